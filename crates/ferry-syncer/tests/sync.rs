//! End to end: an upstream hub with mailbox workspaces, hubs standing in for the
//! workload clusters `florin` and `guilder`, and a syncer for each, in-process.

mod common;

use common::*;
use ferry_testkit::TestHub;
use serde_json::{json, Value};

const DOWNSYNCED: &str = "edge.kubestellar.io/downsynced";
const UPSYNCED: &str = "edge.kubestellar.io/upsynced";
const SYNCER_LABEL: &str = "ferry.dev/syncer";

fn deployment(ns: &str, name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "namespace": ns, "labels": { "app": name } },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "web", "image": "nginx:1.25" }] }
            }
        }
    })
}

fn widget(ns: &str, name: &str, size: i64) -> Value {
    json!({ "apiVersion": "example.com/v1", "kind": "Widget", "metadata": { "name": name, "namespace": ns }, "spec": { "size": size } })
}

/// Namespace × resources for `namespaces`, plus the widgets CRD cluster-scoped.
fn workload_config(namespaces: &[&str]) -> Value {
    syncer_config(
        "the-one",
        json!({
            "namespaceScope": {
                "namespaces": namespaces,
                "resources": [
                    { "group": "", "apiVersion": "v1", "resource": "configmaps" },
                    { "group": "", "apiVersion": "v1", "resource": "secrets" },
                    { "group": "apps", "apiVersion": "v1", "resource": "deployments" },
                    { "group": "example.com", "apiVersion": "v1", "resource": "widgets" }
                ]
            },
            "clusterScope": [
                { "group": "apiextensions.k8s.io", "apiVersion": "v1", "resource": "customresourcedefinitions", "objects": ["widgets.example.com"] }
            ]
        }),
    )
}

#[tokio::test]
async fn florin_and_guilder_each_get_their_mailbox_workloads() {
    let up = TestHub::start().await;
    let florin = TestHub::start().await;
    let guilder = TestHub::start().await;
    let mut syncers = vec![];
    for (name, wec, names) in [
        ("florin", &florin, vec!["commonstuff"]),
        ("guilder", &guilder, vec!["commonstuff", "specialstuff"]),
    ] {
        let ws = mailbox(&up, &format!("{name}-mb")).await;
        let mb = Cluster::of(&up, Some(&ws)).await;
        mb.create(&crds(), crd("Widget", "widgets")).await;
        for ns in &names {
            mb.create(&namespaces(), namespace(ns)).await;
            mb.create(
                &configmaps(),
                configmap(
                    ns,
                    "httpd-htdocs",
                    json!({ "index.html": format!("<h1>{ns}</h1>") }),
                ),
            )
            .await;
        }
        mb.create(
            &secrets(),
            json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "creds", "namespace": "commonstuff" }, "type": "Opaque", "data": { "password": "c2VjcmV0" } }),
        )
        .await;
        mb.create(&deployments(), deployment("commonstuff", "commond", 1))
            .await;
        mb.create(&widgets(), widget("commonstuff", "w1", 3)).await;
        mb.create(&syncer_configs(), workload_config(&names)).await;
        syncers.push(start_syncer(&up, &ws, wec, name).await);
    }

    let f = Cluster::of(&florin, None).await;
    let g = Cluster::of(&guilder, None).await;
    for syncer in &syncers {
        wait_ready(syncer).await;
    }
    let ns = wait_present(&f, &namespaces(), None, "commonstuff", "namespace downstream").await;
    assert_eq!(annotation(&ns, DOWNSYNCED), Some("Namespace//commonstuff"));
    let cm = wait_present(
        &f,
        &configmaps(),
        Some("commonstuff"),
        "httpd-htdocs",
        "configmap downstream",
    )
    .await;
    assert_eq!(cm["data"]["index.html"], "<h1>commonstuff</h1>");
    assert_eq!(
        annotation(&cm, DOWNSYNCED),
        Some("ConfigMap/commonstuff/httpd-htdocs")
    );
    assert_eq!(label(&cm, SYNCER_LABEL), Some("florin"));
    let secret = wait_present(&f, &secrets(), Some("commonstuff"), "creds", "secret downstream").await;
    assert_eq!(secret["data"]["password"], "c2VjcmV0");
    let deploy = wait_present(
        &f,
        &deployments(),
        Some("commonstuff"),
        "commond",
        "deployment downstream",
    )
    .await;
    assert_eq!(deploy["spec"]["replicas"], 1);
    assert!(deploy["metadata"]["ownerReferences"].is_null());
    let crd = wait_for(&f, &crds(), None, "widgets.example.com", "CRD downstream", |_| {
        true
    })
    .await;
    assert_eq!(label(&crd, SYNCER_LABEL), Some("florin"));
    let w = wait_present(
        &f,
        &widgets(),
        Some("commonstuff"),
        "w1",
        "custom resource downstream",
    )
    .await;
    assert_eq!(w["spec"]["size"], 3);
    assert_eq!(annotation(&w, DOWNSYNCED), Some("Widget/commonstuff/w1"));

    // guilder gets the extra namespace; florin does not.
    wait_present(
        &g,
        &configmaps(),
        Some("specialstuff"),
        "httpd-htdocs",
        "guilder's special configmap",
    )
    .await;
    wait_present(&g, &widgets(), Some("commonstuff"), "w1", "guilder's widget").await;
    assert!(f.get(&namespaces(), None, "specialstuff").await.is_none());
    let g_cm = g
        .get(&configmaps(), Some("commonstuff"), "httpd-htdocs")
        .await
        .unwrap();
    assert_eq!(label(&g_cm, SYNCER_LABEL), Some("guilder"));

    for s in syncers {
        s.stop().await;
    }
}

/// One mailbox, one cluster, one syncer, the workload config over `namespaces`.
async fn single(names: &[&str]) -> (TestHub, TestHub, String, Cluster, Cluster) {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    for ns in names {
        mb.create(&namespaces(), namespace(ns)).await;
    }
    mb.create(&syncer_configs(), workload_config(names)).await;
    (up, wec, ws, mb, down)
}

#[tokio::test]
async fn updates_and_deletions_propagate_and_nothing_is_rewritten_needlessly() {
    let (up, wec, ws, mb, down) = single(&["app"]).await;
    mb.create(
        &configmaps(),
        configmap("app", "settings", json!({ "mode": "blue", "old": "x" })),
    )
    .await;
    mb.create(&configmaps(), configmap("app", "doomed", json!({})))
        .await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_ready(&syncer).await;
    wait_present(&down, &configmaps(), Some("app"), "settings", "copy").await;

    // Update, including a removed key.
    mb.api(&configmaps(), Some("app"))
        .replace(
            "settings",
            &Default::default(),
            &serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "settings", "namespace": "app",
                    "resourceVersion": resource_version(&mb.get(&configmaps(), Some("app"), "settings").await.unwrap()) },
                "data": { "mode": "green" }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let copy = wait_for(
        &down,
        &configmaps(),
        Some("app"),
        "settings",
        "update downstream",
        |o| o["data"]["mode"] == "green" && o["data"].get("old").is_none(),
    )
    .await;

    // Drift made downstream is repaired.
    down.merge(
        &configmaps(),
        Some("app"),
        "settings",
        json!({ "data": { "mode": "hacked" } }),
    )
    .await;
    let copy = wait_for(
        &down,
        &configmaps(),
        Some("app"),
        "settings",
        "drift repaired",
        |o| o["data"]["mode"] == "green" && resource_version(o) != resource_version(&copy),
    )
    .await;

    // A full reconcile (the config changes) writes nothing that is already right.
    mb.merge(
        &syncer_configs(),
        None,
        "the-one",
        json!({ "spec": { "namespaceScope": { "namespaces": ["app", "other"] } } }),
    )
    .await;
    mb.create(&namespaces(), namespace("other")).await;
    wait_present(&down, &namespaces(), None, "other", "new namespace downstream").await;
    let after = down.get(&configmaps(), Some("app"), "settings").await.unwrap();
    assert_eq!(
        resource_version(&after),
        resource_version(&copy),
        "no write when nothing changed"
    );

    // Deletion.
    mb.delete(&configmaps(), Some("app"), "doomed").await;
    wait_gone(&down, &configmaps(), Some("app"), "doomed", "deleted downstream").await;
    syncer.stop().await;
}

#[tokio::test]
async fn removing_an_entry_from_the_syncer_config_deletes_the_copies() {
    let (up, wec, ws, mb, down) = single(&["app"]).await;
    mb.create(&configmaps(), configmap("app", "keep", json!({ "a": "1" })))
        .await;
    mb.create(
        &secrets(),
        json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "drop", "namespace": "app" }, "data": {} }),
    )
    .await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_present(&down, &secrets(), Some("app"), "drop", "secret downstream").await;
    wait_present(&down, &configmaps(), Some("app"), "keep", "configmap downstream").await;

    let mut config = mb.get(&syncer_configs(), None, "the-one").await.unwrap();
    let resources = config["spec"]["namespaceScope"]["resources"]
        .as_array_mut()
        .unwrap();
    resources.retain(|r| r["resource"] != "secrets");
    mb.merge(
        &syncer_configs(),
        None,
        "the-one",
        json!({ "spec": config["spec"] }),
    )
    .await;

    wait_gone(
        &down,
        &secrets(),
        Some("app"),
        "drop",
        "secret removed from the config",
    )
    .await;
    assert!(down.get(&configmaps(), Some("app"), "keep").await.is_some());
    assert!(
        mb.get(&secrets(), Some("app"), "drop").await.is_some(),
        "upstream untouched"
    );
    syncer.stop().await;
}

#[tokio::test]
async fn downstream_status_is_returned_upstream_and_never_wiped() {
    let (up, wec, ws, mb, down) = single(&["app"]).await;
    mb.create(&crds(), crd("Widget", "widgets")).await;
    mb.create(&deployments(), deployment("app", "web", 2)).await;
    mb.create(&widgets(), widget("app", "w", 1)).await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_present(&down, &deployments(), Some("app"), "web", "deployment downstream").await;
    wait_present(&down, &widgets(), Some("app"), "w", "widget downstream").await;

    // A controller in the workload cluster reports state.
    down.set_status(
        &deployments(),
        Some("app"),
        "web",
        json!({ "replicas": 2, "readyReplicas": 2, "availableReplicas": 2 }),
    )
    .await;
    down.set_status(&widgets(), Some("app"), "w", json!({ "phase": "Running" }))
        .await;
    wait_for(
        &mb,
        &deployments(),
        Some("app"),
        "web",
        "deployment status upstream",
        |o| o["status"]["readyReplicas"] == 2,
    )
    .await;
    wait_for(&mb, &widgets(), Some("app"), "w", "widget status upstream", |o| {
        o["status"]["phase"] == "Running"
    })
    .await;

    // A spec change upstream reaches the copy and leaves its status alone.
    mb.merge(
        &deployments(),
        Some("app"),
        "web",
        json!({ "spec": { "replicas": 3 } }),
    )
    .await;
    let copy = wait_for(
        &down,
        &deployments(),
        Some("app"),
        "web",
        "spec update downstream",
        |o| o["spec"]["replicas"] == 3,
    )
    .await;
    assert_eq!(
        copy["status"]["readyReplicas"], 2,
        "downstream status kept: {copy}"
    );
    syncer.stop().await;
}

#[tokio::test]
async fn custom_resources_created_downstream_are_upsynced_and_their_deletion_follows() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    mb.create(&crds(), crd("Report", "reports")).await;
    down.create(&crds(), crd("Report", "reports")).await;
    mb.create(
        &syncer_configs(),
        syncer_config(
            "the-one",
            json!({ "upsync": [{ "apiGroup": "example.com", "resources": ["reports"], "namespaces": ["*"], "names": ["*"] }] }),
        ),
    )
    .await;
    // An upstream object the syncer did not upsync, matching the upsync entry.
    mb.create(&namespaces(), namespace("kyverno")).await;
    mb.create(
        &reports(),
        json!({ "apiVersion": "example.com/v1", "kind": "Report", "metadata": { "name": "manual", "namespace": "kyverno" }, "spec": { "by": "hand" } }),
    )
    .await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_ready(&syncer).await;

    down.create(&namespaces(), namespace("policy")).await;
    down.create(
        &reports(),
        json!({ "apiVersion": "example.com/v1", "kind": "Report", "metadata": { "name": "r1", "namespace": "policy" }, "spec": { "pass": 1 } }),
    )
    .await;
    down.set_status(&reports(), Some("policy"), "r1", json!({ "summary": "ok" }))
        .await;
    let copy = wait_for(
        &mb,
        &reports(),
        Some("policy"),
        "r1",
        "report upsynced with status",
        |o| o["status"]["summary"] == "ok",
    )
    .await;
    assert_eq!(annotation(&copy, UPSYNCED), Some("Report/policy/r1"));
    assert_eq!(copy["spec"]["pass"], 1);

    down.merge(&reports(), Some("policy"), "r1", json!({ "spec": { "pass": 2 } }))
        .await;
    wait_for(&mb, &reports(), Some("policy"), "r1", "update upsynced", |o| {
        o["spec"]["pass"] == 2
    })
    .await;

    down.delete(&reports(), Some("policy"), "r1").await;
    wait_gone(&mb, &reports(), Some("policy"), "r1", "upsynced copy deleted").await;
    assert!(
        mb.get(&reports(), Some("kyverno"), "manual").await.is_some(),
        "an upstream object the syncer did not upsync is never deleted"
    );
    syncer.stop().await;
}

#[tokio::test]
async fn changes_made_while_the_syncer_was_down_are_caught_on_restart() {
    let (up, wec, ws, mb, down) = single(&["app"]).await;
    for name in ["gone", "changed", "same"] {
        mb.create(&configmaps(), configmap("app", name, json!({ "v": "1" })))
            .await;
    }
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_ready(&syncer).await;
    for name in ["gone", "changed", "same"] {
        wait_present(&down, &configmaps(), Some("app"), name, "copy").await;
    }
    syncer.stop().await;

    mb.delete(&configmaps(), Some("app"), "gone").await;
    mb.merge(
        &configmaps(),
        Some("app"),
        "changed",
        json!({ "data": { "v": "2" } }),
    )
    .await;
    mb.create(&configmaps(), configmap("app", "new", json!({ "v": "1" })))
        .await;
    let same_rv = resource_version(&down.get(&configmaps(), Some("app"), "same").await.unwrap());

    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_gone(
        &down,
        &configmaps(),
        Some("app"),
        "gone",
        "deletion made while down",
    )
    .await;
    wait_for(
        &down,
        &configmaps(),
        Some("app"),
        "changed",
        "update made while down",
        |o| o["data"]["v"] == "2",
    )
    .await;
    wait_present(
        &down,
        &configmaps(),
        Some("app"),
        "new",
        "creation made while down",
    )
    .await;
    wait_ready(&syncer).await;
    let same = down.get(&configmaps(), Some("app"), "same").await.unwrap();
    assert_eq!(
        resource_version(&same),
        same_rv,
        "unchanged copy not rewritten on restart"
    );
    syncer.stop().await;
}

#[tokio::test]
async fn pre_existing_objects_are_adopted_and_unowned_ones_left_alone() {
    let (up, wec, ws, mb, down) = single(&["app"]).await;
    down.create(&namespaces(), namespace("app")).await;
    down.create(
        &configmaps(),
        configmap("app", "pre", json!({ "from": "cluster" })),
    )
    .await;
    let bystander = down
        .create(
            &configmaps(),
            configmap("app", "bystander", json!({ "mine": "yes" })),
        )
        .await;
    mb.create(
        &configmaps(),
        configmap("app", "pre", json!({ "from": "mailbox" })),
    )
    .await;
    let mut once = configmap("app", "once", json!({ "v": "1" }));
    once["metadata"]["annotations"] = json!({ "edge.kubestellar.io/downsync-overwrite": "false" });
    mb.create(&configmaps(), once).await;

    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    let adopted = wait_for(&down, &configmaps(), Some("app"), "pre", "adopted", |o| {
        o["data"]["from"] == "mailbox"
    })
    .await;
    assert_eq!(label(&adopted, SYNCER_LABEL), Some("florin"));
    let events = eventually(15, "an Adopted event", || async {
        let list = down.list(&events(), Some("app")).await;
        list.into_iter()
            .find(|e| e["reason"] == "Adopted" && e["involvedObject"]["name"] == "pre")
    })
    .await;
    assert!(events["message"].as_str().unwrap().contains("florin"));

    // Create-only: created, then never updated or deleted.
    wait_present(&down, &configmaps(), Some("app"), "once", "create-only copy").await;
    mb.merge(
        &configmaps(),
        Some("app"),
        "once",
        json!({ "data": { "v": "2" } }),
    )
    .await;
    mb.merge(
        &configmaps(),
        Some("app"),
        "pre",
        json!({ "data": { "from": "mailbox-2" } }),
    )
    .await;
    wait_for(&down, &configmaps(), Some("app"), "pre", "later update", |o| {
        o["data"]["from"] == "mailbox-2"
    })
    .await;
    assert_eq!(
        down.get(&configmaps(), Some("app"), "once").await.unwrap()["data"]["v"],
        "1"
    );
    mb.delete(&configmaps(), Some("app"), "once").await;
    mb.delete(&configmaps(), Some("app"), "pre").await;
    wait_gone(
        &down,
        &configmaps(),
        Some("app"),
        "pre",
        "adopted copy deleted with its source",
    )
    .await;
    assert!(
        down.get(&configmaps(), Some("app"), "once").await.is_some(),
        "create-only copy kept"
    );

    // The unowned object in a synced namespace was never touched.
    let now = down.get(&configmaps(), Some("app"), "bystander").await.unwrap();
    assert_eq!(resource_version(&now), resource_version(&bystander));
    syncer.stop().await;
}

#[tokio::test]
async fn the_api_servers_own_kubernetes_service_is_never_synced() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    let services = ar("", "v1", "Service", "services");
    let endpoints = ar("", "v1", "Endpoints", "endpoints");
    mb.create(
        &services,
        json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web", "namespace": "default" },
                "spec": { "ports": [{ "port": 80 }] } }),
    )
    .await;
    sync_in_default(&mb, &[("", "services"), ("", "endpoints")]).await;
    let before = down
        .get(&endpoints, Some("default"), "kubernetes")
        .await
        .expect("downstream's own");
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_for(
        &down,
        &services,
        Some("default"),
        "web",
        "the selected Service",
        |_| true,
    )
    .await;
    wait_ready(&syncer).await;
    // The downstream cluster keeps its own: neither adopted nor overwritten.
    let own = down.get(&services, Some("default"), "kubernetes").await.unwrap();
    assert_eq!(label(&own, SYNCER_LABEL), None);
    assert_eq!(annotation(&own, DOWNSYNCED), None);
    let after = down.get(&endpoints, Some("default"), "kubernetes").await.unwrap();
    assert_eq!(after["subsets"], before["subsets"]);
    assert_eq!(resource_version(&after), resource_version(&before));
    syncer.stop().await;
}

/// A default syncer (no `--qps`) recognises both hubs as pacing clients themselves and
/// lifts its own limit, and still copies; an explicit `--qps` stays a cap.
#[tokio::test]
async fn a_default_syncer_goes_at_the_hubs_pace_and_an_explicit_qps_caps_it() {
    use ferry_syncer::ratelimit::ServerPacing;
    use ferry_syncer::side::Side;

    let (up, wec, ws, mb, down) = single(&["app"]).await;
    mb.create(&configmaps(), configmap("app", "paced", json!({ "a": "1" })))
        .await;
    let mut opts = syncer_options(&up, &ws, &wec, "florin").await;
    opts.qps = None;
    let syncer = ferry_syncer::start(opts).await.expect("syncer starts");
    wait_present(&down, &configmaps(), Some("app"), "paced", "copy").await;
    for side in [Side::Upstream, Side::Downstream] {
        eventually(10, "the server judged", || async {
            (syncer.server_pacing(side) == Some(ServerPacing::FerryHub)).then_some(())
        })
        .await;
        assert_eq!(syncer.request_limit(side).0, 0.0, "{side}: no client-side limit");
    }
    syncer.stop().await;

    let mut opts = syncer_options(&up, &ws, &wec, "florin").await;
    opts.qps = Some(25.0);
    opts.burst = 7;
    let syncer = start_ready(opts).await;
    assert_eq!(syncer.server_pacing(Side::Upstream), Some(ServerPacing::FerryHub));
    assert_eq!(syncer.request_limit(Side::Upstream), (25.0, 7), "--qps is a cap");
    assert_eq!(syncer.request_limit(Side::Downstream), (25.0, 7));
    syncer.stop().await;
}

/// The two hubs are distinct clusters (their own service and node-port
/// ranges), as a real workload cluster is distinct from its control plane:
/// a Service or a Job copied with what the upstream allocated for it would be
/// refused downstream. Copies carry intent only, and get their cluster IP,
/// node ports, Job selector and generated labels from the cluster they land in.
#[tokio::test]
async fn services_and_jobs_land_with_what_the_destination_allocates() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    let services = ar("", "v1", "Service", "services");
    let jobs = ar("batch", "v1", "Job", "jobs");
    let web = mb
        .create(
            &services,
            json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "web", "namespace": "default" },
                    "spec": { "type": "NodePort", "selector": { "app": "web" }, "ports": [{ "port": 80 }] } }),
        )
        .await;
    let migrate = mb
        .create(
            &jobs,
            json!({ "apiVersion": "batch/v1", "kind": "Job", "metadata": { "name": "migrate", "namespace": "default" },
                    "spec": { "template": { "spec": { "restartPolicy": "Never",
                        "containers": [{ "name": "m", "image": "busybox" }] } } } }),
        )
        .await;
    sync_in_default(&mb, &[("", "services"), ("batch", "jobs")]).await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    let copy = wait_for(
        &down,
        &services,
        Some("default"),
        "web",
        "the Service's copy",
        |_| true,
    )
    .await;
    let ranges = ferry_testkit::distinct_cluster_ranges(wec.data_dir());
    let ip: std::net::Ipv4Addr = copy["spec"]["clusterIP"].as_str().unwrap().parse().unwrap();
    assert!(ranges.contains_ip(ip), "{ip} is the workload cluster's own");
    assert_ne!(copy["spec"]["clusterIP"], web["spec"]["clusterIP"]);
    let node_port = copy["spec"]["ports"][0]["nodePort"].as_u64().unwrap() as u16;
    assert!(
        ranges.node_ports.contains(&node_port),
        "{node_port} from the cluster's own range"
    );
    assert_eq!(copy["spec"]["selector"], web["spec"]["selector"]);

    let job = wait_for(&down, &jobs, Some("default"), "migrate", "the Job's copy", |_| {
        true
    })
    .await;
    let uid = job["metadata"]["uid"].as_str().unwrap();
    assert_ne!(Some(uid), migrate["metadata"]["uid"].as_str());
    assert_eq!(
        job["spec"]["selector"],
        json!({ "matchLabels": { "batch.kubernetes.io/controller-uid": uid } })
    );
    assert_eq!(
        job["spec"]["template"]["metadata"]["labels"]["controller-uid"],
        uid
    );
    wait_ready(&syncer).await;
    syncer.stop().await;
}

/// A copy the workload cluster refuses is named, with the cluster's own
/// message on one line, in the SyncerConfig's status and its Syncing
/// condition (where the hub's placement translator picks it up for whoever
/// placed the object), and goes from there once the object is fixed.
#[tokio::test]
async fn a_refused_copy_is_named_with_the_clusters_message_until_it_is_fixed() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    let services = ar("", "v1", "Service", "services");
    // A node port kept on purpose, from the upstream's range: the workload
    // cluster's range is another, so it refuses the copy.
    let port = *ferry_testkit::distinct_cluster_ranges(up.data_dir())
        .node_ports
        .start();
    let theirs = ferry_testkit::distinct_cluster_ranges(wec.data_dir());
    assert!(
        !theirs.node_ports.contains(&port),
        "the two hubs' node-port ranges differ"
    );
    mb.create(
        &services,
        json!({ "apiVersion": "v1", "kind": "Service",
                "metadata": { "name": "pinned", "namespace": "default",
                              "annotations": { "control.kubestellar.io/preserve": "nodeport" } },
                "spec": { "type": "NodePort", "ports": [{ "port": 80, "nodePort": port }] } }),
    )
    .await;
    sync_in_default(&mb, &[("", "services")]).await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    let config = eventually(20, "the refusal in the SyncerConfig's status", || async {
        let config = mb.get(&syncer_configs(), None, "the-one").await?;
        (config["status"]["refusedCount"] == 1).then_some(config)
    })
    .await;
    let refused = &config["status"]["refused"][0];
    assert_eq!(
        (
            refused["resource"].as_str(),
            refused["namespace"].as_str(),
            refused["name"].as_str(),
            refused["side"].as_str()
        ),
        (
            Some("core/services"),
            Some("default"),
            Some("pinned"),
            Some("downstream")
        )
    );
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("spec.ports[0].nodePort") && message.contains("not in the valid range"),
        "the cluster's own message: {message}"
    );
    assert!(
        !message.contains('\n') && !message.contains("Status {") && !message.contains("ApiError"),
        "{message}"
    );
    let syncing = config["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Syncing")
        .unwrap();
    assert_eq!(
        (syncing["status"].as_str(), syncing["reason"].as_str()),
        (Some("False"), Some("CopiesRefused"))
    );
    assert!(
        syncing["message"].as_str().unwrap().contains("default/pinned"),
        "{syncing}"
    );

    // Fixed upstream: the copy lands, and the refusal is gone.
    mb.merge(
        &services,
        Some("default"),
        "pinned",
        json!({ "metadata": { "annotations": { "control.kubestellar.io/preserve": null } } }),
    )
    .await;
    wait_for(
        &down,
        &services,
        Some("default"),
        "pinned",
        "the fixed Service's copy",
        |_| true,
    )
    .await;
    eventually(20, "the refusal cleared", || async {
        let config = mb.get(&syncer_configs(), None, "the-one").await?;
        config["status"].get("refused").is_none().then_some(())
    })
    .await;
    syncer.stop().await;
}

/// Downsyncs ConfigMaps `app/<names>`, and with `secret`, Secret `app/s`.
fn named_objects(names: &[&str], secret: bool) -> Value {
    let mut spec = json!({ "namespacedObjects": [{ "group": "", "apiVersion": "v1", "resource": "configmaps",
        "objectsByNamespace": [{ "namespace": "app", "names": names }] }] });
    if secret {
        spec["namespacedObjects"]
            .as_array_mut()
            .unwrap()
            .push(json!({ "group": "", "apiVersion": "v1", "resource": "secrets",
                    "objectsByNamespace": [{ "namespace": "app", "names": ["s"] }] }));
    }
    spec
}

/// Requests `cluster` answered outside the resource API: discovery (`/api`,
/// `/apis`), `/version` and `/metrics` (each scrape counts the one before it).
async fn non_resource_reads(cluster: &TestHub) -> f64 {
    let scrape = ferry_testkit::clients::scrape_metrics(cluster).await;
    let has = ["verb=\"GET\"", ",resource=\"\"", "scope=\"\""];
    ferry_testkit::clients::metric_sum(&scrape, "apiserver_request_total", &has)
}

#[tokio::test]
async fn naming_more_objects_of_watched_types_reads_no_discovery_and_a_new_type_does() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    mb.create(&namespaces(), namespace("app")).await;
    down.create(&namespaces(), namespace("app")).await;
    for name in ["c0", "c1", "c2", "c3"] {
        mb.create(&configmaps(), configmap("app", name, json!({ "k": name })))
            .await;
    }
    mb.create(
        &secrets(),
        json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "s", "namespace": "app" }, "data": {} }),
    )
    .await;
    mb.create(
        &syncer_configs(),
        syncer_config("the-one", named_objects(&["c0"], false)),
    )
    .await;
    let mut opts = syncer_options(&up, &ws, &wec, "florin").await;
    // One probe at the start, none while the test counts.
    opts.probe_period = std::time::Duration::from_secs(600);
    let syncer = start_ready(opts).await;
    wait_present(&down, &configmaps(), Some("app"), "c0", "c0's copy").await;

    // A placement adding objects rewrites the-one each time: the types stay.
    let before = non_resource_reads(&wec).await;
    for n in 1..4 {
        let names: Vec<String> = (0..=n).map(|i| format!("c{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let spec = json!({ "spec": named_objects(&names, false) });
        mb.merge(&syncer_configs(), None, "the-one", spec).await;
        wait_present(
            &down,
            &configmaps(),
            Some("app"),
            names[n],
            "the copy newly named",
        )
        .await;
    }
    let reads = non_resource_reads(&wec).await - before;
    assert_eq!(
        reads, 1.0,
        "only the scrape before: no discovery read for names alone"
    );

    // The positive twin: a new type is looked up, and its object lands.
    let before = non_resource_reads(&wec).await;
    let spec = json!({ "spec": named_objects(&["c0", "c1", "c2", "c3"], true) });
    mb.merge(&syncer_configs(), None, "the-one", spec).await;
    wait_present(&down, &secrets(), Some("app"), "s", "the Secret's copy").await;
    let reads = non_resource_reads(&wec).await - before;
    assert!(reads > 1.0, "the new type read discovery downstream: {reads}");
    syncer.stop().await;
}
