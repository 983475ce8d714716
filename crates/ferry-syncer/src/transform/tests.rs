use serde_json::{json, Value};

use super::*;
use ferry_api::well_known::{DESIRED_HASH_ANNOTATION, SYNCER_LABEL};

const SYNCER: &str = "kubestellar-syncer-florin-32uaph9l";

fn deployment_type() -> ObjectType {
    ObjectType::new("apps/v1", "Deployment")
}

fn upstream_deployment() -> Value {
    json!({
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "1234",
            "resourceVersion": "42",
            "creationTimestamp": "2024-01-01T00:00:00Z",
            "generation": 3,
            "selfLink": "/apis/apps/v1/namespaces/shop/deployments/web",
            "managedFields": [{ "manager": "kubectl" }],
            "ownerReferences": [{ "apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u" }],
            "finalizers": ["example.com/keep"],
            "deletionTimestamp": "2024-01-02T00:00:00Z",
            "deletionGracePeriodSeconds": 30,
            "labels": { "app": "web" },
            "annotations": {
                "kcp.io/cluster": "root:wmw1",
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "note": "keep me"
            }
        },
        "spec": { "replicas": 2, "template": { "spec": { "containers": [{ "name": "c", "image": "nginx" }] } } },
        "status": { "readyReplicas": 1 }
    })
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["annotations"].get(key).and_then(Value::as_str)
}

#[test]
fn downstream_copy_strips_server_fields_and_marks_ownership() {
    let copy = downstream_copy(&upstream_deployment(), &deployment_type(), SYNCER);
    let meta = copy["metadata"].as_object().unwrap();
    for field in SERVER_SET_METADATA {
        assert!(!meta.contains_key(*field), "{field} should be stripped");
    }
    assert!(copy.get("status").is_none());
    assert_eq!(copy["apiVersion"], "apps/v1");
    assert_eq!(copy["kind"], "Deployment");
    assert_eq!(meta["name"], "web");
    assert_eq!(meta["namespace"], "shop");
    assert_eq!(copy["spec"]["replicas"], 2);
    assert_eq!(
        annotation(&copy, "edge.kubestellar.io/downsynced"),
        Some("Deployment/shop/web")
    );
    assert_eq!(annotation(&copy, "note"), Some("keep me"));
    assert_eq!(annotation(&copy, "kcp.io/cluster"), None);
    assert_eq!(
        annotation(&copy, "kubectl.kubernetes.io/last-applied-configuration"),
        None
    );
    assert_eq!(meta["labels"]["app"], "web");
    assert_eq!(meta["labels"][SYNCER_LABEL], SYNCER);
    assert!(is_owned_by(&copy, SYNCER));
}

#[test]
fn cluster_scoped_copy_has_empty_namespace_in_the_mark() {
    let role = json!({ "metadata": { "name": "admin" }, "rules": [] });
    let copy = downstream_copy(
        &role,
        &ObjectType::new("rbac.authorization.k8s.io/v1", "ClusterRole"),
        SYNCER,
    );
    assert_eq!(
        annotation(&copy, "edge.kubestellar.io/downsynced"),
        Some("ClusterRole//admin")
    );
}

#[test]
fn copies_of_copies_do_not_inherit_marks() {
    let mut source = downstream_copy(&upstream_deployment(), &deployment_type(), "other-syncer");
    source["metadata"]["labels"]["state.workload.kcp.io/abc"] = json!("Sync");
    let copy = downstream_copy(&source, &deployment_type(), SYNCER);
    assert!(is_owned_by(&copy, SYNCER));
    assert!(!is_owned_by(&copy, "other-syncer"));
    assert!(copy["metadata"]["labels"]
        .get("state.workload.kcp.io/abc")
        .is_none());
}

#[test]
fn object_that_inherited_marks_is_not_owned() {
    // A ReplicaSet created by the Deployment controller copies the Deployment's
    // annotations; its labels come from the pod template.
    let copy = downstream_copy(&upstream_deployment(), &deployment_type(), SYNCER);
    let mut replica_set = copy.clone();
    replica_set["kind"] = json!("ReplicaSet");
    replica_set["metadata"]["name"] = json!("web-5d4f");
    assert!(!is_owned_by(&replica_set, SYNCER));
    let unlabelled = json!({ "metadata": { "name": "web", "namespace": "shop",
        "annotations": { "edge.kubestellar.io/downsynced": "Deployment/shop/web" } } });
    assert!(
        !is_owned_by(&unlabelled, SYNCER),
        "only this syncer's labelled copies are owned"
    );
}

#[test]
fn unchanged_object_needs_no_update() {
    let desired = downstream_copy(&upstream_deployment(), &deployment_type(), SYNCER);
    // What the destination returns after create: server fields, defaults, status, and an
    // annotation added by the Deployment controller.
    let mut actual = desired.clone();
    actual["metadata"]["uid"] = json!("dst-uid");
    actual["metadata"]["resourceVersion"] = json!("7");
    actual["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
    actual["spec"]["strategy"] = json!({ "type": "RollingUpdate" });
    actual["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    actual["status"] = json!({ "readyReplicas": 2 });
    assert!(!needs_update(&desired, &actual));
}

#[test]
fn changed_source_needs_update() {
    let actual = downstream_copy(&upstream_deployment(), &deployment_type(), SYNCER);
    let mut upstream = upstream_deployment();
    upstream["spec"]["replicas"] = json!(3);
    assert!(needs_update(
        &downstream_copy(&upstream, &deployment_type(), SYNCER),
        &actual
    ));
}

#[test]
fn removed_source_field_or_label_needs_update() {
    let actual = downstream_copy(&upstream_deployment(), &deployment_type(), SYNCER);
    let mut upstream = upstream_deployment();
    upstream["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("app");
    assert!(needs_update(
        &downstream_copy(&upstream, &deployment_type(), SYNCER),
        &actual
    ));
    let mut upstream = upstream_deployment();
    upstream["spec"].as_object_mut().unwrap().remove("replicas");
    assert!(needs_update(
        &downstream_copy(&upstream, &deployment_type(), SYNCER),
        &actual
    ));
}

#[test]
fn edited_copy_needs_update() {
    let desired = downstream_copy(&upstream_deployment(), &deployment_type(), SYNCER);
    let mut actual = desired.clone();
    actual["spec"]["replicas"] = json!(5);
    assert!(needs_update(&desired, &actual));
    let mut actual = desired.clone();
    actual["metadata"]["labels"]["app"] = json!("hijacked");
    assert!(needs_update(&desired, &actual));
}

#[test]
fn copy_without_hash_needs_update() {
    // A pre-existing object (or one written by KubeStellar) is taken over on first sight.
    let desired = downstream_copy(&upstream_deployment(), &deployment_type(), SYNCER);
    let mut actual = desired.clone();
    actual["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove(DESIRED_HASH_ANNOTATION);
    assert!(needs_update(&desired, &actual));
}

#[test]
fn merge_for_update_keeps_downstream_status_resource_version_and_foreign_metadata() {
    let old_desired = downstream_copy(&upstream_deployment(), &deployment_type(), SYNCER);
    let mut actual = old_desired.clone();
    actual["metadata"]["resourceVersion"] = json!("7");
    actual["metadata"]["uid"] = json!("dst-uid");
    actual["metadata"]["finalizers"] = json!(["downstream.example/guard"]);
    actual["metadata"]["managedFields"] = json!([{ "manager": "syncer" }]);
    actual["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
    actual["status"] = json!({ "readyReplicas": 2 });

    let mut upstream = upstream_deployment();
    upstream["spec"]["replicas"] = json!(4);
    upstream["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("note");
    let desired = downstream_copy(&upstream, &deployment_type(), SYNCER);
    let merged = merge_for_update(&desired, &actual);

    assert_eq!(merged["spec"]["replicas"], 4);
    assert_eq!(merged["status"], json!({ "readyReplicas": 2 }));
    assert_eq!(merged["metadata"]["resourceVersion"], "7");
    assert_eq!(merged["metadata"]["uid"], "dst-uid");
    assert_eq!(
        merged["metadata"]["finalizers"],
        json!(["downstream.example/guard"])
    );
    assert!(merged["metadata"].get("managedFields").is_none());
    assert_eq!(
        annotation(&merged, "deployment.kubernetes.io/revision"),
        Some("1")
    );
    assert_eq!(
        annotation(&merged, "note"),
        None,
        "annotation removed upstream is removed"
    );
    assert_eq!(
        annotation(&merged, DESIRED_HASH_ANNOTATION),
        annotation(&desired, DESIRED_HASH_ANNOTATION)
    );
    assert!(!needs_update(&desired, &merged));
}

#[test]
fn upstream_copy_keeps_status_and_marks_upsynced() {
    let report = json!({
        "metadata": { "name": "r1", "namespace": "policy", "uid": "u", "resourceVersion": "9" },
        "results": [{ "policy": "p", "result": "pass" }],
        "status": { "phase": "Done" }
    });
    let ty = ObjectType::new("wgpolicyk8s.io/v1alpha2", "PolicyReport");
    let copy = upstream_copy(&report, &ty, SYNCER);
    assert_eq!(copy["status"], json!({ "phase": "Done" }));
    assert_eq!(
        annotation(&copy, "edge.kubestellar.io/upsynced"),
        Some("PolicyReport/policy/r1")
    );
    assert!(copy["metadata"].get("uid").is_none());
    assert!(is_owned_by(&copy, SYNCER));

    // An upstream copy with stale status needs an update, and the update carries the new status.
    let mut actual = copy.clone();
    actual["status"] = json!({ "phase": "Running" });
    assert!(needs_update(&copy, &actual));
    assert_eq!(
        merge_for_update(&copy, &actual)["status"],
        json!({ "phase": "Done" })
    );
}

#[test]
fn status_returns_upstream_only_when_present_and_different() {
    let upstream = upstream_deployment();
    assert_eq!(status_for_upstream(&json!({ "metadata": {} })), None);
    assert_eq!(status_for_upstream(&json!({ "status": {} })), None);
    let status = status_for_upstream(&json!({ "status": { "readyReplicas": 2 } })).unwrap();
    assert!(status_differs(&upstream, &status));
    let updated = with_status(&upstream, status.clone());
    assert_eq!(updated["metadata"]["resourceVersion"], "42");
    assert!(!status_differs(&updated, &status));
}

#[test]
fn create_only_objects_are_not_overwritten() {
    let mut upstream = upstream_deployment();
    assert!(allows_overwrite(&upstream));
    upstream["metadata"]["annotations"]["edge.kubestellar.io/downsync-overwrite"] = json!("false");
    assert!(!allows_overwrite(&upstream));
    let copy = downstream_copy(&upstream, &deployment_type(), SYNCER);
    assert!(!allows_overwrite(&copy), "create-only travels with the copy");
}

#[test]
fn semantic_subset_ignores_extra_fields_but_not_list_changes() {
    assert!(is_semantic_subset(
        &json!({ "a": 1 }),
        &json!({ "a": 1.0, "b": 2 })
    ));
    assert!(!is_semantic_subset(&json!({ "a": [1, 2] }), &json!({ "a": [1] })));
    assert!(is_semantic_subset(&json!({ "a": null }), &json!({})));
    assert!(!is_semantic_subset(&json!({ "a": "x" }), &json!({})));
}

#[test]
fn a_released_copy_is_no_longer_owned_and_keeps_everything_else() {
    let mut copy = downstream_copy(&upstream_deployment(), &deployment_type(), "florin");
    copy["metadata"]["labels"]["team"] = json!("blue");
    copy["metadata"]["annotations"]["note"] = json!("kept");
    assert!(is_owned_by(&copy, "florin"));
    json_patch::merge(&mut copy, &release_patch());
    assert!(!is_owned_by(&copy, "florin"));
    let meta = &copy["metadata"];
    assert!(meta["labels"].get(SYNCER_LABEL).is_none());
    assert!(meta["annotations"].get(DESIRED_HASH_ANNOTATION).is_none());
    assert!(meta["annotations"]
        .as_object()
        .unwrap()
        .keys()
        .all(|k| !k.starts_with("edge.kubestellar.io/") && !k.starts_with("ferry.dev/")));
    assert_eq!(meta["labels"]["team"], "blue");
    assert_eq!(meta["annotations"]["note"], "kept");
    assert_eq!(
        copy["spec"],
        downstream_copy(&upstream_deployment(), &deployment_type(), "florin")["spec"]
    );
}

#[test]
fn the_last_sync_time_alone_never_makes_a_copy_look_changed() {
    let stamped = |at: &str| {
        let dest = ObjectRef::of(&upstream_deployment()).unwrap();
        desired_copy_with(
            &upstream_deployment(),
            Direction::Downsync,
            &dest,
            &deployment_type(),
            &KubeStellarMarks::new(SYNCER),
            |copy| mark_tracking(copy, "my-cluster", "root:my-workspace", at),
        )
    };
    let written = stamped("2024-01-15T10:30:00Z");
    let later = stamped("2024-01-15T11:00:00Z");
    assert_eq!(
        written["metadata"]["annotations"]["syncer.kcp.io/sync-target"],
        "my-cluster"
    );
    assert_eq!(
        written["metadata"]["annotations"]["syncer.kcp.io/workspace"],
        "root:my-workspace"
    );
    assert!(!needs_update(&later, &written), "only last-sync differs");
    // A real change is written, with the new time.
    let mut changed = later.clone();
    changed["spec"]["replicas"] = json!(5);
    assert!(needs_update(&changed, &written));
    let merged = merge_for_update(&changed, &written);
    assert_eq!(
        merged["metadata"]["annotations"]["syncer.kcp.io/last-sync"],
        "2024-01-15T11:00:00Z"
    );
}
