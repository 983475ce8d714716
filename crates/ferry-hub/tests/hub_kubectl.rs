//! The hub as kubectl sees it.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::ok;
use ferry_testkit::TestHub;

const DEPLOYMENT: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: main
        image: nginx:IMAGE
        ports:
        - containerPort: 80
"#;

/// kubectl applies the CRD `yaml` (named `name`) and waits until it is Established.
fn apply_crd(hub: &TestHub, yaml: &str, name: &str) {
    ok(hub.kubectl_stdin(&["apply", "-f", "-"], Some(yaml)), "apply crd");
    ok(
        hub.kubectl(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{name}"),
            "--timeout=20s",
        ]),
        "wait",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_get_api_resources_and_namespaces() {
    let hub = TestHub::start().await;
    let ns = ok(hub.kubectl(&["get", "ns"]), "get ns");
    assert!(
        ns.contains("default") && ns.contains("kube-system") && ns.contains("Active"),
        "{ns}"
    );
    let res = ok(hub.kubectl(&["api-resources"]), "api-resources");
    for r in [
        "deployments",
        "configmaps",
        "customresourcedefinitions",
        "leases",
        "workspaces",
    ] {
        assert!(res.contains(r), "{r} missing from api-resources:\n{res}");
    }
    let ver = ok(hub.kubectl(&["version", "-o", "json"]), "version");
    assert!(ver.contains("serverVersion"), "{ver}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_apply_twice_then_server_side_then_delete() {
    let hub = TestHub::start().await;
    let first = DEPLOYMENT.replace("IMAGE", "1.25");
    ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(&first)),
        "first apply",
    );
    let second = DEPLOYMENT.replace("IMAGE", "1.26");
    let out = ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(&second)),
        "second apply",
    );
    assert!(out.contains("configured"), "{out}");
    let image = ok(
        hub.kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].image}",
        ]),
        "get",
    );
    assert_eq!(image, "nginx:1.26");
    let out = ok(
        hub.kubectl_stdin(&["apply", "--server-side", "-f", "-"], Some(&second)),
        "server-side apply",
    );
    assert!(out.contains("serverside-applied"), "{out}");
    let table = ok(hub.kubectl(&["get", "deployments"]), "get deployments");
    assert!(table.contains("READY") && table.contains("web"), "{table}");
    ok(hub.kubectl(&["delete", "deployment", "web"]), "delete");
    let out = hub.kubectl(&["get", "deployment", "web"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not found"));
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_patch_types() {
    let hub = TestHub::start().await;
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p, namespace: default}\ndata: {a: '1'}\n";
    ok(hub.kubectl_stdin(&["apply", "-f", "-"], Some(cm)), "create");
    ok(
        hub.kubectl(&[
            "patch",
            "configmap",
            "p",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"b":"2"}}"#,
        ]),
        "merge",
    );
    ok(
        hub.kubectl(&[
            "patch",
            "configmap",
            "p",
            "--type",
            "json",
            "-p",
            r#"[{"op":"add","path":"/data/c","value":"3"}]"#,
        ]),
        "json",
    );
    ok(
        hub.kubectl(&["patch", "configmap", "p", "-p", r#"{"data":{"d":"4"}}"#]),
        "strategic",
    );
    let data = ok(hub.kubectl(&["get", "cm", "p", "-o", "jsonpath={.data}"]), "get");
    for kv in [r#""a":"1""#, r#""b":"2""#, r#""c":"3""#, r#""d":"4""#] {
        assert!(data.contains(kv), "{kv} missing from {data}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_get_watch_prints_new_objects() {
    let hub = TestHub::start().await;
    let cm = |name: &str| {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\n")
    };
    ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(&cm("listed"))),
        "create listed",
    );
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(hub.kubeconfig())
        .args(["get", "configmaps", "-w", "--request-timeout=0"])
        .env("HOME", hub.data_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = String::new();
    let mut created = false;
    while Instant::now() < deadline && !seen.contains("watched") {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.push_str(&line);
            seen.push('\n');
        }
        // Only once the initial list is printed: then "watched" can only arrive as a watch event.
        if !created && seen.contains("listed") {
            ok(
                hub.kubectl_stdin(&["apply", "-f", "-"], Some(&cm("watched"))),
                "create watched",
            );
            created = true;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        created && seen.contains("watched"),
        "kubectl get -w printed:\n{seen}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_crd_and_custom_resource_with_printer_columns() {
    let hub = TestHub::start().await;
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
"#;
    apply_crd(&hub, crd, "widgets.example.com");
    let cr = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1, namespace: default}\nspec: {size: 7}\n";
    ok(hub.kubectl_stdin(&["apply", "-f", "-"], Some(cr)), "apply cr");
    let cr2 = cr.replace("size: 7", "size: 8");
    ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(&cr2)),
        "apply cr again",
    );
    let table = ok(hub.kubectl(&["get", "wd"]), "get widgets");
    assert!(
        table.contains("SIZE") && table.contains("w1") && table.contains('8'),
        "{table}"
    );
    let bad = cr.replace("size: 7", "size: big");
    let out = hub.kubectl_stdin(&["apply", "-f", "-"], Some(&bad));
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("spec.size"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_create_shortcuts_send_protobuf_and_work() {
    let hub = TestHub::start().await;
    ok(
        hub.kubectl(&["create", "configmap", "pb", "--from-literal=a=1"]),
        "create configmap",
    );
    ok(
        hub.kubectl(&["create", "secret", "generic", "pbs", "--from-literal=k=v"]),
        "create secret",
    );
    ok(
        hub.kubectl(&[
            "create",
            "deployment",
            "pbd",
            "--image=nginx:1.27",
            "--replicas=3",
        ]),
        "create deployment",
    );
    let data = ok(
        hub.kubectl(&["get", "cm", "pb", "-o", "jsonpath={.data.a}"]),
        "get cm",
    );
    assert_eq!(data, "1");
    let secret = ok(
        hub.kubectl(&["get", "secret", "pbs", "-o", "jsonpath={.data.k}"]),
        "get secret",
    );
    assert_eq!(secret, "dg==", "base64 of v");
    let image = ok(
        hub.kubectl(&[
            "get",
            "deploy",
            "pbd",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}",
        ]),
        "get deploy",
    );
    assert_eq!(image, "3 nginx:1.27");
}

/// kubectl always validates a `v1/List` client-side against `/openapi/v2`
/// (protobuf), before writing anything: built-in items are left to the
/// server, custom resources are checked against their CRD schema.
#[tokio::test(flavor = "multi_thread")]
async fn kubectl_apply_of_a_list_validates_and_creates_every_item() {
    let hub = TestHub::start().await;
    let crd = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;
    apply_crd(&hub, crd, "gadgets.example.com");
    let list = |image: &str, size: &str, config_map: &str| {
        let items = [
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {config_map}, namespace: default}}\ndata: {{a: '1'}}"),
            DEPLOYMENT.replace("IMAGE", image),
            format!("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {{name: g1, namespace: default}}\nspec: {{size: {size}, extra: {{any: [1, x]}}}}"),
        ];
        let mut yaml = String::from("apiVersion: v1\nkind: List\nitems:\n");
        for item in items {
            for (i, line) in item.trim().lines().enumerate() {
                yaml.push_str(if i == 0 { "- " } else { "  " });
                yaml.push_str(line);
                yaml.push('\n');
            }
        }
        yaml
    };

    let out = ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(&list("1.25", "7", "settings"))),
        "apply list",
    );
    for created in [
        "configmap/settings created",
        "deployment.apps/web created",
        "gadget.example.com/g1 created",
    ] {
        assert!(out.contains(created), "{created} missing from:\n{out}");
    }

    // A type error in a custom resource is caught before anything is written.
    let out = hub.kubectl_stdin(&["apply", "-f", "-"], Some(&list("1.25", "big", "other")));
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("error validating") && stderr.contains("spec.size"),
        "{stderr}"
    );
    assert!(!hub.kubectl(&["get", "configmap", "other"]).status.success());

    // Re-applying merges containers by name (kubectl's built-in patch
    // metadata): a field set by someone else on the container survives.
    ok(
        hub.kubectl(&["set", "env", "deployment/web", "FROM_ELSEWHERE=kept"]),
        "set env",
    );
    let out = ok(
        hub.kubectl_stdin(&["apply", "-f", "-"], Some(&list("1.26", "8", "settings"))),
        "apply list again",
    );
    assert!(
        out.contains("deployment.apps/web configured") && out.contains("gadget.example.com/g1 configured"),
        "{out}"
    );
    let container = ok(
        hub.kubectl(&[
            "get",
            "deploy",
            "web",
            "-o",
            "jsonpath={.spec.template.spec.containers[*].image} {.spec.template.spec.containers[0].env[0].value}",
        ]),
        "get deployment",
    );
    assert_eq!(container, "nginx:1.26 kept");
    let size = ok(
        hub.kubectl(&["get", "gadget", "g1", "-o", "jsonpath={.spec.size}"]),
        "get gadget",
    );
    assert_eq!(size, "8");
}
