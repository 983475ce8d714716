//! Shared setup for the KubeStellar placement tests: workspaces with the
//! edge API, inventory (SyncTarget and Location) with its mailbox, applying
//! objects, and reading what the translator placed and said.

use crate::TestHub;
use ferry_hub::controllers::placement::PLACED_LABEL;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

use crate::clients::client;
use crate::eventually;
pub use crate::resources::{ar, configmaps, deployments, secrets};

pub fn edge(kind: &str, plural: &str) -> ApiResource {
    ar("edge.kubestellar.io", "v2alpha1", kind, plural)
}

pub fn api(c: &kube::Client, r: &ApiResource, ns: Option<&str>) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(c.clone(), ns, r),
        None => Api::all_with(c.clone(), r),
    }
}

pub fn summaries() -> ApiResource {
    ar(
        "edge.ferry.dev",
        "v1alpha1",
        "PlacementSummary",
        "placementsummaries",
    )
}

/// Server-side apply, resolving the kind through discovery.
pub async fn apply(c: &kube::Client, doc: Value) -> DynamicObject {
    let api_version = doc["apiVersion"].as_str().unwrap();
    let kind = doc["kind"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (r, caps) = kube::discovery::pinned_kind(c, &GroupVersionKind::gvk(group, version, kind))
        .await
        .unwrap_or_else(|e| panic!("{kind} is not served: {e}"));
    let ns = doc.pointer("/metadata/namespace").and_then(Value::as_str);
    let a = match (caps.scope, ns) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => api(c, &r, Some(ns)),
        _ => api(c, &r, None),
    };
    let name = doc["metadata"]["name"].as_str().unwrap();
    a.patch(name, &PatchParams::apply("test").force(), &Patch::Apply(&doc))
        .await
        .unwrap_or_else(|e| panic!("applying {kind} {name}: {e}"))
}

/// A workspace under root with Ferry's CRDs installed (what `ferry ensure wmw` does);
/// returns its logical cluster name.
pub async fn workspace(hub: &TestHub, name: &str) -> String {
    let cluster = crate::workspaces::ready_workspace(hub, name).await;
    install_edge_api(&client(hub, &format!("root:{name}")).await).await;
    cluster
}

/// Install Ferry's CRDs as whoever `c` acts as, where it points (what
/// `ferry crds | kubectl apply -f -` does), and wait until EdgePlacements
/// are served there.
pub async fn install_edge_api(c: &kube::Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    for crd in ferry_api::all_crds() {
        match crds.create(&PostParams::default(), &crd).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    let placements = api(c, &edge("EdgePlacement", "edgeplacements"), None);
    eventually(10, "the edge API in the workspace", || {
        let placements = placements.clone();
        async move { placements.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// SyncTarget and Location `name` in `root:imw1`, as `ferry ensure location` makes them;
/// returns the mailbox workspace path once it serves the edge API.
pub async fn location(hub: &TestHub, imw_cluster: &str, name: &str, labels: Value) -> String {
    let imw = client(hub, "root:imw1").await;
    let mut target_labels = labels.clone();
    target_labels["id"] = json!(name);
    let st = apply(
        &imw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget",
               "metadata": {"name": name, "labels": target_labels}}),
    )
    .await;
    apply(
        &imw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Location",
               "metadata": {"name": name, "labels": labels},
               "spec": {"resource": {"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"},
                        "instanceSelector": {"matchLabels": {"id": name}}}}),
    )
    .await;
    let path = format!("root:{imw_cluster}-mb-{}", st.metadata.uid.unwrap());
    let mb = client(hub, &path).await;
    let configs = api(&mb, &edge("SyncerConfig", "syncerconfigs"), None);
    eventually(15, "the mailbox to serve SyncerConfigs", || {
        let configs = configs.clone();
        async move { configs.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
    path
}

/// A hub with root:imw1 (florin: env=prod; guilder: env=prod, extended=yes) and
/// root:wmw1; returns the mailbox paths of florin and guilder.
pub async fn example1(hub: &TestHub) -> (String, String) {
    let imw_cluster = workspace(hub, "imw1").await;
    workspace(hub, "wmw1").await;
    let florin = location(
        hub,
        &imw_cluster,
        "florin",
        json!({"loc-name": "florin", "env": "prod"}),
    )
    .await;
    let guilder = location(
        hub,
        &imw_cluster,
        "guilder",
        json!({"loc-name": "guilder", "env": "prod", "extended": "yes"}),
    )
    .await;
    (florin, guilder)
}

pub async fn get(c: &kube::Client, r: &ApiResource, ns: Option<&str>, name: &str) -> Option<DynamicObject> {
    api(c, r, ns).get_opt(name).await.unwrap()
}

/// Names of everything the translator placed in a mailbox (`resource ns/name`).
pub async fn placed(hub: &TestHub, mailbox: &str) -> Vec<String> {
    let mb = client(hub, mailbox).await;
    let lp = ListParams::default().labels(PLACED_LABEL);
    let mut out = Vec::new();
    for (r, namespaced) in [
        (ar("", "v1", "Namespace", "namespaces"), false),
        (configmaps(), true),
        (deployments(), true),
        (edge("SyncerConfig", "syncerconfigs"), false),
    ] {
        let list = if namespaced {
            Api::<DynamicObject>::all_with(mb.clone(), &r)
                .list(&lp)
                .await
                .unwrap()
        } else {
            api(&mb, &r, None).list(&lp).await.unwrap()
        };
        for o in list {
            out.push(format!(
                "{} {}{}",
                r.plural,
                o.metadata.namespace.map(|n| format!("{n}/")).unwrap_or_default(),
                o.metadata.name.unwrap()
            ));
        }
    }
    out.sort();
    out
}

pub async fn the_one(hub: &TestHub, mailbox: &str) -> Option<Value> {
    let mb = client(hub, mailbox).await;
    get(&mb, &edge("SyncerConfig", "syncerconfigs"), None, "the-one")
        .await
        .map(|o| o.data["spec"].clone())
}

pub fn condition(p: &DynamicObject, type_: &str) -> (String, String) {
    let c = p.data["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or(Value::Null);
    (
        c["status"].as_str().unwrap_or_default().to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// `kubectl ferry kubestellar init`'s ESPW, as admin: `root:espw` holding
/// the KubeStellar API's schemas, the APIExport `edge.kubestellar.io` and
/// the grant letting every authenticated user bind it. Returns the ESPW's
/// logical cluster.
pub async fn kubestellar_init(hub: &TestHub) -> String {
    let cluster = crate::workspaces::ready_workspace(hub, ferry_api::edge::espw::WORKSPACE).await;
    let espw = client(hub, ferry_api::edge::espw::PATH).await;
    eventually(10, "root:espw to serve", || {
        let espw = espw.clone();
        async move {
            kube::discovery::pinned_kind(
                &espw,
                &GroupVersionKind::gvk("apis.kcp.io", "v1alpha1", "APIExport"),
            )
            .await
            .ok()
        }
    })
    .await;
    for obj in ferry_api::edge::espw::objects() {
        apply(&espw, obj).await;
    }
    cluster
}

/// The APIBinding `name` of the ESPW's export in `c`'s workspace, once Bound
/// and EdgePlacements are served there.
pub async fn bind_espw(c: &kube::Client, name: &str) {
    let bindings = api(
        c,
        &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
        None,
    );
    let binding: DynamicObject = serde_json::from_value(ferry_api::edge::espw::binding(name)).unwrap();
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap_or_else(|e| panic!("binding root:espw as {name}: {e}"));
    eventually(15, "the binding to be Bound", || {
        let bindings = bindings.clone();
        async move {
            let b = bindings.get(name).await.ok()?;
            (b.data["status"]["phase"] == "Bound").then_some(())
        }
    })
    .await;
    served(c, "EdgePlacement", "edgeplacements").await;
}

/// Waits until `c`'s workspace serves the edge kind `kind` (`plural`).
pub async fn served(c: &kube::Client, kind: &str, plural: &str) {
    let a = api(c, &edge(kind, plural), None);
    eventually(15, &format!("{plural} to be served"), || {
        let a = a.clone();
        async move { a.list(&ListParams::default()).await.ok().map(|_| ()) }
    })
    .await;
}

/// Stands in for the KubeStellar syncer of `mailbox` for the rest of the
/// test: writes on `the-one` what a running syncer writes (a heartbeat, and
/// `SyncerReady` at the generation it read), again whenever the generation
/// moves or the heartbeat is a few seconds old, so the mailbox's copies
/// count as synced. Tests of what a real syncer does start one instead.
pub async fn stand_in_syncer(hub: &TestHub, mailbox: &str) -> tokio::task::JoinHandle<()> {
    let client = client(hub, mailbox).await;
    tokio::spawn(async move {
        let configs = api(&client, &edge("SyncerConfig", "syncerconfigs"), None);
        let mut written: Option<(i64, std::time::Instant)> = None;
        loop {
            if let Ok(Some(one)) = configs.get_opt("the-one").await {
                let generation = one.metadata.generation.unwrap_or(0);
                let due = written.is_none_or(|(g, at)| g != generation || at.elapsed().as_secs() >= 5);
                if due {
                    let now = ferry_api::timestamp::now();
                    let status = json!({"status": {"lastSyncerHeartbeatTime": now, "conditions": [
                        {"type": "SyncerReady", "status": "True", "reason": "Ready", "message": "stand-in",
                         "observedGeneration": generation, "lastTransitionTime": now}]}});
                    if configs
                        .patch_status("the-one", &PatchParams::default(), &Patch::Merge(&status))
                        .await
                        .is_ok()
                    {
                        written = Some((generation, std::time::Instant::now()));
                    }
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    })
}

pub fn status_collectors() -> ApiResource {
    ar(
        "control.kubestellar.io",
        "v1alpha1",
        "StatusCollector",
        "statuscollectors",
    )
}

pub fn combined_statuses() -> ApiResource {
    ar(
        "control.kubestellar.io",
        "v1alpha1",
        "CombinedStatus",
        "combinedstatuses",
    )
}

/// What a cluster's syncer does when the cluster reports on a copy: writes
/// the copy's status in the mailbox (`r`'s status subresource).
pub async fn return_status(
    hub: &TestHub,
    mailbox: &str,
    r: &ApiResource,
    ns: &str,
    name: &str,
    status: Value,
) {
    let mb = client(hub, mailbox).await;
    api(&mb, r, Some(ns))
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("returning the status of {ns}/{name} into {mailbox}: {e}"));
}

/// The CombinedStatus the hub keeps for EdgePlacement `placement` in
/// namespace `ns` of `c`'s workspace, if any.
pub async fn combined_status(c: &kube::Client, ns: &str, placement: &str) -> Option<Value> {
    let lp = ListParams::default().labels(&format!("status.kubestellar.io/binding-policy={placement}"));
    let list = api(c, &combined_statuses(), Some(ns)).list(&lp).await.ok()?;
    list.items
        .into_iter()
        .next()
        .map(|o| serde_json::to_value(o).unwrap())
}

/// The CombinedStatus of `placement`'s object in `ns`, once `check` holds
/// for it (waiting up to `secs`).
pub async fn combined_status_when(
    c: &kube::Client,
    ns: &str,
    placement: &str,
    secs: u64,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let check = &check;
    eventually(secs, what, || async move {
        let cs = combined_status(c, ns, placement).await?;
        check(&cs).then_some(cs)
    })
    .await
}

/// A status collector `lagging`: the clusters (name and region) whose copy
/// has fewer available replicas than it asks for.
pub fn lagging_collector() -> Value {
    collector(
        "lagging",
        json!({"filter": "obj.spec.replicas != returned.status.availableReplicas",
               "select": [{"name": "wec", "def": "inventory.name"},
                          {"name": "region", "def": "inventory.labels.region"}]}),
    )
}

/// `kubectl get combinedstatuses -n <ns>` in `workspace`: the table it prints.
pub fn combined_status_table(hub: &TestHub, workspace: &str, ns: &str) -> String {
    let out = hub.kubectl_in(workspace, &["get", "combinedstatuses", "-n", ns], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The rows of result `name` of a CombinedStatus, as plain JSON values.
pub fn result_rows(cs: &Value, name: &str) -> Option<Vec<Vec<Value>>> {
    let result = cs["results"].as_array()?.iter().find(|r| r["name"] == name)?;
    let rows = result["rows"].as_array().cloned().unwrap_or_default();
    Some(
        rows.iter()
            .map(|row| {
                row["columns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| match c["type"].as_str() {
                        Some("Number") => {
                            serde_json::from_str(c["float"].as_str().unwrap()).unwrap_or(Value::Null)
                        }
                        Some("String") => c["string"].clone(),
                        Some("Bool") => c["bool"].clone(),
                        Some("Object") => c["object"].clone(),
                        Some("Array") => c["array"].clone(),
                        _ => Value::Null,
                    })
                    .collect()
            })
            .collect(),
    )
}

// ---- combined status: Deployment shop/web placed with StatusCollectors

/// Namespace `shop` and Deployment `shop/web` (2 replicas) in `c`'s workspace.
pub async fn web(c: &kube::Client) {
    apply(
        c,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
    )
    .await;
    apply(
        c,
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}}),
    )
    .await;
}

/// StatusCollectors `broken` (a filter that does not parse) and `count`
/// (the clusters reporting) in `c`'s workspace.
pub async fn broken_and_count_collectors(c: &kube::Client) {
    apply(
        c,
        collector(
            "broken",
            json!({"filter": "returned.status.(", "combinedFields": [{"name": "n", "type": "COUNT"}]}),
        ),
    )
    .await;
    apply(
        c,
        collector(
            "count",
            json!({"combinedFields": [{"name": "n", "type": "COUNT"}]}),
        ),
    )
    .await;
}

/// StatusCollector `broken` of [`broken_and_count_collectors`] once its
/// `Valid` condition is False, after checking its message names the field.
pub async fn broken_collector_reported(c: &kube::Client) -> DynamicObject {
    let collectors = api(c, &status_collectors(), None);
    let broken = eventually(10, "broken's Valid condition", || {
        let collectors = collectors.clone();
        async move {
            let b = collectors.get("broken").await.ok()?;
            (condition(&b, "Valid").0 == "False").then_some(b)
        }
    })
    .await;
    let (_, message) = condition(&broken, "Valid");
    assert!(
        message.starts_with("spec.filter: ") && message.contains("fix its syntax"),
        "{message}"
    );
    broken
}

/// Waits (20 s) until `placement`'s CombinedStatus in `ns` of `c`'s workspace
/// is gone.
pub async fn combined_status_gone(c: &kube::Client, ns: &str, placement: &str, what: &str) {
    eventually(20, what, || async {
        combined_status(c, ns, placement).await.is_none().then_some(())
    })
    .await;
}

/// Every CombinedStatus in `ns` of `c`'s workspace.
pub async fn combined_statuses_in(c: &kube::Client, ns: &str) -> Vec<DynamicObject> {
    api(c, &combined_statuses(), Some(ns))
        .list(&Default::default())
        .await
        .expect("listing CombinedStatuses")
        .items
}

/// Asserts the built-in availability of a CombinedStatus over florin,
/// guilder and pound reporting [`available`] 2, 2 and 1: a row per cluster
/// and 5 of 6 replicas on 3 clusters in total.
pub fn assert_five_of_six_available(cs: &Value) {
    assert_eq!(
        result_rows(cs, "builtin:availability").unwrap(),
        vec![
            vec![json!("florin"), json!(2), json!(2)],
            vec![json!("guilder"), json!(2), json!(2)],
            vec![json!("pound"), json!(1), json!(2)],
        ]
    );
    assert_eq!(
        result_rows(cs, "builtin:availability-total").unwrap(),
        vec![vec![json!(3), json!(5), json!(6)]]
    );
}

/// Asserts that a CombinedStatus followed a cluster's change within a second of `changed`.
pub fn assert_followed_within_a_second(changed: std::time::Instant) {
    let took = changed.elapsed();
    assert!(
        took < std::time::Duration::from_secs(1),
        "the combined status followed in {took:?}"
    );
}

/// The error of result `name` of a CombinedStatus; it must have one.
pub fn result_error(cs: &Value, name: &str) -> String {
    result_named(cs, name)["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error on result {name}: {cs}"))
        .to_string()
}

/// Result `name` of a CombinedStatus; it must be there.
pub fn result_named(cs: &Value, name: &str) -> Value {
    cs["results"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no result {name}: {cs}"))
}

pub fn collector(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "control.kubestellar.io/v1alpha1", "kind": "StatusCollector",
           "metadata": {"name": name}, "spec": spec})
}

/// StatusCollector `name` listing what each cluster returned (`wec`, `status`).
pub fn statuses_collector(name: &str) -> Value {
    collector(
        name,
        json!({"select": [{"name": "wec", "def": "inventory.name"}, {"name": "status", "def": "returned.status"}]}),
    )
}

/// EdgePlacement `name` sending the Deployments of `shop` to `selector`'s
/// Locations, combining their status with `collectors`.
pub async fn place_web(c: &kube::Client, name: &str, selector: Value, collectors: &[&str]) {
    apply(
        c,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
               "metadata": {"name": name},
               "spec": {"locationSelectors": [selector],
                        "downsync": [{"apiGroup": "apps", "resources": ["deployments"], "namespaces": ["shop"],
                                      "statusCollectors": collectors}]}}),
    )
    .await;
}

pub async fn copies_in(hub: &TestHub, mailboxes: &[String]) {
    for mb in mailboxes {
        let mbc = client(hub, mb).await;
        eventually(20, &format!("the Deployment's copy in {mb}"), || {
            let mbc = mbc.clone();
            async move { get(&mbc, &deployments(), Some("shop"), "web").await.map(|_| ()) }
        })
        .await;
    }
}

pub fn available(n: i64) -> Value {
    json!({"replicas": 2, "readyReplicas": n, "availableReplicas": n,
           "conditions": [{"type": "Available", "status": if n == 2 { "True" } else { "False" }}]})
}

/// [`available`] `n`, its Available condition saying `message` (what a
/// tenant's test plants to see whether it leaks).
pub fn available_saying(n: i64, message: &str) -> Value {
    let mut status = available(n);
    status["conditions"][0]["message"] = json!(message);
    status
}

// ---- drift and refusals: what a cluster's syncer reports on `the-one`

/// What a cluster's syncer writes on `the-one` in `mailbox` once it has
/// restored the copy of `resource` (`group/resource`, `core/...` for the
/// core group) `ns`/`name`, changed in its cluster in `fields`.
pub async fn report_drift(
    hub: &TestHub,
    mailbox: &str,
    resource: &str,
    ns: &str,
    name: &str,
    fields: &[&str],
) {
    let drifted = json!([{"resource": resource, "namespace": ns, "name": name,
                          "drift": {"time": ferry_api::timestamp::now(), "fields": fields, "corrections": 1}}]);
    let what = format!("the drift of {ns}/{name} reported in {mailbox}");
    report(hub, mailbox, &what, json!({"drifted": drifted})).await;
}

/// What a cluster's syncer writes on `the-one` in `mailbox` once its API
/// server refused the copy of `resource` (as in [`report_drift`]) `ns`/`name`
/// with `message`.
pub async fn report_refusal(
    hub: &TestHub,
    mailbox: &str,
    resource: &str,
    ns: &str,
    name: &str,
    message: &str,
) {
    let refused = json!([{"resource": resource, "namespace": ns, "name": name, "side": "downstream", "message": message}]);
    let what = format!("the refusal of {ns}/{name} reported in {mailbox}");
    report(
        hub,
        mailbox,
        &what,
        json!({"refused": refused, "refusedCount": 1}),
    )
    .await;
}

/// Merge `status` into `the-one`'s status in `mailbox`, as its syncer does.
async fn report(hub: &TestHub, mailbox: &str, what: &str, status: Value) {
    let mb = client(hub, mailbox).await;
    let patch = json!({ "status": status });
    let configs = api(&mb, &edge("SyncerConfig", "syncerconfigs"), None);
    eventually(15, what, || {
        let (configs, patch) = (configs.clone(), patch.clone());
        async move {
            configs
                .patch_status("the-one", &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .ok()
                .map(drop)
        }
    })
    .await;
}

/// The PlacementSummary of the Deployment `shop/web` in `c`'s workspace, if any.
pub async fn web_summary(c: &kube::Client) -> Option<Value> {
    let name = ferry_api::edge::PlacementSummary::name_for("apps", "deployments", "shop", "web");
    get(c, &summaries(), None, &name)
        .await
        .map(|o| serde_json::to_value(o).unwrap())
}

/// The drift the PlacementSummary `summary` lists for destination `cluster`.
pub fn drift_on(summary: &Value, cluster: &str) -> Option<Value> {
    summary["destinations"]
        .as_array()?
        .iter()
        .find(|d| d["cluster"] == cluster)?
        .get("drift")
        .cloned()
}
