//! The stage of the `ferry syncagent` tests: kcp (a hub with `root:provider` holding an
//! APIExport, and `root:c1`) and a service cluster (another hub with a Database CRD),
//! each with an admin kubeconfig file and client.

#![allow(dead_code, unused_imports)]

use ferry_hub::kubeconfig::AuthInfo;
use ferry_testkit::{client_from, eventually, TestHub};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Value};

pub use ferry_testkit::net::{free_address, response_of, status_of};
pub use ferry_testkit::resources::{ar, crds, published_resources};

/// The stderr of `child`, a process that must refuse to start (waited for
/// off the runtime, which the hubs it talks to run on).
pub async fn refused_to_start(child: std::process::Child) -> String {
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(!output.status.success());
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes `file` in `hub`'s data directory: an admin kubeconfig for `hub` at
/// `workspace` (its top when `None`); returns its path.
pub fn write_kubeconfig(hub: &TestHub, workspace: Option<&str>, file: &str) -> std::path::PathBuf {
    ferry_testkit::clients::write_kubeconfig(
        hub.data_dir().join(file),
        hub,
        workspace,
        AuthInfo::Token(hub.running.admin_token.clone()),
    )
}

/// An admin client from the kubeconfig file at `path`.
pub async fn client(path: &std::path::Path) -> kube::Client {
    client_from(path, None).await
}

pub async fn create(client: &kube::Client, resource: &ApiResource, ns: Option<&str>, obj: Value) {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    eventually(15, "the object created", || async {
        api.create(&PostParams::default(), &obj).await.ok()
    })
    .await;
}

pub async fn get(
    client: &kube::Client,
    resource: &ApiResource,
    ns: Option<&str>,
    name: &str,
) -> Option<Value> {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    api.get(name).await.ok().map(|o| serde_json::to_value(o).unwrap())
}

/// kcp (`root:provider` holding the APIExport `export`, `root:c1`) and a service
/// cluster with a Database CRD, each with an admin kubeconfig file and client.
pub struct Stage {
    pub kcp: TestHub,
    pub service_hub: TestHub,
    pub provider_kubeconfig: std::path::PathBuf,
    pub provider: kube::Client,
    pub c1: kube::Client,
    pub service_kubeconfig: std::path::PathBuf,
    pub service: kube::Client,
}

impl Stage {
    pub async fn start(export: &str) -> Stage {
        let kcp = TestHub::start().await;
        let service_hub = TestHub::start().await;
        let root = client(&write_kubeconfig(&kcp, Some("root"), "root.kubeconfig")).await;
        let workspaces = ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces");
        for name in ["provider", "c1"] {
            create(
                &root,
                &workspaces,
                None,
                json!({ "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": { "name": name } }),
            )
            .await;
        }
        let provider_kubeconfig = write_kubeconfig(&kcp, Some("root:provider"), "provider.kubeconfig");
        let provider = client(&provider_kubeconfig).await;
        let c1 = client(&write_kubeconfig(&kcp, Some("root:c1"), "c1.kubeconfig")).await;
        create(
            &provider,
            &ar("apis.kcp.io", "v1alpha1", "APIExport", "apiexports"),
            None,
            json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": { "name": export }, "spec": {} }),
        )
        .await;
        let service_kubeconfig = write_kubeconfig(&service_hub, None, "service.kubeconfig");
        let service = client(&service_kubeconfig).await;
        create(
            &service,
            &crds(),
            None,
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": { "name": "databases.example.com" },
                "spec": { "group": "example.com", "scope": "Namespaced",
                    "names": { "kind": "Database", "plural": "databases", "singular": "database", "listKind": "DatabaseList" },
                    "versions": [{ "name": "v1", "served": true, "storage": true, "subresources": { "status": {} },
                        "schema": { "openAPIV3Schema": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } } }] }
            }),
        )
        .await;
        Stage {
            kcp,
            service_hub,
            provider_kubeconfig,
            provider,
            c1,
            service_kubeconfig,
            service,
        }
    }
}

/// Installs the PublishedResource CRD on the service cluster and publishes its
/// Databases (`databases`, labelled `team=db`).
pub async fn publish_databases(service: &kube::Client) {
    for crd in ferry_api::crds::all_crds() {
        let crd = serde_json::to_value(crd).unwrap();
        if crd["metadata"]["name"] == "publishedresources.syncagent.kcp.io" {
            create(service, &crds(), None, crd).await;
        }
    }
    create(
        service,
        &published_resources(),
        None,
        json!({ "apiVersion": "syncagent.kcp.io/v1alpha1", "kind": "PublishedResource",
                "metadata": { "name": "databases", "labels": { "team": "db" } },
                "spec": { "resource": { "apiGroup": "example.com", "kind": "Database", "versions": ["v1"] } } }),
    )
    .await;
}

/// The agent `nora` holds its Lease in `ferry-system` on the service cluster.
pub async fn assert_holds_lease(service: &kube::Client) {
    let lease = get(
        service,
        &ar("coordination.k8s.io", "v1", "Lease", "leases"),
        Some("ferry-system"),
        "syncagent.nora",
    )
    .await
    .expect("the agent's Lease");
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{lease}"
    );
}

/// The APIBinding `name` in `consumer`'s workspace of the APIExport `export`
/// in `root:provider`.
pub async fn bind_provider_export(consumer: &kube::Client, name: &str, export: &str) {
    create(
        consumer,
        &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
        None,
        json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": { "name": name },
                "spec": { "reference": { "export": { "path": "root:provider", "name": export } } } }),
    )
    .await;
}

/// A consumer's Database `default/name` of size `size`, in the group
/// `export` serves it under.
pub async fn create_database(consumer: &kube::Client, export: &str, name: &str, size: usize) {
    create(
        consumer,
        &ar(export, "v1", "Database", "databases"),
        Some("default"),
        json!({ "apiVersion": format!("{export}/v1"), "kind": "Database",
                "metadata": { "name": name, "namespace": "default" }, "spec": { "size": size } }),
    )
    .await;
}
