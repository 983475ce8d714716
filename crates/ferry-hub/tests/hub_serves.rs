//! What a real cluster serves besides the objects clients write: the
//! `default/kubernetes` Service, `componentstatuses`, GET on listed
//! subresources, per-kind field selectors, full OpenAPI schemas for
//! `kubectl explain` (of kcp's kinds too), and kube-apiserver's key order.

mod common;

use common::ok;
use ferry_testkit::TestHub;

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_explain_describes_any_field_of_a_built_in_kind() {
    let hub = TestHub::start().await;
    let replicas = ok(
        hub.kubectl(&["explain", "deployment.spec.replicas"]),
        "explain replicas",
    );
    assert!(replicas.contains("FIELD: replicas <integer>"), "{replicas}");
    assert!(replicas.contains("Number of desired pods"), "{replicas}");
    let image = ok(
        hub.kubectl(&["explain", "pod.spec.containers.image"]),
        "explain image",
    );
    assert!(image.contains("Container image name"), "{image}");
    let recursive = ok(
        hub.kubectl(&["explain", "deployment.spec.strategy", "--recursive"]),
        "explain --recursive",
    );
    assert!(
        recursive.contains("rollingUpdate") && recursive.contains("maxSurge"),
        "{recursive}"
    );
    let labels = ok(
        hub.kubectl(&["explain", "configmap.metadata.labels"]),
        "explain labels",
    );
    assert!(labels.contains("map[string]string"), "{labels}");
}

/// kcp's kinds, which the API server library does not know and
/// `ferry-server` registers with the hubs it builds, are served as
/// Kubernetes' own are: listed in discovery under their group and short
/// name, in kcp's category, and explained from their schema.
#[tokio::test(flavor = "multi_thread")]
async fn kcps_kinds_are_discovered_and_explained_as_built_ins() {
    let hub = TestHub::start().await;
    let resources = ok(
        hub.kubectl(&["api-resources", "--categories", "kcp", "-o", "wide"]),
        "api-resources",
    );
    for (name, group) in [
        ("workspaces", "tenancy.kcp.io"),
        ("apibindings", "apis.kcp.io"),
        ("synctargets", "workload.kcp.io"),
        ("logicalclusters", "core.kcp.io"),
    ] {
        let line = resources
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{resources}"));
        assert!(line.contains(group), "{line}");
    }
    let workspaces = resources
        .lines()
        .find(|l| l.starts_with("workspaces "))
        .unwrap_or_default();
    assert!(workspaces.split_whitespace().nth(1) == Some("ws"), "{workspaces}");
    let explained = ok(
        hub.kubectl(&["explain", "synctargets.spec.evictAfter"]),
        "explain synctargets",
    );
    assert!(explained.contains("GROUP:      workload.kcp.io"), "{explained}");
    assert!(explained.contains("FIELD: evictAfter"), "{explained}");
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: NAME, namespace: default}
spec:
  containers: [{name: main, image: nginx}]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn field_selectors_compare_unset_fields_as_kube_defaults() {
    let hub = TestHub::start().await;
    ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(&POD.replace("NAME", "fresh"))),
        "create pod",
    );
    let running = POD.replace("NAME", "running") + "  nodeName: n1\n";
    ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(&running)),
        "create pod",
    );
    ok(
        hub.kubectl(&[
            "patch",
            "pod",
            "running",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Running"}}"#,
        ]),
        "set phase",
    );
    let names = |selector: &str| {
        ok(
            hub.kubectl(&["get", "pods", "--field-selector", selector, "-o", "name"]),
            selector,
        )
    };
    assert_eq!(names("status.phase=Pending"), "pod/fresh\n");
    assert_eq!(names("status.phase=Running"), "pod/running\n");
    assert_eq!(names("spec.nodeName=n1"), "pod/running\n");
    assert_eq!(names("spec.nodeName="), "pod/fresh\n");
    assert_eq!(
        names("spec.restartPolicy=Always,spec.schedulerName=default-scheduler"),
        "pod/fresh\npod/running\n"
    );

    for (name, spec) in [("plain", "{}"), ("cordoned", r#"{"unschedulable": true}"#)] {
        let node =
            format!(r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}"}},"spec":{spec}}}"#);
        ok(
            hub.kubectl_stdin(&["create", "-f", "-"], Some(&node)),
            "create node",
        );
    }
    let nodes = |selector: &str| {
        ok(
            hub.kubectl(&["get", "nodes", "--field-selector", selector, "-o", "name"]),
            selector,
        )
    };
    assert_eq!(nodes("spec.unschedulable=false"), "node/plain\n");
    assert_eq!(nodes("spec.unschedulable!=false"), "node/cordoned\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn unsupported_field_labels_are_a_400_on_list_and_watch() {
    let hub = TestHub::start().await;
    let client = common::client(&hub, "root").await;
    for path in [
        "/api/v1/namespaces/default/configmaps?fieldSelector=data.x%3Dy",
        "/api/v1/namespaces/default/configmaps?watch=true&fieldSelector=data.x%3Dy",
    ] {
        let (code, body) = common::call(&client, "GET", path, None).await;
        assert_eq!(code, 400, "{path}: {body}");
        assert_eq!(body["reason"], "BadRequest", "{body}");
        assert_eq!(body["message"], "field label not supported: data.x", "{body}");
    }
    // Nodes only know metadata.name among the metadata labels.
    let (code, body) = common::call(
        &client,
        "GET",
        "/api/v1/nodes?fieldSelector=metadata.namespace%3Dx",
        None,
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (400, Some("field label not supported: metadata.namespace"))
    );
    let out = hub.kubectl(&["get", "secrets", "--field-selector", "data.password=x"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("field label not supported: data.password"),
        "{stderr}"
    );
    // Supported ones pass, and secrets default to type Opaque.
    ok(
        hub.kubectl(&["create", "secret", "generic", "s", "--from-literal=a=b"]),
        "create secret",
    );
    let secrets = ok(
        hub.kubectl(&["get", "secrets", "--field-selector", "type=Opaque", "-o", "name"]),
        "secrets by type",
    );
    assert!(secrets.contains("secret/s"), "{secrets}");
}

const WORKSPACE: &str =
    r#"{"apiVersion":"tenancy.kcp.io/v1alpha1","kind":"Workspace","metadata":{"name":"team"}}"#;

#[tokio::test(flavor = "multi_thread")]
async fn every_workspace_has_the_kubernetes_service_and_it_comes_back() {
    use k8s_openapi::api::core::v1::{Endpoints, Service};
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube::api::Api;

    let hub = TestHub::start_with(|o| o.service_ranges = Default::default()).await;
    let port = hub.running.addr.port();
    ok(
        hub.kubectl_stdin(&["create", "-f", "-"], Some(WORKSPACE)),
        "create workspace",
    );
    for workspace in ["root", "root:team"] {
        let client = common::client(&hub, workspace).await;
        let services: Api<Service> = Api::namespaced(client.clone(), "default");
        let svc = services.get("kubernetes").await.expect("kubernetes service");
        let labels = svc.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("component").map(String::as_str), Some("apiserver"));
        assert_eq!(labels.get("provider").map(String::as_str), Some("kubernetes"));
        let spec = svc.spec.expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.cluster_ip.as_deref(), Some("10.96.0.1"));
        let svc_port = &spec.ports.expect("ports")[0];
        assert_eq!((svc_port.name.as_deref(), svc_port.port), (Some("https"), 443));
        assert_eq!(
            svc_port.target_port,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(
                port as i32
            ))
        );
        let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
        let ep = endpoints.get("kubernetes").await.expect("endpoints");
        let subset = &ep.subsets.expect("subsets")[0];
        assert_eq!(subset.addresses.as_ref().unwrap()[0].ip, "127.0.0.1");
        assert_eq!(subset.ports.as_ref().unwrap()[0].port, port as i32);
        let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
        let slice = slices.get("kubernetes").await.expect("endpointslice");
        assert_eq!(
            slice
                .metadata
                .labels
                .unwrap_or_default()
                .get("kubernetes.io/service-name")
                .map(String::as_str),
            Some("kubernetes")
        );
        assert_eq!(slice.endpoints[0].addresses, vec!["127.0.0.1".to_string()]);
    }
    let table = ok(
        hub.kubectl_in("root:team", &["get", "svc", "kubernetes", "-n", "default"], None),
        "kubectl get svc kubernetes",
    );
    assert!(
        table.contains("kubernetes") && table.contains("10.96.0.1") && table.contains("443/TCP"),
        "{table}"
    );

    let ep = ok(
        hub.kubectl(&["get", "endpoints,endpointslices", "-n", "default"]),
        "get endpoints",
    );
    assert!(ep.contains(&format!("127.0.0.1:{port}")), "{ep}");
    let slice_row: Vec<&str> = ep
        .lines()
        .find(|l| l.starts_with("endpointslice"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(slice_row[1..4], ["IPv4", &port.to_string(), "127.0.0.1"], "{ep}");

    // Deleted: recreated, as kube-apiserver's controller does.
    ok(
        hub.kubectl(&["delete", "svc", "kubernetes", "-n", "default"]),
        "delete service",
    );
    ok(
        hub.kubectl(&["delete", "endpoints", "kubernetes", "-n", "default"]),
        "delete endpoints",
    );
    let client = common::client(&hub, "root").await;
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    common::eventually(
        10,
        "the kubernetes Service and Endpoints to come back",
        || async {
            (services.get_opt("kubernetes").await.ok()?.is_some()
                && endpoints.get_opt("kubernetes").await.ok()?.is_some())
            .then_some(())
        },
    )
    .await;
    // Changed: repaired.
    ok(
        hub.kubectl(&[
            "patch",
            "endpoints",
            "kubernetes",
            "-n",
            "default",
            "--type=merge",
            "-p",
            r#"{"subsets":[{"addresses":[{"ip":"10.1.1.1"}],"ports":[{"name":"https","port":1}]}]}"#,
        ]),
        "break endpoints",
    );
    common::eventually(10, "the kubernetes Endpoints to be repaired", || async {
        let ep = endpoints.get("kubernetes").await.ok()?;
        let ip = ep.subsets?.first()?.addresses.as_ref()?.first()?.ip.clone();
        (ip == "127.0.0.1").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn componentstatuses_are_listed_with_the_deprecation_warning() {
    let hub = TestHub::start().await;
    let out = hub.kubectl(&["get", "componentstatuses"]);
    let table = ok(out.clone(), "get componentstatuses");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Warning: v1 ComponentStatus is deprecated in v1.19+"),
        "{stderr}"
    );
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("NAME")
            && header.contains("STATUS")
            && header.contains("MESSAGE")
            && header.contains("ERROR"),
        "{table}"
    );
    for name in ["scheduler", "controller-manager", "etcd-0"] {
        let row = table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {table}"));
        assert!(row.contains("Healthy") && row.contains("ok"), "{row}");
    }
    let resources = ok(hub.kubectl(&["api-resources", "--api-group="]), "api-resources");
    let row = resources
        .lines()
        .find(|l| l.starts_with("componentstatuses"))
        .expect("listed");
    assert!(row.contains(" cs ") && row.contains("ComponentStatus"), "{row}");

    let client = common::client(&hub, "root").await;
    let (code, cs) = common::call(&client, "GET", "/api/v1/componentstatuses/etcd-0", None).await;
    assert_eq!(code, 200);
    assert_eq!(
        cs["conditions"],
        serde_json::json!([{"type": "Healthy", "status": "True", "message": "ok"}])
    );
    let (code, missing) = common::call(&client, "GET", "/api/v1/componentstatuses/nope", None).await;
    assert_eq!(
        (code, missing["message"].as_str()),
        (404, Some("componentstatuses \"nope\" not found"))
    );
    let (code, _) = common::call(&client, "DELETE", "/api/v1/componentstatuses/etcd-0", None).await;
    assert_eq!(code, 405);
}

#[tokio::test(flavor = "multi_thread")]
async fn listed_subresources_answer_get_as_kube_does() {
    let hub = TestHub::start().await;
    let client = common::client(&hub, "root").await;
    let csr = serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "c1"},
        "spec": {"request": "", "signerName": "example.com/x", "usages": ["digital signature"]},
    });
    let (code, body) = common::call(
        &client,
        "POST",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        Some(&csr),
    )
    .await;
    assert!(code == 201, "{body}");
    let (code, approval) = common::call(
        &client,
        "GET",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests/c1/approval",
        None,
    )
    .await;
    assert_eq!(code, 200, "{approval}");
    assert_eq!(approval["kind"], "CertificateSigningRequest");
    assert_eq!(approval["metadata"]["name"], "c1");
    // serviceaccounts/token is create-only: the verb is not allowed.
    let (code, token) = common::call(
        &client,
        "GET",
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        None,
    )
    .await;
    assert_eq!(
        (code, token["reason"].as_str()),
        (405, Some("MethodNotAllowed")),
        "{token}"
    );
    assert_eq!(
        token["message"],
        "the server does not allow this method on the requested resource"
    );
    // namespaces/finalize is update-only, as in kube.
    let (code, _) = common::call(&client, "GET", "/api/v1/namespaces/default/finalize", None).await;
    assert_eq!(code, 405);
    // Not listed at all (configmaps have no status): not found.
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    common::call(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&cm),
    )
    .await;
    let (code, _) = common::call(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/c/status",
        None,
    )
    .await;
    assert_eq!(code, 404);
    let (code, scale) = common::call(
        &client,
        "GET",
        "/api/v1/namespaces/default/pods/p/ephemeralcontainers",
        None,
    )
    .await;
    assert_eq!((code, scale["reason"].as_str()), (404, Some("NotFound")));
}

#[tokio::test(flavor = "multi_thread")]
async fn built_in_objects_are_served_with_kube_apiservers_key_order() {
    let hub = TestHub::start().await;
    let client = common::client(&hub, "root").await;
    let body = serde_json::json!({
        "spec": {
            "selector": {"matchLabels": {"app": "k"}},
            "template": {"metadata": {"labels": {"app": "k"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
        "metadata": {"name": "k"},
        "apiVersion": "apps/v1",
        "kind": "Deployment",
    });
    let (code, created) = common::call(
        &client,
        "POST",
        "/apis/apps/v1/namespaces/default/deployments",
        Some(&body),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&created)[..4], ["kind", "apiVersion", "metadata", "spec"]);
    // The raw bytes of a GET, not just a parsed map.
    let req = http::Request::get("/apis/apps/v1/namespaces/default/deployments/k")
        .body(Vec::new())
        .unwrap();
    let text = client.request_text(req).await.expect("get");
    let at = |k: &str| text.find(&format!("\"{k}\":")).unwrap_or(usize::MAX);
    assert!(
        at("kind") < at("apiVersion") && at("apiVersion") < at("metadata") && at("metadata") < at("spec"),
        "{text}"
    );
    let cm = serde_json::json!({"data": {"a": "b"}, "metadata": {"name": "c"}, "apiVersion": "v1", "kind": "ConfigMap"});
    let (_, cm) = common::call(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&cm),
    )
    .await;
    assert_eq!(keys(&cm), ["kind", "apiVersion", "metadata", "data"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_hub_moves_the_kubernetes_endpoints_to_its_new_port() {
    use k8s_openapi::api::core::v1::Endpoints;
    use kube::api::Api;

    let first = TestHub::start().await;
    ok(
        first.kubectl_stdin(&["create", "-f", "-"], Some(WORKSPACE)),
        "create workspace",
    );
    let (running, dir) = first.into_parts();
    running.stop().await;
    let dir = dir.expect("the first hub's data directory");
    let second = TestHub::start_in(dir.path()).await;
    let port = second.running.addr.port() as i32;
    for workspace in ["root", "root:team"] {
        let endpoints: Api<Endpoints> = Api::namespaced(second.client(workspace).await, "default");
        common::eventually(10, "the Endpoints to follow the hub", || async {
            let ep = endpoints.get("kubernetes").await.ok()?;
            let found = ep.subsets?.first()?.ports.as_ref()?.first()?.port;
            (found == port).then_some(())
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn custom_resources_select_by_their_crds_selectable_fields() {
    let hub = TestHub::start().await;
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: paints.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: paints, singular: paint, kind: Paint}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields: [{jsonPath: .spec.color}]
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {color: {type: string}, size: {type: integer}}}
"#;
    ok(hub.kubectl_stdin(&["apply", "-f", "-"], Some(crd)), "apply crd");
    let client = common::client(&hub, "root").await;
    common::eventually(10, "paints to be served", || async {
        let (code, _) = common::call(
            &client,
            "GET",
            "/apis/example.com/v1/namespaces/default/paints",
            None,
        )
        .await;
        (code == 200).then_some(())
    })
    .await;
    for (name, color) in [("a", "red"), ("b", "blue")] {
        let paint = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Paint",
            "metadata": {"name": name}, "spec": {"color": color, "size": 1}});
        let (code, body) = common::call(
            &client,
            "POST",
            "/apis/example.com/v1/namespaces/default/paints",
            Some(&paint),
        )
        .await;
        assert_eq!(code, 201, "{body}");
    }
    let (code, list) = common::call(
        &client,
        "GET",
        "/apis/example.com/v1/namespaces/default/paints?fieldSelector=spec.color%3Dred",
        None,
    )
    .await;
    assert_eq!(code, 200, "{list}");
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["a"]);
    let (code, body) = common::call(
        &client,
        "GET",
        "/apis/example.com/v1/namespaces/default/paints?fieldSelector=spec.size%3D1",
        None,
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (400, Some("field label not supported: spec.size"))
    );
}
