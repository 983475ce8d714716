//! `ferry syncagent` as a process, with the reference's flag names: it refuses an unknown
//! controller, and with kcp (a hub with `root:provider` exporting `databases.example.io`
//! and `root:c1` binding it) and a service cluster (another hub with a Database CRD and
//! a PublishedResource) it publishes the schema, serves `/readyz`, and syncs a
//! consumer's Database down.

use std::process::{Command, Stdio};

use ferry_hub::kubeconfig::{kubeconfig, AuthInfo};
use ferry_hub::testing::{eventually, TestHub};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

const EXPORT: &str = "databases.example.io";

fn write_kubeconfig(hub: &TestHub, workspace: Option<&str>, file: &str) -> std::path::PathBuf {
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

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn client(path: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

async fn create(client: &kube::Client, resource: &ApiResource, ns: Option<&str>, obj: Value) {
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

async fn get(client: &kube::Client, resource: &ApiResource, ns: Option<&str>, name: &str) -> Option<Value> {
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    api.get(name).await.ok().map(|o| serde_json::to_value(o).unwrap())
}

/// A loopback address with a port nobody listens on now.
fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `GET http://addr/path`: the status code, if it answered.
fn status_of(addr: &str, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.split_whitespace().nth(1)?.parse().ok()
}

#[tokio::test(flavor = "multi_thread")]
async fn syncagent_takes_the_reference_flags_publishes_and_syncs() {
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
        json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": { "name": EXPORT }, "spec": {} }),
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
    for crd in ferry_api::crds::all_crds() {
        let crd = serde_json::to_value(crd).unwrap();
        if crd["metadata"]["name"] == "publishedresources.syncagent.kcp.io" {
            create(&service, &crds, None, crd).await;
        }
    }
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
    let prs = ar(
        "syncagent.kcp.io",
        "v1alpha1",
        "PublishedResource",
        "publishedresources",
    );
    create(
        &service,
        &prs,
        None,
        json!({ "apiVersion": "syncagent.kcp.io/v1alpha1", "kind": "PublishedResource",
                "metadata": { "name": "databases", "labels": { "team": "db" } },
                "spec": { "resource": { "apiGroup": "example.com", "kind": "Database", "versions": ["v1"] } } }),
    )
    .await;

    let agent = |extra: &[&str], metrics: &str| {
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args([
                "syncagent",
                "--kcp-kubeconfig",
                provider_kubeconfig.to_str().unwrap(),
                "--kubeconfig",
                service_kubeconfig.to_str().unwrap(),
                "--apiexportendpointslice-ref",
                EXPORT,
                "--namespace=ferry-system",
                "--agent-name=nora",
                "--published-resource-selector=team=db",
                "--metrics-address",
                metrics,
            ])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // An unknown controller: it says which ones exist and exits.
    let wrong = agent(&["--disabled-controllers=bogus"], &free_address());
    let output = tokio::task::spawn_blocking(move || wrong.wait_with_output().unwrap())
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bogus") && stderr.contains("apiresourceschema"),
        "{stderr}"
    );

    // Run as one of two replicas would: it syncs once it holds the Lease
    // syncagent.<agent name> in --namespace on the service cluster.
    create(
        &service,
        &ar("", "v1", "Namespace", "namespaces"),
        None,
        json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": "ferry-system" } }),
    )
    .await;
    let metrics = free_address();
    let mut running = agent(
        &["--enable-leader-election", "--leader-elect-retry-period=200ms"],
        &metrics,
    );
    let schema = eventually(
        30,
        "the schema name in the PublishedResource's status",
        || async {
            let pr = get(&service, &prs, None, "databases").await?;
            pr["status"]["resourceSchemaName"].as_str().map(str::to_string)
        },
    )
    .await;
    assert!(schema.ends_with(".databases.databases.example.io"), "{schema}");
    let addr = metrics.clone();
    eventually(30, "/readyz to answer 200", || {
        let addr = addr.clone();
        async move {
            let code = tokio::task::spawn_blocking(move || status_of(&addr, "/readyz"))
                .await
                .ok()?;
            (code == Some(200)).then_some(())
        }
    })
    .await;

    create(
        &c1,
        &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
        None,
        json!({ "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": { "name": "databases" },
                "spec": { "reference": { "export": { "path": "root:provider", "name": EXPORT } } } }),
    )
    .await;
    let remote = ar(EXPORT, "v1", "Database", "databases");
    create(
        &c1,
        &remote,
        Some("default"),
        json!({ "apiVersion": format!("{EXPORT}/v1"), "kind": "Database",
                "metadata": { "name": "my-db", "namespace": "default" }, "spec": { "size": 1 } }),
    )
    .await;
    let source = get(&c1, &remote, Some("default"), "my-db").await.unwrap();
    let cluster = source["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .unwrap()
        .to_string();
    let local = ar("example.com", "v1", "Database", "databases");
    let name = ferry_syncer::profiles::syncagent::default_name("default", "my-db");
    let copy = eventually(30, "the Database on the service cluster", || async {
        get(&service, &local, Some(&cluster), &name).await
    })
    .await;
    assert_eq!(copy["metadata"]["labels"]["syncagent.kcp.io/agent-name"], "nora");
    assert_eq!(copy["spec"]["size"], 1);
    let lease = get(
        &service,
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
    running.kill().unwrap();
    let _ = running.wait();
}
