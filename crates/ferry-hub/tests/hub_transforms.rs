//! User transforms (KubeStellar's CustomTransform) in the placement
//! translator: a WMW's transforms strip their paths from every mailbox copy
//! of the objects they name and carry their owned-downstream fields along,
//! while the WMW object keeps everything; a transform in another tenant's
//! workspace changes nothing of alice's; a bad path is refused on write.

mod common;

use common::edge::*;
use common::tenants::{bind_cluster_role, install_ferry_crds, Tenants};
use common::{client, eventually, expect_status, post_created};
use ferry_api::well_known::OWNED_DOWNSTREAM_ANNOTATION;
use ferry_hub::controllers::placement::transform::TRANSFORMED_BY_ANNOTATION;
use ferry_testkit::TestHub;
use kube::api::DeleteParams;
use serde_json::{json, Value};

const TRANSFORMS: &str = "/apis/control.kubestellar.io/v1alpha1/customtransforms";

fn custom_transforms() -> kube::core::ApiResource {
    ar(
        "control.kubestellar.io",
        "v1alpha1",
        "CustomTransform",
        "customtransforms",
    )
}

/// What the example removes from Deployments, and the replicas an
/// autoscaler in each cluster owns.
fn strip_placement_details(name: &str) -> Value {
    json!({"apiVersion": "control.kubestellar.io/v1alpha1", "kind": "CustomTransform",
           "metadata": {"name": name},
           "spec": {"apiGroup": "apps", "resource": "deployments",
                    "remove": ["$.spec.template.spec.nodeSelector", "$.metadata.annotations['team.example/owner']"],
                    "ownedDownstream": [{"condition": "OnSpokePresent", "jsonPaths": ["$.spec.replicas"]}]}})
}

/// example1's inventory administered by alice, and root:wmw1 hers too;
/// returns the mailboxes of florin and guilder and alice's client in wmw1.
async fn alices_world(t: &Tenants) -> (String, String, kube::Client) {
    let (florin, guilder) = example1(&t.hub).await;
    bind_cluster_role(&t.hub, "root:imw1", "alice-admin", "cluster-admin", "alice").await;
    bind_cluster_role(&t.hub, "root:wmw1", "alice-admin", "cluster-admin", "alice").await;
    (florin, guilder, t.client_as("alice", "root:wmw1").await)
}

/// Alice's Deployment `web` (with a nodeSelector and an owner annotation),
/// placed on every prod Location.
async fn place_web(alice: &kube::Client) {
    apply(
        alice,
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "default", "annotations": {"team.example/owner": "alice"}},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"nodeSelector": {"disk": "ssd"},
                                              "containers": [{"name": "web", "image": "nginx:1.25"}]}}}}),
    )
    .await;
    apply(
        alice,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
               "metadata": {"name": "web"},
               "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                        "downsync": [{"apiGroup": "apps", "resources": ["deployments"],
                                      "namespaces": ["default"], "objectNames": ["web"]}]}}),
    )
    .await;
}

/// The copy of `web` in `mailbox` once it satisfies `pred`.
async fn copy_of_web(hub: &TestHub, mailbox: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let mb = client(hub, mailbox).await;
    eventually(20, what, || {
        let mb = mb.clone();
        let pred = &pred;
        async move {
            let d = get(&mb, &deployments(), Some("default"), "web").await?;
            let v = serde_json::to_value(d).ok()?;
            pred(&v).then_some(v)
        }
    })
    .await
}

fn node_selector(d: &Value) -> &Value {
    &d["spec"]["template"]["spec"]["nodeSelector"]
}

fn annotation<'a>(d: &'a Value, key: &str) -> Option<&'a str> {
    d["metadata"]["annotations"][key].as_str()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_custom_transform_strips_every_copy_and_the_wmw_object_keeps_its_fields() {
    let t = Tenants::start().await;
    let (florin, guilder, alice) = alices_world(&t).await;
    apply(&alice, strip_placement_details("strip")).await;
    place_web(&alice).await;

    for mailbox in [&florin, &guilder] {
        let copy = copy_of_web(&t.hub, mailbox, "the transformed copy", |d| {
            annotation(d, TRANSFORMED_BY_ANNOTATION).is_some()
        })
        .await;
        assert!(node_selector(&copy).is_null(), "{mailbox}: {copy}");
        assert_eq!(annotation(&copy, "team.example/owner"), None, "{mailbox}");
        assert_eq!(copy["spec"]["replicas"], 2, "what is not removed is copied");
        let owned: Value =
            serde_json::from_str(annotation(&copy, OWNED_DOWNSTREAM_ANNOTATION).unwrap()).unwrap();
        assert_eq!(
            owned,
            json!([{"condition": "OnSpokePresent", "jsonPaths": ["$.spec.replicas"]}])
        );
    }
    let source = get(&alice, &deployments(), Some("default"), "web").await.unwrap();
    let source = serde_json::to_value(source).unwrap();
    assert_eq!(node_selector(&source), &json!({"disk": "ssd"}));
    assert_eq!(annotation(&source, "team.example/owner"), Some("alice"));

    // Deleting the transform gives the copies their fields back.
    api(&alice, &custom_transforms(), None)
        .delete("strip", &DeleteParams::default())
        .await
        .unwrap();
    for mailbox in [&florin, &guilder] {
        let copy = copy_of_web(&t.hub, mailbox, "the untransformed copy", |d| {
            annotation(d, TRANSFORMED_BY_ANNOTATION).is_none()
        })
        .await;
        assert_eq!(node_selector(&copy), &json!({"disk": "ssd"}), "{mailbox}");
        assert_eq!(annotation(&copy, "team.example/owner"), Some("alice"));
        assert_eq!(annotation(&copy, OWNED_DOWNSTREAM_ANNOTATION), None);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transform_in_another_tenants_workspace_changes_nothing_of_alices() {
    let t = Tenants::start().await;
    let (florin, guilder, alice) = alices_world(&t).await;
    t.workspace("mal", Some("mal")).await;
    let mal = t.client_as("mal", "root:mal").await;
    install_edge_api(&mal).await;
    apply(&mal, strip_placement_details("strip")).await;
    // Alice places after mal's transform exists: the pass that copies her
    // Deployment sees it, and must not use it.
    place_web(&alice).await;

    for mailbox in [&florin, &guilder] {
        let copy = copy_of_web(&t.hub, mailbox, "alice's copy", |_| true).await;
        assert_eq!(node_selector(&copy), &json!({"disk": "ssd"}), "{mailbox}: {copy}");
        assert_eq!(annotation(&copy, "team.example/owner"), Some("alice"));
        assert_eq!(annotation(&copy, TRANSFORMED_BY_ANNOTATION), None);
        assert_eq!(annotation(&copy, OWNED_DOWNSTREAM_ANNOTATION), None);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_transform_path_is_refused_naming_the_path_and_the_fix() {
    let t = Tenants::start().await;
    t.workspace("alice", Some("alice")).await;
    let alice = t.client_as("alice", "root:alice").await;
    install_ferry_crds(&alice).await;
    let mut bad = strip_placement_details("bad");
    bad["spec"]["remove"] = json!(["$.spec.replicas", "$.spec.containers[x]"]);
    let status = expect_status(&alice, "POST", TRANSFORMS, Some(&bad), 422).await;
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("spec.remove[1]"), "{message}");
    assert!(message.contains("$.spec.containers[x]"), "{message}");
    assert!(
        message.contains("e.g. $.spec.template.spec.nodeSelector"),
        "{message}"
    );

    let mut identity = strip_placement_details("identity");
    identity["spec"]["ownedDownstream"] =
        json!([{"condition": "Sometimes", "jsonPaths": ["$.metadata.name"]}]);
    let status = expect_status(&alice, "POST", TRANSFORMS, Some(&identity), 422).await;
    let message = status["message"].as_str().unwrap();
    assert!(message.contains("spec.ownedDownstream[0].condition"), "{message}");
    assert!(
        message.contains("spec.ownedDownstream[0].jsonPaths[0]"),
        "{message}"
    );

    let mut many = strip_placement_details("many");
    many["spec"]["remove"] = json!((0..65).map(|i| format!("$.spec.f{i}")).collect::<Vec<_>>());
    let status = expect_status(&alice, "POST", TRANSFORMS, Some(&many), 422).await;
    assert!(status["message"].as_str().unwrap().contains("spec.remove"));

    post_created(&alice, TRANSFORMS, &strip_placement_details("good")).await;
}
