//! The kcp TMC profile end to end: one hub as kcp (a SyncTarget in `root:org`,
//! workloads in `root:app`), another as the physical cluster. The SyncTarget's virtual
//! workspace URLs point at the kcp hub's root, where `/clusters/*` lists every
//! workspace (the shape of the syncer virtual workspace), and the tests label objects
//! `state.workload.kcp.io/<key>=Sync` as kcp's scheduler would.

mod common;

use std::time::Duration;

use common::*;
use ferry_api::well_known::{
    workload_deletion_annotation, workload_soft_finalizers_annotation, workload_state_label,
    workload_syncer_finalizer, NAMESPACE_LOCATOR_ANNOTATION, WORKLOAD_CLUSTER_LABEL, WORKLOAD_RV_ANNOTATION,
};
use ferry_hub::testing::TestHub;
use ferry_syncer::profiles::tmc::locator::{NamespaceLocator, SyncTargetLocator};
use ferry_syncer::profiles::tmc::TmcOptions;
use ferry_syncer::RunningSyncer;
use kube::core::ApiResource;
use serde_json::{json, Value};

fn sync_targets() -> ApiResource {
    ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets")
}

fn pods() -> ApiResource {
    ar("", "v1", "Pod", "pods")
}

/// kcp (with `root:org` holding SyncTarget `east`, and workload workspace `root:app`)
/// and a physical cluster.
struct Tmc {
    kcp: TestHub,
    pcluster: TestHub,
    org: Cluster,
    app: Cluster,
    down: Cluster,
    /// The SyncTarget's uid.
    uid: String,
    /// Its locator (logical cluster, name, uid).
    target: SyncTargetLocator,
    /// The sync target key.
    key: String,
    /// `root:app`'s logical cluster name.
    app_cluster: String,
}

impl Tmc {
    async fn start() -> Tmc {
        init_logs();
        let kcp = TestHub::start().await;
        let pcluster = TestHub::start().await;
        let org_path = mailbox(&kcp, "org").await;
        let org = Cluster::of(&kcp, Some(&org_path)).await;
        let root = Cluster::of(&kcp, Some("root")).await;
        root.create(
            &ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"),
            json!({ "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": { "name": "app" } }),
        )
        .await;
        let app = Cluster::of(&kcp, Some("root:app")).await;
        let st = org
            .create(
                &sync_targets(),
                json!({ "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget", "metadata": { "name": "east" } }),
            )
            .await;
        let uid = st["metadata"]["uid"].as_str().unwrap().to_string();
        let st_cluster = annotation(&st, "kcp.io/cluster")
            .expect("kcp.io/cluster")
            .to_string();
        // What kcp's SyncTarget controller and schema compatibility would write.
        org.set_status(
            &sync_targets(),
            None,
            "east",
            json!({
                "virtualWorkspaces": [{ "syncerURL": kcp.url(), "upsyncerURL": kcp.url() }],
                "syncedResources": [
                    { "group": "apps", "resource": "deployments", "versions": ["v1"], "state": "Accepted" }
                ],
            }),
        )
        .await;
        let probe = app.create(&namespaces(), namespace("probe")).await;
        let app_cluster = annotation(&probe, "kcp.io/cluster").unwrap().to_string();
        let target = SyncTargetLocator {
            cluster: st_cluster.clone(),
            name: "east".into(),
            uid: uid.clone(),
            ..Default::default()
        };
        Tmc {
            down: Cluster::of(&pcluster, None).await,
            key: ferry_api::workload::sync_target_key(&st_cluster, "east"),
            kcp,
            pcluster,
            org,
            app,
            uid,
            target,
            app_cluster,
        }
    }

    fn options(&self, uid: &str) -> TmcOptions {
        let mut options = TmcOptions::new(uid);
        options.heartbeat_period = Duration::from_millis(300);
        options.sync_target_poll = Duration::from_millis(200);
        options.namespace_clean_delay = Duration::from_secs(1);
        options
    }

    async fn syncer_with(&self, uid: &str) -> anyhow::Result<RunningSyncer> {
        let mut opts = syncer_options(&self.kcp, "root:org", &self.pcluster, "east").await;
        opts.tmc = Some(self.options(uid));
        ferry_syncer::start(opts).await
    }

    async fn syncer(&self) -> RunningSyncer {
        let syncer = self.syncer_with(&self.uid).await.expect("syncer starts");
        wait_ready(&syncer).await;
        syncer
    }

    fn state_label(&self) -> String {
        workload_state_label(&self.key)
    }

    fn finalizer(&self) -> String {
        workload_syncer_finalizer(&self.key)
    }

    /// The downstream namespace of `root:app`'s `namespace`.
    fn downstream(&self, namespace: &str) -> String {
        NamespaceLocator::new(&self.target, &self.app_cluster, namespace).downstream_namespace()
    }

    /// Labels for an object scheduled onto the target.
    fn scheduled(&self) -> Value {
        json!({ self.state_label(): "Sync" })
    }

    /// Namespace `name` in `root:app`, scheduled onto the target.
    async fn scheduled_namespace(&self, name: &str) {
        let mut ns = namespace(name);
        ns["metadata"]["labels"] = self.scheduled();
        self.app.create(&namespaces(), ns).await;
    }

    async fn scheduled_configmap(&self, ns: &str, name: &str) -> Value {
        let mut cm = configmap(ns, name, json!({ "k": "v" }));
        cm["metadata"]["labels"] = self.scheduled();
        self.app.create(&configmaps(), cm).await
    }
}

fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

fn deployment(ns: &str, name: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "namespace": ns, "labels": labels },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "serviceAccountName": "builder", "containers": [{ "name": "c", "image": "nginx:1.20" }] }
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labelled_objects_land_in_a_kcp_namespace_with_the_locator_and_status_returns() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    t.scheduled_configmap("demo", "settings").await;
    t.app
        .create(&deployments(), deployment("demo", "web", t.scheduled()))
        .await;
    // Not labelled for this target: stays upstream.
    t.app
        .create(&configmaps(), configmap("demo", "unscheduled", json!({})))
        .await;

    let kcp_ns = t.downstream("demo");
    assert!(kcp_ns.starts_with("kcp-") && kcp_ns.len() == 16, "{kcp_ns}");
    let ns = wait_for(
        &t.down,
        &namespaces(),
        None,
        &kcp_ns,
        "the kcp-<hash> namespace",
        |_| true,
    )
    .await;
    let locator =
        NamespaceLocator::parse(annotation(&ns, NAMESPACE_LOCATOR_ANNOTATION).expect("locator")).unwrap();
    assert_eq!(locator, NamespaceLocator::new(&t.target, &t.app_cluster, "demo"));
    assert_eq!(label(&ns, WORKLOAD_CLUSTER_LABEL), Some(t.key.as_str()));

    let cm = wait_for(
        &t.down,
        &configmaps(),
        Some(&kcp_ns),
        "settings",
        "the configmap copy",
        |_| true,
    )
    .await;
    assert_eq!(cm["data"]["k"], "v");
    assert_eq!(label(&cm, WORKLOAD_CLUSTER_LABEL), Some(t.key.as_str()));
    assert_eq!(label(&cm, &t.state_label()), None, "the state label is replaced");
    // The physical cluster (a hub here) may name its own cluster; never the upstream's.
    assert_ne!(annotation(&cm, "kcp.io/cluster"), Some(t.app_cluster.as_str()));
    assert!(cm["metadata"]["finalizers"].is_null());
    let managers: Vec<&str> = cm["metadata"]["managedFields"]
        .as_array()
        .map(|m| m.iter().filter_map(|e| e["manager"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        managers.contains(&"syncer"),
        "written by server-side apply as syncer: {managers:?}"
    );
    let dep = wait_for(
        &t.down,
        &deployments(),
        Some(&kcp_ns),
        "web",
        "the deployment copy",
        |_| true,
    )
    .await;
    let pod_spec = &dep["spec"]["template"]["spec"];
    assert_eq!(pod_spec["automountServiceAccountToken"], false);
    assert!(pod_spec["serviceAccountName"].is_null(), "{pod_spec}");

    // The upstream objects carry the finalizer (added before the copy was made).
    for (ar, name) in [(configmaps(), "settings"), (deployments(), "web")] {
        let up = t.app.get(&ar, Some("demo"), name).await.unwrap();
        assert!(has_finalizer(&up, &t.finalizer()), "{name}: {up}");
    }
    assert!(t
        .down
        .get(&configmaps(), Some(&kcp_ns), "unscheduled")
        .await
        .is_none());

    // Status set downstream comes back upstream.
    t.down
        .set_status(
            &deployments(),
            Some(&kcp_ns),
            "web",
            json!({ "replicas": 2, "readyReplicas": 2 }),
        )
        .await;
    wait_for(
        &t.app,
        &deployments(),
        Some("demo"),
        "web",
        "status upstream",
        |d| d["status"]["readyReplicas"] == 2,
    )
    .await;

    // The heartbeat and the permission check show on the SyncTarget.
    let st = wait_for(&t.org, &sync_targets(), None, "east", "a heartbeat", |st| {
        st["status"]["lastSyncerHeartbeatTime"].is_string()
    })
    .await;
    let first = st["status"]["lastSyncerHeartbeatTime"].clone();
    let authorized = condition(&st, "SyncerAuthorized").expect("SyncerAuthorized");
    assert_eq!(authorized["status"], "True", "{authorized}");
    // Heartbeats carry on (RFC 3339 to the second: wait past one).
    wait_for(&t.org, &sync_targets(), None, "east", "a later heartbeat", |st| {
        st["status"]["lastSyncerHeartbeatTime"] != first
    })
    .await;
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_delete_waits_for_downstream_cleanup() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    t.scheduled_configmap("demo", "held").await;
    let kcp_ns = t.downstream("demo");
    wait_for(&t.down, &configmaps(), Some(&kcp_ns), "held", "the copy", |_| {
        true
    })
    .await;
    // Something downstream holds the copy.
    t.down
        .merge(
            &configmaps(),
            Some(&kcp_ns),
            "held",
            json!({ "metadata": { "finalizers": ["example.com/hold"] } }),
        )
        .await;
    t.app.delete(&configmaps(), Some("demo"), "held").await;
    wait_for(
        &t.down,
        &configmaps(),
        Some(&kcp_ns),
        "held",
        "the copy being deleted",
        |c| !c["metadata"]["deletionTimestamp"].is_null(),
    )
    .await;
    let up = t
        .app
        .get(&configmaps(), Some("demo"), "held")
        .await
        .expect("upstream waits");
    assert!(has_finalizer(&up, &t.finalizer()));
    assert!(!up["metadata"]["deletionTimestamp"].is_null());
    // The copy goes; then the upstream object does.
    t.down
        .merge(
            &configmaps(),
            Some(&kcp_ns),
            "held",
            json!({ "metadata": { "finalizers": null } }),
        )
        .await;
    wait_gone(&t.app, &configmaps(), Some("demo"), "held", "the upstream object").await;
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_the_label_or_the_deletion_handshake_deletes_the_copy_and_releases_the_source() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    t.scheduled_configmap("demo", "unlabelled").await;
    t.scheduled_configmap("demo", "evicted").await;
    let kcp_ns = t.downstream("demo");
    for name in ["unlabelled", "evicted"] {
        wait_for(&t.down, &configmaps(), Some(&kcp_ns), name, "the copy", |_| true).await;
    }

    t.app
        .merge(
            &configmaps(),
            Some("demo"),
            "unlabelled",
            json!({ "metadata": { "labels": { t.state_label(): null } } }),
        )
        .await;
    wait_gone(
        &t.down,
        &configmaps(),
        Some(&kcp_ns),
        "unlabelled",
        "the unlabelled copy",
    )
    .await;
    wait_for(
        &t.app,
        &configmaps(),
        Some("demo"),
        "unlabelled",
        "the finalizer removed",
        |c| !has_finalizer(c, &t.finalizer()),
    )
    .await;

    // The scheduler's deletion handshake: held while a soft finalizer remains.
    let deletion = workload_deletion_annotation(&t.key);
    let soft = workload_soft_finalizers_annotation(&t.key);
    t.app
        .merge(
            &configmaps(),
            Some("demo"),
            "evicted",
            json!({ "metadata": { "annotations": { deletion.as_str(): "2024-01-01T00:00:00Z", soft.as_str(): "[\"example.com/drain\"]" } } }),
        )
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        t.down
            .get(&configmaps(), Some(&kcp_ns), "evicted")
            .await
            .is_some(),
        "a soft finalizer holds the copy"
    );
    t.app
        .merge(
            &configmaps(),
            Some("demo"),
            "evicted",
            json!({ "metadata": { "annotations": { soft.as_str(): "[]" } } }),
        )
        .await;
    wait_gone(
        &t.down,
        &configmaps(),
        Some(&kcp_ns),
        "evicted",
        "the evicted copy",
    )
    .await;
    let up = wait_for(
        &t.app,
        &configmaps(),
        Some("demo"),
        "evicted",
        "the source released",
        |c| !has_finalizer(c, &t.finalizer()),
    )
    .await;
    assert_eq!(annotation(&up, &deletion), None);
    assert_eq!(label(&up, &t.state_label()), None);
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_collision_is_reported_and_never_overwritten() {
    let t = Tmc::start().await;
    let kcp_ns = t.downstream("demo");
    // Someone else's namespace with the name the syncer would use.
    t.down.create(&namespaces(), namespace(&kcp_ns)).await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    t.scheduled_configmap("demo", "settings").await;
    let event = eventually(15, "a SyncFailed Event naming both namespaces", || async {
        t.app.list(&events(), Some("demo")).await.into_iter().find(|e| {
            let message = e["message"].as_str().unwrap_or_default();
            message.contains("namespace collision") && message.contains(&kcp_ns) && message.contains("demo")
        })
    })
    .await;
    assert_eq!(event["reason"], "SyncFailed", "{event}");
    let ns = t.down.get(&namespaces(), None, &kcp_ns).await.unwrap();
    assert_eq!(
        annotation(&ns, NAMESPACE_LOCATOR_ANNOTATION),
        None,
        "not overwritten"
    );
    assert_eq!(label(&ns, WORKLOAD_CLUSTER_LABEL), None);
    assert!(t
        .down
        .get(&configmaps(), Some(&kcp_ns), "settings")
        .await
        .is_none());
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_labelled_upsync_downstream_appears_upstream_and_goes_with_it() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    let kcp_ns = t.downstream("demo");
    wait_for(&t.down, &namespaces(), None, &kcp_ns, "the namespace", |_| true).await;
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "runner", "namespace": kcp_ns, "labels": { t.state_label(): "Upsync" } },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] }
    });
    let made = t.down.create(&pods(), pod).await;
    let up = wait_for(
        &t.app,
        &pods(),
        Some("demo"),
        "runner",
        "the pod upstream",
        |_| true,
    )
    .await;
    assert!(has_finalizer(&up, &t.finalizer()));
    assert_eq!(label(&up, &t.state_label()), Some("Upsync"));
    assert_eq!(
        annotation(&up, WORKLOAD_RV_ANNOTATION),
        made["metadata"]["resourceVersion"].as_str()
    );
    t.down.delete(&pods(), Some(&kcp_ns), "runner").await;
    wait_gone(&t.app, &pods(), Some("demo"), "runner", "the upstream pod").await;
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syncer_for_another_uid_refuses_to_start() {
    let t = Tmc::start().await;
    let error = match t.syncer_with("not-the-uid").await {
        Ok(_) => panic!("started for the wrong SyncTarget"),
        Err(e) => e.to_string(),
    };
    assert!(error.contains("not --sync-target-uid not-the-uid"), "{error}");
    assert!(error.contains(&t.uid), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_syncer_converges_with_no_orphans_and_no_finalizers_left() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    for name in ["kept", "deleted", "unlabelled"] {
        t.scheduled_configmap("demo", name).await;
    }
    let kcp_ns = t.downstream("demo");
    for name in ["kept", "deleted", "unlabelled"] {
        wait_for(&t.down, &configmaps(), Some(&kcp_ns), name, "the copy", |_| true).await;
    }
    syncer.stop().await;

    // While the syncer is away.
    t.app.delete(&configmaps(), Some("demo"), "deleted").await;
    t.app
        .merge(
            &configmaps(),
            Some("demo"),
            "unlabelled",
            json!({ "metadata": { "labels": { t.state_label(): null } } }),
        )
        .await;
    t.scheduled_configmap("demo", "new").await;
    assert!(
        t.app.get(&configmaps(), Some("demo"), "deleted").await.is_some(),
        "held by the finalizer"
    );

    let syncer = t.syncer().await;
    wait_for(
        &t.down,
        &configmaps(),
        Some(&kcp_ns),
        "new",
        "the new copy",
        |_| true,
    )
    .await;
    wait_gone(
        &t.down,
        &configmaps(),
        Some(&kcp_ns),
        "deleted",
        "the deleted object's copy",
    )
    .await;
    wait_gone(
        &t.app,
        &configmaps(),
        Some("demo"),
        "deleted",
        "the deleted object",
    )
    .await;
    wait_gone(
        &t.down,
        &configmaps(),
        Some(&kcp_ns),
        "unlabelled",
        "the unlabelled object's copy",
    )
    .await;
    wait_for(
        &t.app,
        &configmaps(),
        Some("demo"),
        "unlabelled",
        "its finalizer removed",
        |c| !has_finalizer(c, &t.finalizer()),
    )
    .await;
    assert!(t.down.get(&configmaps(), Some(&kcp_ns), "kept").await.is_some());
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_whose_upstream_is_gone_is_deleted_after_the_delay_only_when_empty() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("empty").await;
    t.scheduled_namespace("full").await;
    t.scheduled_configmap("full", "inside").await;
    let empty = t.downstream("empty");
    let full = t.downstream("full");
    wait_for(
        &t.down,
        &namespaces(),
        None,
        &empty,
        "the empty namespace",
        |_| true,
    )
    .await;
    wait_for(&t.down, &configmaps(), Some(&full), "inside", "the copy", |_| {
        true
    })
    .await;
    // Unscheduled: the namespaces are no longer wanted, but the configmap still is.
    for ns in ["empty", "full"] {
        t.app
            .merge(
                &namespaces(),
                None,
                ns,
                json!({ "metadata": { "labels": { t.state_label(): null } } }),
            )
            .await;
    }
    let started = std::time::Instant::now();
    wait_gone(
        &t.down,
        &namespaces(),
        None,
        &empty,
        "the empty namespace deleted",
    )
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "not before the delay"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        t.down.get(&namespaces(), None, &full).await.is_some(),
        "a namespace holding a copy stays"
    );
    syncer.stop().await;
}
