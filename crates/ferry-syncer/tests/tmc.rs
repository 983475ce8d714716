//! The kcp TMC profile end to end: one hub as kcp, another as the physical cluster.
//! In kcp, `root:org` holds SyncTarget `east`, the `kubernetes` APIExport (with a
//! deployments schema) and the target's imported deployments schema, so deployments
//! are `Accepted`; `root:app` holds a Placement that schedules namespaces labelled
//! `tmc=yes` onto the target. The hub's scheduler labels them and their objects
//! `state.workload.kcp.io/<key>=Sync`, and the syncer reads and writes through the
//! SyncTarget's syncer and upsyncer virtual workspaces, as a kcp syncer does.

mod common;

use std::time::Duration;

use common::*;
use ferry_api::well_known::{
    workload_deletion_annotation, workload_soft_finalizers_annotation, workload_state_label,
    workload_syncer_finalizer, NAMESPACE_LOCATOR_ANNOTATION, WORKLOAD_CLUSTER_LABEL, WORKLOAD_RV_ANNOTATION,
};
use ferry_syncer::profiles::tmc::locator::{NamespaceLocator, SyncTargetLocator};
use ferry_syncer::profiles::tmc::TmcOptions;
use ferry_syncer::{RunningSyncer, SyncerOptions};
use ferry_testkit::TestHub;
use kube::core::ApiResource;
use serde_json::{json, Value};

use ferry_testkit::resources::workload_sync_targets as sync_targets;

/// A deployments schema anything fits (the test stands in for the syncer's schema import).
fn open_schema() -> Value {
    json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

fn placements() -> ApiResource {
    ar("scheduling.kcp.io", "v1alpha1", "Placement", "placements")
}

fn apis(kind: &str, plural: &str) -> ApiResource {
    ar("apis.kcp.io", "v1alpha1", kind, plural)
}

fn api_resource_imports() -> ApiResource {
    ar(
        "apiresource.kcp.io",
        "v1alpha1",
        "APIResourceImport",
        "apiresourceimports",
    )
}

/// APIResourceSchema `name` of `kind` (`group`, v1, `scope`), any object fitting.
fn resource_schema(
    name: &str,
    group: &str,
    scope: &str,
    (plural, singular, kind): (&str, &str, &str),
) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": { "name": name },
        "spec": { "group": group, "scope": scope,
            "names": { "plural": plural, "singular": singular, "kind": kind, "listKind": format!("{kind}List") },
            "versions": [{ "name": "v1", "served": true, "storage": true, "schema": open_schema(),
                "subresources": { "status": {} } }] }
    })
}

/// SyncTarget `location`'s imported schema of `plural` (`group`/v1, `scope`), as
/// the syncer's importer writes it (the test stands in for the importer).
async fn import_schema(
    org: &Cluster,
    location: &str,
    group: &str,
    scope: &str,
    (plural, kind): (&str, &str),
) {
    org.create(
        &api_resource_imports(),
        json!({
            "apiVersion": "apiresource.kcp.io/v1alpha1", "kind": "APIResourceImport",
            "metadata": { "name": format!("{plural}.{location}.v1.{group}") },
            "spec": { "location": location, "groupVersion": { "group": group, "version": "v1" },
                "scope": scope, "plural": plural, "kind": kind, "openAPIV3Schema": open_schema() }
        }),
    )
    .await;
}

/// Whether SyncTarget `st` says `resource` is Accepted.
fn accepted(st: &Value, resource: &str) -> bool {
    st["status"]["syncedResources"].as_array().is_some_and(|r| {
        r.iter()
            .any(|e| e["resource"] == resource && e["state"] == "Accepted")
    })
}

/// Pod `runner` in the downstream namespace `ns`, labelled `labels`.
fn runner_pod(ns: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "runner", "namespace": ns, "labels": labels },
        "spec": { "containers": [{ "name": "c", "image": "busybox" }] }
    })
}

/// Placement `compute`: namespaces labelled `tmc=yes` onto any SyncTarget of `root:org`.
fn compute_placement() -> Value {
    json!({
        "apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement", "metadata": { "name": "compute" },
        "spec": { "locationWorkspace": "root:org", "locationSelectors": [{}],
            "locationResource": { "group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets" },
            "namespaceSelector": { "matchLabels": { "tmc": "yes" } } }
    })
}

/// kcp (SyncTarget `east` in `root:org`, workloads in `root:app`) and a physical cluster.
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
    /// The stage, with the target's deployments schema already imported.
    async fn start() -> Tmc {
        Tmc::start_with(true).await
    }

    /// The stage; `imported`: the test imports the deployments schema (otherwise the
    /// syncer's importer has to).
    async fn start_with(imported: bool) -> Tmc {
        init_logs();
        let kcp = TestHub::start().await;
        let pcluster = TestHub::start().await;
        let org = workspace(&kcp, "org").await;
        let app = workspace(&kcp, "app").await;
        org.create(
            &apis("APIResourceSchema", "apiresourceschemas"),
            resource_schema(
                "v1.deployments.apps",
                "apps",
                "Namespaced",
                ("deployments", "deployment", "Deployment"),
            ),
        )
        .await;
        org.create(
            &apis("APIExport", "apiexports"),
            json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": { "name": "kubernetes" },
                    "spec": { "latestResourceSchemas": ["v1.deployments.apps"] } }),
        )
        .await;
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
        if imported {
            import_schema(&org, "east", "apps", "Namespaced", ("deployments", "Deployment")).await;
        }
        wait_for(
            &org,
            &sync_targets(),
            None,
            "east",
            "deployments Accepted",
            |st| {
                (accepted(st, "deployments") || !imported)
                    && st["status"]["virtualWorkspaces"][0]["syncerURL"].is_string()
            },
        )
        .await;
        app.create(&placements(), compute_placement()).await;
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

    /// SyncTarget `east` once `pred` holds for it.
    async fn target_when(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(&self.org, &sync_targets(), None, "east", what, pred).await
    }

    fn options(&self, uid: &str) -> TmcOptions {
        let mut options = TmcOptions::new(uid);
        options.heartbeat_period = Duration::from_millis(300);
        options.sync_target_poll = Duration::from_millis(200);
        options.namespace_clean_delay = Duration::from_secs(1);
        options.api_import_poll_interval = Duration::from_millis(300);
        options
    }

    /// Options for a syncer of `east` to the physical cluster as the target with
    /// uid `uid`, with test-speed timers.
    async fn syncer_options_for(&self, uid: &str) -> SyncerOptions {
        let mut opts = syncer_options(&self.kcp, "root:org", &self.pcluster, "east").await;
        opts.tmc = Some(self.options(uid));
        opts
    }

    async fn syncer_with(&self, uid: &str) -> anyhow::Result<RunningSyncer> {
        self.syncer_for(uid, &[]).await
    }

    /// A syncer for the target with uid `uid`, run with `--resources <resources>`.
    async fn syncer_for(&self, uid: &str, resources: &[&str]) -> anyhow::Result<RunningSyncer> {
        let mut opts = self.syncer_options_for(uid).await;
        if let Some(options) = opts.tmc.as_mut() {
            options.resources = resources.iter().map(|r| r.to_string()).collect();
        }
        ferry_syncer::start(opts).await
    }

    async fn syncer(&self) -> RunningSyncer {
        start_ready(self.syncer_options_for(&self.uid).await).await
    }

    /// SyncTarget `east` once its condition `type_` has `status`.
    async fn target_condition(&self, what: &str, type_: &str, status: &str) -> Value {
        self.target_when(what, |st| {
            condition(st, type_).is_some_and(|c| c["status"] == status)
        })
        .await
    }

    /// The copy of `name` in the downstream namespace `ns`, once there.
    async fn copy(&self, ar: &ApiResource, ns: &str, name: &str, what: &str) -> Value {
        self.down.when(ar, ns, name, what, |_| true).await
    }

    /// `ns/name` upstream once the syncer has let it go (its finalizer removed).
    async fn released(&self, ar: &ApiResource, ns: &str, name: &str, what: &str) -> Value {
        let finalizer = self.finalizer();
        self.app
            .when(ar, ns, name, what, |c| !has_finalizer(c, &finalizer))
            .await
    }

    /// Sets the soft finalizers annotation of ConfigMap `ns/name` upstream to `value`.
    async fn soft_finalizers(&self, ns: &str, name: &str, value: Value) {
        let soft = workload_soft_finalizers_annotation(&self.key);
        self.app
            .merge(
                &configmaps(),
                Some(ns),
                name,
                json!({ "metadata": { "annotations": { soft: value } } }),
            )
            .await;
    }

    /// The cluster reports `status` on the copy of Deployment `web` in `kcp_ns`;
    /// returns once upstream `demo/web` shows its `readyReplicas`.
    async fn web_status_returns(&self, kcp_ns: &str, status: Value, what: &str) {
        self.down
            .set_status(&deployments(), Some(kcp_ns), "web", status.clone())
            .await;
        self.app
            .when(&deployments(), "demo", "web", what, |d| {
                d["status"]["readyReplicas"] == status["readyReplicas"]
            })
            .await;
    }

    /// The Event in the physical cluster's `default` namespace that `pred` picks.
    async fn downstream_event(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        eventually(15, what, || async {
            self.down
                .list(&events(), Some("default"))
                .await
                .into_iter()
                .find(|e| pred(e))
        })
        .await
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

    /// Namespace `name` in `root:app`, selected by the Placement; returns once the
    /// scheduler has put it on the target.
    async fn scheduled_namespace(&self, name: &str) {
        let mut ns = namespace(name);
        ns["metadata"]["labels"] = json!({ "tmc": "yes" });
        self.app.create(&namespaces(), ns).await;
        let label = self.state_label();
        wait_for(
            &self.app,
            &namespaces(),
            None,
            name,
            "the namespace scheduled",
            |ns| ns["metadata"]["labels"][&label] == "Sync",
        )
        .await;
    }

    /// Takes namespace `name` off the Placement: the scheduler's deletion handshake.
    async fn unschedule(&self, name: &str) {
        self.app
            .merge(
                &namespaces(),
                None,
                name,
                json!({ "metadata": { "labels": { "tmc": "no" } } }),
            )
            .await;
    }

    /// Namespaces `demo` (ConfigMaps `kept` and `deleted`) and `moved` (ConfigMap
    /// `inside`) scheduled, and their copies made; returns the two downstream namespaces.
    /// Namespace `demo` scheduled with ConfigMap `name` in it; returns the
    /// downstream namespace once the copy is there.
    async fn demo_copy(&self, name: &str) -> String {
        self.scheduled_namespace("demo").await;
        self.scheduled_configmap("demo", name).await;
        let kcp_ns = self.downstream("demo");
        self.copy(&configmaps(), &kcp_ns, name, "the copy").await;
        kcp_ns
    }

    /// Namespace `demo` scheduled with ConfigMap `settings` and Deployment `web`
    /// in it; returns the downstream namespace.
    async fn demo_settings_and_web(&self) -> String {
        self.scheduled_namespace("demo").await;
        self.scheduled_configmap("demo", "settings").await;
        self.app
            .create(&deployments(), deployment("demo", "web", json!({})))
            .await;
        self.downstream("demo")
    }

    async fn demo_and_moved(&self) -> (String, String) {
        self.scheduled_namespace("demo").await;
        self.scheduled_namespace("moved").await;
        for name in ["kept", "deleted"] {
            self.scheduled_configmap("demo", name).await;
        }
        self.scheduled_configmap("moved", "inside").await;
        let (kcp_ns, moved) = (self.downstream("demo"), self.downstream("moved"));
        for name in ["kept", "deleted"] {
            self.copy(&configmaps(), &kcp_ns, name, "the copy").await;
        }
        self.copy(&configmaps(), &moved, "inside", "the copy").await;
        (kcp_ns, moved)
    }

    async fn scheduled_configmap(&self, ns: &str, name: &str) -> Value {
        self.app
            .create(&configmaps(), configmap(ns, name, json!({ "k": "v" })))
            .await
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
async fn scheduled_objects_land_in_a_kcp_namespace_with_the_locator_and_status_returns() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    let kcp_ns = t.demo_settings_and_web().await;
    // kcp's root CA in the namespace: renamed on the way down, beside the cluster's own.
    t.app
        .create(
            &configmaps(),
            configmap("demo", "kube-root-ca.crt", json!({ "ca.crt": "kcp" })),
        )
        .await;
    // Not selected by the Placement: stays upstream.
    t.app.create(&namespaces(), namespace("other")).await;
    t.app
        .create(&configmaps(), configmap("other", "unscheduled", json!({})))
        .await;

    assert!(kcp_ns.starts_with("kcp-") && kcp_ns.len() == 16, "{kcp_ns}");
    let ns = wait_present(&t.down, &namespaces(), None, &kcp_ns, "the kcp-<hash> namespace").await;
    let locator =
        NamespaceLocator::parse(annotation(&ns, NAMESPACE_LOCATOR_ANNOTATION).expect("locator")).unwrap();
    assert_eq!(locator, NamespaceLocator::new(&t.target, &t.app_cluster, "demo"));
    assert_eq!(label(&ns, WORKLOAD_CLUSTER_LABEL), Some(t.key.as_str()));

    let cm = t
        .copy(&configmaps(), &kcp_ns, "settings", "the configmap copy")
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
    let ca = t
        .copy(&configmaps(), &kcp_ns, "kcp-root-ca.crt", "kcp's root CA")
        .await;
    assert_eq!(ca["data"]["ca.crt"], "kcp");
    assert!(t
        .down
        .get(&configmaps(), Some(&kcp_ns), "kube-root-ca.crt")
        .await
        .is_none());
    let dep = t
        .copy(&deployments(), &kcp_ns, "web", "the deployment copy")
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
        .get(&namespaces(), None, &t.downstream("other"))
        .await
        .is_none());

    // Status set downstream comes back upstream.
    t.web_status_returns(
        &kcp_ns,
        json!({ "replicas": 2, "readyReplicas": 2 }),
        "status upstream",
    )
    .await;

    // The heartbeat and the permission check show on the SyncTarget.
    let st = t
        .target_when("a heartbeat", |st| {
            st["status"]["lastSyncerHeartbeatTime"].is_string() && condition(st, "SyncerAuthorized").is_some()
        })
        .await;
    let first = st["status"]["lastSyncerHeartbeatTime"].clone();
    let authorized = condition(&st, "SyncerAuthorized").unwrap();
    assert_eq!(authorized["status"], "True", "{authorized}");
    // Heartbeats carry on (RFC 3339 to the second: wait past one).
    t.target_when("a later heartbeat", |st| {
        st["status"]["lastSyncerHeartbeatTime"] != first
    })
    .await;
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_delete_waits_for_downstream_cleanup() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    let kcp_ns = t.demo_copy("held").await;
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
    t.down
        .when(&configmaps(), &kcp_ns, "held", "the copy being deleted", |c| {
            !c["metadata"]["deletionTimestamp"].is_null()
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
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
    t.app
        .gone(&configmaps(), "demo", "held", "the upstream object")
        .await;
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unscheduling_deletes_the_copies_after_soft_finalizers_and_releases_the_sources() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    t.scheduled_configmap("demo", "plain").await;
    t.scheduled_configmap("demo", "drained").await;
    let kcp_ns = t.downstream("demo");
    for name in ["plain", "drained"] {
        t.copy(&configmaps(), &kcp_ns, name, "the copy").await;
    }
    // Something upstream wants to see `drained` off the cluster first.
    t.soft_finalizers("demo", "drained", json!("[\"example.com/drain\"]"))
        .await;

    t.unschedule("demo").await;
    let deletion = workload_deletion_annotation(&t.key);
    t.down
        .gone(&configmaps(), &kcp_ns, "plain", "the plain copy")
        .await;
    let up = t
        .released(&configmaps(), "demo", "plain", "the source released")
        .await;
    assert_eq!(annotation(&up, &deletion), None);
    assert_eq!(label(&up, &t.state_label()), None);

    let drained = t.app.get(&configmaps(), Some("demo"), "drained").await.unwrap();
    assert!(
        annotation(&drained, &deletion).is_some(),
        "the scheduler's handshake: {drained}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        t.down
            .get(&configmaps(), Some(&kcp_ns), "drained")
            .await
            .is_some(),
        "a soft finalizer holds the copy"
    );
    t.soft_finalizers("demo", "drained", json!("[]")).await;
    t.down
        .gone(&configmaps(), &kcp_ns, "drained", "the drained copy")
        .await;
    t.released(&configmaps(), "demo", "drained", "the source released")
        .await;
    // The emptied namespace goes after the clean delay.
    wait_gone(&t.down, &namespaces(), None, &kcp_ns, "the emptied namespace").await;
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
    let event = t
        .downstream_event("a NamespaceCollision Event naming both namespaces", |e| {
            let message = e["message"].as_str().unwrap_or_default();
            e["reason"] == "NamespaceCollision" && message.contains(&kcp_ns) && message.contains("|demo")
        })
        .await;
    assert_eq!(event["involvedObject"]["name"], kcp_ns.as_str(), "{event}");
    assert!(
        event["message"].as_str().unwrap().contains("namespace collision"),
        "{event}"
    );
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
    wait_present(&t.down, &namespaces(), None, &kcp_ns, "the namespace").await;
    let pod = runner_pod(&kcp_ns, json!({ t.state_label(): "Upsync" }));
    let made = t.down.create(&pods(), pod).await;
    let up = t
        .app
        .when(&pods(), "demo", "runner", "the pod upstream", |_| true)
        .await;
    assert!(has_finalizer(&up, &t.finalizer()));
    assert_eq!(label(&up, &t.state_label()), Some("Upsync"));
    assert_eq!(
        annotation(&up, WORKLOAD_RV_ANNOTATION),
        made["metadata"]["resourceVersion"].as_str()
    );
    t.down.delete(&pods(), Some(&kcp_ns), "runner").await;
    t.app.gone(&pods(), "demo", "runner", "the upstream pod").await;
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
    let (kcp_ns, moved) = t.demo_and_moved().await;
    syncer.stop().await;

    // While the syncer is away.
    t.app.delete(&configmaps(), Some("demo"), "deleted").await;
    t.unschedule("moved").await;
    t.scheduled_configmap("demo", "new").await;
    assert!(
        t.app.get(&configmaps(), Some("demo"), "deleted").await.is_some(),
        "held by the finalizer"
    );

    let syncer = t.syncer().await;
    t.copy(&configmaps(), &kcp_ns, "new", "the new copy").await;
    t.down
        .gone(&configmaps(), &kcp_ns, "deleted", "the deleted object's copy")
        .await;
    t.app
        .gone(&configmaps(), "demo", "deleted", "the deleted object")
        .await;
    t.down
        .gone(&configmaps(), &moved, "inside", "the moved namespace's copy")
        .await;
    t.released(&configmaps(), "moved", "inside", "its finalizer removed")
        .await;
    wait_gone(
        &t.down,
        &namespaces(),
        None,
        &moved,
        "the moved namespace downstream",
    )
    .await;
    assert!(t.down.get(&configmaps(), Some(&kcp_ns), "kept").await.is_some());
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_no_longer_scheduled_is_deleted_after_the_delay_only_when_empty() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("empty").await;
    t.scheduled_namespace("full").await;
    t.scheduled_configmap("full", "inside").await;
    let empty = t.downstream("empty");
    let full = t.downstream("full");
    wait_present(&t.down, &namespaces(), None, &empty, "the empty namespace").await;
    t.copy(&configmaps(), &full, "inside", "the copy").await;
    // A soft finalizer keeps the copy in `full` after it is unscheduled.
    t.soft_finalizers("full", "inside", json!("[\"x/y\"]")).await;
    let started = std::time::Instant::now();
    t.unschedule("empty").await;
    t.unschedule("full").await;
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
    t.soft_finalizers("full", "inside", Value::Null).await;
    wait_gone(
        &t.down,
        &namespaces(),
        None,
        &full,
        "the emptied namespace deleted",
    )
    .await;
    syncer.stop().await;
}

/// A namespace taken off the SyncTarget is let go upstream at once, while its copy
/// waits out `--downstream-namespace-clean-delay` (here 30 s): scheduled back within
/// the delay, its objects land again at once, in the same namespace, rather than
/// after the delay (what made a re-run of the kcp TMC quickstart wait 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_scheduled_back_within_the_clean_up_delay_syncs_again_at_once() {
    let t = Tmc::start().await;
    let mut opts = t.syncer_options_for(&t.uid).await;
    if let Some(options) = opts.tmc.as_mut() {
        options.namespace_clean_delay = Duration::from_secs(30);
    }
    let syncer = start_ready(opts).await;
    let kcp_ns = t.demo_copy("cm").await;
    let namespace_copy = t.down.get(&namespaces(), None, &kcp_ns).await.unwrap();

    t.unschedule("demo").await;
    t.down
        .gone(&configmaps(), &kcp_ns, "cm", "the copy deleted")
        .await;
    wait_for(
        &t.app,
        &namespaces(),
        None,
        "demo",
        "the namespace let go by the syncer, and so off the target",
        |ns| !has_finalizer(ns, &t.finalizer()) && ns["metadata"]["labels"][&t.state_label()].is_null(),
    )
    .await;
    assert!(
        t.down.get(&namespaces(), None, &kcp_ns).await.is_some(),
        "the namespace copy waits out the delay"
    );

    t.app
        .merge(
            &namespaces(),
            None,
            "demo",
            json!({ "metadata": { "labels": { "tmc": "yes" } } }),
        )
        .await;
    t.copy(&configmaps(), &kcp_ns, "cm", "the copy back").await;
    let again = t.down.get(&namespaces(), None, &kcp_ns).await.unwrap();
    assert_eq!(
        again["metadata"]["uid"], namespace_copy["metadata"]["uid"],
        "the namespace copy is the same one"
    );
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_the_cluster_does_not_allow_is_not_synced_and_the_sync_target_says_so() {
    let t = Tmc::start().await;
    // The syncer's downstream identity may do everything with the core types, nothing
    // with deployments.
    t.down.create(&namespaces(), namespace("kcp-syncer")).await;
    let token = t
        .down
        .service_account_with_rules(
            ("kcp-syncer", "syncer"),
            "kcp-syncer",
            // What kcp's plugin grants (kubectl ferry workload sync writes the same),
            // without deployments.
            json!([
                { "apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "get", "list", "watch", "delete"] },
                { "apiGroups": [""], "resources": ["configmaps", "configmaps/status", "secrets", "secrets/status", "serviceaccounts", "pods", "pods/status"], "verbs": ["*"] },
                { "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"] },
                { "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"], "verbs": ["create"] },
                { "apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"] },
            ]),
        )
        .await;
    let mut opts = t.syncer_options_for(&t.uid).await;
    opts.downstream = token_config(&t.pcluster, "root", &token).await;
    let syncer = ferry_syncer::start(opts).await.expect("syncer starts");

    let st = t
        .target_condition("SyncerAuthorized False", "SyncerAuthorized", "False")
        .await;
    let authorized = condition(&st, "SyncerAuthorized").unwrap();
    assert_eq!(authorized["reason"], "SyncerUnauthorized", "{authorized}");
    assert_eq!(
        authorized["message"], "SSAR check failed for gvrs: deployments.apps",
        "{authorized}"
    );
    let kcp_ns = t.demo_settings_and_web().await;
    t.copy(&configmaps(), &kcp_ns, "settings", "what it may sync")
        .await;
    let web = t.app.get(&deployments(), Some("demo"), "web").await.unwrap();
    assert!(!has_finalizer(&web, &t.finalizer()), "not taken on: {web}");

    // Granted: noticed without a restart.
    t.down
        .merge(
            &cluster_roles(),
            None,
            "kcp-syncer",
            json!({ "rules": [
                { "apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "get", "list", "watch", "delete"] },
                { "apiGroups": [""], "resources": ["configmaps", "secrets", "serviceaccounts", "pods"], "verbs": ["*"] },
                { "apiGroups": ["apps"], "resources": ["deployments", "deployments/status"], "verbs": ["*"] },
                { "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"], "verbs": ["create"] },
            ] }),
        )
        .await;
    t.copy(&deployments(), &kcp_ns, "web", "the deployment once allowed")
        .await;
    t.target_condition("SyncerAuthorized True", "SyncerAuthorized", "True")
        .await;
    // The namespace goes too, with no more than create and delete on namespaces.
    t.unschedule("demo").await;
    wait_gone(&t.down, &namespaces(), None, &kcp_ns, "the namespace cleaned up").await;
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clusters_schemas_are_imported_so_the_hub_accepts_what_it_can_hold() {
    let t = Tmc::start_with(false).await;
    let syncer = t.syncer().await;
    let import = wait_present(
        &t.org,
        &api_resource_imports(),
        None,
        "deployments.east.v1.apps",
        "the deployments schema imported",
    )
    .await;
    assert_eq!(import["spec"]["location"], "east");
    assert_eq!(
        import["spec"]["groupVersion"],
        json!({ "group": "apps", "version": "v1" })
    );
    assert_eq!(import["spec"]["scope"], "Namespaced");
    assert_eq!(
        import["spec"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]["type"], "integer",
        "the cluster's own schema"
    );
    assert_eq!(import["metadata"]["ownerReferences"][0]["uid"], t.uid.as_str());
    let st = t
        .target_when("deployments Accepted", |st| {
            accepted(st, "deployments") && condition(st, "APIImporterReady").is_some()
        })
        .await;
    assert_eq!(condition(&st, "APIImporterReady").unwrap()["status"], "True");
    t.scheduled_namespace("demo").await;
    t.app
        .create(&deployments(), deployment("demo", "web", json!({})))
        .await;
    t.copy(
        &deployments(),
        &t.downstream("demo"),
        "web",
        "the deployment copy",
    )
    .await;
    syncer.stop().await;
}

/// The identity kcp's plugin (and kubectl ferry workload sync) gives the syncer
/// of `east` in the SyncTarget's workspace, nothing in the workload workspaces:
/// its bearer token.
async fn syncer_identity(t: &Tmc) -> String {
    t.org
        .service_account_with_rules(
            ("default", "kcp-syncer-east"),
            "kcp-syncer-east",
            json!([
                { "apiGroups": ["workload.kcp.io"], "resources": ["synctargets"], "resourceNames": ["east"], "verbs": ["sync"] },
                { "apiGroups": ["workload.kcp.io"], "resources": ["synctargets"], "verbs": ["get", "list", "watch"] },
                { "apiGroups": ["workload.kcp.io"], "resources": ["synctargets/status"], "resourceNames": ["east"], "verbs": ["get", "update", "patch"] },
                { "apiGroups": ["apiresource.kcp.io"], "resources": ["apiresourceimports"], "verbs": ["get", "create", "update", "delete", "list", "watch"] },
            ]),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syncer_with_only_the_sync_verb_upstream_syncs_through_the_virtual_workspaces() {
    let t = Tmc::start_with(false).await;
    let token = syncer_identity(&t).await;
    let mut opts = t.syncer_options_for(&t.uid).await;
    opts.upstream = token_config(&t.kcp, "root:org", &token).await;
    let syncer = start_ready(opts).await;

    let kcp_ns = t.demo_settings_and_web().await;
    t.copy(&configmaps(), &kcp_ns, "settings", "the configmap copy")
        .await;
    // Its schema import made deployments Accepted.
    t.copy(&deployments(), &kcp_ns, "web", "the deployment copy")
        .await;
    t.web_status_returns(&kcp_ns, json!({ "readyReplicas": 1 }), "status upstream")
        .await;
    let pod = runner_pod(&kcp_ns, json!({ t.state_label(): "Upsync" }));
    t.down.create(&pods(), pod).await;
    t.app
        .when(&pods(), "demo", "runner", "the pod upstream", |_| true)
        .await;
    let st = t.target_condition("Ready", "Ready", "True").await;
    assert!(st["status"]["lastSyncerHeartbeatTime"].is_string());
    // Removing the upstream object waits for the copy, which the syncer deletes.
    t.app.delete(&configmaps(), Some("demo"), "settings").await;
    t.down.gone(&configmaps(), &kcp_ns, "settings", "the copy").await;
    t.app
        .gone(&configmaps(), "demo", "settings", "the upstream object")
        .await;
    syncer.stop().await;
}

fn volumes() -> ApiResource {
    ar("", "v1", "PersistentVolume", "persistentvolumes")
}

/// A persistent volume; `claim`: `(namespace, name)` of the claim it is bound to.
fn volume(name: &str, labels: Value, annotations: Value, claim: Option<(&str, &str)>) -> Value {
    let mut pv = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": { "name": name, "labels": labels, "annotations": annotations },
        "spec": { "capacity": { "storage": "1Gi" }, "accessModes": ["ReadWriteOnce"],
            "hostPath": { "path": format!("/data/{name}") } }
    });
    if let Some((ns, claim)) = claim {
        pv["spec"]["claimRef"] = json!({ "kind": "PersistentVolumeClaim", "namespace": ns, "name": claim,
            "uid": "0b7c5f3e-downstream-claim", "resourceVersion": "42" });
    }
    pv
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_provisioned_downstream_goes_up_to_the_workspace_of_its_claim_or_locator() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    let kcp_ns = t.downstream("demo");
    wait_present(&t.down, &namespaces(), None, &kcp_ns, "the namespace").await;
    let upsync = json!({ t.state_label(): "Upsync" });
    // Bound to a claim in a namespace synced from root:app.
    t.down
        .create(
            &volumes(),
            volume("pvc-1", upsync.clone(), json!({}), Some((&kcp_ns, "data"))),
        )
        .await;
    // Located in root:app by its locator annotation.
    let locator = NamespaceLocator::new(&t.target, &t.app_cluster, "").to_json();
    t.down
        .create(
            &volumes(),
            volume(
                "located",
                upsync.clone(),
                json!({ NAMESPACE_LOCATOR_ANNOTATION: locator }),
                None,
            ),
        )
        .await;
    // Labelled, but nothing says which workspace it belongs to.
    t.down
        .create(
            &volumes(),
            volume("stranger", upsync, json!({}), Some(("default", "x"))),
        )
        .await;

    let up = wait_present(&t.app, &volumes(), None, "pvc-1", "the bound volume upstream").await;
    assert_eq!(up["spec"]["claimRef"]["namespace"], "demo", "{up}");
    assert_eq!(up["spec"]["claimRef"]["name"], "data", "{up}");
    assert!(
        up["spec"]["claimRef"]["uid"].is_null(),
        "the downstream claim's uid is not copied: {up}"
    );
    assert!(has_finalizer(&up, &t.finalizer()), "{up}");
    assert_eq!(annotation(&up, NAMESPACE_LOCATOR_ANNOTATION), None, "{up}");
    wait_present(&t.app, &volumes(), None, "located", "the located volume upstream").await;
    assert!(
        t.app.get(&volumes(), None, "stranger").await.is_none(),
        "a volume belonging to no workspace stays downstream"
    );

    t.down.delete(&volumes(), None, "pvc-1").await;
    wait_gone(&t.app, &volumes(), None, "pvc-1", "the upstream volume").await;
    assert!(t.app.get(&volumes(), None, "located").await.is_some());
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_labelled_sync_lands_downstream_with_its_locator_and_never_over_a_stranger() {
    let t = Tmc::start().await;
    // persistentvolumes in the `kubernetes` export, imported from the cluster: Accepted.
    t.org
        .create(
            &apis("APIResourceSchema", "apiresourceschemas"),
            resource_schema(
                "v1.persistentvolumes.core",
                "",
                "Cluster",
                ("persistentvolumes", "persistentvolume", "PersistentVolume"),
            ),
        )
        .await;
    t.org
        .merge(
            &apis("APIExport", "apiexports"),
            None,
            "kubernetes",
            json!({ "spec": { "latestResourceSchemas": ["v1.deployments.apps", "v1.persistentvolumes.core"] } }),
        )
        .await;
    import_schema(
        &t.org,
        "east",
        "core",
        "Cluster",
        ("persistentvolumes", "PersistentVolume"),
    )
    .await;
    t.target_when("persistentvolumes Accepted", |st| {
        accepted(st, "persistentvolumes")
    })
    .await;
    // Someone else's volume downstream, with a name a workspace also uses.
    t.down
        .create(&volumes(), volume("taken", json!({}), json!({}), None))
        .await;
    let sync = json!({ t.state_label(): "Sync" });
    t.app
        .create(
            &volumes(),
            volume("data-vol", sync.clone(), json!({}), Some(("demo", "data"))),
        )
        .await;
    t.app
        .create(&volumes(), volume("taken", sync, json!({}), None))
        .await;
    let syncer = t.syncer().await;

    let copy = wait_for(&t.down, &volumes(), None, "data-vol", "the volume's copy", |_| {
        true
    })
    .await;
    let locator = annotation(&copy, NAMESPACE_LOCATOR_ANNOTATION).and_then(NamespaceLocator::parse);
    assert_eq!(
        locator,
        Some(NamespaceLocator::new(&t.target, &t.app_cluster, "")),
        "{copy}"
    );
    assert_eq!(
        label(&copy, WORKLOAD_CLUSTER_LABEL),
        Some(t.key.as_str()),
        "{copy}"
    );
    assert_eq!(label(&copy, &t.state_label()), None, "{copy}");
    assert_eq!(
        copy["spec"]["claimRef"]["namespace"],
        t.downstream("demo").as_str(),
        "{copy}"
    );
    assert!(copy["spec"]["claimRef"]["uid"].is_null(), "{copy}");
    wait_for(
        &t.app,
        &volumes(),
        None,
        "data-vol",
        "the syncer's finalizer",
        |v| has_finalizer(v, &t.finalizer()),
    )
    .await;

    // The stranger is reported and left alone.
    let event = t
        .downstream_event("a Collision Event on the stranger", |e| {
            e["reason"] == "Collision" && e["involvedObject"]["name"] == "taken"
        })
        .await;
    let message = event["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("|taken") && message.contains("without a kcp.io/namespace-locator"),
        "{message}"
    );
    let stranger = t.down.get(&volumes(), None, "taken").await.unwrap();
    assert_eq!(label(&stranger, WORKLOAD_CLUSTER_LABEL), None, "{stranger}");
    assert_eq!(
        annotation(&stranger, NAMESPACE_LOCATOR_ANNOTATION),
        None,
        "{stranger}"
    );

    // Another workspace's volume of the same name does not take the copy over.
    let other = workspace(&t.kcp, "other").await;
    // A workspace the target's owners granted (a Placement on root:org):
    // otherwise the syncer's view would not show it at all.
    other
        .create(
            &ar("scheduling.kcp.io", "v1alpha1", "Placement", "placements"),
            json!({
                "apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement", "metadata": { "name": "compute" },
                "spec": { "locationWorkspace": "root:org", "locationSelectors": [{}],
                    "namespaceSelector": { "matchLabels": { "tmc": "yes" } } }
            }),
        )
        .await;
    let sync = json!({ t.state_label(): "Sync" });
    let intruder = other
        .create(&volumes(), volume("data-vol", sync, json!({}), None))
        .await;
    let other_cluster = annotation(&intruder, "kcp.io/cluster").unwrap().to_string();
    t.downstream_event("a Collision Event naming the other workspace's volume", |e| {
        e["reason"] == "Collision"
            && e["involvedObject"]["name"] == "data-vol"
            && e["message"]
                .as_str()
                .unwrap_or_default()
                .contains(&format!("{other_cluster}|data-vol"))
    })
    .await;
    let copy = t.down.get(&volumes(), None, "data-vol").await.unwrap();
    let locator = annotation(&copy, NAMESPACE_LOCATOR_ANNOTATION).and_then(NamespaceLocator::parse);
    assert_eq!(
        locator.map(|l| l.cluster),
        Some(t.app_cluster.clone()),
        "still root:app's: {copy}"
    );
    other.delete(&volumes(), None, "data-vol").await;

    // Deleting upstream waits for the copy, then goes.
    t.app.delete(&volumes(), None, "data-vol").await;
    wait_gone(&t.down, &volumes(), None, "data-vol", "the volume's copy").await;
    wait_gone(&t.app, &volumes(), None, "data-vol", "the upstream volume").await;
    syncer.stop().await;
}

/// Either side away for a while, with work piling up on the other: everything
/// converges when it returns, and nothing is left behind (no orphaned copy, no
/// finalizer on an object the syncer no longer syncs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_either_side_for_a_while_converges_with_no_orphans_and_no_finalizers_left() {
    let mut t = Tmc::start().await;
    let syncer = t.syncer().await;
    let (kcp_ns, moved) = t.demo_and_moved().await;
    let finalizer = t.finalizer();
    let upsync = json!({ t.state_label(): "Upsync" });

    // The physical cluster goes away; kcp keeps changing.
    let (pcluster, ()) = t
        .pcluster
        .restart_after(async {
            t.app.delete(&configmaps(), Some("demo"), "deleted").await;
            t.app
                .merge(
                    &namespaces(),
                    None,
                    "moved",
                    json!({ "metadata": { "labels": { "tmc": "no" } } }),
                )
                .await;
            t.app
                .create(
                    &configmaps(),
                    configmap("demo", "while-down", json!({ "k": "v" })),
                )
                .await;
            t.app
                .merge(
                    &configmaps(),
                    Some("demo"),
                    "kept",
                    json!({ "data": { "k": "changed" } }),
                )
                .await;
            // Long enough for the syncer to notice and back off.
            eventually(15, "the syncer to see the cluster gone", || async {
                (!syncer.is_ready()).then_some(())
            })
            .await;
        })
        .await;
    t.pcluster = pcluster;
    t.copy(&configmaps(), &kcp_ns, "while-down", "the copy made on return")
        .await;
    t.down
        .when(&configmaps(), &kcp_ns, "kept", "the change", |c| {
            c["data"]["k"] == "changed"
        })
        .await;
    t.down
        .gone(&configmaps(), &kcp_ns, "deleted", "the deleted object's copy")
        .await;
    t.app
        .gone(&configmaps(), "demo", "deleted", "the deleted object, released")
        .await;
    t.down
        .gone(
            &configmaps(),
            &moved,
            "inside",
            "the unscheduled namespace's copy",
        )
        .await;
    t.released(&configmaps(), "moved", "inside", "its finalizer removed")
        .await;

    // kcp goes away; the physical cluster keeps changing.
    let (kcp, ()) = t
        .kcp
        .restart_after(async {
            t.down.delete(&configmaps(), Some(&kcp_ns), "kept").await;
            t.down.create(&pods(), runner_pod(&kcp_ns, upsync)).await;
            eventually(15, "the syncer to see kcp gone", || async {
                (!syncer.is_ready()).then_some(())
            })
            .await;
        })
        .await;
    t.kcp = kcp;
    t.app
        .when(
            &pods(),
            "demo",
            "runner",
            "the pod made while kcp was away",
            |p| has_finalizer(p, &finalizer),
        )
        .await;
    t.down
        .when(
            &configmaps(),
            &kcp_ns,
            "kept",
            "the copy deleted by hand, made again",
            |c| c["data"]["k"] == "changed",
        )
        .await;

    // Finally nothing is scheduled: nothing of the syncer's is left on either side.
    t.unschedule("demo").await;
    t.down.delete(&pods(), Some(&kcp_ns), "runner").await;
    wait_gone(&t.down, &namespaces(), None, &kcp_ns, "the namespace downstream").await;
    t.app.gone(&pods(), "demo", "runner", "the upsynced pod").await;
    for ns in ["demo", "moved"] {
        for cm in t.app.list(&configmaps(), Some(ns)).await {
            assert!(!has_finalizer(&cm, &finalizer), "a finalizer left behind: {cm}");
        }
    }
    let key = t.key.clone();
    let leftovers: Vec<Value> = t
        .down
        .list(&configmaps(), None)
        .await
        .into_iter()
        .filter(|c| label(c, WORKLOAD_CLUSTER_LABEL) == Some(key.as_str()))
        .collect();
    assert!(leftovers.is_empty(), "orphaned copies: {leftovers:?}");
    syncer.stop().await;
}

/// kcp's syncer reaches its SyncTarget through a front proxy that stays put, and
/// reads and writes through the virtual workspace the SyncTarget advertises. When the
/// hub behind the proxy restarts on another port, the syncer notices that its virtual
/// workspace no longer answers, reads its SyncTarget again, says in one line where the
/// virtual workspace moved, and syncs there without a restart; the outage costs a few
/// warnings, not one per retry.
#[test]
fn a_syncer_follows_its_virtual_workspace_to_a_hub_restarted_on_another_port() {
    let log = LogCapture::new("ferry_syncer=info");
    log.runtime().block_on(async {
        let mut t = Tmc::start().await;
        let proxy = ferry_testkit::net::FrontProxy::to(t.kcp.running.addr).await;
        let mut opts = t.syncer_options_for(&t.uid).await;
        opts.upstream = proxy.config_through(opts.upstream);
        let syncer = start_ready(opts).await;
        let kcp_ns = t.demo_copy("before").await;
        let was = t.kcp.url().to_string();
        let lines_before = log.lines().len();

        t.kcp = t.kcp.restart_elsewhere().await;
        proxy.point_at(t.kcp.running.addr);
        t.app = Cluster::of(&t.kcp, Some("root:app")).await;
        t.scheduled_configmap("demo", "after").await;
        t.copy(
            &configmaps(),
            &kcp_ns,
            "after",
            "the copy of an object placed after the hub moved",
        )
        .await;

        let moved: Vec<String> = log
            .lines()
            .into_iter()
            .filter(|l| l.contains("virtual workspace moved"))
            .collect();
        assert_eq!(moved.len(), 1, "one line says it: {moved:#?}");
        let now = t.kcp.url();
        assert!(
            moved[0].contains(&format!(
                "SyncTarget east: its syncer virtual workspace moved from {was}/services/syncer/"
            )) && moved[0].contains(&format!(" to {now}/services/syncer/")),
            "{}",
            moved[0]
        );
        // Each warning once (the retries' own are quieter), whatever the outage's length.
        let warnings = log.warnings_after(lines_before);
        let mut said: Vec<&str> = warnings
            .iter()
            .map(|l| l.split_once(" WARN ").map_or(l.as_str(), |(_, said)| said))
            .collect();
        said.sort();
        said.dedup();
        assert!(
            said.len() == warnings.len() && warnings.len() <= 5,
            "the move costs a few warnings, not one per retry: {warnings:#?}"
        );
        syncer.stop().await;
    });
}

/// kcp's syncers each append their own finalizer to every object they sync, so on a
/// fleet each append reaches every other syncer watching the object. Another
/// controller's finalizer coming or going changes nothing a copy shows: the syncer
/// records it without reconciling the object. Its own finalizer removed, or the
/// object's data changed, it does reconcile (the finalizer is put back, the copy
/// follows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_controllers_finalizer_on_an_object_is_no_work_for_the_syncer() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    let kcp_ns = t.demo_copy("held").await;
    t.scheduled_configmap("demo", "marker").await;
    t.copy(&configmaps(), &kcp_ns, "marker", "the marker's copy")
        .await;
    let own = t.finalizer();
    let held = t
        .app
        .when(&configmaps(), "demo", "held", "the syncer's finalizer", |c| {
            has_finalizer(c, &own)
        })
        .await;
    let skipped = || changes_skipped(&syncer.metrics_text(), "v1/configmaps");
    // The marker's copy following a change made after held's shows that the syncer's
    // watch is past held's change (one watch, in order).
    let mut marks = 0;
    let mut marker_followed = async || {
        marks += 1;
        let data = json!({ "data": { "mark": marks.to_string() } });
        t.app.merge(&configmaps(), Some("demo"), "marker", data).await;
        let want = marks.to_string();
        t.down
            .when(&configmaps(), &kcp_ns, "marker", "the marker's change", |c| {
                c["data"]["mark"] == want.as_str()
            })
            .await;
    };
    let with = |finalizers: &[&str]| json!({ "metadata": { "finalizers": finalizers } });
    let cms = configmaps();
    let merge_held = |patch: Value| t.app.merge(&cms, Some("demo"), "held", patch);

    marker_followed().await;
    let before = skipped();
    let mut finalizers: Vec<&str> = held["metadata"]["finalizers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    finalizers.push("example.com/keep");
    merge_held(with(&finalizers)).await;
    finalizers.retain(|f| *f != "example.com/keep");
    merge_held(with(&finalizers)).await;
    marker_followed().await;
    assert_eq!(
        skipped(),
        before + 2,
        "another controller's finalizer added, then removed: two changes taken without a reconcile"
    );

    // Its own finalizer taken away: a change, and the finalizer is put back.
    merge_held(with(&["example.com/keep"])).await;
    t.app
        .when(
            &configmaps(),
            "demo",
            "held",
            "the syncer's finalizer back",
            |c| has_finalizer(c, &own) && has_finalizer(c, "example.com/keep"),
        )
        .await;
    // The data changed: the copy follows.
    merge_held(json!({ "data": { "k": "changed" } })).await;
    t.down
        .when(&configmaps(), &kcp_ns, "held", "the change in the copy", |c| {
            c["data"]["k"] == "changed"
        })
        .await;
    marker_followed().await;
    assert_eq!(skipped(), before + 2, "neither is skipped");
    syncer.stop().await;
}

/// A copy the physical cluster refuses shows on the SyncTarget (where kcp users
/// look) in one line with the cluster's own message, naming the object by its
/// workspace, namespace and name, and as a `CopyRefused` Event on the object in
/// its workspace; the condition clears once the object is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_the_cluster_refuses_is_named_on_the_sync_target_until_fixed() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    // Annotations just under kube's 256 KiB total: kcp takes them, but the copy,
    // with the syncer's own annotations added, is too large for the cluster.
    let mut big = configmap("demo", "bad", json!({ "k": "v" }));
    big["metadata"]["annotations"] = json!({ "big": "x".repeat(262_144 - 3 - 64) });
    t.app.create(&configmaps(), big).await;
    let st = t
        .target_condition("the refusal on the SyncTarget", "CopiesAccepted", "False")
        .await;
    let refused = condition(&st, "CopiesAccepted").unwrap();
    let message = refused["message"].as_str().unwrap();
    assert_eq!(refused["reason"], "CopiesRefused");
    assert!(
        message.starts_with("1 object(s) refused: core/configmaps")
            && message.contains(&format!("{}|demo/bad", t.app_cluster))
            && message.contains("metadata.annotations: Too long"),
        "{message}"
    );
    assert!(
        !message.contains("Status {") && !message.contains('\n'),
        "{message}"
    );
    // The object's owner sees it on the object too (`kubectl describe`).
    let event = eventually(
        20,
        "a CopyRefused Event on the object in its workspace",
        || async {
            events_about(&t.app, "demo", "bad")
                .await
                .into_iter()
                .find(|e| e.starts_with("CopyRefused: "))
        },
    )
    .await;
    assert!(
        event.contains("metadata.annotations: Too long") && !event.contains("Status {"),
        "{event}"
    );

    t.app
        .merge(
            &configmaps(),
            Some("demo"),
            "bad",
            json!({ "metadata": { "annotations": { "big": null } } }),
        )
        .await;
    t.copy(&configmaps(), &t.downstream("demo"), "bad", "the fixed copy")
        .await;
    t.target_condition("the refusal cleared", "CopiesAccepted", "True")
        .await;
    syncer.stop().await;
}

/// An object that leaves the SyncTarget (here its namespace is taken off the
/// Placement; a drain or a reschedule is the same handshake) loses the status
/// that cluster reported upstream, so it does not keep the old cluster's state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_leaving_the_sync_target_loses_the_status_its_cluster_reported() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    t.scheduled_namespace("demo").await;
    t.app
        .create(&deployments(), deployment("demo", "web", json!({})))
        .await;
    let kcp_ns = t.downstream("demo");
    t.copy(&deployments(), &kcp_ns, "web", "the copy").await;
    t.web_status_returns(
        &kcp_ns,
        json!({ "replicas": 2, "readyReplicas": 2 }),
        "the cluster's status upstream",
    )
    .await;

    t.unschedule("demo").await;
    t.down.gone(&deployments(), &kcp_ns, "web", "the copy").await;
    let web = t
        .app
        .when(
            &deployments(),
            "demo",
            "web",
            "the old cluster's status cleared and the object released",
            |d| d["status"].get("readyReplicas").is_none() && !has_finalizer(d, &t.finalizer()),
        )
        .await;
    assert!(
        web["status"].get("replicas").is_none(),
        "nothing of the old cluster's status stays: {}",
        web["status"]
    );
    syncer.stop().await;
}

fn roles() -> ApiResource {
    ar("rbac.authorization.k8s.io", "v1", "Role", "roles")
}

fn role_bindings() -> ApiResource {
    ar("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings")
}

/// kcp's `workload sync --resources roles.rbac.authorization.k8s.io,rolebindings...`:
/// the workspace's own Roles and RoleBindings land in the object's `kcp-<hash>`
/// namespace (served to the syncer from `root:app` itself, no APIExport involved),
/// and ServiceAccounts without asking, but for each namespace's `default`, which the
/// cluster makes itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_bindings_and_service_accounts_of_a_scheduled_namespace_land() {
    let t = Tmc::start().await;
    let syncer = t
        .syncer_for(
            &t.uid,
            &[
                "roles.rbac.authorization.k8s.io",
                "rolebindings.rbac.authorization.k8s.io",
            ],
        )
        .await
        .expect("syncer starts");
    wait_ready(&syncer).await;
    // The syncer imports the cluster's schemas; the hub then accepts both.
    t.target_when("roles and rolebindings Accepted", |st| {
        accepted(st, "roles") && accepted(st, "rolebindings")
    })
    .await;
    t.scheduled_namespace("demo").await;
    t.app
        .create(
            &service_accounts(),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "builder", "namespace": "demo"}}),
        )
        .await;
    t.app
        .create(
            &roles(),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "reader", "namespace": "demo"},
                   "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        )
        .await;
    t.app
        .create(
            &role_bindings(),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "builder-reads", "namespace": "demo"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
                   "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "demo"}]}),
        )
        .await;
    let kcp_ns = t.downstream("demo");
    let role = t.copy(&roles(), &kcp_ns, "reader", "the Role's copy").await;
    assert_eq!(role["rules"][0]["verbs"], json!(["get", "list"]));
    assert_eq!(label(&role, WORKLOAD_CLUSTER_LABEL), Some(t.key.as_str()));
    let binding = t
        .copy(
            &role_bindings(),
            &kcp_ns,
            "builder-reads",
            "the RoleBinding's copy",
        )
        .await;
    assert_eq!(binding["roleRef"]["name"], "reader");
    t.down
        .when(
            &service_accounts(),
            &kcp_ns,
            "builder",
            "the ServiceAccount's copy",
            |sa| label(sa, WORKLOAD_CLUSTER_LABEL) == Some(t.key.as_str()),
        )
        .await;
    // Upstream, the Role carries the syncer's finalizer like any synced object.
    t.app
        .when(&roles(), "demo", "reader", "the syncer's finalizer", |r| {
            has_finalizer(r, &t.finalizer())
        })
        .await;
    // The namespace's own `default` account upstream (the hub makes one in each
    // namespace, as kube does) is scheduled like the rest but never copied, so
    // nothing holds it: the scheduler labels it without the syncer's finalizer,
    // which the syncer would never take out (the namespace's deletion would wait
    // for it forever).
    let upstream_default = t
        .app
        .when(
            &service_accounts(),
            "demo",
            "default",
            "labelled for the target",
            |sa| label(sa, &workload_state_label(&t.key)) == Some("Sync"),
        )
        .await;
    assert!(
        !has_finalizer(&upstream_default, &t.finalizer()),
        "{upstream_default}"
    );
    // The cluster's own `default` account is left as the cluster made it.
    let default = t.down.get(&service_accounts(), Some(&kcp_ns), "default").await;
    assert!(
        default
            .as_ref()
            .is_none_or(|sa| label(sa, WORKLOAD_CLUSTER_LABEL).is_none()),
        "{default:?}"
    );
    syncer.stop().await;
}

fn custom_transforms() -> ApiResource {
    ar(
        "control.kubestellar.io",
        "v1alpha1",
        "CustomTransform",
        "customtransforms",
    )
}

/// KubeStellar's CustomTransform CRD in `ws`, and CustomTransform `name` removing
/// `paths` from ConfigMaps.
async fn configmap_transform(ws: &Cluster, name: &str, paths: Value) {
    if ws
        .get(&crds(), None, "customtransforms.control.kubestellar.io")
        .await
        .is_none()
    {
        let crd = serde_json::to_value(ferry_api::control::CustomTransform::crd()).unwrap();
        ws.create(&crds(), crd).await;
        eventually(15, "customtransforms served", || async {
            ws.api(&custom_transforms(), None)
                .list(&Default::default())
                .await
                .ok()
                .map(drop)
        })
        .await;
    }
    ws.create(
        &custom_transforms(),
        json!({"apiVersion": "control.kubestellar.io/v1alpha1", "kind": "CustomTransform",
               "metadata": {"name": name},
               "spec": {"apiGroup": "", "resource": "configmaps", "remove": paths}}),
    )
    .await;
}

/// A workload workspace's CustomTransform shapes its copies through TMC as
/// KubeStellar's placement translator does: the listed fields never reach the
/// cluster, and deleting the transform brings them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workspaces_custom_transform_removes_its_paths_from_the_copies() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    configmap_transform(&t.app, "no-token", json!(["$.data.token"])).await;
    t.scheduled_namespace("demo").await;
    t.app
        .create(
            &configmaps(),
            configmap("demo", "settings", json!({"k": "v", "token": "s3cret"})),
        )
        .await;
    let kcp_ns = t.downstream("demo");
    // The syncer reads transforms once per SyncTarget poll, so a copy made
    // before its first read is reshaped at the next one: wait for that.
    let copy = t
        .down
        .when(&configmaps(), &kcp_ns, "settings", "the transformed copy", |c| {
            c["data"]["k"] == "v" && c["data"].get("token").is_none()
        })
        .await;
    assert!(copy["data"].get("token").is_none(), "{copy}");
    assert!(
        annotation(&copy, "ferry.dev/transformed-by").is_some_and(|a| a.starts_with("no-token@")),
        "{copy}"
    );
    t.app.delete(&custom_transforms(), None, "no-token").await;
    t.down
        .when(&configmaps(), &kcp_ns, "settings", "the token back", |c| {
            c["data"]["token"] == "s3cret"
        })
        .await;
    syncer.stop().await;
}

/// The attacker's side: `root:mal`, placed on the same SyncTarget, writes a
/// CustomTransform for ConfigMaps; it shapes mal's own copies and nothing of
/// `root:app`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_workspaces_custom_transform_never_shapes_this_workspaces_copies() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    let mal = workspace(&t.kcp, "mal").await;
    mal.create(&placements(), compute_placement()).await;
    configmap_transform(&mal, "strip-everything", json!(["$.data"])).await;
    let mut ns = namespace("loot");
    ns["metadata"]["labels"] = json!({ "tmc": "yes" });
    let loot = mal.create(&namespaces(), ns).await;
    let mal_cluster = annotation(&loot, "kcp.io/cluster").unwrap().to_string();
    mal.create(&configmaps(), configmap("loot", "bait", json!({"k": "v"})))
        .await;
    t.scheduled_namespace("demo").await;
    let mut settings = configmap("demo", "settings", json!({"k": "v", "token": "s3cret"}));
    settings["metadata"]["labels"] = json!({"team": "alice"});
    t.app.create(&configmaps(), settings).await;
    // mal's transform does shape mal's copy, so it was read and is in force.
    let mal_ns = NamespaceLocator::new(&t.target, &mal_cluster, "loot").downstream_namespace();
    t.down
        .when(&configmaps(), &mal_ns, "bait", "mal's transformed copy", |c| {
            c.get("data").is_none() && annotation(c, "ferry.dev/transformed-by").is_some()
        })
        .await;
    let copy = t
        .copy(&configmaps(), &t.downstream("demo"), "settings", "app's copy")
        .await;
    assert_eq!(copy["data"], json!({"k": "v", "token": "s3cret"}), "{copy}");
    assert_eq!(label(&copy, "team"), Some("alice"), "{copy}");
    assert!(annotation(&copy, "ferry.dev/transformed-by").is_none(), "{copy}");
    syncer.stop().await;
}

/// Another SyncTarget `name` (labelled `target=<name>`) in `root:org`, its
/// deployments schema imported, its own physical cluster and a syncer;
/// returns the cluster, the syncer and the target's key.
async fn another_target(t: &Tmc, name: &str) -> (Cluster, TestHub, RunningSyncer, String) {
    let st = t
        .org
        .create(
            &sync_targets(),
            json!({ "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
                    "metadata": { "name": name, "labels": { "target": name } } }),
        )
        .await;
    let uid = st["metadata"]["uid"].as_str().unwrap().to_string();
    import_schema(&t.org, name, "apps", "Namespaced", ("deployments", "Deployment")).await;
    wait_for(
        &t.org,
        &sync_targets(),
        None,
        name,
        "deployments Accepted",
        |st| accepted(st, "deployments") && st["status"]["virtualWorkspaces"][0]["syncerURL"].is_string(),
    )
    .await;
    let pcluster = TestHub::start().await;
    let mut opts = syncer_options(&t.kcp, "root:org", &pcluster, name).await;
    opts.tmc = Some(t.options(&uid));
    let syncer = start_ready(opts).await;
    let key = ferry_api::workload::sync_target_key(annotation(&st, "kcp.io/cluster").unwrap(), name);
    (Cluster::of(&pcluster, None).await, pcluster, syncer, key)
}

/// SyncTarget `east` (already running) labelled `target=east`, as
/// [`another_target`] labels the others.
async fn label_east(t: &Tmc) {
    t.org
        .merge(
            &sync_targets(),
            None,
            "east",
            json!({ "metadata": { "labels": { "target": "east" } } }),
        )
        .await;
}

/// Namespace `fleet` in `root:app`, scheduled onto each SyncTarget of `names`: a
/// Location of that target alone and a Placement of it, both selecting it (kcp's
/// Placements are any-cast, so one per target).
async fn fleet_namespace_on_each(t: &Tmc, names: &[&str]) {
    let scheduling = |kind: &str, plural: &str| ar("scheduling.kcp.io", "v1alpha1", kind, plural);
    let synctargets = json!({ "group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets" });
    for name in names {
        t.org
            .create(
                &scheduling("Location", "locations"),
                json!({ "apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Location",
                        "metadata": { "name": format!("only-{name}"), "labels": { "only": name } },
                        "spec": { "resource": synctargets, "instanceSelector": { "matchLabels": { "target": name } } } }),
            )
            .await;
        t.app
            .create(
                &scheduling("Placement", "placements"),
                json!({ "apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
                        "metadata": { "name": format!("on-{name}") },
                        "spec": { "locationWorkspace": "root:org",
                                  "locationSelectors": [{ "matchLabels": { "only": name } }],
                                  "locationResource": synctargets,
                                  "namespaceSelector": { "matchLabels": { "fleet": "yes" } } } }),
            )
            .await;
    }
    let mut ns = namespace("fleet");
    ns["metadata"]["labels"] = json!({ "fleet": "yes" });
    t.app.create(&namespaces(), ns).await;
}

/// Three SyncTargets sync one Deployment (three Placements select its
/// namespace, each on a Location of one target: kcp's Placements are
/// any-cast). Each syncer returns its cluster's status into its own
/// `experimental.status.workload.kcp.io/<key>` annotation rather than the
/// object's status, which none of them overwrites, and the hub combines the
/// three into the Deployment's CombinedStatus.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_sync_targets_each_return_status_into_their_own_annotation_and_it_is_combined() {
    let t = Tmc::start().await;
    let east = t.syncer().await;
    label_east(&t).await;
    let west = another_target(&t, "west").await;
    let north = another_target(&t, "north").await;
    fleet_namespace_on_each(&t, &["east", "west", "north"]).await;
    t.app
        .create(&deployments(), deployment("fleet", "web", json!({})))
        .await;

    // Each cluster runs its copy and reports on it, as its Deployment controller would.
    let clusters = [
        (&t.down, t.key.clone()),
        (&west.0, west.3.clone()),
        (&north.0, north.3.clone()),
    ];
    for ((down, key), n) in clusters.iter().zip([2, 2, 1]) {
        let copy = eventually(30, "the copy on each cluster", || async {
            down.list(&deployments(), None)
                .await
                .into_iter()
                .find(|d| d["metadata"]["name"] == "web")
        })
        .await;
        let kcp_ns = copy["metadata"]["namespace"].as_str().unwrap().to_string();
        down.set_status(
            &deployments(),
            Some(&kcp_ns),
            "web",
            json!({ "replicas": 2, "readyReplicas": n, "availableReplicas": n }),
        )
        .await;
        let annotation = ferry_api::well_known::workload_status_annotation(key);
        t.app
            .when(
                &deployments(),
                "fleet",
                "web",
                "the cluster's own annotation",
                |d| {
                    d["metadata"]["annotations"][&annotation]
                        .as_str()
                        .and_then(|s| serde_json::from_str::<Value>(s).ok())
                        .is_some_and(|s| s["availableReplicas"] == n)
                },
            )
            .await;
    }
    let combined = ar(
        "control.kubestellar.io",
        "v1alpha1",
        "CombinedStatus",
        "combinedstatuses",
    );
    let cs = eventually(30, "the three clusters' reports combined", || async {
        t.app
            .list(&combined, Some("fleet"))
            .await
            .into_iter()
            .find(|cs| cs["placement"] == "on-east" && cs["summary"] == "5/6 available on 3 clusters")
    })
    .await;
    assert_eq!(cs["subject"], "deployments.apps/web", "{cs}");
    let web = t.app.get(&deployments(), Some("fleet"), "web").await.unwrap();
    assert!(
        web["status"].get("availableReplicas").is_none(),
        "no syncer writes the object's status while three sync it: {}",
        web["status"]
    );
    for syncer in [east, west.2, north.2] {
        syncer.stop().await;
    }
}

/// Someone edits a copy in the cluster: the syncer restores it, counts it, and
/// records the drift on the upstream object under its SyncTarget's key
/// (`drift.ferry.dev/<key>`, as kcp keeps per-target state), which never
/// travels to the copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_changed_in_the_cluster_is_restored_counted_and_recorded_on_the_upstream_object() {
    let t = Tmc::start().await;
    let syncer = t.syncer().await;
    let ns = t.demo_copy("settings").await;
    assert_eq!(drift_corrections(&syncer.metrics_text(), "v1/configmaps"), 0);

    t.down
        .merge(
            &configmaps(),
            Some(&ns),
            "settings",
            json!({ "data": { "k": "edited" } }),
        )
        .await;
    t.down
        .when(&configmaps(), &ns, "settings", "the copy restored", |c| {
            c["data"]["k"] == "v"
        })
        .await;
    let key = ferry_api::drift::drift_annotation(&t.key);
    let source = t
        .app
        .when(
            &configmaps(),
            "demo",
            "settings",
            "the drift on the upstream object",
            |c| annotation(c, &key).is_some(),
        )
        .await;
    let recorded = annotation(&source, &key).unwrap();
    let drift = ferry_api::drift::Drift::parse(recorded).expect("a drift");
    assert_eq!(drift.fields, vec!["$.data.k"]);
    assert_eq!(drift.corrections, 1);
    assert!(!recorded.contains("edited"), "never the value: {recorded}");
    assert_eq!(drift_corrections(&syncer.metrics_text(), "v1/configmaps"), 1);
    // Recording it there changed nothing the copy carries.
    let copy = t.down.get(&configmaps(), Some(&ns), "settings").await.unwrap();
    assert!(annotation(&copy, &key).is_none(), "{copy}");
    assert_eq!(drift_corrections(&syncer.metrics_text(), "v1/configmaps"), 1);
    syncer.stop().await;
}

/// Each heartbeat carries the syncer's version (`status.syncerVersion`), and the
/// syncer's identity may write it on its own SyncTarget only: the same patch on
/// another target of the workspace is forbidden.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_syncer_reports_its_version_on_its_own_sync_target_and_cannot_on_another() {
    let t = Tmc::start().await;
    t.org
        .create(
            &sync_targets(),
            json!({ "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget", "metadata": { "name": "west" } }),
        )
        .await;
    let token = syncer_identity(&t).await;
    let mut opts = t.syncer_options_for(&t.uid).await;
    opts.upstream = token_config(&t.kcp, "root:org", &token).await;
    opts.version = "0.1.0 (commit 0123456789ab)".into();
    let syncer = ferry_syncer::start(opts.clone()).await.expect("syncer starts");
    wait_for(
        &t.org,
        &sync_targets(),
        None,
        "east",
        "the syncer's version",
        |st| st["status"]["syncerVersion"] == "0.1.0 (commit 0123456789ab)",
    )
    .await;
    syncer.stop().await;

    // The syncer's identity, by hand: its own target takes a version, west does not.
    let client = kube::Client::try_from(opts.upstream).unwrap();
    let api: kube::Api<kube::core::DynamicObject> = kube::Api::all_with(client, &sync_targets());
    let patch = kube::api::Patch::Merge(json!({ "status": { "syncerVersion": "6.6.6 (commit forged)" } }));
    let params = kube::api::PatchParams::default();
    api.patch_status("east", &params, &patch)
        .await
        .expect("the syncer may write its own target's status");
    let err = api.patch_status("west", &params, &patch).await.unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 403),
        "another target's version must be forbidden: {err}"
    );
    let west = t.org.get(&sync_targets(), None, "west").await.unwrap();
    assert!(west["status"]["syncerVersion"].is_null(), "west: {west}");
}

/// PATCHes of ConfigMaps the hub answered with one of `codes`, from its `/metrics`.
async fn configmap_patches(hub: &TestHub, codes: &[&str]) -> u64 {
    let metrics = ferry_testkit::clients::scrape_metrics(hub).await;
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("verb=\"PATCH\"")
                && l.contains("resource=\"configmaps\",subresource=\"\"")
                && codes.iter().any(|c| l.contains(&format!("code=\"{c}\"")))
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.trim().parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// PATCHes of ConfigMaps the hub refused as conflicts (409) or failed JSON-patch
/// tests (422): finalizer patches that lost a race.
async fn refused_configmap_patches(hub: &TestHub) -> u64 {
    configmap_patches(hub, &["409", "422"]).await
}

/// `obj`'s finalizers.
fn finalizers(obj: &Value) -> Vec<&str> {
    obj["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// A finalizer someone other than the syncers put on an object.
const KEEP: &str = "example.com/keep";

/// Four clusters' syncers hold the same ConfigMaps, all made at once: each puts its
/// own finalizer on each exactly once, beside one someone else put there first, and
/// where that list already exists no syncer's patch is refused (each appends to it;
/// a write of the whole list pinned to the version read, as kcp's syncer updates the
/// object, let one syncer through per round and refused the others). Where no list
/// exists yet, the first syncer's patch makes it and each other syncer loses at most
/// once. (These objects are made already labelled for the four targets, so the
/// syncers append their finalizers themselves, as they do under kcp.) Objects the
/// hub's scheduler labels get all four finalizers in that same write: no syncer
/// patches them at all. Deleted, each object keeps the finalizer that is not a
/// syncer's: each syncer takes out only its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_syncers_hold_each_object_with_their_own_finalizer_without_refusing_each_other() {
    const OBJECTS: usize = 12;
    let t = Tmc::start().await;
    let east = t.syncer().await;
    label_east(&t).await;
    let others = [
        another_target(&t, "west").await,
        another_target(&t, "north").await,
        another_target(&t, "south").await,
    ];
    fleet_namespace_on_each(&t, &["east", "west", "north", "south"]).await;
    let keys: Vec<&String> = std::iter::once(&t.key)
        .chain(others.iter().map(|o| &o.3))
        .collect();
    let syncers: Vec<String> = keys.iter().map(|k| workload_syncer_finalizer(k)).collect();
    wait_for(
        &t.app,
        &namespaces(),
        None,
        "fleet",
        "the namespace on every target",
        |ns| {
            keys.iter()
                .all(|k| ns["metadata"]["labels"][workload_state_label(k)] == "Sync")
        },
    )
    .await;

    // Made at once, with a finalizer of someone else's ("held-") or none ("bare-"),
    // labelled for the four targets already ("held-", "bare-") or by the scheduler
    // ("placed-").
    let app = &t.app;
    let states: Value = keys
        .iter()
        .map(|k| (workload_state_label(k), json!("Sync")))
        .collect::<serde_json::Map<_, _>>()
        .into();
    let make_all = |prefix: &'static str, list: Option<Value>| {
        let states = states.clone();
        futures::future::join_all((0..OBJECTS).map(move |i| {
            let mut cm = configmap("fleet", &format!("{prefix}-{i}"), json!({ "k": "v" }));
            if let Some(list) = &list {
                cm["metadata"]["finalizers"] = list.clone();
            }
            if prefix != "placed" {
                cm["metadata"]["labels"] = states.clone();
            }
            async move { app.create(&configmaps(), cm).await }
        }))
    };
    let held_by_all = |prefix: &'static str, with_keep: bool| {
        let syncers = &syncers;
        async move {
            for i in 0..OBJECTS {
                let name = format!("{prefix}-{i}");
                let cm = app
                    .when(&configmaps(), "fleet", &name, "every syncer's finalizer", |cm| {
                        syncers.iter().all(|f| finalizers(cm).contains(&f.as_str()))
                    })
                    .await;
                let list = finalizers(&cm);
                for f in syncers
                    .iter()
                    .map(String::as_str)
                    .chain(with_keep.then_some(KEEP))
                {
                    let times = list.iter().filter(|x| **x == f).count();
                    assert_eq!(times, 1, "{f} on {name} {times} times: {list:?}");
                }
                assert_eq!(
                    list.len(),
                    syncers.len() + usize::from(with_keep),
                    "{name}: {list:?}"
                );
            }
        }
    };

    let before = refused_configmap_patches(&t.kcp).await;
    make_all("held", Some(json!([KEEP]))).await;
    held_by_all("held", true).await;
    let refused = refused_configmap_patches(&t.kcp).await - before;
    assert_eq!(
        refused, 0,
        "{refused} finalizer patches refused on {OBJECTS} objects that had a list to append to"
    );

    let before = refused_configmap_patches(&t.kcp).await;
    make_all("bare", None).await;
    held_by_all("bare", false).await;
    let refused = refused_configmap_patches(&t.kcp).await - before;
    let at_most = OBJECTS * (syncers.len() - 1);
    assert!(
        refused as usize <= at_most,
        "{refused} finalizer patches refused on {OBJECTS} objects without a list (at most {at_most}: one per syncer but the first)"
    );

    let before = configmap_patches(&t.kcp, &["200", "409", "422"]).await;
    make_all("placed", Some(json!([KEEP]))).await;
    held_by_all("placed", true).await;
    // Counted once every syncer has copied every object: a syncer that appends its
    // finalizer does so before its copy.
    for cluster in std::iter::once(&t.down).chain(others.iter().map(|o| &o.0)) {
        eventually(30, "every placed- copy in each cluster", || async {
            let names: Vec<String> = cluster
                .list(&configmaps(), None)
                .await
                .iter()
                .filter_map(|c| c["metadata"]["name"].as_str().map(String::from))
                .collect();
            (0..OBJECTS)
                .all(|i| names.contains(&format!("placed-{i}")))
                .then_some(())
        })
        .await;
    }
    let patched = configmap_patches(&t.kcp, &["200", "409", "422"]).await - before;
    assert_eq!(
        patched, 0,
        "{patched} ConfigMap patches by the syncers on {OBJECTS} objects the scheduler labelled with every finalizer"
    );

    // Deleted: every syncer lets go, and only its own finalizer goes.
    for i in 0..OBJECTS {
        for prefix in ["held", "bare", "placed"] {
            t.app
                .delete(&configmaps(), Some("fleet"), &format!("{prefix}-{i}"))
                .await;
        }
    }
    for i in 0..OBJECTS {
        for prefix in ["held", "placed"] {
            let released = t
                .app
                .when(
                    &configmaps(),
                    "fleet",
                    &format!("{prefix}-{i}"),
                    "released by every syncer",
                    |cm| !syncers.iter().any(|f| finalizers(cm).contains(&f.as_str())),
                )
                .await;
            assert_eq!(finalizers(&released), [KEEP], "{prefix}-{i}");
            assert!(!released["metadata"]["deletionTimestamp"].is_null());
        }
        t.app
            .gone(
                &configmaps(),
                "fleet",
                &format!("bare-{i}"),
                "a deleted object no syncer holds",
            )
            .await;
    }
    east.stop().await;
    for (_, _, syncer, _) in others {
        syncer.stop().await;
    }
}
