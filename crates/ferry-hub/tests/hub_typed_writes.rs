//! Built-in kinds are typed at the boundary: wrong types are 400s naming the
//! field, unknown fields follow `fieldValidation`, and what is stored carries
//! kube-apiserver's defaults and passed its validation.

mod common;

use std::collections::HashSet;
use std::net::Ipv4Addr;

use common::{
    call, delete_ok, eventually_status, expect_status, expect_status_because, ok, post_created, put_ok,
};
use ferry_testkit::TestHub;
use serde_json::{json, Value};

fn deployment(name: &str, selector: Value, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}}
        }
    })
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_create_deployment_comes_back_with_kube_apiserver_defaults() {
    let hub = TestHub::start().await;
    ok(
        hub.kubectl(&["create", "deployment", "web", "--image", "nginx"]),
        "create deployment",
    );
    let out = ok(hub.kubectl(&["get", "deploy", "web", "-o", "json"]), "get deploy");
    let d: Value = serde_json::from_str(&out).expect("json");
    let spec = &d["spec"];
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(spec["replicas"], 1);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["securityContext"], json!({}));
    let c = &pod["containers"][0];
    assert_eq!(c["imagePullPolicy"], "Always", "untagged image: {c}");
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_pod_is_pending_with_its_qos_class() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                     "spec": {"containers": [{"name": "c", "image": "busybox:1.36",
                               "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                               "ports": [{"containerPort": 8080}]}]}});
    let created = post_created(&client, "/api/v1/namespaces/default/pods", &pod).await;
    assert_eq!(created["status"]["phase"], "Pending");
    assert_eq!(created["status"]["qosClass"], "Guaranteed");
    let c = &created["spec"]["containers"][0];
    assert_eq!(c["imagePullPolicy"], "IfNotPresent");
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    assert_eq!(c["resources"]["requests"], json!({"cpu": "1", "memory": "1Gi"}));
    let out = ok(
        hub.kubectl(&[
            "get",
            "pods",
            "--field-selector",
            "status.phase=Pending",
            "-o",
            "name",
        ]),
        "get pods",
    );
    assert_eq!(out.trim(), "pod/p");

    // Only images (and a few fields) change on a pod.
    let mut changed = created.clone();
    changed["spec"]["containers"][0]["env"] = json!([{"name": "A", "value": "b"}]);
    let body = expect_status(
        &client,
        "PUT",
        "/api/v1/namespaces/default/pods/p",
        Some(&changed),
        422,
    )
    .await;
    assert_eq!(body["details"]["causes"][0]["field"], "spec", "{body}");
    let mut image = created.clone();
    image["spec"]["containers"][0]["image"] = json!("busybox:1.37");
    put_ok(&client, "/api/v1/namespaces/default/pods/p", &image).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_with_ephemeral_containers_is_refused_on_create_as_kube_does() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let pods = "/api/v1/namespaces/default/pods";
    let debug = json!([{"name": "debug", "image": "busybox:1.36"}]);
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "debugged"},
                         "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    let mut copy = pod.clone();
    copy["spec"]["ephemeralContainers"] = debug.clone();
    let body = expect_status(&client, "POST", pods, Some(&copy), 422).await;
    assert_eq!(
        body["message"],
        "Pod \"debugged\" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create"
    );

    // The positive twin: created without them, the pod takes them through
    // its ephemeralcontainers subresource.
    let created = post_created(&client, pods, &pod).await;
    pod = created;
    pod["spec"]["ephemeralContainers"] = debug;
    let body = put_ok(
        &client,
        "/api/v1/namespaces/default/pods/debugged/ephemeralcontainers",
        &pod,
    )
    .await;
    assert_eq!(body["spec"]["ephemeralContainers"][0]["name"], "debug", "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pod_carrying_another_priority_than_its_class_gives_is_refused_as_kube_does() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let pods = "/api/v1/namespaces/default/pods";
    let class = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                       "metadata": {"name": "high"}, "value": 1000});
    post_created(&client, "/apis/scheduling.k8s.io/v1/priorityclasses", &class).await;
    let pod = |name: &str, spec: Value| {
        let mut spec = spec;
        spec["containers"] = json!([{"name": "c", "image": "nginx:1.27"}]);
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
    };

    // A copy from a cluster whose class "high" is worth 7.
    let body = expect_status(
        &client,
        "POST",
        pods,
        Some(&pod(
            "copied",
            json!({"priorityClassName": "high", "priority": 7}),
        )),
        403,
    )
    .await;
    assert_eq!(
        body["message"],
        "pods \"copied\" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"
    );
    expect_status(
        &client,
        "POST",
        pods,
        Some(&pod("unclassed", json!({"priority": 5}))),
        403,
    )
    .await;
    let body = expect_status(
        &client,
        "POST",
        pods,
        Some(&pod(
            "policy",
            json!({"priorityClassName": "high", "preemptionPolicy": "Never"}),
        )),
        403,
    )
    .await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("computed PreemptLowerPriority"),
        "{body}"
    );

    // The positive twins: what the class gives, or nothing.
    for (name, spec) in [
        ("same", json!({"priorityClassName": "high", "priority": 1000})),
        ("plain", json!({"priorityClassName": "high"})),
        ("zero", json!({"priority": 0})),
    ] {
        expect_status_because(&client, "POST", pods, Some(&pod(name, spec)), 201, &name).await;
    }
}

fn service(name: &str, ty: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
           "spec": {"type": ty, "selector": {"app": name}, "ports": [{"port": 80}]}})
}

#[tokio::test(flavor = "multi_thread")]
async fn services_get_unique_cluster_ips_and_node_ports_from_their_ranges() {
    // kube-apiserver's default ranges (test hubs otherwise get distinct ones).
    let hub = TestHub::start_with(|o| o.service_ranges = Default::default()).await;
    let client = hub.client("root").await;
    let path = "/api/v1/namespaces/default/services";
    let mut ips = HashSet::new();
    for i in 0..5 {
        let s = post_created(&client, path, &service(&format!("s{i}"), "ClusterIP")).await;
        let ip: Ipv4Addr = s["spec"]["clusterIP"]
            .as_str()
            .expect("clusterIP")
            .parse()
            .expect("an IP");
        assert_eq!(
            u32::from(ip) & 0xfff0_0000,
            u32::from(Ipv4Addr::new(10, 96, 0, 0)),
            "{ip} in 10.96.0.0/12"
        );
        assert_ne!(ip, Ipv4Addr::new(10, 96, 0, 1), "default/kubernetes's address");
        assert!(ips.insert(ip), "{ip} given twice");
        assert_eq!(s["spec"]["clusterIPs"], json!([ip.to_string()]));
        assert_eq!(s["spec"]["sessionAffinity"], "None");
        assert_eq!(s["spec"]["ipFamilies"], json!(["IPv4"]));
        assert_eq!(s["spec"]["ipFamilyPolicy"], "SingleStack");
        assert_eq!(s["spec"]["internalTrafficPolicy"], "Cluster");
        assert_eq!(
            s["spec"]["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
    }
    let s = post_created(&client, path, &service("np", "NodePort")).await;
    let node_port = s["spec"]["ports"][0]["nodePort"].as_u64().expect("nodePort");
    assert!((30000..=32767).contains(&node_port), "{node_port}");

    // An address another Service holds is refused; so is one outside the range.
    let taken = ips.iter().next().expect("an IP").to_string();
    let mut dup = service("dup", "ClusterIP");
    dup["spec"]["clusterIP"] = json!(taken);
    let body = expect_status(&client, "POST", path, Some(&dup), 422).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("already allocated"),
        "{body}"
    );
    dup["spec"]["clusterIP"] = json!("192.168.0.10");
    expect_status(&client, "POST", path, Some(&dup), 422).await;

    // A PUT without clusterIP keeps the address; changing it is refused.
    let (_, current) = call(&client, "GET", &format!("{path}/s0"), None).await;
    let mut replaced = service("s0", "ClusterIP");
    replaced["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let kept = put_ok(&client, &format!("{path}/s0"), &replaced).await;
    assert_eq!(kept["spec"]["clusterIP"], current["spec"]["clusterIP"]);
    let mut moved = kept.clone();
    moved["spec"]["clusterIP"] = json!("10.96.100.100");
    moved["spec"]["clusterIPs"] = json!(["10.96.100.100"]);
    let body = expect_status(&client, "PUT", &format!("{path}/s0"), Some(&moved), 422).await;
    assert_eq!(
        body["details"]["causes"][0]["field"], "spec.clusterIPs[0]",
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_types_in_a_deployment_are_a_bad_request_naming_the_field() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    for (field, value, message) in [
        (
            "replicas",
            json!("lots"),
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string \
             into Go struct field DeploymentSpec.spec.replicas of type int32",
        ),
        (
            "template",
            json!(5),
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal number \
             into Go struct field DeploymentSpec.spec.template of type v1.PodTemplateSpec",
        ),
    ] {
        let mut d = deployment("bad", json!({"app": "a"}), json!({"app": "a"}));
        d["spec"][field] = value;
        let body = expect_status(&client, "POST", DEPLOYMENTS, Some(&d), 400).await;
        assert_eq!(body["reason"], "BadRequest");
        assert_eq!(body["message"], message);
        expect_status_because(
            &client,
            "GET",
            &format!("{DEPLOYMENTS}/bad"),
            None,
            404,
            "nothing stored",
        )
        .await;
    }
}

const TYPO: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: typo
  namespace: default
spec:
  replicaz: 3
  selector:
    matchLabels: {app: typo}
  template:
    metadata:
      labels: {app: typo}
    spec:
      containers:
      - name: main
        image: nginx:1.27
"#;

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_apply_of_an_unknown_field_follows_validate() {
    let hub = TestHub::start().await;
    let strict = hub.kubectl_stdin(&["apply", "-f", "-"], Some(TYPO));
    assert!(!strict.status.success(), "kubectl's default is Strict");
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(stderr.contains(r#"unknown field "spec.replicaz""#), "{stderr}");
    assert!(
        !hub.kubectl(&["get", "deploy", "typo"]).status.success(),
        "nothing stored"
    );

    let warn = hub.kubectl_stdin(&["apply", "--validate=warn", "-f", "-"], Some(TYPO));
    ok(warn.clone(), "apply --validate=warn");
    let stderr = String::from_utf8_lossy(&warn.stderr);
    assert!(stderr.contains(r#"unknown field "spec.replicaz""#), "{stderr}");
    ok(hub.kubectl(&["delete", "deploy", "typo"]), "delete");

    ok(
        hub.kubectl_stdin(&["apply", "--validate=false", "-f", "-"], Some(TYPO)),
        "apply --validate=false",
    );
    let out = ok(hub.kubectl(&["get", "deploy", "typo", "-o", "json"]), "get");
    let d: Value = serde_json::from_str(&out).expect("json");
    assert!(
        d["spec"].get("replicaz").is_none(),
        "unknown fields are dropped: {d}"
    );
    assert_eq!(d["spec"]["replicas"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn strict_field_validation_lists_every_unknown_field() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let mut d = deployment("s", json!({"app": "s"}), json!({"app": "s"}));
    d["spec"]["replicaz"] = json!(1);
    d["spec"]["template"]["spec"]["containers"][0]["imagez"] = json!("x");
    let body = expect_status(
        &client,
        "POST",
        &format!("{DEPLOYMENTS}?fieldValidation=Strict"),
        Some(&d),
        400,
    )
    .await;
    assert_eq!(
        body["message"],
        // In the order the body has them.
        "strict decoding error: unknown field \"spec.template.spec.containers[0].imagez\", \
         unknown field \"spec.replicaz\""
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_selector_must_match_the_template_and_may_not_change() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let d = deployment("m", json!({"app": "a"}), json!({"app": "b"}));
    let body = expect_status(&client, "POST", DEPLOYMENTS, Some(&d), 422).await;
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(
        body["details"]["causes"][0]["field"], "spec.template.metadata.labels",
        "{body}"
    );
    assert!(body["message"]
        .as_str()
        .unwrap_or_default()
        .contains("`selector` does not match template `labels`"));

    let d = deployment("m", json!({"app": "a"}), json!({"app": "a", "tier": "web"}));
    post_created(&client, DEPLOYMENTS, &d).await;
    let patch = json!({"spec": {"selector": {"matchLabels": {"app": "a", "tier": "web"}}}});
    let req = http::Request::builder()
        .method("PATCH")
        .uri(format!("{DEPLOYMENTS}/m"))
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&patch).expect("json"),
        ))
        .expect("request");
    let resp = client.send(req).await.expect("response");
    assert_eq!(resp.status().as_u16(), 422);
    let body: Value =
        serde_json::from_slice(&resp.into_body().collect_bytes().await.expect("body")).expect("json");
    assert_eq!(body["details"]["causes"][0]["field"], "spec.selector", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("field is immutable"),
        "{body}"
    );
}

/// The `Warning` headers of an answer, as text.
fn warning_headers(headers: &http::HeaderMap) -> Vec<String> {
    headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .collect()
}

/// A JSON body that names a field twice keeps the last one, as Go's decoder
/// does, and `fieldValidation` decides: Strict refuses it naming the field,
/// Warn (the default) says so in a `Warning` header, Ignore says nothing. The
/// same for a create and for a server-side apply whose YAML body is JSON (as
/// kube-rs, client-go and kubectl send it); a YAML apply body still applies.
#[tokio::test(flavor = "multi_thread")]
async fn duplicate_fields_follow_field_validation() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let send = |method: &'static str, uri: String, content_type: &'static str, body: String| {
        let client = client.clone();
        async move {
            let req = http::Request::builder()
                .method(method)
                .uri(uri)
                .header(http::header::CONTENT_TYPE, content_type)
                .body(kube::client::Body::from(body.into_bytes()))
                .expect("request");
            let resp = client.send(req).await.expect("response");
            let code = resp.status().as_u16();
            let warnings = warning_headers(resp.headers());
            let body: Value = serde_json::from_slice(&resp.into_body().collect_bytes().await.expect("body"))
                .unwrap_or(Value::Null);
            (code, warnings, body)
        }
    };
    let path = "/api/v1/namespaces/default/configmaps";
    for (way, method, content_type, created) in [
        ("create", "POST", "application/json", 201),
        ("apply", "PATCH", "application/apply-patch+yaml", 201),
    ] {
        let uri = |name: &str, validation: &str| match method {
            "POST" => format!("{path}?fieldValidation={validation}"),
            _ => format!("{path}/{way}-{name}?fieldManager=dup&fieldValidation={validation}"),
        };
        let body = |name: &str, metadata: &str| {
            format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{way}-{name}"{metadata}}},"data":{{"a":"1","a":"2"}}}}"#
            )
        };
        let (code, _, answer) = send(
            method,
            uri("d1", "Strict"),
            content_type,
            body("d1", &format!(r#","name":"{way}-d1""#)),
        )
        .await;
        assert_eq!(code, 400, "{way}: {answer}");
        assert_eq!(
            answer["message"],
            "strict decoding error: duplicate field \"metadata.name\", duplicate field \"data.a\"",
            "{way}"
        );
        let (code, warnings, answer) = send(method, uri("d2", "Warn"), content_type, body("d2", "")).await;
        assert_eq!(code, created, "{way}: {answer}");
        assert_eq!(answer["data"]["a"], "2", "{way}: the last one wins");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("duplicate field") && w.contains("data.a")),
            "{way}: {warnings:?}"
        );
        let (code, warnings, _) = send(method, uri("d3", "Ignore"), content_type, body("d3", "")).await;
        assert_eq!(code, created, "{way}");
        assert!(
            warnings.iter().all(|w| !w.contains("duplicate")),
            "{way}: {warnings:?}"
        );
    }
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: apply-yaml\ndata:\n  a: \"1\"\n";
    let uri = format!("{path}/apply-yaml?fieldManager=dup&fieldValidation=Strict");
    let (code, _, answer) = send("PATCH", uri, "application/apply-patch+yaml", yaml.to_string()).await;
    assert_eq!(code, 201, "a YAML apply body: {answer}");
    assert_eq!(answer["data"]["a"], "1");
}

/// A custom resource's fields that its schema prunes are its unknown fields:
/// Strict refuses them by path, Warn (the default) warns and drops them.
#[tokio::test(flavor = "multi_thread")]
async fn pruned_fields_of_a_custom_resource_follow_field_validation() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gizmos.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}});
    post_created(
        &client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await;
    let gizmos = "/apis/example.com/v1/namespaces/default/gizmos";
    let gizmo = |name: &str| {
        json!({"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": name},
               "spec": {"size": 1, "colour": "red"}})
    };
    eventually_status(10, "gizmos served", &client, gizmos, 200).await;
    let body = expect_status(
        &client,
        "POST",
        &format!("{gizmos}?fieldValidation=Strict"),
        Some(&gizmo("g1")),
        400,
    )
    .await;
    assert_eq!(
        body["message"],
        "strict decoding error: unknown field \"spec.colour\""
    );
    let req = http::Request::builder()
        .method("POST")
        .uri(gizmos)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&gizmo("g2")).unwrap(),
        ))
        .unwrap();
    let resp = client.send(req).await.expect("response");
    assert_eq!(resp.status().as_u16(), 201);
    let warnings = warning_headers(resp.headers());
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("unknown field") && w.contains("spec.colour")),
        "{warnings:?}"
    );
    let stored: Value = serde_json::from_slice(&resp.into_body().collect_bytes().await.unwrap()).unwrap();
    assert!(stored["spec"].get("colour").is_none(), "pruned: {stored}");
}

/// A Job as another cluster stored it (its generated selector and labels carry
/// that Job's uid) is refused on create, as kube-apiserver refuses it, so a
/// hub standing in for a cluster catches a copy that kept them.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_with_another_jobs_generated_selector_is_refused_as_kube_does() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let path = "/apis/batch/v1/namespaces/default/jobs";
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl"}]}}}});
    let stored = post_created(&client, path, &job).await;
    let uid = stored["metadata"]["uid"].as_str().unwrap().to_string();
    assert_eq!(
        stored["spec"]["template"]["metadata"]["labels"]["controller-uid"],
        uid.as_str()
    );
    delete_ok(&client, &format!("{path}/pi")).await;

    let mut copied = stored.clone();
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        copied["metadata"].as_object_mut().unwrap().remove(field);
    }
    copied.as_object_mut().unwrap().remove("status");
    let body = expect_status(&client, "POST", path, Some(&copied), 422).await;
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("spec.template.metadata.labels[controller-uid]")
            && message.contains("`selector` not auto-generated"),
        "{message}"
    );
    assert!(
        !message.contains(&format!("must be '{uid}'")),
        "names the new uid, not the old: {message}"
    );
}
