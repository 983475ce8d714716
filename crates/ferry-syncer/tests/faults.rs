//! End to end: bad input and faults. Invalid configs, missing resources and an
//! unreachable workload cluster are reported and never stop the syncer.

mod common;

use common::*;
use ferry_testkit::tenants::cluster_role_object;
use ferry_testkit::TestHub;
use serde_json::json;

#[tokio::test]
async fn invalid_config_and_missing_resources_get_conditions_while_the_rest_syncs() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    mb.create(&namespaces(), namespace("app")).await;
    mb.create(&configmaps(), configmap("app", "c1", json!({ "k": "v" })))
        .await;
    mb.create(
        &syncer_configs(),
        syncer_config(
            "good",
            json!({ "namespaceScope": { "namespaces": ["app"], "resources": [
                { "group": "", "apiVersion": "v1", "resource": "configmaps" },
                { "group": "example.com", "apiVersion": "v1", "resource": "gadgets" }
            ]}}),
        ),
    )
    .await;
    mb.create(
        &syncer_configs(),
        syncer_config(
            "bad",
            json!({ "clusterScope": [{ "group": "apps", "apiVersion": "apps/v1", "resource": "Deployment" }] }),
        ),
    )
    .await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_present(&down, &configmaps(), Some("app"), "c1", "the valid part syncs").await;

    let bad = wait_for(
        &mb,
        &syncer_configs(),
        None,
        "bad",
        "ConfigValid=False on the bad config",
        |o| condition(o, "ConfigValid").is_some_and(|c| c["status"] == "False"),
    )
    .await;
    let message = condition(&bad, "ConfigValid").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(message.contains("spec.clusterScope[0].apiVersion"), "{message}");
    assert!(message.contains("lowercase plural"), "{message}");

    let good = wait_for(
        &mb,
        &syncer_configs(),
        None,
        "good",
        "heartbeat and conditions on the good config",
        |o| {
            o["status"]["lastSyncerHeartbeatTime"].is_string()
                && condition(o, "SyncerReady").is_some_and(|c| c["status"] == "True")
                && condition(o, "Syncing").is_some_and(|c| c["status"] == "False")
        },
    )
    .await;
    assert_eq!(condition(&good, "ConfigValid").unwrap()["status"], "True");
    let syncing = condition(&good, "Syncing").unwrap();
    assert!(
        syncing["message"].as_str().unwrap().contains("gadgets"),
        "{syncing}"
    );

    // The heartbeat keeps beating.
    let first = good["status"]["lastSyncerHeartbeatTime"].clone();
    wait_for(&mb, &syncer_configs(), None, "good", "a later heartbeat", |o| {
        o["status"]["lastSyncerHeartbeatTime"] != first
    })
    .await;

    // The CRD appears upstream: its objects wait for it downstream, and say so.
    mb.create(&crds(), crd("Gadget", "gadgets")).await;
    mb.create(
        &gadgets(),
        json!({ "apiVersion": "example.com/v1", "kind": "Gadget", "metadata": { "name": "g1", "namespace": "app" }, "spec": {} }),
    )
    .await;
    wait_for(
        &mb,
        &syncer_configs(),
        None,
        "good",
        "not served downstream",
        |o| {
            condition(o, "Syncing").is_some_and(|c| {
                c["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("example.com/v1/gadgets is not served downstream"))
            })
        },
    )
    .await;
    // ... and sync once it is installed there.
    down.create(&crds(), crd("Gadget", "gadgets")).await;
    wait_present(
        &down,
        &gadgets(),
        Some("app"),
        "g1",
        "gadget downstream once its CRD exists",
    )
    .await;
    wait_for(&mb, &syncer_configs(), None, "good", "Syncing=True", |o| {
        condition(o, "Syncing").is_some_and(|c| c["status"] == "True")
    })
    .await;
    let metrics = syncer.metrics_text();
    assert!(metrics.contains("syncer_heartbeat_total"), "{metrics}");
    syncer.stop().await;
}

#[tokio::test]
async fn downstream_outage_makes_the_syncer_unready_and_it_recovers_by_itself() {
    let Stage { up, wec, ws, mb, .. } = Stage::start().await;
    mb.create(&namespaces(), namespace("app")).await;
    mb.create(&configmaps(), configmap("app", "before", json!({})))
        .await;
    sync_in(&mb, "app", &[("", "configmaps")]).await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    let addr = syncer.metrics_address().unwrap();
    let down = Cluster::of(&wec, None).await;
    wait_present(&down, &configmaps(), Some("app"), "before", "initial copy").await;
    wait_ready(&syncer).await;
    assert_eq!(http_get(addr, "/readyz").await.0, 200);
    assert_eq!(http_get(addr, "/healthz").await.0, 200);
    let (_, metrics) = http_get(addr, "/metrics").await;
    assert!(
        metrics.contains("syncer_connection_status{side=\"downstream\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("syncer_resources_synced_total{direction=\"downsync\",resource=\"v1/configmaps\"}"),
        "{metrics}"
    );

    // The workload cluster goes away.
    let listen = wec.running.addr;
    let data_dir = wec.data_dir().to_path_buf();
    let (running, _keep_dir) = wec.into_parts();
    running.stop().await;
    eventually(15, "/readyz to fail", || async {
        let (code, body) = http_get(addr, "/readyz").await;
        (code == 503 && body.contains("downstream")).then_some(())
    })
    .await;
    let (_, metrics) = http_get(addr, "/metrics").await;
    assert!(
        metrics.contains("syncer_connection_status{side=\"downstream\"} 0"),
        "{metrics}"
    );
    assert_eq!(http_get(addr, "/healthz").await.0, 200, "alive while unready");
    wait_for(
        &mb,
        &syncer_configs(),
        None,
        "the-one",
        "SyncerReady=False",
        |o| condition(o, "SyncerReady").is_some_and(|c| c["status"] == "False"),
    )
    .await;

    // Work piles up meanwhile.
    mb.create(&configmaps(), configmap("app", "during", json!({})))
        .await;
    mb.delete(&configmaps(), Some("app"), "before").await;

    // It comes back on the same address, with its data.
    let wec = TestHub::start_with(|o| {
        o.data_dir = data_dir.clone();
        o.listen = listen;
    })
    .await;
    let down = Cluster::of(&wec, None).await;
    wait_present(&down, &configmaps(), Some("app"), "during", "created while down").await;
    wait_gone(&down, &configmaps(), Some("app"), "before", "deleted while down").await;
    eventually(15, "/readyz to recover", || async {
        (http_get(addr, "/readyz").await.0 == 200).then_some(())
    })
    .await;
    let (_, metrics) = http_get(addr, "/metrics").await;
    assert!(
        metrics.contains("syncer_connection_status{side=\"downstream\"} 1"),
        "{metrics}"
    );
    syncer.stop().await;
}

fn syncing_message(config: &serde_json::Value) -> String {
    condition(config, "Syncing")
        .and_then(|c| c["message"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[tokio::test]
async fn permission_denied_names_verb_resource_and_side_and_granting_it_resumes_without_restart() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    for ns in ["app", "ferry-system"] {
        mb.create(&namespaces(), namespace(ns)).await;
    }
    mb.create(&configmaps(), configmap("app", "c1", json!({ "k": "v" })))
        .await;
    mb.create(
        &secrets(),
        json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "s1", "namespace": "app" }, "stringData": { "k": "v" } }),
    )
    .await;
    mb.create(
        &deployments(),
        json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "d1", "namespace": "app" }, "spec": {
            "replicas": 1, "selector": { "matchLabels": { "app": "d1" } },
            "template": { "metadata": { "labels": { "app": "d1" } }, "spec": { "containers": [{ "name": "c", "image": "nginx" }] } }
        }}),
    )
    .await;
    mb.create(
        &syncer_configs(),
        syncer_config(
            "the-one",
            json!({ "namespaceScope": { "namespaces": ["app"], "resources": [
                { "group": "", "apiVersion": "v1", "resource": "configmaps" },
                { "group": "", "apiVersion": "v1", "resource": "secrets" },
                { "group": "apps", "apiVersion": "v1", "resource": "deployments" }
            ]}}),
        ),
    )
    .await;

    // The syncer's upstream identity: a ServiceAccount that may read what it syncs except
    // Secrets, and may not write Deployment status (reported state).
    let token = mb
        .service_account_with_rules(
            ("ferry-system", "syncer"),
            "syncer-partial",
            json!([
                { "apiGroups": [""], "resources": ["namespaces", "configmaps"], "verbs": ["get", "list", "watch"] },
                { "apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list", "watch"] },
                { "apiGroups": ["edge.kubestellar.io"], "resources": ["syncerconfigs"], "verbs": ["get", "list", "watch"] },
                { "apiGroups": ["edge.kubestellar.io"], "resources": ["syncerconfigs/status"], "verbs": ["update", "patch"] },
                { "apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"] }
            ]),
        )
        .await;
    let mut opts = syncer_options(&up, &ws, &wec, "florin").await;
    opts.upstream = token_config(&up, &ws, &token).await;
    init_logs();
    let syncer = ferry_syncer::start(opts).await.expect("syncer starts");

    // What it may do syncs, and the syncer becomes ready regardless.
    wait_present(&down, &configmaps(), Some("app"), "c1", "the ConfigMap syncs").await;
    wait_present(&down, &deployments(), Some("app"), "d1", "the Deployment syncs").await;
    wait_ready(&syncer).await;
    down.set_status(
        &deployments(),
        Some("app"),
        "d1",
        json!({ "replicas": 1, "readyReplicas": 1 }),
    )
    .await;

    // Both refusals are named: verb, resource and side.
    let config = wait_for(
        &mb,
        &syncer_configs(),
        None,
        "the-one",
        "Syncing=False naming both refusals",
        |o| {
            let m = syncing_message(o);
            m.contains("list and watch v1/secrets on the upstream side")
                && m.contains("update apps/v1/deployments/status on the upstream side")
        },
    )
    .await;
    let syncing = condition(&config, "Syncing").unwrap();
    assert_eq!(syncing["status"], "False", "{syncing}");
    assert_eq!(syncing["reason"], "PermissionDenied", "{syncing}");
    assert!(down.get(&secrets(), Some("app"), "s1").await.is_none());

    // The rest keeps syncing meanwhile.
    mb.merge(&configmaps(), Some("app"), "c1", json!({ "data": { "k": "v2" } }))
        .await;
    wait_for(&down, &configmaps(), Some("app"), "c1", "an update syncs", |o| {
        o["data"]["k"] == "v2"
    })
    .await;

    // Granting the permissions resumes both, without a restart.
    mb.create(
        &cluster_roles(),
        cluster_role_object(
            "syncer-rest",
            json!([
                { "apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"] },
                { "apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["update"] }
            ]),
        ),
    )
    .await;
    mb.create(
        &cluster_role_bindings(),
        service_account_binding("syncer-rest", ("ferry-system", "syncer")),
    )
    .await;
    wait_present(
        &down,
        &secrets(),
        Some("app"),
        "s1",
        "the Secret syncs once granted",
    )
    .await;
    wait_for(
        &mb,
        &deployments(),
        Some("app"),
        "d1",
        "status returns once granted",
        |o| o["status"]["readyReplicas"] == 1,
    )
    .await;
    wait_for(
        &mb,
        &syncer_configs(),
        None,
        "the-one",
        "Syncing=True again",
        |o| condition(o, "Syncing").is_some_and(|c| c["status"] == "True"),
    )
    .await;
    syncer.stop().await;
}
