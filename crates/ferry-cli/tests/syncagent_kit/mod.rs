//! The stage of the `ferry syncagent` tests: kcp (a hub with `root:provider` holding an
//! APIExport, and `root:c1`) and a service cluster (another hub with a Database CRD),
//! each with an admin kubeconfig file and client.

#![allow(dead_code)]

use ferry_hub::kubeconfig::{kubeconfig, AuthInfo};
use ferry_hub::testing::{eventually, TestHub};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

pub fn write_kubeconfig(hub: &TestHub, workspace: Option<&str>, file: &str) -> std::path::PathBuf {
    let path = hub.data_dir().join(file);
    let server = match workspace {
        Some(ws) => format!("{}/clusters/{ws}", hub.url()),
        None => hub.url().to_string(),
    };
    let text = kubeconfig(
        "hub",
        &server,
        &hub.running.ca_pem,
        AuthInfo::Token(hub.running.admin_token.clone()),
        "hub",
        None,
    );
    std::fs::write(&path, text).unwrap();
    path
}

pub fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub async fn client(path: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
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

/// A loopback address with a port nobody listens on now.
pub fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `GET http://addr/path`: the status code, if it answered.
pub fn status_of(addr: &str, path: &str) -> Option<u16> {
    response_of(addr, path)?.split_whitespace().nth(1)?.parse().ok()
}

/// `GET http://addr/path`: the whole response, if it answered.
pub fn response_of(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    Some(response)
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
        let crds = ar(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        );
        create(
            &service,
            &crds,
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
    let crds = ar(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    );
    for crd in ferry_api::crds::all_crds() {
        let crd = serde_json::to_value(crd).unwrap();
        if crd["metadata"]["name"] == "publishedresources.syncagent.kcp.io" {
            create(service, &crds, None, crd).await;
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

pub fn published_resources() -> ApiResource {
    ar(
        "syncagent.kcp.io",
        "v1alpha1",
        "PublishedResource",
        "publishedresources",
    )
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
