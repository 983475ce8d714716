//! Stored input can never crash or stall the hub, tried from an attacker's
//! side: tenant `mal`, cluster-admin of `root:mal` only, writes what once
//! aborted the hub (a Customizer path of 50,000 steps) or kept a core busy
//! (a Placement of 120,000 `NotIn` values). Each is refused when written,
//! with kube's `Too long` / `Too many` naming the field; what an older hub
//! stored anyway is reported and survived; what is within the limits works.

mod common;

use common::tenants::{install_ferry_crds, Tenants};
use common::{
    admin, call, delete_ok, eventually, eventually_status, expect_status, expect_status_because, get_ok,
    post_created,
};
use ferry_hub::storage::{Expect, ObjectKey};
use serde_json::{json, Value};

const CUSTOMIZERS: &str = "/apis/edge.kubestellar.io/v2alpha1/namespaces/default/customizers";
const EDGE_PLACEMENTS: &str = "/apis/edge.kubestellar.io/v2alpha1/edgeplacements";
const PLACEMENTS: &str = "/apis/scheduling.kcp.io/v1alpha1/placements";

fn customizer(name: &str, path: &str) -> Value {
    json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Customizer",
           "metadata": {"name": name, "namespace": "default"},
           "replacements": [{"path": path, "value": "\"x\""}]})
}

/// A path of `$.data` and `steps` more `.a` steps.
fn deep_path(steps: usize) -> String {
    format!("$.data{}", ".a".repeat(steps))
}

/// The `(field, message)` causes of a 422.
fn causes(body: &Value) -> Vec<(String, String)> {
    body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["field"].as_str().unwrap_or_default().to_string(),
                c["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// `n` selectors of one `NotIn` expression of `values` values each.
fn not_in_selectors(n: usize, values: usize) -> Value {
    let values: Vec<String> = (0..values).map(|i| format!("value-{i}")).collect();
    json!((0..n)
        .map(|i| json!({"matchExpressions": [{"key": format!("key-{i}"), "operator": "NotIn", "values": values}]}))
        .collect::<Vec<_>>())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_customizer_path_of_50000_steps_is_refused_when_written_and_a_normal_one_is_kept() {
    let t = Tenants::start().await;
    t.workspace("mal", Some("mal")).await;
    let mal = t.client_as("mal", "root:mal").await;
    install_ferry_crds(&mal).await;

    let body = expect_status(
        &mal,
        "POST",
        CUSTOMIZERS,
        Some(&customizer("deep", &deep_path(50_000))),
        422,
    )
    .await;
    assert_eq!(
        causes(&body),
        [(
            "replacements[0].path".to_string(),
            "Too long: may not be more than 1024 bytes".to_string()
        )]
    );
    // Short enough in bytes, too many steps.
    let body = expect_status(
        &mal,
        "POST",
        CUSTOMIZERS,
        Some(&customizer("steps", &deep_path(64))),
        422,
    )
    .await;
    assert_eq!(
        causes(&body)[0].1,
        "Too many: 65: must have at most 64 items (path steps)"
    );
    // Nor can an update make it so.
    let (code, body) = call(
        &mal,
        "POST",
        CUSTOMIZERS,
        Some(&customizer("fine", "$.data.greeting")),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let api: kube::Api<kube::api::DynamicObject> = kube::Api::namespaced_with(
        mal.clone(),
        "default",
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", "Customizer"),
            "customizers",
        ),
    );
    let err = api
        .patch(
            "fine",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"replacements": [{"path": deep_path(200), "value": "1"}]})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 422 && e.message.contains("replacements[0].path")),
        "{err}"
    );
    // The positive twin: the normal Customizer is as written.
    let body = get_ok(&mal, &format!("{CUSTOMIZERS}/fine")).await;
    assert_eq!(body["replacements"][0]["path"], "$.data.greeting");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_placement_of_120000_values_is_refused_and_one_at_the_limits_schedules_without_write_loops() {
    let t = Tenants::start().await;
    let mal_cluster = t.workspace("mal", Some("mal")).await;
    let mal = t.client_as("mal", "root:mal").await;
    install_ferry_crds(&mal).await;

    // TMC: 10 selectors of 12,000 NotIn values (~1.3 MB).
    let attack = json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
        "metadata": {"name": "burn"}, "spec": {"locationSelectors": not_in_selectors(10, 12_000)}});
    let (code, body) = call(&mal, "POST", PLACEMENTS, Some(&attack)).await;
    assert_eq!(
        code,
        422,
        "{}",
        &body.to_string()[..body.to_string().len().min(2000)]
    );
    let found = causes(&body);
    assert!(
        found.contains(&(
            "spec.locationSelectors[0].matchExpressions[0].values".to_string(),
            "Too many: 12000: must have at most 256 items".to_string()
        )),
        "{found:?}"
    );
    // One an older hub stored anyway selects nothing and says why.
    let mut stored = attack.clone();
    stored["metadata"]["uid"] = json!("6d1f0c55-0000-4000-8000-000000000002");
    stored["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    stored["spec"]["locationResource"] =
        json!({"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"});
    let key = ObjectKey {
        cluster: mal_cluster,
        resource: "scheduling.kcp.io/placements".into(),
        namespace: String::new(),
        name: "burn".into(),
    };
    let store = &t.hub.running.hub.store;
    store
        .put(key, Expect::Absent, stored)
        .unwrap()
        .durable()
        .await
        .unwrap();
    let message = eventually(20, "the stored Placement to say it is too large", || {
        let mal = mal.clone();
        async move {
            let (_, p) = call(&mal, "GET", &format!("{PLACEMENTS}/burn"), None).await;
            let c = p["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["reason"] == "SelectorTooLarge")?;
            c["message"].as_str().map(String::from)
        }
    })
    .await;
    assert!(message.contains("must have at most 256 items"), "{message}");
    delete_ok(&mal, &format!("{PLACEMENTS}/burn")).await;

    // KubeStellar: the same selectors on an EdgePlacement.
    let edge = json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
        "metadata": {"name": "burn"}, "spec": {"locationSelectors": not_in_selectors(10, 12_000)}});
    let body = expect_status(&mal, "POST", EDGE_PLACEMENTS, Some(&edge), 422).await;
    assert!(
        causes(&body)[0].0.starts_with("spec.locationSelectors[0]"),
        "{:?}",
        causes(&body)
    );

    // At the limits: four selectors of 256 values (1,024 in all), a SyncTarget
    // and namespaces to schedule. Accepted, and it schedules.
    let at_limits = json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
        "metadata": {"name": "wide"}, "spec": {"locationSelectors": not_in_selectors(4, 256)}});
    let (code, body) = call(&mal, "POST", PLACEMENTS, Some(&at_limits)).await;
    assert_eq!(
        code,
        201,
        "{}",
        &body.to_string()[..body.to_string().len().min(2000)]
    );
    post_created(
        &mal,
        "/apis/workload.kcp.io/v1alpha1/synctargets",
        &json!({"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget", "metadata": {"name": "east"}}),
    )
    .await;
    let namespaces: Vec<String> = (0..20).map(|i| format!("work-{i}")).collect();
    for ns in &namespaces {
        post_created(
            &mal,
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        )
        .await;
    }
    let scheduled = |mal: kube::Client, ns: String| async move {
        let (_, n) = call(&mal, "GET", &format!("/api/v1/namespaces/{ns}"), None).await;
        n["metadata"]["labels"]
            .as_object()
            .is_some_and(|l| l.keys().any(|k| k.starts_with("state.workload.kcp.io/")))
    };
    for ns in &namespaces {
        eventually(20, &format!("{ns} to be scheduled"), || {
            let (mal, ns) = (mal.clone(), ns.clone());
            async move { scheduled(mal, ns).await.then_some(()) }
        })
        .await;
    }
    // Quiet now: the Placement is Bound and nothing rewrites it.
    let store = t.hub.running.hub.store.clone();
    let settled = eventually(20, "the Placement to be Bound", || {
        let mal = mal.clone();
        async move {
            let (_, p) = call(&mal, "GET", &format!("{PLACEMENTS}/wide"), None).await;
            (p["status"]["phase"] == "Bound").then(|| p["metadata"]["resourceVersion"].clone())
        }
    })
    .await;
    // Twenty namespace changes: each costs the scheduler a bounded number of
    // writes (its label on the namespace at most), never a loop.
    let before = store.resource_version();
    for ns in &namespaces {
        let patch = kube::api::Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
        let nss: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(mal.clone());
        nss.patch(ns, &kube::api::PatchParams::default(), &patch)
            .await
            .unwrap();
    }
    for ns in &namespaces {
        assert!(scheduled(mal.clone(), ns.clone()).await, "{ns} stays scheduled");
    }
    let (_, p) = call(&mal, "GET", &format!("{PLACEMENTS}/wide"), None).await;
    assert_eq!(
        p["metadata"]["resourceVersion"], settled,
        "the Placement is not rewritten"
    );
    let writes = store.resource_version() - before;
    assert!(
        writes <= 3 * namespaces.len() as u64,
        "{writes} writes for {} namespace changes: something writes in a loop",
        namespaces.len()
    );
}

/// An EdgePlacement in `root:wmw` sending ConfigMaps of `commonstuff` to the
/// one Location of `root:imw`; returns the WMW's logical cluster and the
/// mailbox's path.
async fn placed_configmaps(t: &Tenants) -> (String, String) {
    let imw = t.workspace("imw", None).await;
    let wmw = t.workspace("wmw", None).await;
    let hub = &t.hub;
    install_ferry_crds(&admin(hub, "root:imw").await).await;
    install_ferry_crds(&admin(hub, "root:wmw").await).await;
    let st = common::create(
        hub,
        "root:imw",
        "/apis/edge.kubestellar.io/v2alpha1/synctargets",
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget",
               "metadata": {"name": "florin", "labels": {"id": "florin"}}}),
    )
    .await;
    common::create(
        hub,
        "root:imw",
        "/apis/edge.kubestellar.io/v2alpha1/locations",
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Location",
               "metadata": {"name": "florin", "labels": {"env": "prod"}},
               "spec": {"resource": {"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"},
                        "instanceSelector": {"matchLabels": {"id": "florin"}}}}),
    )
    .await;
    let mailbox = format!("root:{imw}-mb-{}", st["metadata"]["uid"].as_str().unwrap());
    common::create(
        hub,
        "root:wmw",
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "commonstuff"}}),
    )
    .await;
    common::create(
        hub,
        "root:wmw",
        EDGE_PLACEMENTS,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
               "metadata": {"name": "customized"},
               "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                        "downsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["commonstuff"]}]}}),
    )
    .await;
    (wmw, mailbox)
}

fn configmap(name: &str, customizer: Option<&str>) -> Value {
    let annotations = match customizer {
        Some(c) => json!({"edge.kubestellar.io/customizer": c}),
        None => json!({}),
    };
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "commonstuff", "annotations": annotations},
           "data": {"greeting": "hello"}})
}

/// ConfigMap `name` in `commonstuff` of `workspace`, once `done` holds for it.
async fn wait_configmap(t: &Tenants, workspace: &str, name: &str, done: impl Fn(&Value) -> bool) {
    let c = admin(&t.hub, workspace).await;
    let path = format!("/api/v1/namespaces/commonstuff/configmaps/{name}");
    eventually(30, &format!("{name} in {workspace}"), || {
        let (c, path, done) = (c.clone(), path.clone(), &done);
        async move {
            let (code, cm) = call(&c, "GET", &path, None).await;
            (code == 200 && done(&cm)).then_some(())
        }
    })
    .await;
}

/// The `CustomizationError` message of EdgePlacement `customized`, once it names `want`.
async fn customization_error(hub: &ferry_testkit::TestHub, want: &str) -> String {
    let c = admin(hub, "root:wmw").await;
    eventually(30, &format!("CustomizationError naming {want:?}"), || {
        let c = c.clone();
        async move {
            let (_, p) = call(&c, "GET", &format!("{EDGE_PLACEMENTS}/customized"), None).await;
            p["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "CustomizationError" && c["status"] == "True")
                .and_then(|c| c["message"].as_str())
                .filter(|m| m.contains(want))
                .map(String::from)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deep_customizer_an_older_hub_stored_is_reported_and_the_hub_restarts_ready() {
    let t = Tenants::start().await;
    let (wmw, mailbox) = placed_configmaps(&t).await;
    // The positive twin first: a normal Customizer customizes the copy.
    post_created(
        &admin(&t.hub, "root:wmw").await,
        "/apis/edge.kubestellar.io/v2alpha1/namespaces/commonstuff/customizers",
        &json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Customizer",
                     "metadata": {"name": "normal", "namespace": "commonstuff"},
                     "replacements": [{"path": "$.data.greeting", "value": "\"customized\""}]}),
    )
    .await;
    common::create(
        &t.hub,
        "root:wmw",
        "/api/v1/namespaces/commonstuff/configmaps",
        configmap("fine", Some("normal")),
    )
    .await;
    wait_configmap(&t, &mailbox, "fine", |cm| cm["data"]["greeting"] == "customized").await;

    // What a hub without limits stored: the 50,000-step Customizer, put
    // straight into storage, and a ConfigMap naming it.
    let mut deep = customizer("deep", &deep_path(50_000));
    deep["metadata"] = json!({"name": "deep", "namespace": "commonstuff", "uid": "6d1f0c55-0000-4000-8000-000000000001",
                              "creationTimestamp": "2026-01-01T00:00:00Z"});
    t.hub
        .running
        .hub
        .store
        .put(
            ObjectKey {
                cluster: wmw.clone(),
                resource: "edge.kubestellar.io/customizers".into(),
                namespace: "commonstuff".into(),
                name: "deep".into(),
            },
            Expect::Absent,
            deep,
        )
        .unwrap()
        .durable()
        .await
        .unwrap();
    common::create(
        &t.hub,
        "root:wmw",
        "/api/v1/namespaces/commonstuff/configmaps",
        configmap("victim", Some("deep")),
    )
    .await;
    let message = customization_error(&t.hub, "more than the limit of 64").await;
    assert!(message.contains("Customizer commonstuff/deep"), "{message}");
    assert!(
        message.len() < 2000,
        "the path is cut short in the message: {} bytes",
        message.len()
    );

    // The hub restarts on the same data directory: ready, still reporting
    // the Customizer, and still placing everything else.
    let (hub, ()) = t.hub.restart_after(async {}).await;
    let root = admin(&hub, "root").await;
    get_ok(&root, "/readyz").await;
    customization_error(&hub, "more than the limit of 64").await;
    common::create(
        &hub,
        "root:wmw",
        "/api/v1/namespaces/commonstuff/configmaps",
        configmap("after", None),
    )
    .await;
    let c = admin(&hub, &mailbox).await;
    eventually_status(
        30,
        "a new ConfigMap placed after the restart",
        &c,
        "/api/v1/namespaces/commonstuff/configmaps/after",
        200,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_object_nested_deeper_than_can_be_read_back_is_refused_with_the_field() {
    let t = Tenants::start().await;
    t.workspace("mal", Some("mal")).await;
    let mal = t.client_as("mal", "root:mal").await;
    // Any kind that keeps unknown fields will do: a CRD the tenant installs.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.mal.example"},
        "spec": {"group": "mal.example", "scope": "Namespaced",
                 "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    post_created(&mal, common::tenants::CRDS, &crd).await;
    let things = "/apis/mal.example/v1/namespaces/default/things";
    eventually(15, "things to be served", || {
        let mal = mal.clone();
        async move { (call(&mal, "GET", things, None).await.0 == 200).then_some(()) }
    })
    .await;
    let nest = |n: usize| (0..n).fold(json!("x"), |v, _| json!({"a": v}));
    expect_status_because(
        &mal,
        "POST",
        things,
        Some(&json!({"apiVersion": "mal.example/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": nest(100)})),
        201,
        "the positive twin: 100 levels are stored",
    )
    .await;
    // A JSON patch adds 100 more levels under the 100 there.
    let path = format!("/spec{}", "/a".repeat(99));
    let req = http::Request::builder()
        .method("PATCH")
        .uri(format!("{things}/t"))
        .header(http::header::CONTENT_TYPE, "application/json-patch+json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&json!([{"op": "add", "path": path, "value": nest(100)}])).unwrap(),
        ))
        .unwrap();
    let resp = mal.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let body: Value = serde_json::from_slice(&resp.into_body().collect_bytes().await.unwrap()).unwrap();
    assert_eq!(code, 422, "{body}");
    let found = causes(&body);
    assert!(found[0].0.starts_with("spec.a.a.a"), "{found:?}");
    assert!(found[0].1.contains("at most 128 levels"), "{found:?}");
    // The object and the list of its kind still read.
    let list = get_ok(&mal, things).await;
    assert_eq!(list["items"][0]["metadata"]["name"], "t");
}
