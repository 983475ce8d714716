//! Deleting a CustomResourceDefinition, as kube-apiserver does: the CRD is
//! held by `customresourcecleanup.apiextensions.k8s.io` while its custom
//! resources are deleted through the normal delete path, their finalizers
//! honoured; then it goes. Also across a hub restart.

mod common;

use common::{client, eventually};
use ferry_testkit::TestHub;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const SECS: u64 = 15;
const CRD: &str = "gadgets.example.com";
const CLEANUP: &str = "customresourcecleanup.apiextensions.k8s.io";

fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": CRD},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .unwrap()
}

fn gadget(name: &str, finalizers: &[&str]) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"name": name, "finalizers": finalizers},
        "spec": {"size": 1},
    }))
    .unwrap()
}

/// Create the CRD and wait until its resources are served.
async fn serve_gadgets(c: &kube::Client) -> (Api<CustomResourceDefinition>, Api<DynamicObject>) {
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.create(&PostParams::default(), &gadget_crd()).await.unwrap();
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Gadget"), "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
    eventually(SECS, "gadgets to be served", || async {
        gadgets.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;
    (crds, gadgets)
}

fn api_code(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("not an API error: {other}"),
    }
}

/// The CRD is terminating: deletionTimestamp, the clean-up finalizer, and a
/// `Terminating=True` condition.
fn assert_terminating(crd: &CustomResourceDefinition) {
    assert!(crd.metadata.deletion_timestamp.is_some(), "{crd:?}");
    let finalizers = crd.metadata.finalizers.clone().unwrap_or_default();
    assert!(finalizers.contains(&CLEANUP.to_string()), "{finalizers:?}");
    let conditions = crd
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Terminating" && c.status == "True"),
        "{conditions:?}"
    );
}

async fn remove_finalizers(gadgets: &Api<DynamicObject>, name: &str) {
    gadgets
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
}

async fn wait_crd_gone(crds: &Api<CustomResourceDefinition>, gadgets: &Api<DynamicObject>) {
    eventually(SECS, "the CRD to go", || async {
        matches!(crds.get(CRD).await, Err(kube::Error::Api(s)) if s.code == 404).then_some(())
    })
    .await;
    eventually(SECS, "gadgets to stop being served", || async {
        gadgets.list(&ListParams::default()).await.is_err().then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_custom_resource_with_a_finalizer_keeps_its_crd_terminating() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let (crds, gadgets) = serve_gadgets(&c).await;
    gadgets
        .create(&PostParams::default(), &gadget("held", &["example.com/hold"]))
        .await
        .unwrap();
    gadgets
        .create(&PostParams::default(), &gadget("plain", &[]))
        .await
        .unwrap();

    crds.delete(CRD, &DeleteParams::default()).await.unwrap();
    eventually(SECS, "the plain gadget to go", || async {
        gadgets.get_opt("plain").await.unwrap().is_none().then_some(())
    })
    .await;
    assert_terminating(&crds.get(CRD).await.unwrap());
    // Its resources are still served: reads, and updates of what is left.
    let held = gadgets.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some(), "{held:?}");
    assert_eq!(gadgets.list(&ListParams::default()).await.unwrap().items.len(), 1);
    gadgets
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    // New ones are refused, saying why.
    let (code, message) = api_code(
        gadgets
            .create(&PostParams::default(), &gadget("late", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 405, "{message}");
    assert!(
        message.contains("create not allowed while custom resource definition is terminating"),
        "{message}"
    );

    remove_finalizers(&gadgets, "held").await;
    wait_crd_gone(&crds, &gadgets).await;
}

#[tokio::test]
async fn a_crd_with_plain_custom_resources_goes_promptly() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let (crds, gadgets) = serve_gadgets(&c).await;
    for name in ["a", "b", "c"] {
        gadgets
            .create(&PostParams::default(), &gadget(name, &[]))
            .await
            .unwrap();
    }
    crds.delete(CRD, &DeleteParams::default()).await.unwrap();
    // Nothing holds them: the CRD is gone by the time the DELETE answers.
    assert!(matches!(crds.get(CRD).await, Err(kube::Error::Api(s)) if s.code == 404));
    wait_crd_gone(&crds, &gadgets).await;
    // The same CRD can be created again at once, empty.
    let (_, gadgets) = serve_gadgets(&c).await;
    assert!(gadgets
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty());
}

#[tokio::test]
async fn a_crd_left_terminating_by_a_restart_finishes() {
    let first = TestHub::start().await;
    let c = client(&first, "root").await;
    let (crds, gadgets) = serve_gadgets(&c).await;
    gadgets
        .create(&PostParams::default(), &gadget("held", &["example.com/hold"]))
        .await
        .unwrap();
    crds.delete(CRD, &DeleteParams::default()).await.unwrap();
    assert_terminating(&crds.get(CRD).await.unwrap());

    let (running, dir) = first.into_parts();
    running.stop().await;
    let dir = dir.expect("the first hub's data directory");
    let second = TestHub::start_in(dir.path()).await;
    let c = client(&second, "root").await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Gadget"), "gadgets");
    let gadgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
    assert_terminating(&crds.get(CRD).await.unwrap());
    assert!(gadgets
        .get("held")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());

    remove_finalizers(&gadgets, "held").await;
    wait_crd_gone(&crds, &gadgets).await;
}
