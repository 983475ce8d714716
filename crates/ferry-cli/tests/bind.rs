//! `kubectl ferry bind apiexport root:provider:<export>`, through kubectl's
//! plugin mechanism: the binding is created, waits until Bound, and records
//! the permission-claim decisions; bad references and claims are refused
//! with a message saying what to write.

use std::path::Path;
use std::process::{Command, Output};

use ferry_testkit::clients::workspace_kubeconfig;
use ferry_testkit::kubectl::{AsyncKubectl, Kubectl};
use ferry_testkit::{client_from, eventually, TestHub};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

async fn create(client: &kube::Client, resource: &ApiResource, obj: Value) {
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    Api::<DynamicObject>::all_with(client.clone(), resource)
        .create(&PostParams::default(), &obj)
        .await
        .expect("created");
}

/// `kubectl ferry ARGS` with `kubeconfig` (in its own directory, kubectl's HOME).
fn kubectl_ferry(kubeconfig: &Path, args: &[&str]) -> Output {
    let home = kubeconfig.parent().expect("the kubeconfig's directory");
    Kubectl::new(kubeconfig, home).run(&[&["ferry"], args].concat())
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_ferry_bind_apiexport_binds_and_records_claims() {
    let hub = TestHub::start().await;
    let root = client_from(hub.kubeconfig(), None).await;
    let workspaces = ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces");
    for name in ["provider", "consumer"] {
        create(
            &root,
            &workspaces,
            json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}}),
        )
        .await;
    }
    let provider = client_from(&workspace_kubeconfig(&hub, "root:provider"), None).await;
    create(
        &provider,
        &ar("apis.kcp.io", "v1alpha1", "APIResourceSchema", "apiresourceschemas"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
               "metadata": {"name": "v1.widgets.example.io"},
               "spec": {"group": "example.io", "scope": "Namespaced",
                        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                                      "schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}]}}),
    )
    .await;
    create(
        &provider,
        &ar("apis.kcp.io", "v1alpha1", "APIExport", "apiexports"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "widgets.example.io"},
               "spec": {"latestResourceSchemas": ["v1.widgets.example.io"],
                        "permissionClaims": [{"resource": "configmaps", "all": true}, {"resource": "secrets", "all": true}]}}),
    )
    .await;
    let consumer_kc = workspace_kubeconfig(&hub, "root:consumer");

    // Bad input first: nothing is created.
    let out = kubectl_ferry(&consumer_kc, &["bind", "apiexport", "widgets.example.io"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("<workspace path>:<export name>"),
        "{out:?}"
    );
    let out = kubectl_ferry(
        &consumer_kc,
        &[
            "bind",
            "apiexport",
            "root:provider:widgets.example.io",
            "--accept-permission-claim",
            "pods",
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no permission claim on pods"),
        "{out:?}"
    );

    let out = tokio::task::spawn_blocking(move || {
        kubectl_ferry(
            &consumer_kc,
            &[
                "bind",
                "apiexport",
                "root:provider:widgets.example.io",
                "--accept-permission-claim",
                "configmaps",
                "--reject-permission-claim",
                "secrets.core",
            ],
        )
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("apibinding widgets.example.io created. Waiting to successfully bind ...")
            && stdout.contains("widgets.example.io created and bound."),
        "{stdout}"
    );
    let consumer = client_from(&workspace_kubeconfig(&hub, "root:consumer"), None).await;
    let binding = Api::<DynamicObject>::all_with(
        consumer.clone(),
        &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
    )
    .get("widgets.example.io")
    .await
    .unwrap();
    let claims = binding.data["spec"]["permissionClaims"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        claims
            .iter()
            .any(|c| c["resource"] == "configmaps" && c["state"] == "Accepted"),
        "{claims:?}"
    );
    assert!(
        claims
            .iter()
            .any(|c| c["resource"] == "secrets" && c["state"] == "Rejected"),
        "{claims:?}"
    );
    // And the API is served in the consumer.
    let widgets = ar("example.io", "v1", "Widget", "widgets");
    eventually(10, "widgets served", || async {
        Api::<DynamicObject>::all_with(consumer.clone(), &widgets)
            .list(&Default::default())
            .await
            .ok()
    })
    .await;
}

/// The walk-through as a new user types it, in one kubeconfig:
/// `ws create provider --enter`, apply a schema and an export, `ws use root`,
/// `ws create consumer --enter`, `bind apiexport`, `get widgets`, and the
/// endpoint slice's URL read back in the provider.
#[tokio::test(flavor = "multi_thread")]
async fn the_walk_through_with_ws_and_bind() {
    let hub = TestHub::start().await;
    let kc = workspace_kubeconfig(&hub, "root");
    let kubectl = AsyncKubectl::new(kc.clone(), hub.data_dir());
    let run = |args: &'static [&'static str], stdin: Option<&'static str>| kubectl.ok_with(args, stdin);
    run(&["ferry", "ws", "create", "provider", "--enter"], None).await;
    let out = run(&["apply", "-f", "-"], Some(SCHEMA_AND_EXPORT)).await;
    assert!(
        out.contains("apiexport.apis.kcp.io/widgets.example.io created"),
        "{out}"
    );
    run(&["ferry", "ws", "use", "root"], None).await;
    run(&["ferry", "ws", "create", "consumer", "--enter"], None).await;
    let out = run(
        &["ferry", "bind", "apiexport", "root:provider:widgets.example.io"],
        None,
    )
    .await;
    assert!(out.contains("widgets.example.io created and bound."), "{out}");
    run(&["apply", "-f", "-"], Some("apiVersion: example.io/v1\nkind: Widget\nmetadata: {name: first, namespace: default}\nspec: {size: 3}\n")).await;
    let out = run(&["get", "widgets", "-A"], None).await;
    assert!(out.contains("first") && out.contains("SIZE"), "{out}");
    run(&["ferry", "ws", "use", "root:provider"], None).await;
    let url = run(
        &[
            "get",
            "apiexportendpointslice",
            "widgets.example.io",
            "-o",
            "jsonpath={.status.endpoints[0].url}",
        ],
        None,
    )
    .await;
    assert!(
        url.starts_with(hub.url()) && url.contains("/services/apiexport/"),
        "{url}"
    );
    // The provider's admin reads every consumer's widgets there with kubectl.
    let server = format!("{url}/clusters/*");
    let out = tokio::task::spawn_blocking({
        let kc = kc.clone();
        move || {
            Command::new("kubectl")
                .args(["--server", &server, "get", "widgets", "-A"])
                .env("KUBECONFIG", &kc)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("first"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const SCHEMA_AND_EXPORT: &str = "\
apiVersion: apis.kcp.io/v1alpha1
kind: APIResourceSchema
metadata: {name: v1.widgets.example.io}
spec:
  group: example.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns: [{name: Size, type: integer, jsonPath: .spec.size}]
    schema:
      type: object
      properties:
        spec: {type: object, properties: {size: {type: integer}}}
---
apiVersion: apis.kcp.io/v1alpha1
kind: APIExport
metadata: {name: widgets.example.io}
spec:
  latestResourceSchemas: [v1.widgets.example.io]
";
