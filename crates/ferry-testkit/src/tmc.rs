//! Shared setup for the kcp TMC tests: workspaces, SyncTargets, Locations,
//! Placements and namespaces, and reading their scheduling labels.

use std::collections::BTreeMap;

use crate::TestHub;
use serde_json::{json, Value};

use crate::clients::{admin, call, create, expect_sent, expect_status_because, send};
use crate::eventually;

pub const WORKLOAD: &str = "/apis/workload.kcp.io/v1alpha1";
pub const SCHEDULING: &str = "/apis/scheduling.kcp.io/v1alpha1";
pub const STATE_PREFIX: &str = "state.workload.kcp.io/";

/// Create workspace `root:<name>`; returns its logical cluster name.
pub async fn workspace(hub: &TestHub, name: &str) -> String {
    crate::workspaces::ready_workspace(hub, name).await
}

/// GET as admin; the object must exist.
pub async fn get(hub: &TestHub, ws: &str, path: &str) -> Value {
    let client = admin(hub, ws).await;
    expect_status_because(&client, "GET", path, None, 200, format!("in {ws}")).await
}

/// GET as admin: `None` when not found.
pub async fn try_get(hub: &TestHub, ws: &str, path: &str) -> Option<Value> {
    let (code, body) = call(&admin(hub, ws).await, "GET", path, None).await;
    (code == 200).then_some(body)
}

/// A JSON merge patch as `client`; returns the status and body.
pub async fn merge_patch(client: &kube::Client, path: &str, body: &Value) -> (u16, Value) {
    let body = serde_json::to_string(body).expect("json");
    send(client, "PATCH", path, "application/merge-patch+json", &body).await
}

/// [`merge_patch`] that must answer `status`; returns the body. A failure
/// names the patch, the status it got and the body, after `why` when it is
/// not empty ([`expect_sent`]).
pub async fn expect_merge_patch(
    client: &kube::Client,
    path: &str,
    body: &Value,
    status: u16,
    why: impl std::fmt::Display,
) -> Value {
    let body = serde_json::to_string(body).expect("json");
    expect_sent(
        client,
        ("PATCH", path),
        ("application/merge-patch+json", &body),
        status,
        why,
    )
    .await
}

/// A merge patch as admin in `ws`; it must succeed.
pub async fn admin_patch(hub: &TestHub, ws: &str, path: &str, body: Value) -> Value {
    expect_merge_patch(&admin(hub, ws).await, path, &body, 200, format!("in {ws}")).await
}

/// A SyncTarget; returns its uid.
pub async fn sync_target(hub: &TestHub, ws: &str, name: &str, labels: Value) -> String {
    let st = create(
        hub,
        ws,
        &format!("{WORKLOAD}/synctargets"),
        json!({"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
               "metadata": {"name": name, "labels": labels}}),
    )
    .await;
    st["metadata"]["uid"].as_str().expect("uid").to_string()
}

pub async fn location(hub: &TestHub, ws: &str, name: &str, labels: Value, instance_selector: Value) {
    create(
        hub,
        ws,
        &format!("{SCHEDULING}/locations"),
        json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Location",
               "metadata": {"name": name, "labels": labels},
               "spec": {"resource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"},
                        "instanceSelector": instance_selector}}),
    )
    .await;
}

pub async fn placement(
    hub: &TestHub,
    ws: &str,
    name: &str,
    location_workspace: &str,
    location_selectors: Value,
    namespace_selector: Value,
) {
    create(
        hub,
        ws,
        &format!("{SCHEDULING}/placements"),
        placement_object(name, location_workspace, location_selectors, namespace_selector),
    )
    .await;
}

/// A Placement of SyncTargets, as a request body.
pub fn placement_object(
    name: &str,
    location_workspace: &str,
    location_selectors: Value,
    namespace_selector: Value,
) -> Value {
    json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
           "metadata": {"name": name},
           "spec": {"locationWorkspace": location_workspace,
                    "locationSelectors": location_selectors,
                    "locationResource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"},
                    "namespaceSelector": namespace_selector}})
}

pub async fn namespace(hub: &TestHub, ws: &str, name: &str, labels: Value) {
    create(
        hub,
        ws,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}),
    )
    .await;
}

/// Namespace `name` labelled `purpose=workload` (what the tests' Placements
/// select), created as `client`; the status and body, for a test to judge.
pub async fn workload_namespace_as(client: &kube::Client, name: &str) -> (u16, Value) {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": {"purpose": "workload"}}});
    call(client, "POST", "/api/v1/namespaces", Some(&ns)).await
}

pub async fn configmap(hub: &TestHub, ws: &str, namespace: &str, name: &str) -> Value {
    create(
        hub,
        ws,
        &format!("/api/v1/namespaces/{namespace}/configmaps"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}),
    )
    .await
}

/// The object's `state.workload.kcp.io/<key>` labels, by key.
pub fn states(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.strip_prefix(STATE_PREFIX)?.to_string(), v.as_str()?.to_string())))
        .collect()
}

/// The object's annotation `k`.
pub fn annotation<'a>(obj: &'a Value, k: &str) -> Option<&'a str> {
    obj["metadata"]["annotations"].get(k).and_then(Value::as_str)
}

/// Wait until the object at `path` in `ws` satisfies `check`; returns it.
pub async fn wait_for(
    hub: &TestHub,
    ws: &str,
    path: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    eventually(20, what, || async {
        let obj = try_get(hub, ws, path).await?;
        check(&obj).then_some(obj)
    })
    .await
}

/// A client of SyncTarget `name`'s (uid `uid`, in logical cluster
/// `target_cluster`) `kind` view (`syncer` or `upsyncer`) at `clusters/<c>`,
/// with the admin's token: what the view shows whoever may enter it.
pub async fn sync_view(
    hub: &TestHub,
    kind: &str,
    target_cluster: &str,
    name: &str,
    uid: &str,
    c: &str,
) -> kube::Client {
    let mut config = hub.config("root").await;
    let url = format!(
        "{}/services/{kind}/{target_cluster}/{name}/{uid}/clusters/{c}",
        hub.url()
    );
    config.cluster_url = url.parse().expect("url");
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

/// The names of a list's items, sorted.
pub fn item_names(list: &Value) -> Vec<String> {
    let mut names: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i["metadata"]["name"].as_str().map(String::from))
        .collect();
    names.sort();
    names
}

/// Deployment `ns/name` with `replicas` in `ws`, as admin.
pub async fn deployment(hub: &TestHub, ws: &str, ns: &str, name: &str, replicas: i64) -> Value {
    create(
        hub,
        ws,
        &format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        deployment_object(name, replicas),
    )
    .await
}

/// Deployment `name` with `replicas`, as a request body.
pub fn deployment_object(name: &str, replicas: i64) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": name, "image": "nginx"}]}}}})
}

/// What the syncer of SyncTarget `key` writes when its cluster reports
/// `status` on the object at `path` while several SyncTargets sync it: the
/// object's `experimental.status.workload.kcp.io/<key>` annotation.
pub async fn return_status_for_target(hub: &TestHub, ws: &str, path: &str, key: &str, status: &Value) {
    let annotation = ferry_api::well_known::workload_status_annotation(key);
    admin_patch(
        hub,
        ws,
        path,
        json!({"metadata": {"annotations": {annotation: status.to_string()}}}),
    )
    .await;
}

/// What the syncer of the one SyncTarget syncing the object at `path`
/// writes when its cluster reports `status`: the object's status.
pub async fn return_status_of_only_target(hub: &TestHub, ws: &str, path: &str, status: &Value) {
    admin_patch(hub, ws, &format!("{path}/status"), json!({"status": status})).await;
}
