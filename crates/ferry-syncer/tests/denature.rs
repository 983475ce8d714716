//! End to end: seed 001's "I can deploy the denatured objects on mailbox workspace to
//! Edge cluster by renaturing them automatically". An EdgeSyncConfig in the mailbox
//! names what goes down and up by kind, and its `conversions` renature a CRD (stored
//! in the mailbox under a `.denatured` group so it cannot clash with an APIBinding), a
//! ClusterRoleBinding (stored as a CR of a look-alike kind, so it grants nothing in the
//! workspace) and custom resources; reports upsynced from the edge map back.

mod common;

use common::*;
use serde_json::{json, Value};

const DOWNSYNCED: &str = "edge.kubestellar.io/downsynced";

fn edge_sync_configs() -> kube::core::ApiResource {
    ar(
        "edge.kubestellar.io",
        "v2alpha1",
        "EdgeSyncConfig",
        "edgesyncconfigs",
    )
}
fn denatured_bindings() -> kube::core::ApiResource {
    ar(
        "denatured.example.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
    )
}
fn policy_reports(group: &str) -> kube::core::ApiResource {
    ar(group, "v1alpha2", "PolicyReport", "policyreports")
}

fn policy_report_crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("policyreports.{group}") },
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": { "kind": "PolicyReport", "plural": "policyreports", "singular": "policyreport", "listKind": "PolicyReportList" },
            "versions": [{ "name": "v1alpha2", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }]
        }
    })
}

/// A CRD in the mailbox for denatured ClusterRoleBindings: same fields, another group.
fn denatured_binding_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": { "name": "clusterrolebindings.denatured.example.io" },
        "spec": {
            "group": "denatured.example.io", "scope": "Cluster",
            "names": { "kind": "ClusterRoleBinding", "plural": "clusterrolebindings", "singular": "clusterrolebinding", "listKind": "ClusterRoleBindingList" },
            "versions": [{ "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }]
        }
    })
}

fn report(group: &str, ns: &str, name: &str, pass: i64) -> Value {
    json!({ "apiVersion": format!("{group}/v1alpha2"), "kind": "PolicyReport",
        "metadata": { "name": name, "namespace": ns }, "summary": { "pass": pass } })
}

fn obj(group: &str, kind: &str, name: &str) -> Value {
    json!({ "group": group, "kind": kind, "name": name })
}

fn kyverno_config() -> Value {
    json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgeSyncConfig",
        "metadata": { "name": "kyverno" },
        "spec": {
            "downSyncedResources": [
                { "group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition", "name": "policyreports.wgpolicyk8s.io.denatured" },
                { "group": "denatured.example.io", "version": "v1", "kind": "ClusterRoleBinding", "name": "*" },
                { "group": "wgpolicyk8s.io.denatured", "kind": "PolicyReport", "namespace": "app", "name": "*" }
            ],
            "upSyncedResources": [
                { "group": "wgpolicyk8s.io", "kind": "PolicyReport", "namespace": "reports", "name": "*" }
            ],
            "conversions": [
                { "upstream": obj("apiextensions.k8s.io", "CustomResourceDefinition", "policyreports.wgpolicyk8s.io.denatured"),
                  "downstream": obj("apiextensions.k8s.io", "CustomResourceDefinition", "policyreports.wgpolicyk8s.io") },
                { "upstream": obj("denatured.example.io", "ClusterRoleBinding", "kyverno-admin"),
                  "downstream": obj("rbac.authorization.k8s.io", "ClusterRoleBinding", "kyverno-admin") },
                { "upstream": obj("wgpolicyk8s.io.denatured", "PolicyReport", "polr-reports-florin"),
                  "downstream": obj("wgpolicyk8s.io", "PolicyReport", "polr-reports") }
            ]
        }
    })
}

/// A denatured ClusterRoleBinding `name` of ClusterRole `view` to `subject`.
fn denatured_view_binding(name: &str, subject: Value) -> Value {
    json!({
        "apiVersion": "denatured.example.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view" },
        "subjects": [subject]
    })
}

/// Creates the denatured `binding` in the mailbox once its kind is served there.
async fn create_once_served(mb: &Cluster, binding: &Value) {
    eventually(
        15,
        "the denatured ClusterRoleBinding kind to be served in the mailbox",
        || async {
            mb.api(&denatured_bindings(), None)
                .create(
                    &Default::default(),
                    &serde_json::from_value(binding.clone()).unwrap(),
                )
                .await
                .ok()
        },
    )
    .await;
}

#[tokio::test]
async fn denatured_objects_in_the_mailbox_land_renatured_and_reports_map_back() {
    let stage = Stage::start().await;
    let (mb, down) = (&stage.mb, &stage.down);
    mb.create(&crds(), policy_report_crd("wgpolicyk8s.io.denatured"))
        .await;
    mb.create(&crds(), denatured_binding_crd()).await;
    for ns in ["app", "reports"] {
        mb.create(&namespaces(), namespace(ns)).await;
    }
    mb.create(&edge_sync_configs(), kyverno_config()).await;
    let binding = denatured_view_binding(
        "kyverno-admin",
        json!({ "kind": "ServiceAccount", "name": "kyverno", "namespace": "kyverno" }),
    );
    create_once_served(mb, &binding).await;
    let denatured_reports = policy_reports("wgpolicyk8s.io.denatured");
    eventually(
        15,
        "the denatured PolicyReport kind to be served in the mailbox",
        || async {
            mb.api(&denatured_reports, Some("app"))
                .create(
                    &Default::default(),
                    &serde_json::from_value(report("wgpolicyk8s.io.denatured", "app", "report-a", 3))
                        .unwrap(),
                )
                .await
                .ok()
        },
    )
    .await;

    let syncer = start_syncer(&stage.up, &stage.ws, &stage.wec, "florin").await;
    wait_ready(&syncer).await;

    // The CRD lands under its natural name and group; the denatured name never does.
    let crd = wait_for(
        down,
        &crds(),
        None,
        "policyreports.wgpolicyk8s.io",
        "the renatured CRD downstream",
        |_| true,
    )
    .await;
    assert_eq!(crd["spec"]["group"], "wgpolicyk8s.io", "{crd}");
    assert_eq!(
        annotation(&crd, DOWNSYNCED),
        Some("CustomResourceDefinition//policyreports.wgpolicyk8s.io")
    );
    assert!(down
        .get(&crds(), None, "policyreports.wgpolicyk8s.io.denatured")
        .await
        .is_none());

    // The binding is a real ClusterRoleBinding downstream.
    let crb = wait_for(
        down,
        &cluster_role_bindings(),
        None,
        "kyverno-admin",
        "the renatured ClusterRoleBinding downstream",
        |_| true,
    )
    .await;
    assert_eq!(crb["apiVersion"], "rbac.authorization.k8s.io/v1");
    assert_eq!(crb["roleRef"]["name"], "view", "{crb}");

    // A CR of the denatured CRD goes down as the natural kind, and follows changes.
    let natural_reports = policy_reports("wgpolicyk8s.io");
    wait_for(
        down,
        &natural_reports,
        Some("app"),
        "report-a",
        "the PolicyReport downstream in its natural group",
        |r| r["summary"]["pass"] == 3,
    )
    .await;
    mb.merge(
        &denatured_reports,
        Some("app"),
        "report-a",
        json!({ "summary": { "pass": 5 } }),
    )
    .await;
    wait_for(
        down,
        &natural_reports,
        Some("app"),
        "report-a",
        "the change to reach the renatured copy",
        |r| r["summary"]["pass"] == 5,
    )
    .await;

    // A report made at the edge goes up, renamed and denatured by the conversion.
    down.create(&namespaces(), namespace("reports")).await;
    down.create(
        &natural_reports,
        report("wgpolicyk8s.io", "reports", "polr-reports", 7),
    )
    .await;
    let up = wait_for(
        mb,
        &denatured_reports,
        Some("reports"),
        "polr-reports-florin",
        "the upsynced report in the mailbox under its denatured name",
        |r| r["summary"]["pass"] == 7,
    )
    .await;
    assert_eq!(up["apiVersion"], "wgpolicyk8s.io.denatured/v1alpha2");
    down.merge(
        &natural_reports,
        Some("reports"),
        "polr-reports",
        json!({ "summary": { "pass": 8 } }),
    )
    .await;
    wait_for(
        mb,
        &denatured_reports,
        Some("reports"),
        "polr-reports-florin",
        "the change at the edge to reach the mailbox",
        |r| r["summary"]["pass"] == 8,
    )
    .await;
    down.delete(&natural_reports, Some("reports"), "polr-reports")
        .await;
    wait_gone(
        mb,
        &denatured_reports,
        Some("reports"),
        "polr-reports-florin",
        "the upsynced report to go when the edge deletes it",
    )
    .await;

    // Deleting the denatured object deletes its renatured copy.
    mb.delete(&denatured_bindings(), None, "kyverno-admin").await;
    wait_gone(
        down,
        &cluster_role_bindings(),
        None,
        "kyverno-admin",
        "the renatured binding to go with its denatured source",
    )
    .await;
    mb.delete(&denatured_reports, Some("app"), "report-a").await;
    wait_gone(
        down,
        &natural_reports,
        Some("app"),
        "report-a",
        "the renatured report to go with its source",
    )
    .await;
    syncer.stop().await;
}

#[tokio::test]
async fn a_bad_conversion_is_a_condition_on_its_edge_sync_config_and_the_rest_syncs() {
    let stage = Stage::start().await;
    let (mb, down) = (&stage.mb, &stage.down);
    mb.create(&namespaces(), namespace("app")).await;
    mb.create(&configmaps(), configmap("app", "settings", json!({ "a": "1" })))
        .await;
    mb.create(
        &edge_sync_configs(),
        json!({
            "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgeSyncConfig",
            "metadata": { "name": "broken" },
            "spec": {
                "downSyncedResources": [
                    { "kind": "ConfigMap", "namespace": "app", "name": "settings" },
                    { "group": "apps", "kind": "deployments", "namespace": "app", "name": "*" }
                ],
                "conversions": [
                    { "upstream": obj("apiextensions.k8s.io", "CustomResourceDefinition", "widgets.example.com.denatured"),
                      "downstream": obj("apiextensions.k8s.io", "CustomResourceDefinition", "") }
                ]
            }
        }),
    )
    .await;
    // A SyncerConfig next to it keeps working too.
    mb.create(
        &syncer_configs(),
        syncer_config(
            "the-one",
            json!({ "namespacedObjects": [{ "group": "", "apiVersion": "v1", "resource": "configmaps",
                "objectsByNamespace": [{ "namespace": "app", "names": ["other"] }] }] }),
        ),
    )
    .await;
    mb.create(&configmaps(), configmap("app", "other", json!({ "b": "2" })))
        .await;

    let syncer = start_syncer(&stage.up, &stage.ws, &stage.wec, "florin").await;
    wait_ready(&syncer).await;
    wait_for(
        down,
        &configmaps(),
        Some("app"),
        "settings",
        "the valid EdgeSyncConfig entry to sync",
        |c| c["data"]["a"] == "1",
    )
    .await;
    wait_for(
        down,
        &configmaps(),
        Some("app"),
        "other",
        "the SyncerConfig next to it to sync",
        |_| true,
    )
    .await;
    let broken = wait_for(
        mb,
        &edge_sync_configs(),
        None,
        "broken",
        "a ConfigValid=False condition on the EdgeSyncConfig",
        |c| condition(c, "ConfigValid").is_some_and(|c| c["status"] == "False"),
    )
    .await;
    let message = condition(&broken, "ConfigValid").unwrap()["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("spec.conversions[0].downstream.name"),
        "{message}"
    );
    assert!(message.contains("spec.downSyncedResources[1].kind"), "{message}");
    assert!(message.contains("EdgeSyncConfig \"broken\""), "{message}");

    // Fixing it clears the condition.
    mb.merge(
        &edge_sync_configs(),
        None,
        "broken",
        json!({ "spec": {
            "downSyncedResources": [{ "kind": "ConfigMap", "namespace": "app", "name": "settings" }],
            "conversions": null
        } }),
    )
    .await;
    wait_for(
        mb,
        &edge_sync_configs(),
        None,
        "broken",
        "ConfigValid=True once fixed",
        |c| condition(c, "ConfigValid").is_some_and(|c| c["status"] == "True"),
    )
    .await;
    syncer.stop().await;
}

#[tokio::test]
async fn a_conversion_added_later_renatures_a_kind_already_selected() {
    let stage = Stage::start().await;
    let (mb, down) = (&stage.mb, &stage.down);
    mb.create(&crds(), denatured_binding_crd()).await;
    let binding = denatured_view_binding(
        "late-admin",
        json!({ "kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io" }),
    );
    create_once_served(mb, &binding).await;
    mb.create(
        &edge_sync_configs(),
        json!({
            "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgeSyncConfig",
            "metadata": { "name": "bindings" },
            "spec": { "downSyncedResources": [
                { "group": "denatured.example.io", "version": "v1", "kind": "ClusterRoleBinding", "name": "*" }
            ] }
        }),
    )
    .await;
    let syncer = start_syncer(&stage.up, &stage.ws, &stage.wec, "florin").await;
    wait_ready(&syncer).await;
    // Without a conversion the look-alike kind is not served downstream: nothing lands.
    assert!(down
        .get(&cluster_role_bindings(), None, "late-admin")
        .await
        .is_none());

    mb.merge(
        &edge_sync_configs(),
        None,
        "bindings",
        json!({ "spec": { "conversions": [
            { "upstream": obj("denatured.example.io", "ClusterRoleBinding", "late-admin"),
              "downstream": obj("rbac.authorization.k8s.io", "ClusterRoleBinding", "late-admin") }
        ] } }),
    )
    .await;
    let crb = wait_for(
        down,
        &cluster_role_bindings(),
        None,
        "late-admin",
        "the binding renatured once its conversion is added",
        |_| true,
    )
    .await;
    assert_eq!(crb["subjects"][0]["name"], "alice", "{crb}");
    syncer.stop().await;
}
