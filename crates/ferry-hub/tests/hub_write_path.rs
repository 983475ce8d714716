//! The write path: what a client sends is decoded before anything touches it
//! (bad input is a 400, never a panic or a stored object), and the hub's own
//! controllers write through the same path as clients.

mod common;

use common::{
    call, client, delete_ok, expect_sent, expect_status, expect_status_because, get_ok, post_created, send,
};
use ferry_testkit::TestHub;
use serde_json::{json, Value};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn apply_with_metadata_of_the_wrong_type_is_a_bad_request_not_a_dropped_connection() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":"oops"}"#;
    let status = expect_sent(
        &c,
        ("PATCH", &format!("{CONFIGMAPS}/e?fieldManager=test")),
        ("application/apply-patch+yaml", body),
        400,
        "",
    )
    .await;
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "BadRequest");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot unmarshal string into Go struct field ConfigMap.metadata"),
        "{message}"
    );
    // The hub keeps answering.
    expect_status(&c, "GET", &format!("{CONFIGMAPS}/e"), None, 404).await;
}

#[tokio::test]
async fn metadata_fields_of_the_wrong_type_are_refused_and_nothing_is_stored() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e", "finalizers": "x"}});
    let status = expect_status(&c, "POST", CONFIGMAPS, Some(&bad), 400).await;
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal string \
         into Go struct field ObjectMeta.metadata.finalizers of type []string"
    );
    expect_status_because(
        &c,
        "GET",
        &format!("{CONFIGMAPS}/e"),
        None,
        404,
        "nothing was stored",
    )
    .await;

    // A patch that would leave a wrong type is refused the same way.
    let good = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e"}});
    post_created(&c, CONFIGMAPS, &good).await;
    expect_sent(
        &c,
        ("PATCH", &format!("{CONFIGMAPS}/e")),
        (
            "application/merge-patch+json",
            r#"{"metadata":{"labels":{"a":1}}}"#,
        ),
        400,
        "",
    )
    .await;
    let (_, stored) = call(&c, "GET", &format!("{CONFIGMAPS}/e"), None).await;
    assert_eq!(stored["metadata"].get("labels"), None);
}

#[tokio::test]
async fn spec_of_the_wrong_type_in_a_namespace_is_refused_not_a_panic() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let bad = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "odd"}, "spec": "x"});
    expect_status(&c, "POST", "/api/v1/namespaces", Some(&bad), 400).await;
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": "x", "stringData": {"a": "b"}});
    expect_status(&c, "POST", "/api/v1/namespaces/default/secrets", Some(&bad), 400).await;
}

#[tokio::test]
async fn a_namespace_left_terminating_by_a_restart_finishes() {
    let first = TestHub::start().await;
    let c = client(&first, "root").await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}});
    post_created(&c, "/api/v1/namespaces", &ns).await;
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    let held_path = "/api/v1/namespaces/doomed/configmaps/held";
    post_created(&c, "/api/v1/namespaces/doomed/configmaps", &held).await;
    let ns = delete_ok(&c, "/api/v1/namespaces/doomed").await;
    assert_eq!(
        ns["status"]["phase"], "Terminating",
        "the DELETE answers with the namespace terminating"
    );
    // Termination deletes what is inside; the finalizer holds the ConfigMap.
    ferry_testkit::eventually(10, "the ConfigMap to be marked for deletion", || async {
        let (_, cm) = call(&c, "GET", held_path, None).await;
        cm["metadata"].get("deletionTimestamp").map(|_| ())
    })
    .await;

    let (running, dir) = first.into_parts();
    running.stop().await;
    let dir = dir.expect("the first hub's data directory");
    let second = TestHub::start_in(dir.path()).await;
    let c = client(&second, "root").await;
    let ns = get_ok(&c, "/api/v1/namespaces/doomed").await;
    assert_eq!(ns["status"]["phase"], "Terminating");

    let release = r#"{"metadata":{"finalizers":null}}"#;
    expect_sent(
        &c,
        ("PATCH", held_path),
        ("application/merge-patch+json", release),
        200,
        "",
    )
    .await;
    ferry_testkit::eventually(10, "the namespace to finish terminating", || async {
        (call(&c, "GET", "/api/v1/namespaces/doomed", None).await.0 == 404).then_some(())
    })
    .await;
    second.running.stop().await;
}

#[tokio::test]
async fn controllers_write_through_the_object_service() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "legacy"}});
    post_created(&c, "/api/v1/namespaces/default/serviceaccounts", &sa).await;
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                        "metadata": {"name": "legacy-token",
                                     "annotations": {"kubernetes.io/service-account.name": "legacy"}}});
    post_created(&c, "/api/v1/namespaces/default/secrets", &secret).await;
    let (_, secret) = call(&c, "GET", "/api/v1/namespaces/default/secrets/legacy-token", None).await;
    assert!(secret["data"]["token"].is_string(), "{secret}");
    // The token controller's update is recorded like any client's.
    let managers: Vec<&str> = secret["metadata"]["managedFields"]
        .as_array()
        .map(|m| m.iter().filter_map(|e| e["manager"].as_str()).collect())
        .unwrap_or_default();
    assert!(managers.contains(&"tokens-controller"), "{managers:?}");

    // Namespace termination finalizes through `namespaces/<name>/finalize`.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "short-lived"}});
    post_created(&c, "/api/v1/namespaces", &ns).await;
    delete_ok(&c, "/api/v1/namespaces/short-lived").await;
    ferry_testkit::eventually(10, "the namespace to go", || async {
        (call(&c, "GET", "/api/v1/namespaces/short-lived", None).await.0 == 404).then_some(())
    })
    .await;
}

/// Every path of `v` (objects' keys and arrays' elements), as JSON pointers.
fn paths(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                paths(child, p, out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                paths(child, p, out);
            }
        }
        _ => {}
    }
}

/// `v` with the value at `pointer` replaced by `with`.
fn replaced(v: &Value, pointer: &str, with: &Value) -> Value {
    let mut v = v.clone();
    if let Some(slot) = v.pointer_mut(pointer) {
        *slot = with.clone();
    }
    v
}

/// Wrong types in every field of every kind with special write semantics,
/// through every write verb and patch type: the hub answers each with a
/// 4xx (or a success), never a 5xx or a dropped connection, and keeps
/// answering. Bounded: one object per kind, four wrong values per field.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wrong_types_in_any_field_never_answer_5xx() {
    use futures::StreamExt;

    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let kinds: Vec<(&str, Value)> = vec![
        (
            "/api/v1/namespaces/default/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "f", "labels": {"a": "b"}, "annotations": {"x": "y"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}]},
            "data": {"k": "v"}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "f"}, "spec": {"finalizers": ["kubernetes"]}}),
        ),
        (
            "/api/v1/namespaces/default/secrets",
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "f"}, "type": "Opaque", "data": {"a": "YQ=="}, "stringData": {"b": "c"}}),
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "f"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole", "metadata": {"name": "f"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
            json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "f"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ),
        (
            "/apis/certificates.k8s.io/v1/certificatesigningrequests",
            json!({
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": "f"},
            "spec": {"request": "eA==", "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]},
            "status": {"conditions": [{"type": "Approved", "status": "True"}]}}),
        ),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "fuzzes.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "fuzzes", "singular": "fuzz", "kind": "Fuzz"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object",
                                       "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}}),
        ),
    ];
    let wrong = [json!("x"), json!(7), json!([]), json!({"z": 1})];
    let mut requests: Vec<(String, String, &str, String)> = Vec::new();
    for (collection, base) in &kinds {
        // One live object per kind, the target of updates and patches.
        let (code, live) = call(&c, "POST", collection, Some(base)).await;
        assert!(code == 201, "creating the base {collection}: {code} {live}");
        let item = format!("{collection}/{}", base["metadata"]["name"].as_str().unwrap());
        let mut all = Vec::new();
        paths(base, String::new(), &mut all);
        for (i, pointer) in all.iter().enumerate() {
            for (j, value) in wrong.iter().enumerate() {
                let mut variant = replaced(base, pointer, value);
                if pointer != "/metadata/name" && pointer != "/metadata" {
                    if let Some(m) = variant.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.insert("name".into(), json!(format!("v{i}-{j}")));
                    }
                }
                let body = variant.to_string();
                requests.push((
                    "POST".into(),
                    collection.to_string(),
                    "application/json",
                    body.clone(),
                ));
                requests.push((
                    "PUT".into(),
                    item.clone(),
                    "application/json",
                    replaced(base, pointer, value).to_string(),
                ));
                requests.push((
                    "PATCH".into(),
                    item.clone(),
                    "application/merge-patch+json",
                    replaced(base, pointer, value).to_string(),
                ));
                requests.push((
                    "PATCH".into(),
                    item.clone(),
                    "application/strategic-merge-patch+json",
                    replaced(base, pointer, value).to_string(),
                ));
                requests.push((
                    "PATCH".into(),
                    format!("{item}?fieldManager=fuzz&force=true"),
                    "application/apply-patch+yaml",
                    replaced(base, pointer, value).to_string(),
                ));
                let op = json!([{"op": "add", "path": pointer, "value": value}]).to_string();
                requests.push(("PATCH".into(), item.clone(), "application/json-patch+json", op));
                // The status subresource, and the kinds' own subresources.
                let status = format!("{item}/status");
                requests.push((
                    "PUT".into(),
                    status.clone(),
                    "application/json",
                    replaced(base, pointer, value).to_string(),
                ));
                requests.push((
                    "PATCH".into(),
                    status,
                    "application/merge-patch+json",
                    replaced(base, pointer, value).to_string(),
                ));
                if collection.ends_with("certificatesigningrequests") {
                    requests.push((
                        "PUT".into(),
                        format!("{item}/approval"),
                        "application/json",
                        replaced(base, pointer, value).to_string(),
                    ));
                }
                if collection.ends_with("namespaces") {
                    requests.push((
                        "PUT".into(),
                        format!("{item}/finalize"),
                        "application/json",
                        replaced(base, pointer, value).to_string(),
                    ));
                }
            }
        }
        if collection.ends_with("deployments") {
            let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "f"}, "spec": {"replicas": 2}});
            let mut all = Vec::new();
            paths(&scale, String::new(), &mut all);
            for pointer in &all {
                for value in &wrong {
                    let body = replaced(&scale, pointer, value).to_string();
                    requests.push((
                        "PUT".into(),
                        format!("{item}/scale"),
                        "application/json",
                        body.clone(),
                    ));
                    requests.push((
                        "PATCH".into(),
                        format!("{item}/scale"),
                        "application/merge-patch+json",
                        body,
                    ));
                }
            }
        }
        // DeleteOptions of the wrong shape (dry runs, so the object stays).
        for field in [
            "propagationPolicy",
            "preconditions",
            "dryRun",
            "gracePeriodSeconds",
            "orphanDependents",
        ] {
            for value in &wrong {
                let body =
                    json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"], field: value});
                requests.push((
                    "DELETE".into(),
                    format!("{item}?dryRun=All"),
                    "application/json",
                    body.to_string(),
                ));
            }
        }
    }
    let total = requests.len();
    let failures: Vec<String> = futures::stream::iter(requests)
        .map(|(method, path, ct, body)| {
            let c = c.clone();
            async move {
                let (code, status) = send(&c, &method, &path, ct, &body).await;
                (code >= 500).then(|| format!("{method} {path} ({ct}) {body} -> {code} {status}"))
            }
        })
        .buffer_unordered(8)
        .filter_map(|f| async move { f })
        .collect()
        .await;
    assert!(
        failures.is_empty(),
        "{} of {total} requests answered 5xx:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Still answering.
    get_ok(&c, "/api/v1/namespaces/default").await;
}

#[tokio::test]
async fn a_strategys_warnings_reach_the_client_as_warning_headers() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "old-labels"},
        "spec": {"selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"nodeSelector": {"beta.kubernetes.io/os": "linux"},
                                       "containers": [{"name": "c", "image": "i"}]}}}});
    let req = http::Request::builder()
        .method("POST")
        .uri("/apis/apps/v1/namespaces/default/deployments")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(deployment.to_string().into_bytes()))
        .expect("request");
    let resp = c.send(req).await.expect("the hub answers");
    assert_eq!(resp.status().as_u16(), 201);
    let warnings: Vec<String> = resp
        .headers()
        .get_all(http::header::WARNING)
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    assert_eq!(
        warnings,
        vec![
            "299 - \"spec.template.spec.nodeSelector[beta.kubernetes.io/os]: deprecated since v1.14; \
             use \\\"kubernetes.io/os\\\" instead\""
                .to_string()
        ]
    );
}
