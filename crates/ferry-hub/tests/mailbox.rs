//! The mailbox controller keeps one mailbox workspace per SyncTarget.

mod common;

use common::{client, eventually};
use ferry_testkit::TestHub;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

#[tokio::test]
async fn sync_target_gets_a_mailbox_workspace_that_goes_with_it() {
    let hub = TestHub::start().await;
    let root = client(&hub, "root").await;
    let workspaces = resource("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces");
    let ws: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "imw1"}}),
    )
    .unwrap();
    let imw = Api::<DynamicObject>::all_with(root.clone(), &workspaces)
        .create(&PostParams::default(), &ws)
        .await
        .unwrap();
    let imw_cluster = imw.data["spec"]["cluster"].as_str().unwrap().to_string();

    let inventory = client(&hub, "root:imw1").await;
    let crds: Api<CustomResourceDefinition> = Api::all(inventory.clone());
    for crd in ferry_api::all_crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let targets = Api::<DynamicObject>::all_with(
        inventory.clone(),
        &resource("edge.kubestellar.io", "v2alpha1", "SyncTarget", "synctargets"),
    );
    let st: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget",
        "metadata": {"name": "florin", "labels": {"id": "florin", "loc-name": "florin"}}
    }))
    .unwrap();
    let st = targets.create(&PostParams::default(), &st).await.unwrap();
    let mailbox = format!("{imw_cluster}-mb-{}", st.metadata.uid.unwrap());

    let mailboxes = Api::<DynamicObject>::all_with(root.clone(), &workspaces);
    let mb = eventually(10, "the mailbox workspace", || {
        let mailboxes = mailboxes.clone();
        let mailbox = mailbox.clone();
        async move { mailboxes.get_opt(&mailbox).await.ok().flatten() }
    })
    .await;
    assert_eq!(
        mb.metadata.annotations.unwrap()["edge.kubestellar.io/sync-target-name"],
        "florin"
    );
    // The edge API is served inside the mailbox.
    let in_mailbox = client(&hub, &format!("root:{mailbox}")).await;
    let configs = Api::<DynamicObject>::all_with(
        in_mailbox,
        &resource("edge.kubestellar.io", "v2alpha1", "SyncerConfig", "syncerconfigs"),
    );
    eventually(10, "SyncerConfig served in the mailbox", || {
        let configs = configs.clone();
        async move { configs.list(&Default::default()).await.ok().map(|_| ()) }
    })
    .await;

    targets.delete("florin", &DeleteParams::default()).await.unwrap();
    eventually(10, "the mailbox workspace to go", || {
        let mailboxes = mailboxes.clone();
        let mailbox = mailbox.clone();
        async move { mailboxes.get_opt(&mailbox).await.unwrap().is_none().then_some(()) }
    })
    .await;
}
