//! Garbage collection of `ownerReferences` dependents, as kube-apiserver and
//! kube-controller-manager do it: background, foreground and orphan
//! propagation, dangling references, workspaces kept apart, and work left
//! over by a restart.

mod common;

use common::{client, delete_ok, eventually, expect_status};
use ferry_testkit::TestHub;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::json;

/// How long the collector gets to act.
const SECS: u64 = 15;

/// A reference to `owner`, blocking its foreground deletion when `block`.
fn reference<K: Resource<DynamicType = ()>>(owner: &K, block: bool) -> OwnerReference {
    let meta = owner.meta();
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone().expect("name"),
        uid: meta.uid.clone().expect("uid"),
        block_owner_deletion: block.then_some(true),
        controller: None,
    }
}

fn cm(name: &str, owners: Vec<OwnerReference>) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            owner_references: (!owners.is_empty()).then_some(owners),
            ..Default::default()
        },
        ..Default::default()
    }
}

async fn create<K>(api: &Api<K>, obj: &K) -> K
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj).await.expect("create")
}

fn is_not_found(r: &Result<impl Sized, kube::Error>) -> bool {
    matches!(r, Err(kube::Error::Api(s)) if s.code == 404)
}

async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    eventually(SECS, what, || async {
        is_not_found(&api.get(name).await).then_some(())
    })
    .await;
}

fn owner_uids(obj: &impl Resource) -> Vec<String> {
    obj.meta()
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect()
}

fn finalizers(obj: &impl Resource) -> Vec<String> {
    obj.meta().finalizers.clone().unwrap_or_default()
}

async fn configmaps(hub: &TestHub, workspace: &str) -> Api<ConfigMap> {
    Api::namespaced(client(hub, workspace).await, "default")
}

#[tokio::test]
async fn deleting_an_owner_deletes_its_dependents_in_the_background() {
    let hub = TestHub::start().await;
    let api = configmaps(&hub, "root").await;
    for (owner_name, params) in [
        ("implicit", DeleteParams::default()),
        ("explicit", DeleteParams::background()),
    ] {
        let owner = create(&api, &cm(owner_name, vec![])).await;
        let child = format!("{owner_name}-child");
        create(&api, &cm(&child, vec![reference(&owner, false)])).await;
        api.delete(owner_name, &params).await.unwrap();
        assert!(is_not_found(&api.get(owner_name).await), "the owner goes at once");
        wait_gone(&api, &child, "the dependent to be collected").await;
    }
}

#[tokio::test]
async fn deletion_cascades_down_a_deployment_replicaset_pod_chain() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let deployments: Api<Deployment> = Api::namespaced(c.clone(), "default");
    let replicasets: Api<ReplicaSet> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let labels = json!({"app": "web"});
    let template =
        json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "main", "image": "nginx"}]}});
    let deploy: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    }))
    .unwrap();
    let deploy = create(&deployments, &deploy).await;
    let mut rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web-1"},
        "spec": {"selector": {"matchLabels": labels}, "template": template},
    }))
    .unwrap();
    rs.metadata.owner_references = Some(vec![reference(&deploy, true)]);
    let rs = create(&replicasets, &rs).await;
    for i in 0..3 {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("web-1-{i}"), "labels": labels},
            "spec": template["spec"],
        }))
        .unwrap();
        pod.metadata.owner_references = Some(vec![reference(&rs, true)]);
        create(&pods, &pod).await;
    }

    deployments.delete("web", &DeleteParams::default()).await.unwrap();
    wait_gone(&replicasets, "web-1", "the ReplicaSet to follow its Deployment").await;
    for i in 0..3 {
        wait_gone(
            &pods,
            &format!("web-1-{i}"),
            "the Pods to follow their ReplicaSet",
        )
        .await;
    }
}

#[tokio::test]
async fn a_dependent_with_two_owners_survives_until_both_are_gone() {
    let hub = TestHub::start().await;
    let api = configmaps(&hub, "root").await;
    let a = create(&api, &cm("a", vec![])).await;
    let b = create(&api, &cm("b", vec![])).await;
    create(
        &api,
        &cm("shared", vec![reference(&a, false), reference(&b, false)]),
    )
    .await;

    api.delete("a", &DeleteParams::default()).await.unwrap();
    // The collector drops the reference to the owner that is gone, and nothing else.
    let shared = eventually(SECS, "the reference to a to be dropped", || async {
        let s = api.get("shared").await.ok()?;
        (owner_uids(&s) == vec![b.metadata.uid.clone().unwrap()]).then_some(s)
    })
    .await;
    assert!(shared.metadata.deletion_timestamp.is_none());

    api.delete("b", &DeleteParams::default()).await.unwrap();
    wait_gone(&api, "shared", "the dependent to go with its last owner").await;
}

#[tokio::test]
async fn foreground_deletion_holds_the_owner_until_blocking_dependents_are_gone() {
    let hub = TestHub::start().await;
    let api = configmaps(&hub, "root").await;
    let owner = create(&api, &cm("owner", vec![])).await;
    let mut blocking = cm("blocking", vec![reference(&owner, true)]);
    blocking.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&api, &blocking).await;
    create(&api, &cm("loose", vec![reference(&owner, false)])).await;

    api.delete("owner", &DeleteParams::foreground()).await.unwrap();
    let held = api.get("owner").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(finalizers(&held), vec!["foregroundDeletion"]);

    // Every dependent is deleted; the blocking one is held by its own finalizer.
    wait_gone(&api, "loose", "the non-blocking dependent to be deleted").await;
    eventually(SECS, "the blocking dependent to be deleted", || async {
        let b = api.get("blocking").await.ok()?;
        b.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await;
    let still = api.get("owner").await.unwrap();
    assert_eq!(
        finalizers(&still),
        vec!["foregroundDeletion"],
        "the owner waits for its blocking dependent"
    );

    api.patch(
        "blocking",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_gone(&api, "blocking", "the blocking dependent to go").await;
    wait_gone(&api, "owner", "the owner to go once nothing blocks it").await;
}

#[tokio::test]
async fn foreground_deletion_of_an_owner_without_dependents_completes() {
    let hub = TestHub::start().await;
    let api = configmaps(&hub, "root").await;
    create(&api, &cm("alone", vec![])).await;
    api.delete("alone", &DeleteParams::foreground()).await.unwrap();
    wait_gone(&api, "alone", "the foregroundDeletion finalizer to be removed").await;
}

#[tokio::test]
async fn foreground_deletion_of_an_ownership_cycle_completes() {
    let hub = TestHub::start().await;
    let api = configmaps(&hub, "root").await;
    let a = create(&api, &cm("cycle-a", vec![])).await;
    let b = create(&api, &cm("cycle-b", vec![reference(&a, true)])).await;
    let refs = json!({"metadata": {"ownerReferences": [reference(&b, true)]}});
    api.patch("cycle-a", &PatchParams::default(), &Patch::Merge(refs))
        .await
        .unwrap();
    api.delete("cycle-a", &DeleteParams::foreground()).await.unwrap();
    wait_gone(&api, "cycle-a", "the first object of the cycle to go").await;
    wait_gone(&api, "cycle-b", "the second object of the cycle to go").await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_and_drops_their_references() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let api = configmaps(&hub, "root").await;
    let keep = create(&api, &cm("keeper", vec![])).await;
    let owner = create(&api, &cm("owner", vec![])).await;
    create(
        &api,
        &cm("child", vec![reference(&owner, true), reference(&keep, false)]),
    )
    .await;
    let deprecated = create(&api, &cm("old-style", vec![])).await;
    create(&api, &cm("old-style-child", vec![reference(&deprecated, false)])).await;

    let left = api.delete("owner", &DeleteParams::orphan()).await.unwrap();
    let left = left
        .left()
        .expect("the owner is left while its dependents are orphaned");
    assert_eq!(finalizers(&left), vec!["orphan"]);
    wait_gone(&api, "owner", "the orphaning owner to go").await;
    let child = api.get("child").await.unwrap();
    assert_eq!(owner_uids(&child), vec![keep.metadata.uid.clone().unwrap()]);

    // The deprecated DeleteOptions field does the same.
    expect_status(
        &c,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/old-style",
        Some(&json!({"kind": "DeleteOptions", "apiVersion": "v1", "orphanDependents": true})),
        200,
    )
    .await;
    wait_gone(&api, "old-style", "the orphaning owner to go").await;
    let child = api.get("old-style-child").await.unwrap();
    assert!(child.metadata.owner_references.is_none());
}

#[tokio::test]
async fn deletecollection_propagates_its_policy() {
    let hub = TestHub::start().await;
    let api = configmaps(&hub, "root").await;
    for name in ["x", "y"] {
        let mut owner = cm(name, vec![]);
        owner.metadata.labels = Some([("group".to_string(), "owners".to_string())].into());
        let owner = create(&api, &owner).await;
        create(
            &api,
            &cm(&format!("{name}-child"), vec![reference(&owner, false)]),
        )
        .await;
    }
    api.delete_collection(
        &DeleteParams::orphan(),
        &ListParams::default().labels("group=owners"),
    )
    .await
    .unwrap();
    for name in ["x", "y"] {
        wait_gone(&api, name, "the owners to go").await;
        let child = api.get(&format!("{name}-child")).await.unwrap();
        assert!(
            child.metadata.owner_references.is_none(),
            "{name}-child was orphaned"
        );
    }
}

#[tokio::test]
async fn protobuf_delete_options_carry_the_policy() {
    use k8s_pb::apimachinery::pkg::apis::meta::v1::DeleteOptions;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;

    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let api = configmaps(&hub, "root").await;
    let owner = create(&api, &cm("owner", vec![])).await;
    create(&api, &cm("child", vec![reference(&owner, false)])).await;
    let options = DeleteOptions {
        propagation_policy: Some("Orphan".into()),
        ..Default::default()
    };
    let envelope = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("DeleteOptions".into()),
        }),
        raw: Some(options.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let body = [b"k8s\0".as_slice(), &envelope.encode_to_vec()].concat();
    let req = http::Request::delete("/api/v1/namespaces/default/configmaps/owner")
        .header(http::header::CONTENT_TYPE, "application/vnd.kubernetes.protobuf")
        .body(kube::client::Body::from(body))
        .unwrap();
    let resp = c.send(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    wait_gone(&api, "owner", "the orphaning owner to go").await;
    assert!(api
        .get("child")
        .await
        .unwrap()
        .metadata
        .owner_references
        .is_none());
}

#[tokio::test]
async fn invalid_propagation_is_rejected_like_kube_apiserver() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let api = configmaps(&hub, "root").await;
    create(&api, &cm("target", vec![])).await;
    let path = "/api/v1/namespaces/default/configmaps/target";
    let body = expect_status(
        &c,
        "DELETE",
        &format!("{path}?propagationPolicy=Sideways"),
        None,
        422,
    )
    .await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Unsupported value: \"Sideways\""),
        "{body}"
    );
    let both = json!({"propagationPolicy": "Orphan", "orphanDependents": true});
    expect_status(&c, "DELETE", path, Some(&both), 422).await;
    api.get("target").await.expect("nothing was deleted");
    // The query string alone works too.
    delete_ok(&c, &format!("{path}?propagationPolicy=Foreground")).await;
    wait_gone(&api, "target", "the foreground deletion to complete").await;
}

#[tokio::test]
async fn dependents_with_dangling_references_are_deleted() {
    let hub = TestHub::start().await;
    let api = configmaps(&hub, "root").await;
    let real = create(&api, &cm("real", vec![])).await;
    create(&api, &cm("rightly-owned", vec![reference(&real, false)])).await;
    let mut never = reference(&real, false);
    never.name = "never-existed".into();
    never.uid = "00000000-0000-0000-0000-000000000001".into();
    create(&api, &cm("owner-never-existed", vec![never])).await;
    // Same name, another uid: the owner it meant is gone.
    let mut stale = reference(&real, false);
    stale.uid = "00000000-0000-0000-0000-000000000002".into();
    create(&api, &cm("owner-replaced", vec![stale])).await;

    wait_gone(
        &api,
        "owner-never-existed",
        "a dependent of nothing to be collected",
    )
    .await;
    wait_gone(
        &api,
        "owner-replaced",
        "a dependent of a uid mismatch to be collected",
    )
    .await;
    api.get("rightly-owned")
        .await
        .expect("a live owner keeps its dependent");

    // A reference added by an update is checked too.
    create(&api, &cm("adopted-late", vec![])).await;
    let mut gone = reference(&real, false);
    gone.uid = "00000000-0000-0000-0000-000000000003".into();
    let patch = json!({"metadata": {"ownerReferences": [gone]}});
    api.patch("adopted-late", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    wait_gone(
        &api,
        "adopted-late",
        "an updated dependent of nothing to be collected",
    )
    .await;
}

#[tokio::test]
async fn custom_resources_own_dependents_even_after_their_crd_goes() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let api = configmaps(&hub, "root").await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let crd = serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    }))
    .unwrap();
    create(&crds, &crd).await;
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
    let widgets: Api<DynamicObject> = Api::namespaced_with(
        c.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    );
    eventually(SECS, "widgets to be served", || async {
        widgets.list(&ListParams::default()).await.ok().map(|_| ())
    })
    .await;
    for name in ["w1", "w2"] {
        let widget: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name},
        }))
        .unwrap();
        let widget = create(&widgets, &widget).await;
        let owner = OwnerReference {
            api_version: "example.com/v1".into(),
            kind: "Widget".into(),
            name: name.into(),
            uid: widget.metadata.uid.clone().unwrap(),
            ..Default::default()
        };
        create(&api, &cm(&format!("{name}-config"), vec![owner])).await;
    }

    widgets.delete("w1", &DeleteParams::default()).await.unwrap();
    wait_gone(&api, "w1-config", "a custom resource's dependent to be collected").await;
    api.get("w2-config").await.expect("w2 still owns it");

    // The CRD goes (in the foreground, through the collector) and takes w2
    // with it; w2's dependent follows although Widgets are no longer served.
    crds.delete("widgets.example.com", &DeleteParams::foreground())
        .await
        .unwrap();
    wait_gone(&crds, "widgets.example.com", "the CRD to go").await;
    wait_gone(
        &api,
        "w2-config",
        "the dependent of a custom resource removed with its CRD",
    )
    .await;
}

fn workspace_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
        "workspaces",
    )
}

#[tokio::test]
async fn owners_in_different_workspaces_never_affect_each_other() {
    let hub = TestHub::start().await;
    let workspaces = Api::<DynamicObject>::all_with(client(&hub, "root").await, &workspace_resource());
    for name in ["a", "b"] {
        let ws: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}
        }))
        .unwrap();
        workspaces.create(&PostParams::default(), &ws).await.unwrap();
    }
    let a = configmaps(&hub, "root:a").await;
    let b = configmaps(&hub, "root:b").await;
    let owner_a = create(&a, &cm("owner", vec![])).await;
    let owner_b = create(&b, &cm("owner", vec![])).await;
    create(&a, &cm("child", vec![reference(&owner_a, false)])).await;
    create(&b, &cm("child", vec![reference(&owner_b, false)])).await;
    // A reference to b's owner means nothing in a, where "owner" has another uid.
    create(&a, &cm("cross", vec![reference(&owner_b, false)])).await;
    wait_gone(&a, "cross", "a reference to another workspace's owner to dangle").await;

    a.delete("owner", &DeleteParams::default()).await.unwrap();
    wait_gone(&a, "child", "a's dependent to go with a's owner").await;
    b.get("owner").await.expect("b's owner is untouched");
    let child_b = b.get("child").await.expect("b's dependent is untouched");
    assert_eq!(owner_uids(&child_b), vec![owner_b.metadata.uid.clone().unwrap()]);
}

/// Run kubectl, bounded: `kubectl delete` waits for the object to be gone.
fn kubectl(hub: &TestHub, args: &[&str]) -> String {
    let args = [args, &["--timeout=60s"]].concat();
    common::ok(hub.kubectl(&args), &format!("kubectl {args:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_cascade_orphan_foreground_and_background() {
    let hub = TestHub::start().await;
    let api = configmaps(&hub, "root").await;
    for name in ["orphaning", "foreground", "background"] {
        let owner = create(&api, &cm(name, vec![])).await;
        create(&api, &cm(&format!("{name}-child"), vec![reference(&owner, true)])).await;
    }

    kubectl(&hub, &["delete", "configmap", "orphaning", "--cascade=orphan"]);
    wait_gone(&api, "orphaning", "the orphaning owner to go").await;
    let child = api.get("orphaning-child").await.unwrap();
    assert!(child.metadata.owner_references.is_none());

    // kubectl waits for the owner to be gone, which takes its blocking dependent first.
    kubectl(
        &hub,
        &["delete", "configmap", "foreground", "--cascade=foreground"],
    );
    assert!(is_not_found(&api.get("foreground").await));
    assert!(
        is_not_found(&api.get("foreground-child").await),
        "a foreground deletion finishes after its blocking dependents"
    );

    kubectl(&hub, &["delete", "configmap", "background"]);
    wait_gone(&api, "background-child", "the dependent to be collected").await;
}

#[tokio::test]
async fn work_left_by_a_restart_is_picked_up() {
    let first = TestHub::start().await;
    let api = configmaps(&first, "root").await;
    // An owner waiting for a blocking dependent held by a finalizer ...
    let waiting = create(&api, &cm("waiting", vec![])).await;
    let mut held = cm("held", vec![reference(&waiting, true)]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    create(&api, &held).await;
    api.delete("waiting", &DeleteParams::foreground()).await.unwrap();
    eventually(SECS, "the held dependent to be deleted", || async {
        let h = api.get("held").await.ok()?;
        h.metadata.deletion_timestamp.is_some().then_some(())
    })
    .await;
    // ... and an owner that goes while no collector runs.
    let vanishing = create(&api, &cm("vanishing", vec![])).await;
    create(&api, &cm("left-behind", vec![reference(&vanishing, false)])).await;

    let (running, dir) = first.into_parts();
    let hub = running.hub.clone();
    running.stop().await;
    let key = ferry_hub::storage::ObjectKey {
        cluster: "root".into(),
        resource: "/configmaps".into(),
        namespace: "default".into(),
        name: "vanishing".into(),
    };
    hub.store
        .delete(key, ferry_hub::storage::Expect::Exists)
        .unwrap()
        .durable()
        .await
        .unwrap();
    drop(hub);

    let dir = dir.expect("the first hub's data directory");
    let second = TestHub::start_in(dir.path()).await;
    let api = configmaps(&second, "root").await;
    wait_gone(
        &api,
        "left-behind",
        "the dependent of an owner deleted while stopped",
    )
    .await;
    let still = api.get("waiting").await.unwrap();
    assert_eq!(finalizers(&still), vec!["foregroundDeletion"]);
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_gone(&api, "waiting", "the owner left waiting to finish its deletion").await;
}
