//! kcp TMC's hub side: `workload.kcp.io` SyncTarget, `scheduling.kcp.io`
//! Location and Placement and `apiresource.kcp.io` APIResourceImport are
//! served in every workspace (validated, with kcp's columns); a SyncTarget
//! gets its key label, its virtual-workspace URLs, heartbeat conditions and
//! `syncedResources` whose states follow the imported schemas; `root:compute`
//! holds the `kubernetes` export and binding to it works; and a user without
//! rights in a workspace cannot touch its SyncTargets.

mod common;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::tenants::{bind_cluster_role, cluster_role};
use common::{
    admin, call, client_as, create, eventually, eventually_status, expect_status, expect_status_because,
    get_ok, post_created, put_ok, token,
};
use ferry_api::workload::{sync_target_key, SyncTarget};
use ferry_testkit::TestHub;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

const TARGETS: &str = "/apis/workload.kcp.io/v1alpha1/synctargets";
const LOCATIONS: &str = "/apis/scheduling.kcp.io/v1alpha1/locations";
const PLACEMENTS: &str = "/apis/scheduling.kcp.io/v1alpha1/placements";
const IMPORTS: &str = "/apis/apiresource.kcp.io/v1alpha1/apiresourceimports";
const APIS: &str = "/apis/apis.kcp.io/v1alpha1";
const TOKENS: &str = "\
alice-token,alice,u-alice
mallory-token,mallory,u-mallory
";

/// A hub that knows alice and mallory, with `threshold` as
/// `--sync-target-heartbeat-threshold`.
async fn hub_with(threshold: Duration) -> (TestHub, tempfile::TempDir) {
    let (hub, dir) =
        common::tenants::hub_with_tokens(TOKENS, |o| o.sync_target_heartbeat_threshold = threshold).await;
    (hub, dir)
}

/// Create workspace `root:<name>`; returns its logical cluster name.
async fn workspace(hub: &TestHub, name: &str) -> String {
    common::tenants::ready_workspace(hub, name).await
}

fn sync_target(name: &str, exports: Value) -> Value {
    json!({
        "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
        "metadata": {"name": name, "labels": {"region": "east"}},
        "spec": {"supportedAPIExports": exports}
    })
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn condition_status(obj: &Value, type_: &str) -> String {
    condition(obj, type_)
        .and_then(|c| c["status"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Poll the object at `path` in `ws` until `check` holds.
async fn wait_for(hub: &TestHub, ws: &str, path: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    eventually(20, what, || async {
        let (code, obj) = call(&admin(hub, ws).await, "GET", path, None).await;
        (code == 200 && check(&obj)).then_some(obj)
    })
    .await
}

fn kubectl_ok(hub: &TestHub, ws: &str, args: &[&str], stdin: Option<&str>) -> String {
    let out = hub.kubectl_in(ws, args, stdin);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kubectl_err(hub: &TestHub, ws: &str, args: &[&str], stdin: Option<&str>) -> String {
    let out = hub.kubectl_in(ws, args, stdin);
    assert!(!out.status.success(), "kubectl {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tmc_kinds_are_served_built_in_with_kcp_columns_and_field_errors() {
    let (hub, _dir) = hub_with(Duration::from_secs(60)).await;
    workspace(&hub, "org").await;
    // kcp's YAML, as its docs write it, through kubectl.
    let yaml = r#"
# The Location first: a workspace that has SyncTargets and no Location
# gets a `default` one from the scheduler, as in kcp.
apiVersion: scheduling.kcp.io/v1alpha1
kind: Location
metadata:
  name: default
spec:
  resource: {group: workload.kcp.io, version: v1alpha1, resource: synctargets}
  instanceSelector: {matchLabels: {region: east}}
  availableSelectorLabels:
  - {key: region, values: [east, west]}
---
apiVersion: workload.kcp.io/v1alpha1
kind: SyncTarget
metadata:
  name: east
  labels: {region: east}
---
apiVersion: scheduling.kcp.io/v1alpha1
kind: Placement
metadata:
  name: p
spec:
  locationSelectors: [{matchLabels: {env: test}}]
  namespaceSelector: {matchLabels: {purpose: workload}}
  locationWorkspace: root:org
---
apiVersion: apiresource.kcp.io/v1alpha1
kind: APIResourceImport
metadata:
  name: deployments.east.v1.apps
spec:
  location: east
  groupVersion: {group: apps, version: v1}
  scope: Namespaced
  plural: deployments
  singular: deployment
  kind: Deployment
  listKind: DeploymentList
  openAPIV3Schema: {type: object}
  subResources: [{name: status}]
"#;
    kubectl_ok(&hub, "root:org", &["apply", "-f", "-"], Some(yaml));
    let out = kubectl_ok(&hub, "root:org", &["get", "synctargets"], None);
    assert!(
        out.contains("READY") && out.contains("HEARTBEAT") && out.contains("east"),
        "{out}"
    );
    let out = kubectl_ok(&hub, "root:org", &["get", "locations"], None);
    assert!(out.contains("RESOURCE") && out.contains("synctargets"), "{out}");
    let out = kubectl_ok(&hub, "root:org", &["get", "apiresourceimports"], None);
    assert!(out.contains("LOCATION") && out.contains("deployments"), "{out}");
    // In the `kcp` category.
    let out = kubectl_ok(&hub, "root:org", &["get", "kcp"], None);
    assert!(out.contains("synctarget.workload.kcp.io/east"), "{out}");

    // Defaults: a Placement targets SyncTargets and starts Pending; an
    // import's strategy is UpdateUnpublished.
    let client = admin(&hub, "root:org").await;
    let (_, p) = call(&client, "GET", &format!("{PLACEMENTS}/p"), None).await;
    assert_eq!(p["spec"]["locationResource"]["resource"], "synctargets", "{p}");
    assert_eq!(p["status"]["phase"], "Pending", "{p}");
    let (_, i) = call(
        &client,
        "GET",
        &format!("{IMPORTS}/deployments.east.v1.apps"),
        None,
    )
    .await;
    assert_eq!(i["spec"]["schemaUpdateStrategy"], "UpdateUnpublished", "{i}");

    // Bad input is refused naming the field, through kubectl too.
    let err = kubectl_err(
        &hub,
        "root:org",
        &["apply", "-f", "-"],
        Some("apiVersion: scheduling.kcp.io/v1alpha1\nkind: Location\nmetadata: {name: pods}\nspec:\n  resource: {version: v1, resource: pods}\n"),
    );
    assert!(
        err.contains("spec.resource") && err.contains("synctargets"),
        "{err}"
    );
    let bad_location = json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Location",
        "metadata": {"name": "nodes"},
        "spec": {"resource": {"group": "", "version": "v1", "resource": "nodes"},
                 "availableSelectorLabels": [{"key": "bad key!", "values": []}]}});
    let body = expect_status(&client, "POST", LOCATIONS, Some(&bad_location), 422).await;
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("spec.resource") && msg.contains("synctargets"),
        "{msg}"
    );
    assert!(msg.contains("spec.availableSelectorLabels[0].key"), "{msg}");
    assert!(msg.contains("spec.availableSelectorLabels[0].values"), "{msg}");

    let bad_placement = json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
        "metadata": {"name": "bad"},
        "spec": {"namespaceSelector": {"matchExpressions": [{"key": "a", "operator": "Sideways"}]},
                 "locationWorkspace": "Root/Org"}});
    let body = expect_status(&client, "POST", PLACEMENTS, Some(&bad_placement), 422).await;
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("spec.namespaceSelector") && msg.contains("spec.locationWorkspace"),
        "{msg}"
    );

    let bad_import = json!({"apiVersion": "apiresource.kcp.io/v1alpha1", "kind": "APIResourceImport",
        "metadata": {"name": "x"}, "spec": {"groupVersion": {"version": "v1"}, "scope": "Somewhere",
        "plural": "xs", "kind": "X"}});
    let body = expect_status(&client, "POST", IMPORTS, Some(&bad_import), 422).await;
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("spec.location") && msg.contains("spec.scope") && msg.contains("spec.openAPIV3Schema"),
        "{msg}"
    );

    let bad_target = sync_target("west", json!([{"path": "root:compute"}]));
    let body = expect_status(&client, "POST", TARGETS, Some(&bad_target), 422).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("spec.supportedAPIExports[0].export"),
        "{body}"
    );
    // The schema checks types.
    let wrong_type = json!({"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
        "metadata": {"name": "north"}, "spec": {"unschedulable": "yes"}});
    let body = expect_status(&client, "POST", TARGETS, Some(&wrong_type), 422).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("spec.unschedulable"),
        "{body}"
    );

    // Ferry's CRDs (which include synctargets.workload.kcp.io, for real
    // clusters) can be installed; the built-in keeps serving, and deleting
    // the CRD leaves the SyncTargets alone.
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(client.clone());
    for crd in ferry_api::all_crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let targets: Api<SyncTarget> = Api::all(client.clone());
    assert!(targets.get("east").await.is_ok());
    crds.delete("synctargets.workload.kcp.io", &Default::default())
        .await
        .unwrap();
    eventually(10, "CRD gone", || async {
        crds.get_opt("synctargets.workload.kcp.io")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        targets.get("east").await.is_ok(),
        "the CRD's deletion must not take the built-in's objects"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_target_gets_its_key_label_virtual_workspace_urls_and_default_export() {
    let (hub, _dir) = hub_with(Duration::from_secs(60)).await;
    let cluster = workspace(&hub, "org").await;
    let client = admin(&hub, "root:org").await;
    let targets: Api<SyncTarget> = Api::all(client.clone());
    let created = targets
        .create(
            &PostParams::default(),
            &SyncTarget::new("east", Default::default()),
        )
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    // kcp's default export list.
    assert_eq!(created.spec.supported_api_exports.len(), 1);
    assert_eq!(created.spec.supported_api_exports[0].export, "kubernetes");
    let key = sync_target_key(&cluster, "east");
    let st = eventually(20, "key label and URLs", || async {
        let st = targets.get("east").await.ok()?;
        let labelled = st.metadata.labels.as_ref()?.get("internal.workload.kcp.io/key") == Some(&key);
        let urls = !st.status.as_ref()?.virtual_workspaces.is_empty();
        (labelled && urls).then_some(st)
    })
    .await;
    let vw = &st.status.unwrap().virtual_workspaces[0];
    assert_eq!(
        vw.syncer_url,
        format!("{}/services/syncer/{cluster}/east/{uid}", hub.url())
    );
    assert_eq!(
        vw.upsyncer_url,
        format!("{}/services/upsyncer/{cluster}/east/{uid}", hub.url())
    );

    // A user removing the label gets it back.
    let patch = json!({"metadata": {"labels": {"internal.workload.kcp.io/key": null}}});
    targets
        .patch("east", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually(20, "label restored", || async {
        let st = targets.get("east").await.ok()?;
        (st.metadata.labels.as_ref()?.get("internal.workload.kcp.io/key") == Some(&key)).then_some(())
    })
    .await;
}

/// The syncer's heartbeat: kcp's JSON patch on `status`.
async fn heartbeat(client: &kube::Client, uid: &str, at: &str) {
    let patch = json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "replace", "path": "/status/lastSyncerHeartbeatTime", "value": at}
    ]);
    let req = http::Request::builder()
        .method("PATCH")
        .uri(format!("{TARGETS}/east/status"))
        .header("content-type", "application/json-patch+json")
        .body(kube::client::Body::from(serde_json::to_vec(&patch).unwrap()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "heartbeat patch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_makes_the_target_ready_and_a_stale_one_unhealthy() {
    let (hub, _dir) = hub_with(Duration::from_secs(3)).await;
    workspace(&hub, "org").await;
    let client = admin(&hub, "root:org").await;
    let created = create(&hub, "root:org", TARGETS, sync_target("east", json!([]))).await;
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let path = format!("{TARGETS}/east");
    // No heartbeat yet: not Ready.
    let st = wait_for(&hub, "root:org", &path, "HeartbeatHealthy False", |o| {
        condition_status(o, "HeartbeatHealthy") == "False"
    })
    .await;
    assert_eq!(condition_status(&st, "Ready"), "False", "{st}");
    assert_eq!(condition_status(&st, "SyncerReady"), "False", "{st}");

    // A heartbeat (kcp's patch needs the status to exist: it does now).
    heartbeat(&client, &uid, &ferry_api::timestamp::now()).await;
    let st = wait_for(&hub, "root:org", &path, "Ready True", |o| {
        condition_status(o, "Ready") == "True"
    })
    .await;
    assert_eq!(condition_status(&st, "HeartbeatHealthy"), "True", "{st}");
    assert_eq!(condition_status(&st, "SyncerReady"), "True", "{st}");
    let out = kubectl_ok(&hub, "root:org", &["get", "synctarget", "east"], None);
    assert!(out.contains("True"), "{out}");

    // No more heartbeats, and no other write: the hub notices on its own.
    let st = wait_for(&hub, "root:org", &path, "HeartbeatHealthy False", |o| {
        condition_status(o, "HeartbeatHealthy") == "False"
    })
    .await;
    let c = condition(&st, "HeartbeatHealthy").unwrap();
    assert_eq!(c["reason"], "ErrorHeartbeat", "{st}");
    assert!(
        c["message"].as_str().unwrap().contains("No heartbeat since"),
        "{st}"
    );
    assert_eq!(condition_status(&st, "Ready"), "False", "{st}");
    assert_eq!(
        condition(&st, "Ready").unwrap()["reason"],
        "ErrorHeartbeat",
        "{st}"
    );
    assert_eq!(condition_status(&st, "SyncerReady"), "True", "{st}");

    // Back to Ready with a new heartbeat; then the syncer reports it may not
    // sync (SyncerAuthorized False): Ready follows.
    heartbeat(&client, &uid, &ferry_api::timestamp::now()).await;
    let mut st = wait_for(&hub, "root:org", &path, "Ready True", |o| {
        condition_status(o, "Ready") == "True"
    })
    .await;
    let mut conditions = st["status"]["conditions"].as_array().unwrap().clone();
    conditions.push(
        json!({"type": "SyncerAuthorized", "status": "False", "severity": "Error",
        "reason": "SyncerUnauthorized", "message": "SSAR check failed for gvrs: apps/v1/deployments",
        "lastTransitionTime": ferry_api::timestamp::now()}),
    );
    st["status"]["conditions"] = json!(conditions);
    put_ok(&client, &format!("{path}/status"), &st).await;
    let st = wait_for(&hub, "root:org", &path, "Ready False for SyncerAuthorized", |o| {
        condition(o, "Ready").is_some_and(|c| c["reason"] == "SyncerUnauthorized")
    })
    .await;
    assert_eq!(
        condition_status(&st, "SyncerAuthorized"),
        "False",
        "kept as the syncer wrote it: {st}"
    );
}

fn widgets_schema(name: &str, plural: &str, kind: &str, size_type: &str) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": name},
        "spec": {
            "group": "example.io", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": schema_with_size(size_type)}]
        }
    })
}

fn schema_with_size(size_type: &str) -> Value {
    json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "size": {"type": size_type},
            "parts": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
        }},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
    }})
}

fn import(name: &str, location: &str, plural: &str, kind: &str, schema: Value) -> Value {
    json!({
        "apiVersion": "apiresource.kcp.io/v1alpha1", "kind": "APIResourceImport",
        "metadata": {"name": name},
        "spec": {"location": location, "groupVersion": {"group": "example.io", "version": "v1"},
                 "scope": "Namespaced", "plural": plural, "kind": kind, "openAPIV3Schema": schema}
    })
}

/// SyncTarget `east` in `root:org`, supporting `exports`; returns its path.
async fn east_in_org(hub: &TestHub, exports: Value) -> String {
    create(hub, "root:org", TARGETS, sync_target("east", exports)).await;
    format!("{TARGETS}/east")
}

/// The SyncTarget at `path` in `root:org` once its synced resources are
/// `states` (resource, state), in that order.
async fn states_when(hub: &TestHub, path: &str, what: &str, states: &[(&str, &str)]) -> Value {
    wait_for(hub, "root:org", path, what, |o| {
        let now = synced_states(o);
        now.iter()
            .map(|(r, s)| (r.as_str(), s.as_str()))
            .eq(states.iter().copied())
    })
    .await
}

fn synced_states(st: &Value) -> Vec<(String, String)> {
    st["status"]["syncedResources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["resource"].as_str().unwrap_or_default().to_string(),
                r["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_resources_go_from_pending_to_accepted_or_incompatible_by_schema() {
    let (hub, _dir) = hub_with(Duration::from_secs(60)).await;
    workspace(&hub, "provider").await;
    workspace(&hub, "org").await;
    for s in [
        widgets_schema("v1.widgets.example.io", "widgets", "Widget", "integer"),
        widgets_schema("v1.gadgets.example.io", "gadgets", "Gadget", "integer"),
    ] {
        create(&hub, "root:provider", &format!("{APIS}/apiresourceschemas"), s).await;
    }
    let export = create(
        &hub,
        "root:provider",
        &format!("{APIS}/apiexports"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "widgets"},
               "spec": {"latestResourceSchemas": ["v1.widgets.example.io", "v1.gadgets.example.io"]}}),
    )
    .await;
    let identity = wait_for(
        &hub,
        "root:provider",
        &format!("{APIS}/apiexports/widgets"),
        "identity",
        |o| o["status"]["identityHash"].is_string(),
    )
    .await["status"]["identityHash"]
        .clone();
    assert!(export["metadata"]["uid"].is_string());
    let path = east_in_org(&hub, json!([{"export": "widgets", "path": "root:provider"}])).await;
    let st = states_when(
        &hub,
        &path,
        "both Pending",
        &[("gadgets", "Pending"), ("widgets", "Pending")],
    )
    .await;
    let widgets = &st["status"]["syncedResources"][1];
    assert_eq!(widgets["group"], "example.io");
    assert_eq!(widgets["versions"], json!(["v1"]));
    assert_eq!(widgets["identityHash"], identity);

    // Another target's import does not count for this one.
    create(
        &hub,
        "root:org",
        IMPORTS,
        import(
            "widgets.west.v1.example.io",
            "west",
            "widgets",
            "Widget",
            schema_with_size("integer"),
        ),
    )
    .await;
    // A compatible import (with a field more) → Accepted; an incompatible
    // one → Incompatible, naming the field.
    let mut wider = schema_with_size("integer");
    wider["properties"]["spec"]["properties"]["color"] = json!({"type": "string"});
    create(
        &hub,
        "root:org",
        IMPORTS,
        import("widgets.east.v1.example.io", "east", "widgets", "Widget", wider),
    )
    .await;
    create(
        &hub,
        "root:org",
        IMPORTS,
        import(
            "gadgets.east.v1.example.io",
            "east",
            "gadgets",
            "Gadget",
            schema_with_size("string"),
        ),
    )
    .await;
    let st = states_when(
        &hub,
        &path,
        "Accepted and Incompatible",
        &[("gadgets", "Incompatible"), ("widgets", "Accepted")],
    )
    .await;
    let c = condition(&st, "ResourcesCompatible").expect("ResourcesCompatible");
    assert_eq!(c["status"], "False", "{st}");
    let msg = c["message"].as_str().unwrap();
    assert!(
        msg.contains("gadgets.example.io v1: spec.size: integer upstream, string downstream"),
        "{msg}"
    );
    // The import says it too.
    let i = wait_for(
        &hub,
        "root:org",
        &format!("{IMPORTS}/gadgets.east.v1.example.io"),
        "Compatible False",
        |o| condition_status(o, "Compatible") == "False",
    )
    .await;
    assert!(
        condition(&i, "Compatible").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("spec.size"),
        "{i}"
    );
    wait_for(
        &hub,
        "root:org",
        &format!("{IMPORTS}/widgets.east.v1.example.io"),
        "Compatible True",
        |o| condition_status(o, "Compatible") == "True",
    )
    .await;

    // The syncer re-imports a fixed schema: Accepted.
    let client = admin(&hub, "root:org").await;
    let fixed = json!({"spec": {"openAPIV3Schema": schema_with_size("integer")}});
    let (code, body) = call_merge(&client, &format!("{IMPORTS}/gadgets.east.v1.example.io"), &fixed).await;
    assert_eq!(code, 200, "{body}");
    let st = states_when(
        &hub,
        &path,
        "both Accepted",
        &[("gadgets", "Accepted"), ("widgets", "Accepted")],
    )
    .await;
    assert_eq!(condition_status(&st, "ResourcesCompatible"), "True", "{st}");

    // The export drops gadgets: it leaves syncedResources.
    let (code, body) = call_merge(
        &admin(&hub, "root:provider").await,
        &format!("{APIS}/apiexports/widgets"),
        &json!({"spec": {"latestResourceSchemas": ["v1.widgets.example.io"]}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    states_when(&hub, &path, "gadgets gone", &[("widgets", "Accepted")]).await;
}

/// The syncer heartbeats often and the hub's comparison of schemas takes a
/// while: the write of an import's judgement then conflicts with a heartbeat.
/// Heartbeats alone never judge again, so a lost judgement used to leave the
/// resource `Pending` for good (and the syncer never synced it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imports_judgement_lands_while_heartbeats_keep_writing() {
    let (hub, _dir) = hub_with(Duration::from_secs(60)).await;
    workspace(&hub, "provider").await;
    workspace(&hub, "org").await;
    // As wide as a Deployment's, so that comparing takes a while.
    let wide = |extra: u64| {
        let mut schema = schema_with_size("integer");
        for i in 0..500 {
            schema["properties"]["spec"]["properties"][format!("field{i}")] = json!({"type": "object",
                "properties": {"name": {"type": "string"}, "count": {"type": "integer"}}});
        }
        schema["properties"]["spec"]["properties"]["extra"] = json!({"type": "string", "maxLength": extra});
        schema
    };
    let mut export_schema = widgets_schema("v1.widgets.example.io", "widgets", "Widget", "integer");
    export_schema["spec"]["versions"][0]["schema"] = wide(0);
    create(
        &hub,
        "root:provider",
        &format!("{APIS}/apiresourceschemas"),
        export_schema,
    )
    .await;
    create(
        &hub,
        "root:provider",
        &format!("{APIS}/apiexports"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "widgets"},
               "spec": {"latestResourceSchemas": ["v1.widgets.example.io"]}}),
    )
    .await;
    let path = east_in_org(&hub, json!([{"export": "widgets", "path": "root:provider"}])).await;
    states_when(&hub, &path, "widgets Pending", &[("widgets", "Pending")]).await;

    // Three "syncers" write the heartbeat's counters back to back while
    // the import arrives and is judged, and for 30 heartbeats after.
    let client = admin(&hub, "root:org").await;
    let stop = Arc::new(AtomicBool::new(false));
    let beats = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..3)
        .map(|_| {
            let (client, stop, beats) = (client.clone(), stop.clone(), beats.clone());
            let path = format!("{path}/status");
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let count = beats.fetch_add(1, Ordering::Relaxed) + 1;
                    let beat = json!({"status": {"heartbeat": {"count": count, "errors": 0}}});
                    let (code, body) = call_merge(&client, &path, &beat).await;
                    assert_eq!(code, 200, "{body}");
                }
            })
        })
        .collect();
    for version in 0..4 {
        // Each change of the import is judged again (and each may conflict).
        let body = import(
            "widgets.east.v1.example.io",
            "east",
            "widgets",
            "Widget",
            wide(version),
        );
        if version == 0 {
            create(&hub, "root:org", IMPORTS, body).await;
        } else {
            let patch = json!({"spec": body["spec"]});
            let (code, body) =
                call_merge(&client, &format!("{IMPORTS}/widgets.east.v1.example.io"), &patch).await;
            assert_eq!(code, 200, "{body}");
        }
    }
    let after = beats.load(Ordering::Relaxed) + 30;
    eventually(20, "30 more heartbeats", || async {
        (beats.load(Ordering::Relaxed) >= after).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let st = states_when(&hub, &path, "widgets Accepted", &[("widgets", "Accepted")]).await;
    assert_eq!(condition_status(&st, "ResourcesCompatible"), "True", "{st}");
}

async fn call_merge(client: &kube::Client, path: &str, patch: &Value) -> (u16, Value) {
    let req = http::Request::builder()
        .method("PATCH")
        .uri(path)
        .header("content-type", "application/merge-patch+json")
        .body(kube::client::Body::from(serde_json::to_vec(patch).unwrap()))
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.unwrap_or_default();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_rights_cannot_read_or_write_sync_targets() {
    let (hub, _dir) = hub_with(Duration::from_secs(60)).await;
    workspace(&hub, "org").await;
    create(&hub, "root:org", TARGETS, sync_target("east", json!([]))).await;
    // alice may read SyncTargets in root:org; mallory nothing.
    cluster_role(
        &hub,
        "root:org",
        "st-reader",
        json!([{"apiGroups": ["workload.kcp.io"], "resources": ["synctargets"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    bind_cluster_role(&hub, "root:org", "alice-reads", "st-reader", "alice").await;
    let alice = client_as(&hub, "root:org", token("alice-token")).await;
    get_ok(&alice, &format!("{TARGETS}/east")).await;
    // Reading is not writing: no heartbeat, no status, no spec for alice.
    let hb = json!({"status": {"lastSyncerHeartbeatTime": ferry_api::timestamp::now()}});
    let (code, _) = call_merge(&alice, &format!("{TARGETS}/east/status"), &hb).await;
    assert_eq!(code, 403);
    let (code, _) = call_merge(
        &alice,
        &format!("{TARGETS}/east"),
        &json!({"spec": {"unschedulable": true}}),
    )
    .await;
    assert_eq!(code, 403);

    let mallory = client_as(&hub, "root:org", token("mallory-token")).await;
    for (method, path, body) in [
        ("GET", format!("{TARGETS}/east"), None),
        ("GET", TARGETS.to_string(), None),
        ("POST", TARGETS.to_string(), Some(sync_target("evil", json!([])))),
        ("DELETE", format!("{TARGETS}/east"), None),
        ("GET", LOCATIONS.to_string(), None),
        ("GET", IMPORTS.to_string(), None),
        (
            "POST",
            IMPORTS.to_string(),
            Some(import(
                "x.east.v1.example.io",
                "east",
                "xs",
                "X",
                json!({"type": "object"}),
            )),
        ),
    ] {
        expect_status_because(
            &mallory,
            method,
            &path,
            body.as_ref(),
            403,
            format!("mallory {method} {path}"),
        )
        .await;
    }
    let (code, _) = call_merge(&mallory, &format!("{TARGETS}/east/status"), &hb).await;
    assert_eq!(code, 403);
    // Not through the all-workspaces view either.
    let everywhere = client_as(&hub, "*", token("mallory-token")).await;
    expect_status(&everywhere, "GET", TARGETS, None, 403).await;
    // The target is unharmed and never saw mallory's heartbeat.
    let (_, st) = call(
        &admin(&hub, "root:org").await,
        "GET",
        &format!("{TARGETS}/east"),
        None,
    )
    .await;
    assert!(st["status"]["lastSyncerHeartbeatTime"].is_null(), "{st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_compute_exports_kubernetes_and_binding_to_it_is_bound_with_built_ins_serving() {
    let (hub, _dir) = common::tenants::hub_with_tokens(TOKENS, |o| o.compute_workspace = true).await;
    // The workspace, its export and kcp's three schemas, from the hub's OpenAPI.
    let export = wait_for(
        &hub,
        "root:compute",
        &format!("{APIS}/apiexports/kubernetes"),
        "export identity",
        |o| o["status"]["identityHash"].is_string(),
    )
    .await;
    let names: Vec<String> = export["spec"]["latestResourceSchemas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 3, "{export}");
    let compute = admin(&hub, "root:compute").await;
    let mut deployment_schema = Value::Null;
    for (name, resource) in names.iter().zip(["deployments", "services", "ingresses"]) {
        assert!(
            name.ends_with(&format!(
                ".{resource}.{}",
                if resource == "services" {
                    "core"
                } else if resource == "deployments" {
                    "apps"
                } else {
                    "networking.k8s.io"
                }
            )),
            "{name}"
        );
        let s = get_ok(&compute, &format!("{APIS}/apiresourceschemas/{name}")).await;
        if resource == "deployments" {
            let v = &s["spec"]["versions"][0];
            assert_eq!(
                v["schema"]["properties"]["spec"]["properties"]["replicas"]["type"], "integer",
                "{s}"
            );
            assert!(v["subresources"]["scale"].is_object(), "{s}");
            deployment_schema = v["schema"].clone();
        }
    }

    // alice, allowed to create bindings in root:app only, binds it: every
    // authenticated user has `bind` on it.
    workspace(&hub, "app").await;
    cluster_role(
        &hub,
        "root:app",
        "binder",
        json!([{"apiGroups": ["apis.kcp.io"], "resources": ["apibindings"], "verbs": ["create", "get"]}]),
    )
    .await;
    bind_cluster_role(&hub, "root:app", "alice-binds", "binder", "alice").await;
    let alice = client_as(&hub, "root:app", token("alice-token")).await;
    let binding = json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": "kubernetes"},
        "spec": {"reference": {"export": {"path": "root:compute", "name": "kubernetes"}}}});
    post_created(&alice, &format!("{APIS}/apibindings"), &binding).await;
    let b = wait_for(
        &hub,
        "root:app",
        &format!("{APIS}/apibindings/kubernetes"),
        "Bound",
        |o| o["status"]["phase"] == "Bound",
    )
    .await;
    // A no-op: the three are the workspace's own built-ins, not bound from
    // the export (which never reaches a workspace's own objects).
    assert_eq!(b["status"]["boundResources"], json!([]), "{b}");
    assert_eq!(condition_status(&b, "Ready"), "True", "{b}");
    // The built-in Deployment still serves: defaulted and validated as one.
    let made = create(
        &hub,
        "root:app",
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kuard"},
               "spec": {"selector": {"matchLabels": {"app": "kuard"}},
                        "template": {"metadata": {"labels": {"app": "kuard"}},
                                     "spec": {"containers": [{"name": "kuard", "image": "gcr.io/kuar-demo/kuard-amd64:blue"}]}}}}),
    )
    .await;
    assert_eq!(made["spec"]["revisionHistoryLimit"], 10, "{made}");
    get_ok(
        &admin(&hub, "root:app").await,
        "/apis/apps/v1/namespaces/default/deployments/kuard/scale",
    )
    .await;

    // A SyncTarget supporting root:compute:kubernetes lists the three, and a
    // syncer importing the same Deployment schema (what a Ferry hub standing
    // in for a cluster serves) gets deployments Accepted.
    workspace(&hub, "org").await;
    let path = east_in_org(&hub, json!([{"export": "kubernetes", "path": "root:compute"}])).await;
    states_when(
        &hub,
        &path,
        "three Pending",
        &[
            ("services", "Pending"),
            ("deployments", "Pending"),
            ("ingresses", "Pending"),
        ],
    )
    .await;
    let mut deployments = import(
        "deployments.east.v1.apps",
        "east",
        "deployments",
        "Deployment",
        deployment_schema,
    );
    deployments["spec"]["groupVersion"] = json!({"group": "apps", "version": "v1"});
    create(&hub, "root:org", IMPORTS, deployments).await;
    let st = wait_for(&hub, "root:org", &path, "deployments Accepted", |o| {
        synced_states(o).contains(&("deployments".into(), "Accepted".into()))
    })
    .await;
    assert_eq!(
        st["status"]["syncedResources"][0]["identityHash"], export["status"]["identityHash"],
        "{st}"
    );
    // A target with no exports named gets the `kubernetes` export, which root:org
    // does not have: root:compute's, as the kcp workload syncer document's
    // path-less reference means (each resource Pending until its syncer imports).
    create(&hub, "root:org", TARGETS, sync_target("west", json!([]))).await;
    let west = wait_for(
        &hub,
        "root:org",
        &format!("{TARGETS}/west"),
        "west's resources",
        |o| o["status"]["virtualWorkspaces"].is_array() && o["status"]["syncedResources"].is_array(),
    )
    .await;
    assert!(
        synced_states(&west).contains(&("deployments".into(), "Pending".into())),
        "{west}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_no_export_serves_are_published_as_imported_apis_and_can_be_bound() {
    let (hub, _dir) = hub_with(Duration::from_secs(60)).await;
    workspace(&hub, "org").await;
    east_in_org(&hub, json!([{"export": "imported-apis"}])).await;
    let route_schema = |host_type: &str| {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"host": {"type": host_type}}},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    let mut routes = import(
        "routes.east.v1.route.openshift.io",
        "east",
        "routes",
        "Route",
        route_schema("string"),
    );
    routes["spec"]["groupVersion"] = json!({"group": "route.openshift.io", "version": "v1"});
    routes["spec"]["subResources"] = json!([{"name": "status"}]);
    create(&hub, "root:org", IMPORTS, routes).await;
    // ServiceAccounts a syncer imports are never published (no export may
    // serve a workspace's own), and do not hold up the rest.
    let mut accounts = import(
        "serviceaccounts.east.v1.core",
        "east",
        "serviceaccounts",
        "ServiceAccount",
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    );
    accounts["spec"]["groupVersion"] = json!({"group": "", "version": "v1"});
    create(&hub, "root:org", IMPORTS, accounts).await;
    // The export appears with a schema made from the import, and the target
    // that supports it accepts routes.
    let export = wait_for(
        &hub,
        "root:org",
        &format!("{APIS}/apiexports/imported-apis"),
        "imported-apis lists routes",
        |o| {
            o["spec"]["latestResourceSchemas"].as_array().is_some_and(|l| {
                l.len() == 1 && l[0].as_str().unwrap().ends_with(".routes.route.openshift.io")
            })
        },
    )
    .await;
    let first_schema = export["spec"]["latestResourceSchemas"][0]
        .as_str()
        .unwrap()
        .to_string();
    states_when(
        &hub,
        &format!("{TARGETS}/east"),
        "routes Accepted",
        &[("routes", "Accepted")],
    )
    .await;
    // A workspace binds it and serves routes.
    workspace(&hub, "app").await;
    create(
        &hub,
        "root:app",
        &format!("{APIS}/apibindings"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": "imported"},
               "spec": {"reference": {"export": {"path": "root:org", "name": "imported-apis"}}}}),
    )
    .await;
    wait_for(
        &hub,
        "root:app",
        &format!("{APIS}/apibindings/imported"),
        "Bound",
        |o| o["status"]["phase"] == "Bound",
    )
    .await;
    let app = admin(&hub, "root:app").await;
    let route = json!({"apiVersion": "route.openshift.io/v1", "kind": "Route", "metadata": {"name": "web"},
                       "spec": {"host": "web.example.com"}});
    eventually(20, "routes served in root:app", || async {
        let (code, _) = call(
            &app,
            "POST",
            "/apis/route.openshift.io/v1/namespaces/default/routes",
            Some(&route),
        )
        .await;
        (code == 201).then_some(())
    })
    .await;
    // The syncer re-imports a changed schema: a new schema replaces the old.
    let (code, body) = call_merge(
        &admin(&hub, "root:org").await,
        &format!("{IMPORTS}/routes.east.v1.route.openshift.io"),
        &json!({"spec": {"openAPIV3Schema": route_schema("integer")}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    wait_for(
        &hub,
        "root:org",
        &format!("{APIS}/apiexports/imported-apis"),
        "a new schema listed",
        |o| {
            o["spec"]["latestResourceSchemas"]
                .as_array()
                .is_some_and(|l| l.len() == 1 && l[0] != first_schema.as_str())
        },
    )
    .await;
    eventually_status(
        20,
        "the old schema deleted",
        &admin(&hub, "root:org").await,
        &format!("{APIS}/apiresourceschemas/{first_schema}"),
        404,
    )
    .await;
}
