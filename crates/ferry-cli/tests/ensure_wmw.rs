//! The KubeStellar flow a user types: `ferry ensure wmw`, `ferry ensure
//! location`, then `kubectl apply` of the workload and an EdgePlacement in the
//! WMW — and the hub's placement translator fills the SyncTarget's mailbox.

mod common;

use common::ferry_with as ferry_output;

use ferry_hub::kubeconfig::{kubeconfig, AuthInfo};
use ferry_testkit::{client_from, eventually, TestHub};
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

fn ferry(args: &[&str], kubeconfig: &std::path::Path) {
    let out = ferry_output(args, kubeconfig);
    assert!(
        out.status.success(),
        "ferry {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const WORKLOAD: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: commonstuff
  labels: {common: "si"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: httpd-htdocs
  namespace: commonstuff
data:
  index.html: "<html>common</html>"
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata:
  name: edge-placement-c
spec:
  locationSelectors:
  - matchLabels: {"env":"prod"}
  downsync:
  - apiGroup: ""
    resources: [ configmaps ]
    namespaces: [ commonstuff ]
    objectNames: [ httpd-htdocs ]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn ensure_wmw_then_an_edge_placement_fills_the_mailbox() {
    let hub = TestHub::start().await;
    ferry(&["ensure", "wmw", "example-wmw"], hub.kubeconfig());
    ferry(&["ensure", "wmw", "example-wmw"], hub.kubeconfig()); // ensure, not create
    ferry(&["ensure", "wmw", "imw1"], hub.kubeconfig());
    let imw_kubeconfig = hub.data_dir().join("imw1.kubeconfig");
    std::fs::write(
        &imw_kubeconfig,
        kubeconfig(
            "imw1",
            &format!("{}/clusters/root:imw1", hub.url()),
            &hub.running.ca_pem,
            AuthInfo::Token(hub.running.admin_token.clone()),
            "imw1",
            None,
        ),
    )
    .unwrap();
    ferry(
        &["ensure", "location", "florin", "loc-name=florin", "env=prod"],
        &imw_kubeconfig,
    );

    let server = format!("{}/clusters/root:example-wmw", hub.url());
    let out = hub.kubectl_stdin(&["--server", &server, "apply", "-f", "-"], Some(WORKLOAD));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let inv = client_from(&imw_kubeconfig, None).await;
    let st = Api::<DynamicObject>::all_with(
        inv,
        &ar("edge.kubestellar.io", "v2alpha1", "SyncTarget", "synctargets"),
    )
    .get("florin")
    .await
    .unwrap();
    let root = client_from(hub.kubeconfig(), None).await;
    let imw =
        Api::<DynamicObject>::all_with(root, &ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"))
            .get("imw1")
            .await
            .unwrap();
    let mailbox = format!(
        "root:{}-mb-{}",
        imw.data["spec"]["cluster"].as_str().unwrap(),
        st.metadata.uid.unwrap()
    );
    let mb = client_from(hub.kubeconfig(), Some(&mailbox)).await;
    let copies = Api::<DynamicObject>::namespaced_with(
        mb.clone(),
        "commonstuff",
        &ar("", "v1", "ConfigMap", "configmaps"),
    );
    let configs = Api::<DynamicObject>::all_with(
        mb,
        &ar("edge.kubestellar.io", "v2alpha1", "SyncerConfig", "syncerconfigs"),
    );
    eventually(20, "the copy and the-one in florin's mailbox", || {
        let (copies, configs) = (copies.clone(), configs.clone());
        async move {
            copies.get_opt("httpd-htdocs").await.ok()??;
            let one = configs.get_opt("the-one").await.ok()??;
            (one.data["spec"]["namespacedObjects"][0]["objectsByNamespace"][0]["names"][0] == "httpd-htdocs")
                .then_some(())
        }
    })
    .await;
    let out = hub.kubectl(&["--server", &server, "get", "edgeplacements"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let row: Vec<&str> = text
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row.first(), Some(&"edge-placement-c"), "{text}");
    assert_eq!(row.get(1), Some(&"1"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wmw_made_before_kubestellar_init_moves_to_bind_espw_keeping_its_placements() {
    let hub = TestHub::start().await;
    // Before the ESPW exists: the CRDs, installed directly (an older Ferry's shape).
    ferry(&["ensure", "wmw", "example-wmw"], hub.kubeconfig());
    let server = format!("{}/clusters/root:example-wmw", hub.url());
    let out = hub.kubectl_stdin(&["--server", &server, "apply", "-f", "-"], Some(WORKLOAD));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let wmw = client_from(hub.kubeconfig(), Some("root:example-wmw")).await;
    let placements = Api::<DynamicObject>::all_with(
        wmw.clone(),
        &ar(
            "edge.kubestellar.io",
            "v2alpha1",
            "EdgePlacement",
            "edgeplacements",
        ),
    );
    let before = placements.get("edge-placement-c").await.unwrap();

    ferry(&["kubestellar", "init"], hub.kubeconfig());
    ferry(&["ensure", "wmw", "example-wmw"], hub.kubeconfig());

    let bindings = Api::<DynamicObject>::all_with(
        wmw.clone(),
        &ar("apis.kcp.io", "v1alpha1", "APIBinding", "apibindings"),
    );
    let binding = bindings.get("bind-espw").await.unwrap();
    assert_eq!(binding.data["status"]["phase"], "Bound");
    assert_eq!(
        binding.data["spec"]["reference"]["export"],
        serde_json::json!({"path": "root:espw", "name": "edge.kubestellar.io"})
    );
    let crds = Api::<DynamicObject>::all_with(
        wmw,
        &ar(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
        ),
    );
    assert!(
        crds.get_opt("edgeplacements.edge.kubestellar.io")
            .await
            .unwrap()
            .is_none(),
        "the binding took the CRD's place"
    );
    let after = placements.get("edge-placement-c").await.unwrap();
    assert_eq!(after.metadata.uid, before.metadata.uid, "the same EdgePlacement");
    assert_eq!(after.data["spec"], before.data["spec"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn remove_wmw_deletes_the_workspace_and_refuses_kubestellars_own() {
    let hub = TestHub::start().await;
    ferry(&["kubestellar", "init"], hub.kubeconfig());
    ferry(&["ensure", "wmw", "example-wmw"], hub.kubeconfig());
    let root = client_from(hub.kubeconfig(), None).await;
    let workspaces =
        Api::<DynamicObject>::all_with(root, &ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"));
    assert!(workspaces.get_opt("example-wmw").await.unwrap().is_some());

    let out = ferry_output(&["kubestellar", "remove", "wmw", "example-wmw"], hub.kubeconfig());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("root:example-wmw removed"));
    eventually(20, "the WMW to be gone", || {
        let workspaces = workspaces.clone();
        async move {
            workspaces
                .get_opt("example-wmw")
                .await
                .ok()?
                .is_none()
                .then_some(())
        }
    })
    .await;
    // Again (as KubeStellar's teardown may run twice), and as `kubectl ferry remove wmw`.
    let out = ferry_output(&["remove", "wmw", "example-wmw"], hub.kubeconfig());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("does not exist"));

    // The ESPW is not a WMW.
    let out = ferry_output(&["kubestellar", "remove", "wmw", "espw"], hub.kubeconfig());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("root:espw") && err.contains("not a workload management workspace"),
        "{err}"
    );
    assert!(workspaces.get_opt("espw").await.unwrap().is_some());
}
