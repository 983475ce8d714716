//! The kcp api-syncagent profile end to end: one hub as kcp, another as the service
//! cluster. In kcp, `root:provider` holds the APIExport `databases.example.io` (with a
//! configmaps claim of its own) and its endpoint slice; `root:c1` and `root:c2` bind it.
//! The service cluster has a Database CRD (`example.com`) and PublishedResources. The
//! agent publishes the CRD as an APIResourceSchema, merges it into the export, and
//! syncs the consumers' Databases down with the reference's default names and marks.

mod common;

use std::time::Duration;

use common::*;
use ferry_api::well_known::{
    SYNCAGENT_AGENT_NAME_LABEL, SYNCAGENT_CLEANUP_FINALIZER, SYNCAGENT_PUBLISHED_RESOURCE_ANNOTATION,
    SYNCAGENT_REMOTE_CLUSTER_LABEL, SYNCAGENT_REMOTE_NAMESPACE_ANNOTATION,
    SYNCAGENT_REMOTE_NAMESPACE_HASH_LABEL, SYNCAGENT_REMOTE_NAME_ANNOTATION,
    SYNCAGENT_REMOTE_NAME_HASH_LABEL,
};
use ferry_syncer::profiles::syncagent::{self, default_name, sha3short, EngineTuning, SyncAgentOptions};
use ferry_testkit::TestHub;
use kube::core::ApiResource;
use serde_json::{json, Value};

const EXPORT: &str = "databases.example.io";
const OLD_SCHEMA: &str = "v1.widgets.databases.example.io";

fn apis(kind: &str, plural: &str) -> ApiResource {
    ar("apis.kcp.io", "v1alpha1", kind, plural)
}

/// A published kind as consumers see it (group = the export's name), and
/// as the service cluster has it.
fn kinds(kind: &str, plural: &str) -> (ApiResource, ApiResource) {
    (
        ar(EXPORT, "v1", kind, plural),
        ar("example.com", "v1", kind, plural),
    )
}

/// The Database as consumers see it (group = the export's name).
fn remote_databases() -> ApiResource {
    kinds("Database", "databases").0
}

/// The Database on the service cluster.
fn local_databases() -> ApiResource {
    kinds("Database", "databases").1
}

fn published(name: &str, kind: &str) -> Value {
    json!({
        "apiVersion": "syncagent.kcp.io/v1alpha1", "kind": "PublishedResource",
        "metadata": { "name": name },
        "spec": { "resource": { "apiGroup": "example.com", "kind": kind, "versions": ["v1"] } }
    })
}

fn ready_condition(pr: &Value) -> Option<Value> {
    pr["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
}

/// An agent `nora` for the export, with test-speed timers.
async fn start_agent(kcp: &TestHub, service_hub: &TestHub) -> syncagent::RunningAgent {
    start_agent_without(kcp, service_hub, &[]).await
}

/// The agent with `disabled` controllers.
async fn start_agent_without(
    kcp: &TestHub,
    service_hub: &TestHub,
    disabled: &[&str],
) -> syncagent::RunningAgent {
    let mut opts = SyncAgentOptions::new(
        kube_config(kcp, Some("root:provider")).await,
        kube_config(service_hub, None).await,
        EXPORT,
        "ferry-system",
    );
    opts.agent_name = "nora".into();
    opts.disabled_controllers = disabled.iter().map(|c| c.to_string()).collect();
    opts.poll = Duration::from_millis(200);
    // Related objects must follow through their watches: the safety resync never
    // comes within a test.
    opts.related_resync = Duration::from_secs(3600);
    opts.engine = Some(EngineTuning {
        qps: Some(0.0),
        discovery_refresh: Some(Duration::from_millis(300)),
        probe_period: Some(Duration::from_millis(100)),
        min_backoff: Some(Duration::from_millis(20)),
        max_backoff: Some(Duration::from_millis(500)),
        ..Default::default()
    });
    tokio::time::timeout(Duration::from_secs(20), syncagent::start(opts))
        .await
        .expect("the agent reads the endpoint slice in time")
        .expect("the agent starts")
}

struct Stage {
    kcp: TestHub,
    service_hub: TestHub,
    provider: Cluster,
    c1: Cluster,
    c2: Cluster,
    service: Cluster,
    agent: syncagent::RunningAgent,
}

impl Stage {
    /// The agent's passes over related objects that ended with `outcome` (`synced`,
    /// `failed`), as its `/metrics` counts them.
    fn related_passes(&self, outcome: &str) -> f64 {
        let syncer = self.agent.syncer.as_ref().expect("the sync controller runs");
        ferry_testkit::clients::metric_sum(
            &syncer.metrics_text(),
            "sync_agent_related_object_passes_total",
            &[&format!("outcome=\"{outcome}\"")],
        )
    }

    /// The agent's APIExport once `pred` holds for it.
    async fn export_when(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(
            &self.provider,
            &apis("APIExport", "apiexports"),
            None,
            EXPORT,
            what,
            pred,
        )
        .await
    }

    async fn start() -> Stage {
        init_logs();
        let kcp = TestHub::start().await;
        let service_hub = TestHub::start().await;
        let provider = workspace(&kcp, "provider").await;
        let c1 = workspace(&kcp, "c1").await;
        let c2 = workspace(&kcp, "c2").await;
        // A schema the provider exported before the agent came: it stays.
        provider
            .create(
                &apis("APIResourceSchema", "apiresourceschemas"),
                json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
                        "metadata": { "name": OLD_SCHEMA },
                        "spec": { "group": EXPORT, "scope": "Namespaced",
                            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
                            "versions": [{ "name": "v1", "served": true, "storage": true,
                                "schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }] } }),
            )
            .await;
        provider
            .create(
                &apis("APIExport", "apiexports"),
                json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": { "name": EXPORT },
                        "spec": { "latestResourceSchemas": [OLD_SCHEMA],
                                  "permissionClaims": [{ "group": "", "resource": "configmaps", "all": true }] } }),
            )
            .await;
        let service = Cluster::of(&service_hub, None).await;
        let pr_crd = ferry_api::crds::all_crds()
            .into_iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .find(|c| c["metadata"]["name"] == "publishedresources.syncagent.kcp.io")
            .expect("Ferry defines the PublishedResource CRD");
        service.create(&crds(), pr_crd).await;
        service.create(&crds(), crd("Database", "databases")).await;
        eventually(
            10,
            "the service cluster to serve PublishedResources and Databases",
            || async {
                let prs = service
                    .api(&published_resources(), None)
                    .list(&Default::default())
                    .await
                    .ok();
                let dbs = service
                    .api(&local_databases(), None)
                    .list(&Default::default())
                    .await
                    .ok();
                (prs.is_some() && dbs.is_some()).then_some(())
            },
        )
        .await;
        service
            .create(&published_resources(), published("databases", "Database"))
            .await;
        service
            .create(&published_resources(), published("broken", "Missing"))
            .await;
        // Published, never synced.
        service.create(&crds(), crd("Gadget", "gadgets")).await;
        let mut schema_only = published("gadgets", "Gadget");
        schema_only["spec"]["synchronization"] = json!({ "enabled": false });
        service.create(&published_resources(), schema_only).await;
        let mut caches = crd("Cache", "caches");
        caches["spec"]["versions"][0]["subresources"] = json!(null);
        service.create(&crds(), caches).await;
        service
            .create(&published_resources(), published("caches", "Cache"))
            .await;

        let agent = start_agent(&kcp, &service_hub).await;
        Stage {
            kcp,
            service_hub,
            provider,
            c1,
            c2,
            service,
            agent,
        }
    }

    /// The agent's APIExport as it is now.
    async fn export(&self) -> Value {
        self.provider
            .get(&apis("APIExport", "apiexports"), None, EXPORT)
            .await
            .expect("the agent's APIExport")
    }

    /// PublishedResource `name` on the service cluster as it is now.
    async fn published_resource(&self, name: &str) -> Value {
        self.service
            .get(&published_resources(), None, name)
            .await
            .expect("the PublishedResource")
    }

    /// Waits for an Event on the agent's APIExport (in the provider's
    /// `default` namespace) that `pred` accepts; returns it.
    async fn export_event(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        eventually(10, what, || async {
            self.provider
                .list(&events(), Some("default"))
                .await
                .into_iter()
                .find(|e| e["involvedObject"]["name"] == EXPORT && pred(e))
        })
        .await
    }

    /// PublishedResource `name` on the service cluster once `pred` holds for it.
    async fn published_when(&self, name: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(&self.service, &published_resources(), None, name, what, pred).await
    }

    /// cert-manager issues Secret `web-tls` in namespace `cluster` of the
    /// service cluster: `tls.crt` is `CERT`.
    async fn issue_web_tls(&self, cluster: &str) {
        self.service
            .create(
                &secrets(),
                json!({ "apiVersion": "v1", "kind": "Secret",
                        "metadata": { "name": "web-tls", "namespace": cluster }, "stringData": { "tls.crt": "CERT" } }),
            )
            .await;
    }

    /// cert-manager renews Secret `web-tls` in namespace `cluster` of the
    /// service cluster: `tls.crt` becomes `RENEWED`.
    async fn renew_web_tls(&self, cluster: &str) {
        self.service
            .merge(
                &secrets(),
                Some(cluster),
                "web-tls",
                json!({ "stringData": { "tls.crt": "RENEWED" } }),
            )
            .await;
    }

    /// Merge `patch` into consumer `root:c1`'s Database `default/name`.
    async fn patch_database(&self, name: &str, patch: Value) -> Value {
        self.c1
            .merge(&remote_databases(), Some("default"), name, patch)
            .await
    }

    /// Merge `patch` into the service cluster's copy `cluster/name` of a Database.
    async fn patch_copy(&self, cluster: &str, name: &str, patch: Value) -> Value {
        self.service
            .merge(&local_databases(), Some(cluster), name, patch)
            .await
    }

    /// [`Stage::start`], once the Database's schema is published.
    async fn with_schema() -> Stage {
        let stage = Stage::start().await;
        stage.schema().await;
        stage
    }

    /// [`Stage::with_schema`], with the export bound in consumer `root:c1`.
    async fn bound() -> Stage {
        let stage = Stage::with_schema().await;
        stage.bind(&stage.c1).await;
        stage
    }

    /// Waits for the Database's schema to be published; returns its name.
    async fn schema(&self) -> String {
        self.schema_of("databases", "PublishedResource databases to record its schema")
            .await
    }

    /// Waits for PublishedResource `name` to record its schema; returns the
    /// schema's name.
    async fn schema_of(&self, name: &str, what: &str) -> String {
        let pr = self
            .published_when(name, what, |pr| pr["status"]["resourceSchemaName"].is_string())
            .await;
        pr["status"]["resourceSchemaName"].as_str().unwrap().to_string()
    }

    /// Binds the export in `ws` and waits for Databases to be served there.
    async fn bind(&self, ws: &Cluster) {
        ws.create(
            &apis("APIBinding", "apibindings"),
            json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": { "name": "databases" },
                    "spec": { "reference": { "export": { "path": "root:provider", "name": EXPORT } } } }),
        )
        .await;
        ws.wait_served(
            &remote_databases(),
            Some("default"),
            "Databases served in the consumer",
        )
        .await;
    }
}

fn database(name: &str) -> Value {
    json!({ "apiVersion": format!("{EXPORT}/v1"), "kind": "Database",
            "metadata": { "name": name, "namespace": "default" }, "spec": { "size": 3 } })
}

fn cluster_of(obj: &Value) -> String {
    annotation(obj, "kcp.io/cluster")
        .expect("kcp.io/cluster")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn publishes_the_schema_and_merges_it_into_the_export() {
    let stage = Stage::start().await;
    let schema = stage.schema().await;
    assert!(
        schema.starts_with('v') && schema.ends_with(".databases.databases.example.io"),
        "{schema}"
    );
    let ars = wait_for(
        &stage.provider,
        &apis("APIResourceSchema", "apiresourceschemas"),
        None,
        &schema,
        "the APIResourceSchema in the provider workspace",
        |_| true,
    )
    .await;
    assert_eq!(ars["spec"]["group"], EXPORT);
    assert_eq!(ars["spec"]["names"]["kind"], "Database");
    assert_eq!(ars["spec"]["scope"], "Namespaced");
    assert_eq!(ars["spec"]["versions"][0]["name"], "v1");
    assert_eq!(
        ars["spec"]["versions"][0]["subresources"],
        json!({ "status": {} })
    );
    let export = stage
        .export_when("the export to list the schema and claim events", |e| {
            e["spec"]["latestResourceSchemas"]
                .as_array()
                .is_some_and(|l| l.iter().any(|s| s == schema.as_str()))
                && e["spec"]["permissionClaims"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|c| c["resource"] == "events"))
        })
        .await;
    // The provider's own schema and claim are kept.
    assert!(
        export["spec"]["latestResourceSchemas"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == OLD_SCHEMA),
        "{export}"
    );
    let claims = export["spec"]["permissionClaims"].as_array().unwrap();
    assert!(claims.iter().any(|c| c["resource"] == "configmaps"), "{claims:?}");
    // The reference's Events on the export say what was added.
    for (reason, names) in [
        ("AddingResourceSchemas", schema.clone()),
        ("AddingPermissionClaims", "events".to_string()),
    ] {
        stage
            .export_event(&format!("a {reason} Event on the export"), |e| {
                e["reason"] == reason
                    && e["involvedObject"]["kind"] == "APIExport"
                    && e["message"].as_str().unwrap_or_default().contains(&names)
            })
            .await;
    }

    // The invalid PublishedResource is named in its condition; the valid one is Ready.
    let broken = stage
        .published_when("broken", "PublishedResource broken to say why", |pr| {
            ready_condition(pr).is_some()
        })
        .await;
    let cond = ready_condition(&broken).unwrap();
    assert_eq!(cond["status"], "False", "{cond}");
    assert_eq!(cond["reason"], "CRDNotFound", "{cond}");
    let message = cond["message"].as_str().unwrap();
    assert!(
        message.contains("broken") && message.contains("Missing") && message.contains("spec.resource"),
        "{message}"
    );
    assert!(broken["status"]["resourceSchemaName"].is_null());
    let good = stage.published_resource("databases").await;
    assert_eq!(ready_condition(&good).unwrap()["status"], "True");

    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn syncs_consumer_objects_down_and_status_back_and_cleans_up_in_order() {
    let stage = Stage::bound().await;
    stage.bind(&stage.c2).await;
    let one = stage.c1.create(&remote_databases(), database("my-db")).await;
    let two = stage.c2.create(&remote_databases(), database("my-db")).await;
    let (cluster1, cluster2) = (cluster_of(&one), cluster_of(&two));
    assert_ne!(cluster1, cluster2);
    let local_name = default_name("default", "my-db");
    assert_eq!(
        local_name,
        format!("{}-{}", sha3short("default"), sha3short("my-db"))
    );

    for cluster in [&cluster1, &cluster2] {
        let copy = stage
            .service
            .when(
                &local_databases(),
                cluster,
                &local_name,
                "the consumer's Database on the service cluster",
                |_| true,
            )
            .await;
        assert_eq!(copy["apiVersion"], "example.com/v1");
        assert_eq!(copy["spec"]["size"], 3);
        assert_eq!(label(&copy, SYNCAGENT_AGENT_NAME_LABEL), Some("nora"));
        assert_eq!(
            label(&copy, SYNCAGENT_REMOTE_CLUSTER_LABEL),
            Some(cluster.as_str())
        );
        assert_eq!(
            label(&copy, SYNCAGENT_REMOTE_NAMESPACE_HASH_LABEL),
            Some(sha3short("default").as_str())
        );
        assert_eq!(
            label(&copy, SYNCAGENT_REMOTE_NAME_HASH_LABEL),
            Some(sha3short("my-db").as_str())
        );
        assert_eq!(
            annotation(&copy, SYNCAGENT_REMOTE_NAMESPACE_ANNOTATION),
            Some("default")
        );
        assert_eq!(annotation(&copy, SYNCAGENT_REMOTE_NAME_ANNOTATION), Some("my-db"));
        // kcp's own annotation is not copied (the service hub stamps its own).
        assert_ne!(annotation(&copy, "kcp.io/cluster"), Some(cluster.as_str()));
        assert!(copy["metadata"]["finalizers"].is_null(), "{copy}");
    }
    // The sources carry the cleanup finalizer.
    for ws in [&stage.c1, &stage.c2] {
        wait_for(
            ws,
            &remote_databases(),
            Some("default"),
            "my-db",
            "the cleanup finalizer",
            |o| {
                o["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|f| f == SYNCAGENT_CLEANUP_FINALIZER))
            },
        )
        .await;
    }

    // Spec changes go down.
    stage
        .patch_database("my-db", json!({ "spec": { "size": 5 } }))
        .await;
    stage
        .service
        .when(&local_databases(), &cluster1, &local_name, "the new size", |o| {
            o["spec"]["size"] == 5
        })
        .await;

    // Status comes back to the consumer.
    stage
        .service
        .set_status(
            &local_databases(),
            Some(&cluster1),
            &local_name,
            json!({ "ready": true }),
        )
        .await;
    stage
        .c1
        .when(&remote_databases(), "default", "my-db", "the status back", |o| {
            o["status"]["ready"] == true
        })
        .await;

    // Deleting the consumer's object deletes the service copy first, then releases the
    // source. A finalizer on the copy holds it, so the order shows.
    stage
        .patch_copy(
            &cluster1,
            &local_name,
            json!({ "metadata": { "finalizers": ["test.example.com/hold"] } }),
        )
        .await;
    stage
        .c1
        .delete(&remote_databases(), Some("default"), "my-db")
        .await;
    stage
        .service
        .when(
            &local_databases(),
            &cluster1,
            &local_name,
            "the copy to be deleting",
            |o| !o["metadata"]["deletionTimestamp"].is_null(),
        )
        .await;
    let held = stage
        .c1
        .get(&remote_databases(), Some("default"), "my-db")
        .await
        .expect("the source waits for its copy");
    assert!(!held["metadata"]["deletionTimestamp"].is_null());
    assert!(held["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == SYNCAGENT_CLEANUP_FINALIZER)));
    stage
        .patch_copy(
            &cluster1,
            &local_name,
            json!({ "metadata": { "finalizers": null } }),
        )
        .await;
    wait_gone(
        &stage.service,
        &local_databases(),
        Some(&cluster1),
        &local_name,
        "the copy gone",
    )
    .await;
    wait_gone(
        &stage.c1,
        &remote_databases(),
        Some("default"),
        "my-db",
        "the source released and gone",
    )
    .await;
    // The other consumer's copy is untouched.
    assert!(stage
        .service
        .get(&local_databases(), Some(&cluster2), &local_name)
        .await
        .is_some());
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_returns_only_through_a_status_subresource_and_schema_only_resources_do_not_sync() {
    let stage = Stage::bound().await;
    let (remote_caches, local_caches) = kinds("Cache", "caches");
    stage
        .c1
        .wait_served(&remote_caches, Some("default"), "Caches served in the consumer")
        .await;
    // The schema-only resource is served to consumers, and nothing of it syncs.
    let remote_gadgets = ar(EXPORT, "v1", "Gadget", "gadgets");
    stage
        .c1
        .wait_served(&remote_gadgets, Some("default"), "Gadgets served in the consumer")
        .await;
    stage
        .c1
        .create(
            &remote_gadgets,
            json!({ "apiVersion": format!("{EXPORT}/v1"), "kind": "Gadget",
                    "metadata": { "name": "g", "namespace": "default" }, "spec": {} }),
        )
        .await;
    let Synced { cluster, name, .. } = stage
        .sync_down(
            &remote_caches,
            &local_caches,
            json!({ "apiVersion": format!("{EXPORT}/v1"), "kind": "Cache",
                    "metadata": { "name": "c", "namespace": "default" }, "spec": { "size": 1 } }),
            "the Cache copy",
        )
        .await;
    // The service sets status on its copy (no subresource: part of the object)...
    stage
        .service
        .merge(
            &local_caches,
            Some(&cluster),
            &name,
            json!({ "status": { "ready": true } }),
        )
        .await;
    // ...and the next change from kcp is reconciled after it: by then status would be back.
    stage
        .c1
        .merge(
            &remote_caches,
            Some("default"),
            "c",
            json!({ "spec": { "size": 2 } }),
        )
        .await;
    stage
        .service
        .when(&local_caches, &cluster, &name, "the new size", |o| {
            o["spec"]["size"] == 2
        })
        .await;
    let source = stage.c1.get(&remote_caches, Some("default"), "c").await.unwrap();
    assert!(source["status"].is_null(), "{source}");
    let gadgets = stage
        .service
        .list(&ar("example.com", "v1", "Gadget", "gadgets"), None)
        .await;
    assert!(gadgets.is_empty(), "{gadgets:?}");
    let gadget = stage.c1.get(&remote_gadgets, Some("default"), "g").await.unwrap();
    assert!(gadget["metadata"]["finalizers"].is_null(), "{gadget}");
    // The invalid PublishedResource did not stop either flow.
    let broken = stage.published_resource("broken").await;
    assert_eq!(ready_condition(&broken).unwrap()["reason"], "CRDNotFound");
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_agent_keeps_its_copies_and_catches_up() {
    let stage = Stage::bound().await;
    let Synced { cluster, name, copy } = stage
        .sync_down(
            &remote_databases(),
            &local_databases(),
            database("my-db"),
            "the copy",
        )
        .await;
    let uid = copy["metadata"]["uid"].clone();
    let Stage { agent, .. } = stage;
    agent.stop().await;
    // Changes while the agent is down.
    stage_changes_while_down(&stage.c1).await;
    let agent = start_agent(&stage.kcp, &stage.service_hub).await;
    let copy = wait_for(
        &stage.service,
        &local_databases(),
        Some(&cluster),
        &name,
        "the change made while down",
        |o| o["spec"]["size"] == 7,
    )
    .await;
    assert_eq!(copy["metadata"]["uid"], uid, "the copy was kept, not made again");
    wait_for(
        &stage.service,
        &local_databases(),
        Some(&cluster),
        &default_name("default", "late"),
        "the object made while down",
        |_| true,
    )
    .await;
    agent.stop().await;
}

async fn stage_changes_while_down(c1: &Cluster) {
    c1.merge(
        &remote_databases(),
        Some("default"),
        "my-db",
        json!({ "spec": { "size": 7 } }),
    )
    .await;
    c1.create(&remote_databases(), database("late")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn disabled_controllers_do_not_run() {
    let stage = Stage::with_schema().await;
    stage.agent.stop().await;
    let kcp = &stage.kcp;
    let service_hub = &stage.service_hub;
    // Without the apiexport and sync controllers, a new schema is made but not exported.
    let agent = start_agent_without(kcp, service_hub, &["apiexport", "sync"]).await;
    assert!(agent.syncer.is_none());
    let mut widgets = crd("Widget", "widgets");
    widgets["spec"]["names"]["shortNames"] = json!(["wd"]);
    stage.service.create(&crds(), widgets).await;
    stage
        .service
        .create(&published_resources(), published("widgets", "Widget"))
        .await;
    let pr = wait_for(
        &stage.service,
        &published_resources(),
        None,
        "widgets",
        "PublishedResource widgets to record its schema",
        |pr| pr["status"]["resourceSchemaName"].is_string(),
    )
    .await;
    let schema = pr["status"]["resourceSchemaName"].as_str().unwrap().to_string();
    assert!(stage
        .provider
        .get(&apis("APIResourceSchema", "apiresourceschemas"), None, &schema)
        .await
        .is_some());
    // One more pass of the controllers after that one.
    stage
        .service
        .create(&published_resources(), published("later", "Missing"))
        .await;
    wait_for(
        &stage.service,
        &published_resources(),
        None,
        "later",
        "a later pass",
        |pr| ready_condition(pr).is_some(),
    )
    .await;
    let export = stage
        .provider
        .get(&apis("APIExport", "apiexports"), None, EXPORT)
        .await
        .unwrap();
    let latest = export["spec"]["latestResourceSchemas"].as_array().unwrap();
    assert!(!latest.iter().any(|s| s == schema.as_str()), "{export}");
    agent.stop().await;
}

impl Stage {
    /// Publishes a new CRD `kind` (plural `plural`) with the PublishedResource `spec`
    /// merged over the plain one; waits until the export lists its schema.
    async fn publish(&self, kind: &str, plural: &str, spec: Value) -> String {
        self.service.create(&crds(), crd(kind, plural)).await;
        let mut pr = published(plural, kind);
        json_patch::merge(&mut pr["spec"], &spec);
        self.service.create(&published_resources(), pr).await;
        let schema = self
            .schema_of(plural, "the new PublishedResource to record its schema")
            .await;
        self.export_when("the export to list the new schema", |e| {
            e["spec"]["latestResourceSchemas"]
                .as_array()
                .is_some_and(|l| l.iter().any(|s| s == schema.as_str()))
        })
        .await;
        schema
    }

    /// [`Stage::publish`] with the PublishedResource's `related` resources.
    async fn publish_related(&self, kind: &str, plural: &str, related: Value) -> String {
        self.publish(kind, plural, json!({ "related": related })).await
    }

    /// cert-manager's Certificate ([`Stage::publish`]) with the `related`
    /// resources its flow brings.
    async fn publish_certificates(&self, related: Value) -> String {
        self.publish_related("Certificate", "certificates", related).await
    }

    /// A Website whose related resource is the cert-manager Certificate
    /// (kcp origin) its `spec.certificate` names ([`Stage::publish`]);
    /// with `identity`, claimed by that identityHash.
    async fn publish_websites(&self, identity: Option<&str>) -> String {
        let mut certificate = json!({
            "identifier": "cert", "origin": "kcp",
            "group": "cert-manager.io", "version": "v1", "resource": "certificates",
            "object": { "reference": { "path": "spec.certificate" } },
        });
        if let Some(identity) = identity {
            certificate["identityHash"] = json!(identity);
        }
        self.publish_related("Website", "websites", json!([certificate]))
            .await
    }

    /// Binds the export in `ws`, accepting every claim it makes, and waits for
    /// `resource` to be served there.
    async fn bind_accepting(&self, ws: &Cluster, resource: &ApiResource) {
        let export = self.export().await;
        let claims: Vec<Value> = export["spec"]["permissionClaims"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|mut c| {
                c["state"] = json!("Accepted");
                c
            })
            .collect();
        ws.create(
            &apis("APIBinding", "apibindings"),
            json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": { "name": "databases" },
                    "spec": { "reference": { "export": { "path": "root:provider", "name": EXPORT } },
                              "permissionClaims": claims } }),
        )
        .await;
        ws.wait_served(resource, Some("default"), "the resource served in the consumer")
            .await;
    }
}

impl Stage {
    /// The published `kind` ([`kinds`]) once consumer `root:c1` binds the
    /// export accepting its claims and is served it.
    async fn bound_in_c1(&self, kind: &str, plural: &str) -> (ApiResource, ApiResource) {
        let (remote, local) = kinds(kind, plural);
        self.bind_accepting(&self.c1, &remote).await;
        (remote, local)
    }
}

/// A consumer's object synced down to the service cluster (default naming).
struct Synced {
    /// The consumer's logical cluster, the copy's namespace.
    cluster: String,
    /// The copy's name.
    name: String,
    copy: Value,
}

impl Stage {
    /// Creates `obj` in consumer `root:c1` as `remote`, and waits for its copy
    /// as `local` on the service cluster under the default naming; `what`
    /// names the wait.
    async fn sync_down(&self, remote: &ApiResource, local: &ApiResource, obj: Value, what: &str) -> Synced {
        let source = self.c1.create(remote, obj).await;
        let cluster = cluster_of(&source);
        let name = default_name(
            source["metadata"]["namespace"].as_str().unwrap_or_default(),
            source["metadata"]["name"].as_str().expect("a name"),
        );
        let copy = self.service.when(local, &cluster, &name, what, |_| true).await;
        Synced { cluster, name, copy }
    }
}

/// A `kind` object for consumers, in namespace `default`.
fn remote_object(kind: &str, name: &str, labels: Value, spec: Value) -> Value {
    json!({ "apiVersion": format!("{EXPORT}/v1"), "kind": kind,
            "metadata": { "name": name, "namespace": "default", "labels": labels }, "spec": spec })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn naming_templates_place_copies_and_bad_or_colliding_names_are_reported() {
    let stage = Stage::with_schema().await;
    // Go template for the name, the deprecated placeholders for the namespace: both
    // consumers' objects land in one namespace, so equal names collide.
    stage
        .publish(
            "Thing",
            "things",
            json!({ "naming": {
                "name": "{{ .Object.metadata.name }}-{{ .Object.metadata.labels.tier }}",
                "namespace": "tenant-$remoteNamespace",
            } }),
        )
        .await;
    let (remote, local) = stage.bound_in_c1("Thing", "things").await;
    stage.bind_accepting(&stage.c2, &remote).await;

    let a1 = stage
        .c1
        .create(
            &remote,
            remote_object("Thing", "a", json!({ "tier": "gold" }), json!({ "from": "c1" })),
        )
        .await;
    let copy = stage
        .service
        .when(
            &local,
            "tenant-default",
            "a-gold",
            "the copy named by the templates",
            |_| true,
        )
        .await;
    assert_eq!(copy["spec"]["from"], "c1");
    assert_eq!(
        label(&copy, SYNCAGENT_REMOTE_CLUSTER_LABEL),
        Some(cluster_of(&a1).as_str())
    );

    // A name that is no Kubernetes name: an Event naming the template, a condition on
    // the PublishedResource, and the other objects keep syncing.
    stage
        .c1
        .create(
            &remote,
            remote_object("Thing", "bad", json!({ "tier": "Gold_Plated" }), json!({})),
        )
        .await;
    let seen = eventually(15, "an Event on the object naming the template", || async {
        let events = events_about(&stage.c1, "default", "bad").await;
        events.into_iter().find(|e| e.starts_with("InvalidNaming"))
    })
    .await;
    assert!(
        seen.contains("spec.naming.name")
            && seen.contains(".Object.metadata.labels.tier")
            && seen.contains("Gold_Plated"),
        "{seen}"
    );
    let pr = stage
        .published_when("things", "the Synced condition to name the problem", |pr| {
            condition(pr, "Synced").is_some_and(|c| c["status"] == "False")
        })
        .await;
    let synced = condition(&pr, "Synced").unwrap();
    assert_eq!(synced["reason"], "InvalidNaming", "{synced}");
    assert!(
        synced["message"].as_str().unwrap().contains("spec.naming.name"),
        "{synced}"
    );
    stage
        .c1
        .create(
            &remote,
            remote_object("Thing", "b", json!({ "tier": "silver" }), json!({})),
        )
        .await;
    stage
        .service
        .when(&local, "tenant-default", "b-silver", "the next object", |_| true)
        .await;
    let bad = stage.c1.get(&remote, Some("default"), "bad").await.unwrap();
    assert!(
        bad["metadata"]["finalizers"].is_null(),
        "an unsynced object is not held: {bad}"
    );

    // c2's "a" maps to the same local name: Events on both, c1's copy untouched.
    stage
        .c2
        .create(
            &remote,
            remote_object("Thing", "a", json!({ "tier": "gold" }), json!({ "from": "c2" })),
        )
        .await;
    for ws in [&stage.c1, &stage.c2] {
        let seen = eventually(15, "a collision Event on both objects", || async {
            events_about(ws, "default", "a")
                .await
                .into_iter()
                .find(|e| e.starts_with("NameCollision"))
        })
        .await;
        assert!(seen.contains("tenant-default/a-gold"), "{seen}");
    }
    let copy = stage
        .service
        .get(&local, Some("tenant-default"), "a-gold")
        .await
        .unwrap();
    assert_eq!(copy["spec"]["from"], "c1", "never silently overwritten");
    assert_eq!(
        label(&copy, SYNCAGENT_REMOTE_CLUSTER_LABEL),
        Some(cluster_of(&a1).as_str())
    );

    // Once c1's object is gone, c2's takes the name.
    stage.c1.delete(&remote, Some("default"), "a").await;
    stage
        .service
        .when(
            &local,
            "tenant-default",
            "a-gold",
            "c2's object to take the freed name",
            |o| o["spec"]["from"] == "c2",
        )
        .await;
    // Once the badly named object is gone too, nothing is blocked any more.
    stage.c1.delete(&remote, Some("default"), "bad").await;
    stage
        .published_when("things", "Synced=True once every problem is gone", |pr| {
            condition(pr, "Synced").is_some_and(|c| c["status"] == "True")
        })
        .await;
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn projection_renames_kind_plural_version_scope_and_group() {
    let stage = Stage::with_schema().await;
    // Beyond the reference: the group too (kcp-dev/api-syncagent#47, PR #52).
    let schema = stage
        .publish(
            "Engine",
            "engines",
            json!({ "projection": {
                "group": "motors.example.io", "kind": "Motor", "plural": "motoren",
                "versions": { "v1": "v2alpha1" }, "scope": "Cluster",
            } }),
        )
        .await;
    assert!(schema.ends_with(".motoren.motors.example.io"), "{schema}");
    let remote = ar("motors.example.io", "v2alpha1", "Motor", "motoren");
    let local = ar("example.com", "v1", "Engine", "engines");
    stage.c1.create(
        &apis("APIBinding", "apibindings"),
        json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": { "name": "databases" },
                "spec": { "reference": { "export": { "path": "root:provider", "name": EXPORT } } } }),
    )
    .await;
    stage
        .c1
        .wait_served(&remote, None, "Motors served cluster-wide in the consumer")
        .await;
    let source = stage
        .c1
        .create(
            &remote,
            json!({ "apiVersion": "motors.example.io/v2alpha1", "kind": "Motor",
                    "metadata": { "name": "m1" }, "spec": { "power": 7 } }),
        )
        .await;
    let cluster = cluster_of(&source);
    // Cluster-scoped in kcp, namespaced locally: the default naming puts it into the
    // cluster's namespace, named after an empty namespace and its name.
    let copy = stage
        .service
        .when(
            &local,
            &cluster,
            &default_name("", "m1"),
            "the Motor as a local Engine",
            |_| true,
        )
        .await;
    assert_eq!(copy["apiVersion"], "example.com/v1");
    assert_eq!(copy["kind"], "Engine");
    assert_eq!(copy["spec"]["power"], 7);
    stage
        .service
        .set_status(
            &local,
            Some(&cluster),
            &default_name("", "m1"),
            json!({ "running": true }),
        )
        .await;
    wait_for(
        &stage.c1,
        &remote,
        None,
        "m1",
        "the status back on the Motor",
        |o| o["status"]["running"] == true,
    )
    .await;
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn filters_select_objects_by_their_labels_and_their_namespaces_labels() {
    let stage = Stage::with_schema().await;
    stage
        .publish(
            "Probe",
            "probes",
            json!({ "filter": {
                "resource": { "matchLabels": { "sync": "yes" } },
                "namespace": { "matchExpressions": [{ "key": "env", "operator": "In", "values": ["prod"] }] },
            } }),
        )
        .await;
    // The namespace filter makes the export claim namespaces.
    stage
        .export_when("the namespaces claim", |e| claims(e, "namespaces"))
        .await;
    let (remote, local) = stage.bound_in_c1("Probe", "probes").await;
    for (ns, env) in [("prod", "prod"), ("dev", "dev")] {
        stage
            .c1
            .create(
                &namespaces(),
                json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": ns, "labels": { "env": env } } }),
            )
            .await;
    }
    let probe = |ns: &str, name: &str, labels: Value| {
        json!({ "apiVersion": format!("{EXPORT}/v1"), "kind": "Probe",
                "metadata": { "name": name, "namespace": ns, "labels": labels }, "spec": {} })
    };
    let x = stage
        .c1
        .create(&remote, probe("prod", "x", json!({ "sync": "yes" })))
        .await;
    stage.c1.create(&remote, probe("prod", "y", json!({}))).await;
    stage
        .c1
        .create(&remote, probe("dev", "z", json!({ "sync": "yes" })))
        .await;
    let cluster = cluster_of(&x);
    stage
        .service
        .when(
            &local,
            &cluster,
            &default_name("prod", "x"),
            "the selected object",
            |_| true,
        )
        .await;
    // Relabelling the namespace selects what is in it.
    stage
        .c1
        .merge(
            &namespaces(),
            None,
            "dev",
            json!({ "metadata": { "labels": { "env": "prod" } } }),
        )
        .await;
    stage
        .service
        .when(
            &local,
            &cluster,
            &default_name("dev", "z"),
            "the object in the relabelled namespace",
            |_| true,
        )
        .await;
    // y never matched its own filter; everything else of the flow was judged since.
    assert!(stage
        .service
        .get(&local, Some(&cluster), &default_name("prod", "y"))
        .await
        .is_none());
    let y = stage.c1.get(&remote, Some("prod"), "y").await.unwrap();
    assert!(y["metadata"]["finalizers"].is_null(), "{y}");
    // An object that stops matching loses its copy and is released.
    stage
        .c1
        .merge(
            &remote,
            Some("prod"),
            "x",
            json!({ "metadata": { "labels": { "sync": null } } }),
        )
        .await;
    wait_gone(
        &stage.service,
        &local,
        Some(&cluster),
        &default_name("prod", "x"),
        "the copy of the deselected object",
    )
    .await;
    stage
        .c1
        .when(&remote, "prod", "x", "the finalizer released", |o| {
            o["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty())
        })
        .await;
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mutations_rewrite_spec_on_the_way_down_and_status_on_the_way_up() {
    let stage = Stage::with_schema().await;
    stage
        .publish(
            "Bucket",
            "buckets",
            json!({ "mutation": {
                "spec": [
                    { "delete": { "path": "spec.note" } },
                    { "regex": { "path": "spec.region", "pattern": "^eu-(.*)$", "replacement": "europe-\\1" } },
                    { "template": { "path": "spec.owner", "template": "{{ .Value }}@{{ .LocalObject.metadata.name }}" } },
                    { "cel": { "path": "spec.replicas", "expression": "value * 2" } },
                ],
                "status": [
                    { "delete": { "path": "status.internal" } },
                    { "regex": { "path": "status.url", "pattern": "svc\\.local", "replacement": "example.io" } },
                ],
            } }),
        )
        .await;
    // A step that does not compile: the PublishedResource says which.
    let mut broken = published("broken-mutation", "Bucket");
    broken["spec"]["mutation"] =
        json!({ "status": [{ "cel": { "path": "status.x", "expression": "value +" } }] });
    stage.service.create(&published_resources(), broken).await;
    let (remote, local) = stage.bound_in_c1("Bucket", "buckets").await;
    let Synced { cluster, name, copy } = stage
        .sync_down(
            &remote,
            &local,
            remote_object(
                "Bucket",
                "b",
                json!({}),
                json!({ "note": "private", "region": "eu-west", "owner": "ann", "replicas": 2 }),
            ),
            "the mutated copy",
        )
        .await;
    let local_name = copy["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        copy["spec"],
        json!({ "region": "europe-west", "owner": format!("ann@{local_name}"), "replicas": 4 }),
        "{copy}"
    );
    stage
        .service
        .set_status(
            &local,
            Some(&cluster),
            &name,
            json!({ "url": "https://b.svc.local", "internal": "node-7", "ready": true }),
        )
        .await;
    let back = stage
        .c1
        .when(&remote, "default", "b", "the mutated status", |o| {
            o["status"]["ready"] == true
        })
        .await;
    assert_eq!(
        back["status"],
        json!({ "url": "https://b.example.io", "ready": true })
    );
    let pr = stage
        .published_when("broken-mutation", "the invalid mutation named", |pr| {
            ready_condition(pr).is_some()
        })
        .await;
    let cond = ready_condition(&pr).unwrap();
    assert_eq!(cond["reason"], "InvalidMutation", "{cond}");
    assert!(
        cond["message"]
            .as_str()
            .unwrap()
            .contains("spec.mutation.status[0].cel.expression"),
        "{cond}"
    );
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_existing_local_object_is_adopted() {
    let stage = Stage::bound().await;
    // Learn the consumer's logical cluster from a first object.
    let Synced { cluster, .. } = stage
        .sync_down(
            &remote_databases(),
            &local_databases(),
            database("first"),
            "the first copy (and its namespace)",
        )
        .await;
    let name = default_name("default", "adopt-me");
    // The service cluster already has an object under the name the copy will get.
    stage
        .service
        .create(
            &local_databases(),
            json!({ "apiVersion": "example.com/v1", "kind": "Database",
                    "metadata": { "name": name, "namespace": cluster, "labels": { "kept": "yes" } },
                    "spec": { "size": 1 } }),
        )
        .await;
    let before = stage
        .service
        .get(&local_databases(), Some(&cluster), &name)
        .await
        .unwrap();
    stage.c1.create(&remote_databases(), database("adopt-me")).await;
    let adopted = stage
        .service
        .when(
            &local_databases(),
            &cluster,
            &name,
            "the existing object adopted",
            |o| label(o, SYNCAGENT_AGENT_NAME_LABEL) == Some("nora"),
        )
        .await;
    assert_eq!(
        adopted["metadata"]["uid"], before["metadata"]["uid"],
        "adopted, not recreated"
    );
    assert_eq!(adopted["spec"]["size"], 3);
    assert_eq!(label(&adopted, "kept"), Some("yes"));
    assert_eq!(
        annotation(&adopted, SYNCAGENT_REMOTE_NAME_ANNOTATION),
        Some("adopt-me")
    );
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn related_objects_travel_both_ways_and_are_cleaned_up_with_the_primary() {
    let stage = Stage::with_schema().await;
    // cert-manager's flow: a Certificate goes down, the Secret its controller writes
    // comes back up; a CA ConfigMap from the consumer goes down with it.
    stage
        .publish_certificates(json!([
            { "identifier": "tls", "origin": "service", "kind": "Secret", "cleanup": true,
              "object": { "reference": { "path": "spec.secretName" } } },
            { "identifier": "ca", "origin": "kcp", "group": "", "version": "v1", "resource": "configmaps",
              "object": { "template": { "template": "{{ .Object.spec.caConfigMap }}" } },
              "mutation": { "spec": [{ "regex": { "path": "data.note", "pattern": "kcp", "replacement": "the service" } }] } },
            { "identifier": "settings", "origin": "kcp", "kind": "ConfigMap",
              "object": { "reference": { "path": "spec.settings.name" },
                          "namespace": { "reference": { "path": "spec.settings.namespace" } } } },
            { "identifier": "extra", "origin": "service", "group": "", "version": "v1", "resource": "secrets",
              "object": { "selector": { "matchLabels": { "cert": "{{ .LocalObject.metadata.name }}" },
                                        "rewrite": { "template": { "template": "{{ .Value }}-copy" } } } } },
        ]))
        .await;
    stage
        .export_when("the export to claim secrets and configmaps", |e| {
            let claims = e["spec"]["permissionClaims"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            ["secrets", "configmaps", "namespaces"]
                .iter()
                .all(|r| claims.iter().any(|c| c["resource"] == *r))
        })
        .await;
    let (remote, local) = stage.bound_in_c1("Certificate", "certificates").await;
    stage
        .c1
        .create(
            &configmaps(),
            configmap("default", "ca", json!({ "note": "from kcp" })),
        )
        .await;
    stage
        .c1
        .create(
            &namespaces(),
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "shared-config" } }),
        )
        .await;
    stage
        .c1
        .create(
            &configmaps(),
            configmap("shared-config", "settings", json!({ "level": "debug" })),
        )
        .await;
    let Synced { cluster, name, .. } = stage
        .sync_down(
            &remote,
            &local,
            web_certificate(json!({ "settings": { "name": "settings", "namespace": "shared-config" } })),
            "the Certificate copy",
        )
        .await;
    let ca = stage
        .service
        .when(
            &configmaps(),
            &cluster,
            "ca",
            "the kcp-origin ConfigMap on the service cluster, mutated",
            |_| true,
        )
        .await;
    assert_eq!(ca["data"]["note"], "from the service");
    // Found by references to its name and namespace; the namespace is made.
    let settings = stage
        .service
        .when(
            &configmaps(),
            "shared-config",
            "settings",
            "the ConfigMap in the namespace the primary names",
            |_| true,
        )
        .await;
    assert_eq!(settings["data"]["level"], "debug");
    // The service's controller writes the credentials.
    stage.issue_web_tls(&cluster).await;
    stage
        .service
        .create(
            &secrets(),
            json!({ "apiVersion": "v1", "kind": "Secret",
                    "metadata": { "name": "extra", "namespace": cluster, "labels": { "cert": name } },
                    "stringData": { "k": "v" } }),
        )
        .await;
    let tls = stage
        .c1
        .when(
            &secrets(),
            "default",
            "web-tls",
            "the service-origin Secret in the consumer's workspace",
            |_| true,
        )
        .await;
    assert!(tls["data"]["tls.crt"].is_string(), "{tls}");
    stage
        .c1
        .when(
            &secrets(),
            "default",
            "extra-copy",
            "the Secret found by the templated selector, renamed",
            |_| true,
        )
        .await;
    let recorded = stage
        .c1
        .when(&remote, "default", "web", "the related object recorded", |o| {
            annotation(o, "related-resources.syncagent.kcp.io/tls.0").is_some()
        })
        .await;
    let record: Value =
        serde_json::from_str(annotation(&recorded, "related-resources.syncagent.kcp.io/tls.0").unwrap())
            .unwrap();
    assert_eq!(
        record,
        json!({ "namespace": "default", "name": "web-tls", "apiVersion": "v1", "kind": "Secret" })
    );
    let copy = stage.service.get(&local, Some(&cluster), &name).await.unwrap();
    assert!(
        annotation(&copy, "related-resources.syncagent.kcp.io/tls.0").is_none(),
        "the record stays in kcp: {copy}"
    );
    // Changes at the origin follow.
    stage.renew_web_tls(&cluster).await;
    let renewed = base64_of("RENEWED");
    stage
        .c1
        .when(&secrets(), "default", "web-tls", "the renewed Secret", |s| {
            s["data"]["tls.crt"] == renewed.as_str()
        })
        .await;

    // Deleting the primary: the service copy of the kcp ConfigMap goes, the kcp copy
    // of the service Secret too (cleanup: true); the one without cleanup stays.
    stage.c1.delete(&remote, Some("default"), "web").await;
    wait_gone(&stage.c1, &remote, Some("default"), "web", "the Certificate gone").await;
    wait_gone(
        &stage.service,
        &configmaps(),
        Some(&cluster),
        "ca",
        "the ConfigMap copy gone",
    )
    .await;
    wait_gone(
        &stage.service,
        &configmaps(),
        Some("shared-config"),
        "settings",
        "the other ConfigMap copy gone",
    )
    .await;
    wait_gone(
        &stage.c1,
        &secrets(),
        Some("default"),
        "web-tls",
        "the Secret copy gone",
    )
    .await;
    assert!(stage
        .c1
        .get(&secrets(), Some("default"), "extra-copy")
        .await
        .is_some());
    assert!(
        stage.c1.get(&configmaps(), Some("default"), "ca").await.is_some(),
        "the origin stays"
    );
    stage.agent.stop().await;
}

/// Related objects made or changed on their origin side after the primary synced
/// (nothing about the primary changes) arrive within seconds: only the watches of the
/// origin resources can see them, as the safety resync is an hour away here.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn related_objects_made_or_changed_later_arrive_through_watches() {
    let stage = Stage::with_schema().await;
    stage
        .publish_certificates(json!([
            { "identifier": "tls", "origin": "service", "kind": "Secret",
              "object": { "reference": { "path": "spec.secretName" } } },
            { "identifier": "owned", "origin": "service", "group": "", "version": "v1", "resource": "configmaps",
              "watch": { "byOwner": {} },
              "object": { "selector": { "matchLabels": { "owned-by": "{{ .LocalObject.metadata.name }}" },
                                        "rewrite": { "template": { "template": "{{ .Value }}" } } } } },
            { "identifier": "ca", "origin": "kcp", "group": "", "version": "v1", "resource": "configmaps",
              "object": { "template": { "template": "{{ .Object.spec.caConfigMap }}" } } },
        ]))
        .await;
    stage
        .export_when("the export to claim secrets", |e| claims(e, "secrets"))
        .await;
    let (remote, local) = stage.bound_in_c1("Certificate", "certificates").await;
    let Synced { cluster, name, copy } = stage
        .sync_down(
            &remote,
            &local,
            web_certificate(json!({})),
            "the Certificate copy",
        )
        .await;
    // The first related pass (nothing to find yet) has happened.
    eventually(5, "the agent's first pass over the related objects", || async {
        (stage.related_passes("waiting") >= 1.0).then_some(())
    })
    .await;
    let soon = 5;

    // Service origin, found by reference: made, then changed.
    let made = std::time::Instant::now();
    stage.issue_web_tls(&cluster).await;
    eventually(soon, "the new Secret in the consumer's workspace", || async {
        stage.c1.get(&secrets(), Some("default"), "web-tls").await
    })
    .await;
    eprintln!(
        "a new service-origin Secret arrived in kcp after {:?}",
        made.elapsed()
    );
    stage.renew_web_tls(&cluster).await;
    let renewed = base64_of("RENEWED");
    eventually(soon, "the renewed Secret", || async {
        stage
            .c1
            .get(&secrets(), Some("default"), "web-tls")
            .await
            .filter(|s| s["data"]["tls.crt"] == renewed.as_str())
    })
    .await;

    // Service origin, owned by the primary's copy and found by labels.
    let owner = json!([{ "apiVersion": "example.com/v1", "kind": "Certificate",
                         "name": name, "uid": copy["metadata"]["uid"] }]);
    stage
        .service
        .create(
            &configmaps(),
            json!({ "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": { "name": "web-owned", "namespace": cluster, "ownerReferences": owner,
                                  "labels": { "owned-by": name } },
                    "data": { "k": "v1" } }),
        )
        .await;
    eventually(
        soon,
        "the owned ConfigMap in the consumer's workspace",
        || async { stage.c1.get(&configmaps(), Some("default"), "web-owned").await },
    )
    .await;
    stage
        .service
        .merge(
            &configmaps(),
            Some(&cluster),
            "web-owned",
            json!({ "data": { "k": "v2" } }),
        )
        .await;
    eventually(soon, "the owned ConfigMap's change", || async {
        stage
            .c1
            .get(&configmaps(), Some("default"), "web-owned")
            .await
            .filter(|c| c["data"]["k"] == "v2")
    })
    .await;

    // kcp origin, through the virtual workspace: made, then changed.
    let made = std::time::Instant::now();
    stage
        .c1
        .create(&configmaps(), configmap("default", "ca", json!({ "pem": "A" })))
        .await;
    eventually(
        soon,
        "the consumer's ConfigMap on the service cluster",
        || async { stage.service.get(&configmaps(), Some(&cluster), "ca").await },
    )
    .await;
    eprintln!(
        "a new kcp-origin ConfigMap arrived on the service cluster after {:?}",
        made.elapsed()
    );
    stage
        .c1
        .merge(
            &configmaps(),
            Some("default"),
            "ca",
            json!({ "data": { "pem": "B" } }),
        )
        .await;
    eventually(soon, "the consumer's ConfigMap change", || async {
        stage
            .service
            .get(&configmaps(), Some(&cluster), "ca")
            .await
            .filter(|c| c["data"]["pem"] == "B")
    })
    .await;
    stage.agent.stop().await;
}

/// A related resource whose kcp side is another export's (cert-manager's Certificate,
/// exported from `root:certs`): the agent's export claims it with that export's
/// identityHash, a consumer that binds both exports and accepts the claim has its
/// Certificate synced down through the agent's virtual workspace (and its changes
/// follow through the watch), while one that did not accept the claim keeps it.
/// Whether the export claims `resource`.
fn claims(export: &Value, resource: &str) -> bool {
    export["spec"]["permissionClaims"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["resource"] == resource))
}

/// kcp refuses a claim on another export's resource without its identityHash;
/// the agent still publishes the schema and names the claim and the fix.
#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_related_resource_without_identity_is_named_and_the_rest_is_published() {
    let stage = Stage::with_schema().await;
    stage.publish_websites(None).await;
    let export = stage
        .export_when("the export to list the websites schema", |e| {
            e["spec"]["latestResourceSchemas"].as_array().is_some_and(|l| {
                l.iter()
                    .any(|s| s.as_str().is_some_and(|s| s.contains(".websites.")))
            })
        })
        .await;
    let claims = export["spec"]["permissionClaims"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        claims.iter().all(|c| c["resource"] != "certificates"),
        "no claim without identity: {claims:?}"
    );
    assert!(claims.iter().any(|c| c["resource"] == "namespaces"), "{claims:?}");
    stage
        .export_event("a PermissionClaimRefused Event naming the claim", |e| {
            let message = e["message"].as_str().unwrap_or_default();
            e["reason"] == "PermissionClaimRefused"
                && e["type"] == "Warning"
                && message.contains("certificates.cert-manager.io")
                && message.contains("identityHash")
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_related_resource_of_another_export_syncs_through_its_identity_claim() {
    let stage = Stage::with_schema().await;
    let certs_ws = workspace(&stage.kcp, "certs").await;
    certs_ws
        .create(
            &apis("APIResourceSchema", "apiresourceschemas"),
            json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
                    "metadata": { "name": "v1.certificates.cert-manager.io" },
                    "spec": { "group": "cert-manager.io", "scope": "Namespaced",
                        "names": { "plural": "certificates", "singular": "certificate", "kind": "Certificate", "listKind": "CertificateList" },
                        "versions": [{ "name": "v1", "served": true, "storage": true, "subresources": { "status": {} },
                            "schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } }] } }),
        )
        .await;
    certs_ws
        .create(
            &apis("APIExport", "apiexports"),
            json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": { "name": "cert-manager" },
                    "spec": { "latestResourceSchemas": ["v1.certificates.cert-manager.io"] } }),
        )
        .await;
    let identity = wait_for(
        &certs_ws,
        &apis("APIExport", "apiexports"),
        None,
        "cert-manager",
        "cert-manager's identity",
        |e| e["status"]["identityHash"].is_string(),
    )
    .await["status"]["identityHash"]
        .as_str()
        .unwrap()
        .to_string();
    // The service cluster has cert-manager's CRD, where the copies land.
    let mut cert_crd = crd("Certificate", "certificates");
    cert_crd["metadata"]["name"] = json!("certificates.cert-manager.io");
    cert_crd["spec"]["group"] = json!("cert-manager.io");
    stage.service.create(&crds(), cert_crd).await;
    let certificates = ar("cert-manager.io", "v1", "Certificate", "certificates");
    stage.publish_websites(Some(&identity)).await;
    stage
        .export_when(
            "the export to claim cert-manager's certificates by identity",
            |e| {
                e["spec"]["permissionClaims"].as_array().is_some_and(|c| {
                    c.iter()
                        .any(|c| c["resource"] == "certificates" && c["identityHash"] == identity.as_str())
                })
            },
        )
        .await;
    let (remote, local) = kinds("Website", "websites");
    let mut clusters = vec![];
    for (ws, accepts) in [(&stage.c1, true), (&stage.c2, false)] {
        ws.create(
            &apis("APIBinding", "apibindings"),
            json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": { "name": "cert-manager" },
                    "spec": { "reference": { "export": { "path": "root:certs", "name": "cert-manager" } } } }),
        )
        .await;
        ws.wait_served(
            &certificates,
            Some("default"),
            "Certificates served in the consumer",
        )
        .await;
        if accepts {
            stage.bind_accepting(ws, &remote).await;
        } else {
            stage.bind(ws).await;
        }
        ws.create(
            &certificates,
            json!({ "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                    "metadata": { "name": "web-cert", "namespace": "default" }, "spec": { "dnsName": "example.org" } }),
        )
        .await;
        let site = ws
            .create(
                &remote,
                remote_object("Website", "site", json!({}), json!({ "certificate": "web-cert" })),
            )
            .await;
        clusters.push(cluster_of(&site));
    }
    let (accepted, refused) = (&clusters[0], &clusters[1]);
    let copy = stage
        .service
        .when(
            &certificates,
            accepted,
            "web-cert",
            "the consumer's Certificate on the service cluster",
            |_| true,
        )
        .await;
    assert_eq!(copy["spec"]["dnsName"], "example.org");
    stage
        .c1
        .merge(
            &certificates,
            Some("default"),
            "web-cert",
            json!({ "spec": { "dnsName": "www.example.org" } }),
        )
        .await;
    eventually(5, "the Certificate's change", || async {
        stage
            .service
            .get(&certificates, Some(accepted), "web-cert")
            .await
            .filter(|c| c["spec"]["dnsName"] == "www.example.org")
    })
    .await;
    // The workspace that did not accept the claim: its Website syncs, its
    // Certificate stays out of the agent's reach.
    stage
        .service
        .when(
            &local,
            refused,
            &default_name("default", "site"),
            "the other consumer's Website copy",
            |_| true,
        )
        .await;
    // The agent has looked for the Certificate of the workspace that did not accept
    // the claim, and not found it (the other workspace's Certificate exists before
    // its Website, so its passes find everything).
    eventually(
        5,
        "a pass over the related objects of the other consumer's Website that misses its Certificate",
        || async { (stage.related_passes("waiting") >= 1.0).then_some(()) },
    )
    .await;
    assert!(
        stage
            .service
            .get(&certificates, Some(refused), "web-cert")
            .await
            .is_none(),
        "a Certificate of a workspace that did not accept the claim reached the service cluster"
    );
    stage.agent.stop().await;
}

/// The consumer's Certificate `web`: its Secret is `web-tls`, its CA
/// ConfigMap `ca`; `more` is merged into its spec.
fn web_certificate(more: Value) -> Value {
    let mut spec = json!({ "secretName": "web-tls", "caConfigMap": "ca" });
    json_patch::merge(&mut spec, &more);
    remote_object("Certificate", "web", json!({}), spec)
}

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn last_known_state_keeps_what_the_service_set_and_goes_with_the_object() {
    let stage = Stage::bound().await;
    let mut db = database("stateful");
    db["spec"]["temp"] = json!("x");
    let Synced { cluster, name, .. } = stage
        .sync_down(&remote_databases(), &local_databases(), db, "the copy")
        .await;
    let state_selector = "syncagent.kcp.io/object-state=true";
    let states = eventually(10, "the state Secret", || async {
        let list = stage
            .service
            .api(&secrets(), Some("ferry-system"))
            .list(&kube::api::ListParams::default().labels(state_selector))
            .await
            .ok()?;
        (!list.items.is_empty()).then_some(list.items)
    })
    .await;
    assert_eq!(states.len(), 1);
    let state_name = states[0].metadata.name.clone().unwrap();
    assert!(
        state_name.starts_with(&format!("obj-state-{cluster}-")),
        "{state_name}"
    );
    // The service's controller sets a field of its own.
    stage
        .patch_copy(&cluster, &name, json!({ "spec": { "defaulted": "by-service" } }))
        .await;
    stage
        .patch_database("stateful", json!({ "spec": { "size": 4, "temp": null } }))
        .await;
    let copy = stage
        .service
        .when(&local_databases(), &cluster, &name, "the change merged", |o| {
            o["spec"]["size"] == 4
        })
        .await;
    assert_eq!(
        copy["spec"],
        json!({ "size": 4, "defaulted": "by-service" }),
        "{copy}"
    );
    // Every update records the state again: a field added, then removed, goes.
    stage
        .patch_database("stateful", json!({ "spec": { "extra": "y" } }))
        .await;
    stage
        .service
        .when(&local_databases(), &cluster, &name, "the field added", |o| {
            o["spec"]["extra"] == "y"
        })
        .await;
    // A state Secret deleted behind the agent's back is written again.
    stage
        .service
        .delete(&secrets(), Some("ferry-system"), &state_name)
        .await;
    stage
        .patch_database("stateful", json!({ "spec": { "extra": null } }))
        .await;
    let copy = stage
        .service
        .when(&local_databases(), &cluster, &name, "the field removed", |o| {
            o["spec"].get("extra").is_none()
        })
        .await;
    assert_eq!(
        copy["spec"],
        json!({ "size": 4, "defaulted": "by-service" }),
        "{copy}"
    );
    eventually(10, "the state Secret written again", || async {
        stage
            .service
            .get(&secrets(), Some("ferry-system"), &state_name)
            .await
    })
    .await;
    stage
        .c1
        .delete(&remote_databases(), Some("default"), "stateful")
        .await;
    wait_gone(
        &stage.c1,
        &remote_databases(),
        Some("default"),
        "stateful",
        "the source gone",
    )
    .await;
    assert!(
        stage
            .service
            .get(&secrets(), Some("ferry-system"), &state_name)
            .await
            .is_none(),
        "the state goes with the object"
    );
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workspace_paths_feed_templates_and_are_recorded_on_copies() {
    let stage = Stage::with_schema().await;
    stage
        .publish(
            "Site",
            "sites",
            json!({ "enableWorkspacePaths": true,
                    "naming": { "namespace": "{{ .ClusterPath | replace \":\" \"-\" }}",
                                "name": "{{ .Object.metadata.name }}" } }),
        )
        .await;
    let (remote, local) = stage.bound_in_c1("Site", "sites").await;
    stage
        .c1
        .create(&remote, remote_object("Site", "w1", json!({}), json!({})))
        .await;
    stage
        .service
        .when(
            &local,
            "root-c1",
            "w1",
            "the copy named after the workspace path, with the path recorded",
            |o| annotation(o, "syncagent.kcp.io/remote-object-workspace-path") == Some("root:c1"),
        )
        .await;
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn related_objects_of_a_schema_only_type_carry_their_status_with_sync_status() {
    let stage = Stage::with_schema().await;
    // The reference's pattern: the related type is published for its schema only.
    stage
        .publish(
            "Credential",
            "credentials",
            json!({ "synchronization": { "enabled": false } }),
        )
        .await;
    stage
        .publish_related(
            "Vault",
            "vaults",
            json!([{
                "identifier": "cred", "origin": "service",
                "group": "example.com", "version": "v1", "resource": "credentials",
                "projection": { "group": EXPORT },
                "syncStatus": true, "watch": { "byOwner": {} },
                "object": { "reference": { "path": "spec.credential" } },
            }]),
        )
        .await;
    let (remote, local) = kinds("Vault", "vaults");
    let (remote_credentials, local_credentials) = kinds("Credential", "credentials");
    stage.bind_accepting(&stage.c1, &remote).await;
    let Synced { cluster, .. } = stage
        .sync_down(
            &remote,
            &local,
            remote_object("Vault", "v", json!({}), json!({ "credential": "v-cred" })),
            "the Vault copy",
        )
        .await;
    stage
        .service
        .create(
            &local_credentials,
            json!({ "apiVersion": "example.com/v1", "kind": "Credential",
                    "metadata": { "name": "v-cred", "namespace": cluster }, "spec": { "user": "x" } }),
        )
        .await;
    stage
        .service
        .set_status(
            &local_credentials,
            Some(&cluster),
            "v-cred",
            json!({ "issued": true }),
        )
        .await;
    let back = stage
        .c1
        .when(
            &remote_credentials,
            "default",
            "v-cred",
            "the Credential with its status in the consumer's workspace",
            |o| o["status"]["issued"] == true,
        )
        .await;
    assert_eq!(back["spec"]["user"], "x");
    stage.agent.stop().await;
}

/// Either cluster away for a while, with work piling up on the other: everything
/// converges when it returns; a consumer object deleted meanwhile leaves no copy and
/// no cleanup finalizer behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn losing_either_cluster_for_a_while_converges_with_no_orphans() {
    let mut stage = Stage::bound().await;
    for name in ["kept", "deleted"] {
        stage.c1.create(&remote_databases(), database(name)).await;
    }
    let cluster = cluster_of(
        &stage
            .c1
            .get(&remote_databases(), Some("default"), "kept")
            .await
            .unwrap(),
    );
    for name in ["kept", "deleted"] {
        wait_for(
            &stage.service,
            &local_databases(),
            Some(&cluster),
            &default_name("default", name),
            "the copy",
            |_| true,
        )
        .await;
    }

    // The service cluster goes away; the consumer keeps changing.
    let (service_hub, ()) = stage
        .service_hub
        .restart_after(async {
            stage
                .c1
                .merge(
                    &remote_databases(),
                    Some("default"),
                    "kept",
                    json!({ "spec": { "size": 9 } }),
                )
                .await;
            stage
                .c1
                .delete(&remote_databases(), Some("default"), "deleted")
                .await;
            stage.c1.create(&remote_databases(), database("while-away")).await;
            eventually(15, "the agent to see the service cluster gone", || async {
                (!stage.agent.syncer.as_ref().unwrap().is_ready()).then_some(())
            })
            .await;
        })
        .await;
    stage.service_hub = service_hub;
    let copy_of = |name: &str| default_name("default", name);
    wait_for(
        &stage.service,
        &local_databases(),
        Some(&cluster),
        &copy_of("kept"),
        "the change",
        |o| o["spec"]["size"] == 9,
    )
    .await;
    wait_for(
        &stage.service,
        &local_databases(),
        Some(&cluster),
        &copy_of("while-away"),
        "the new copy",
        |_| true,
    )
    .await;
    wait_gone(
        &stage.service,
        &local_databases(),
        Some(&cluster),
        &copy_of("deleted"),
        "the deleted object's copy",
    )
    .await;
    wait_gone(
        &stage.c1,
        &remote_databases(),
        Some("default"),
        "deleted",
        "the deleted object, released",
    )
    .await;

    // kcp goes away; the service's controller reports status meanwhile.
    let (kcp, ()) = stage
        .kcp
        .restart_after(async {
            stage
                .service
                .set_status(
                    &local_databases(),
                    Some(&cluster),
                    &copy_of("kept"),
                    json!({ "phase": "Ready" }),
                )
                .await;
            eventually(15, "the agent to see kcp gone", || async {
                (!stage.agent.syncer.as_ref().unwrap().is_ready()).then_some(())
            })
            .await;
        })
        .await;
    stage.kcp = kcp;
    wait_for(
        &stage.c1,
        &remote_databases(),
        Some("default"),
        "kept",
        "the status set while kcp was away",
        |o| o["status"]["phase"] == "Ready",
    )
    .await;

    // Nothing wanted any more: nothing left on either side.
    for name in ["kept", "while-away"] {
        stage.c1.delete(&remote_databases(), Some("default"), name).await;
    }
    for name in ["kept", "while-away"] {
        wait_gone(
            &stage.c1,
            &remote_databases(),
            Some("default"),
            name,
            "the consumer object",
        )
        .await;
    }
    let left = stage.service.list(&local_databases(), None).await;
    assert!(left.is_empty(), "orphaned copies: {left:?}");
    let Stage { agent, .. } = stage;
    agent.stop().await;
}

/// A copy the service cluster refuses is a Warning Event on the consumer's
/// object with the cluster's own message, and the PublishedResource's
/// `Synced` condition names it, until the object is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_copy_the_service_cluster_refuses_is_named_on_the_object_and_the_published_resource() {
    let stage = Stage::with_schema().await;
    stage.publish("Thing", "things", json!({})).await;
    let remote = ar(EXPORT, "v1", "Thing", "things");
    stage.bind_accepting(&stage.c1, &remote).await;
    // Annotations just under kube's 256 KiB total: kcp takes them, but the copy,
    // with the agent's own annotations added, is too large for the service cluster.
    let mut big = remote_object("Thing", "big", json!({}), json!({}));
    big["metadata"]["annotations"] = json!({ "big": "x".repeat(262_144 - 3 - 64) });
    stage.c1.create(&remote, big).await;
    let seen = eventually(
        20,
        "an Event on the object with the cluster's message",
        || async {
            let events = events_about(&stage.c1, "default", "big").await;
            events.into_iter().find(|e| e.starts_with("CopyRefused"))
        },
    )
    .await;
    assert!(seen.contains("metadata.annotations: Too long"), "{seen}");
    assert!(!seen.contains("Status {") && !seen.contains("ApiError"), "{seen}");
    let pr = stage
        .published_when("things", "the Synced condition to name the refusal", |pr| {
            condition(pr, "Synced").is_some_and(|c| c["reason"] == "CopyRefused")
        })
        .await;
    let synced = condition(&pr, "Synced").unwrap();
    let message = synced["message"].as_str().unwrap();
    assert!(
        message.contains("default/big was refused by the service cluster") && message.contains("Too long"),
        "{message}"
    );

    stage
        .c1
        .merge(
            &remote,
            Some("default"),
            "big",
            json!({ "metadata": { "annotations": { "big": null } } }),
        )
        .await;
    stage
        .published_when("things", "the Synced condition to clear", |pr| {
            condition(pr, "Synced").is_some_and(|c| c["status"] == "True")
        })
        .await;
}

/// A Database of `c1` synced under PublishedResource `databases` (default naming), with
/// the service's status returned: `(its cluster, the copy)`.
async fn a_synced_database(stage: &Stage, name: &str) -> (String, Value) {
    stage.schema().await;
    stage.bind(&stage.c1).await;
    let Synced { cluster, copy, .. } = stage
        .sync_down(
            &remote_databases(),
            &local_databases(),
            database(name),
            "the copy under the default name",
        )
        .await;
    (cluster, copy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replaced_published_resource_moves_its_copies_to_the_new_names() {
    let stage = Stage::start().await;
    let (cluster, copy) = a_synced_database(&stage, "my-db").await;
    let old_name = default_name("default", "my-db");
    assert_eq!(
        annotation(&copy, SYNCAGENT_PUBLISHED_RESOURCE_ANNOTATION),
        Some("databases"),
        "a copy names the PublishedResource that made it"
    );
    // Another workspace's object of the same name: its copy moves on its own, never
    // taking or removing c1's.
    stage.bind(&stage.c2).await;
    let other = stage.c2.create(&remote_databases(), database("my-db")).await;
    let other_cluster = cluster_of(&other);
    stage
        .service
        .when(&local_databases(), &other_cluster, &old_name, "c2's copy", |_| {
            true
        })
        .await;

    // PublishedResources are immutable: new naming means delete and create.
    stage
        .service
        .delete(&published_resources(), None, "databases")
        .await;
    let mut replacement = published("databases-v2", "Database");
    replacement["spec"]["naming"] = json!({ "name": "db-{{ .Object.metadata.name }}" });
    stage.service.create(&published_resources(), replacement).await;

    let moved = stage
        .service
        .when(
            &local_databases(),
            &cluster,
            "db-my-db",
            "the copy under the new PublishedResource's name",
            |_| true,
        )
        .await;
    assert_eq!(moved["spec"]["size"], 3);
    assert_eq!(
        annotation(&moved, SYNCAGENT_PUBLISHED_RESOURCE_ANNOTATION),
        Some("databases-v2")
    );
    wait_gone(
        &stage.service,
        &local_databases(),
        Some(&cluster),
        &old_name,
        "the copy under the old name, once the new one exists",
    )
    .await;
    // The service's state now comes from the new copy.
    stage
        .service
        .set_status(
            &local_databases(),
            Some(&cluster),
            "db-my-db",
            json!({ "phase": "Moved" }),
        )
        .await;
    stage
        .c1
        .when(
            &remote_databases(),
            "default",
            "my-db",
            "the new copy's status in kcp",
            |o| o["status"]["phase"] == "Moved",
        )
        .await;
    // And it follows the kcp object as before: spec down, deletion through.
    stage
        .patch_database("my-db", json!({ "spec": { "size": 7 } }))
        .await;
    stage
        .service
        .when(
            &local_databases(),
            &cluster,
            "db-my-db",
            "the spec change on the moved copy",
            |o| o["spec"]["size"] == 7,
        )
        .await;
    let left: Vec<String> = stage
        .service
        .list(&local_databases(), Some(&cluster))
        .await
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(left, ["db-my-db"], "no copy is left under the old name");
    stage
        .service
        .when(
            &local_databases(),
            &other_cluster,
            "db-my-db",
            "c2's copy under the new name",
            |o| label(o, SYNCAGENT_REMOTE_CLUSTER_LABEL) == Some(other_cluster.as_str()),
        )
        .await;
    wait_gone(
        &stage.service,
        &local_databases(),
        Some(&other_cluster),
        &old_name,
        "c2's copy under the old name",
    )
    .await;
    let c1_copy = stage
        .service
        .get(&local_databases(), Some(&cluster), "db-my-db")
        .await
        .unwrap();
    assert_eq!(c1_copy["spec"]["size"], 7, "c1's copy is untouched by c2's move");
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_published_resource_deleted_with_nothing_replacing_it_keeps_its_copies() {
    let stage = Stage::start().await;
    let (cluster, first) = a_synced_database(&stage, "kept").await;
    assert_eq!(
        annotation(&first, SYNCAGENT_PUBLISHED_RESOURCE_ANNOTATION),
        Some("databases")
    );
    stage
        .service
        .delete(&published_resources(), None, "databases")
        .await;
    eventually(15, "the agent to stop publishing databases", || async {
        let published = stage.agent.agent.published();
        published.iter().all(|p| p.name != "databases").then_some(())
    })
    .await;
    // Work the agent does after that (a Cache synced) shows it has settled.
    let caches = ar(EXPORT, "v1", "Cache", "caches");
    stage.bind_accepting(&stage.c2, &caches).await;
    let cache = stage
        .c2
        .create(&caches, remote_object("Cache", "after", json!({}), json!({})))
        .await;
    wait_for(
        &stage.service,
        &ar("example.com", "v1", "Cache", "caches"),
        Some(&cluster_of(&cache)),
        &default_name("default", "after"),
        "a later object of another PublishedResource",
        |_| true,
    )
    .await;
    // The kcp object and its copy both stay; the copy says where it came from.
    assert!(stage
        .c1
        .get(&remote_databases(), Some("default"), "kept")
        .await
        .is_some());
    let copy = stage
        .service
        .get(
            &local_databases(),
            Some(&cluster),
            &default_name("default", "kept"),
        )
        .await
        .expect("the copy stays (no data loss)");
    assert_eq!(
        annotation(&copy, SYNCAGENT_PUBLISHED_RESOURCE_ANNOTATION),
        Some("databases"),
        "{copy}"
    );
    assert_eq!(label(&copy, SYNCAGENT_AGENT_NAME_LABEL), Some("nora"));
    stage.agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn published_resources_are_immutable_on_every_service_cluster() {
    // Two stand-in service clusters, each with only the CRD: the refusal is the API
    // server's (a CEL rule in the CRD), so it needs no agent.
    for _ in 0..2 {
        let hub = TestHub::start().await;
        let service = Cluster::of(&hub, None).await;
        let pr_crd = ferry_api::crds::all_crds()
            .into_iter()
            .map(|c| serde_json::to_value(c).unwrap())
            .find(|c| c["metadata"]["name"] == "publishedresources.syncagent.kcp.io")
            .unwrap();
        service.create(&crds(), pr_crd).await;
        service
            .create(&published_resources(), published("databases", "Database"))
            .await;
        let api = service.api(&published_resources(), None);
        let patch = |p: Value| kube::api::Patch::Merge(p);
        let refused = api
            .patch(
                "databases",
                &Default::default(),
                &patch(json!({ "spec": { "resource": { "kind": "User" } } })),
            )
            .await
            .expect_err("a changed kind is refused");
        let kube::Error::Api(status) = refused else {
            panic!("{refused}")
        };
        assert_eq!(status.code, 422, "{status:?}");
        assert!(
            status
                .message
                .contains("PublishedResource.syncagent.kcp.io \"databases\" is invalid")
                && status.message.contains("spec")
                && status
                    .message
                    .contains(ferry_api::syncagent::IMMUTABLE_SPEC_MESSAGE),
            "{}",
            status.message
        );
        let pr = service
            .get(&published_resources(), None, "databases")
            .await
            .unwrap();
        assert_eq!(pr["spec"]["resource"]["kind"], "Database");
        // Metadata and status still change.
        service
            .merge(
                &published_resources(),
                None,
                "databases",
                json!({ "metadata": { "labels": { "team": "db" } } }),
            )
            .await;
        let pr = service
            .set_status(
                &published_resources(),
                None,
                "databases",
                json!({ "resourceSchemaName": "v1.databases.example.io" }),
            )
            .await;
        assert_eq!(pr["metadata"]["labels"]["team"], "db");
        assert_eq!(pr["status"]["resourceSchemaName"], "v1.databases.example.io");
    }
}

/// However many copies the service cluster refuses, the PublishedResource's
/// `Synced` condition names the first few with the cluster's message and
/// counts the rest, so it stays readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_refused_copies_are_named_a_few_and_counted_on_the_published_resource() {
    let stage = Stage::with_schema().await;
    stage.publish("Thing", "things", json!({})).await;
    let remote = ar(EXPORT, "v1", "Thing", "things");
    stage.bind_accepting(&stage.c1, &remote).await;
    // As above: kcp takes each, the service cluster finds each copy too large.
    for i in 0..5 {
        let mut big = remote_object("Thing", &format!("big{i}"), json!({}), json!({}));
        big["metadata"]["annotations"] = json!({ "big": "x".repeat(262_144 - 3 - 64) });
        stage.c1.create(&remote, big).await;
    }
    let pr = stage
        .published_when(
            "things",
            "the Synced condition to count the five refusals",
            |pr| {
                condition(pr, "Synced").is_some_and(|c| {
                    c["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("5 objects are not synced: "))
                })
            },
        )
        .await;
    let synced = condition(&pr, "Synced").unwrap();
    assert_eq!(synced["reason"], "CopyRefused");
    let message = synced["message"].as_str().unwrap();
    assert!(message.ends_with("; and 2 more"), "{message}");
    assert_eq!(
        message.matches("was refused by the service cluster").count(),
        3,
        "three named: {message}"
    );
    assert!(
        message.contains("Too long") && !message.contains("ApiError"),
        "{message}"
    );
    let Stage { agent, .. } = stage;
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn objects_into_a_new_namespace_make_it_once_and_no_copy_is_refused_for_it() {
    let stage = Stage::with_schema().await;
    // The agent's own state namespace exists once a first object has synced.
    a_synced_database(&stage, "first").await;
    stage.bind(&stage.c2).await;
    let before = ferry_testkit::clients::scrape_metrics(&stage.service_hub).await;
    let names: Vec<String> = (0..20).map(|i| format!("burst-{i}")).collect();
    let mut cluster = String::new();
    for name in &names {
        cluster = cluster_of(&stage.c2.create(&remote_databases(), database(name)).await);
    }
    for name in &names {
        stage
            .service
            .when(
                &local_databases(),
                &cluster,
                &default_name("default", name),
                "the copy in the consumer's namespace",
                |_| true,
            )
            .await;
    }
    let after = ferry_testkit::clients::scrape_metrics(&stage.service_hub).await;
    let made = |has: &[&str]| {
        let count = |scrape: &str| ferry_testkit::clients::metric_sum(scrape, "apiserver_request_total", has);
        count(&after) - count(&before)
    };
    assert_eq!(
        made(&[r#"verb="POST""#, r#"resource="namespaces""#]),
        1.0,
        "namespace {cluster} is created once for its 20 copies, not raced for"
    );
    assert_eq!(
        // The hub counts a CRD's requests as `(custom)`, as kube-apiserver does.
        made(&[
            r#"verb="POST""#,
            r#"resource="(custom)""#,
            r#"scope="namespace""#,
            r#"code="404""#
        ]),
        0.0,
        "no copy is sent before its namespace exists"
    );
}

/// A consumer's object that already has a finalizer of someone else's, of a kind an
/// APIExport serves (a custom resource, which takes no strategic merge patch: 415 on
/// kube-apiserver and kcp, and on the hub): the agent's cleanup finalizer goes on
/// beside it, and once the object is deleted and its copy gone, only the agent's
/// comes off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_with_another_finalizer_gets_the_cleanup_finalizer_beside_it_and_keeps_it() {
    const KEEP: &str = "example.com/keep";
    let stage = Stage::bound().await;
    let mut db = database("kept-db");
    db["metadata"]["finalizers"] = json!([KEEP]);
    let made = stage.c1.create(&remote_databases(), db).await;
    let refused = stage
        .c1
        .api(&remote_databases(), Some("default"))
        .patch(
            "kept-db",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(json!({ "metadata": { "labels": { "a": "b" } } })),
        )
        .await
        .expect_err("a strategic merge patch of a custom resource");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 415),
        "{refused}"
    );
    let finalizers = |o: &Value| -> Vec<String> {
        o["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(String::from))
            .collect()
    };
    let held = wait_for(
        &stage.c1,
        &remote_databases(),
        Some("default"),
        "kept-db",
        "the cleanup finalizer",
        |o| finalizers(o).iter().any(|f| f == SYNCAGENT_CLEANUP_FINALIZER),
    )
    .await;
    assert_eq!(finalizers(&held), [KEEP, SYNCAGENT_CLEANUP_FINALIZER]);
    let (cluster, local_name) = (cluster_of(&made), default_name("default", "kept-db"));
    stage
        .service
        .when(&local_databases(), &cluster, &local_name, "the copy", |_| true)
        .await;
    stage
        .c1
        .delete(&remote_databases(), Some("default"), "kept-db")
        .await;
    wait_gone(
        &stage.service,
        &local_databases(),
        Some(&cluster),
        &local_name,
        "the copy of the deleted object",
    )
    .await;
    let released = wait_for(
        &stage.c1,
        &remote_databases(),
        Some("default"),
        "kept-db",
        "the source released",
        |o| !finalizers(o).iter().any(|f| f == SYNCAGENT_CLEANUP_FINALIZER),
    )
    .await;
    assert_eq!(finalizers(&released), [KEEP]);
    assert!(!released["metadata"]["deletionTimestamp"].is_null());
    stage.agent.stop().await;
}
