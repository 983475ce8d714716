//! The write path: what a client sends is decoded before anything touches it
//! (bad input is a 400, never a panic or a stored object), and the hub's own
//! controllers write through the same path as clients.

mod common;

use common::{call, client};
use ferry_hub::testing::TestHub;
use serde_json::{json, Value};

/// Send `body` as `content_type`; the status code and the body as JSON.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body.as_bytes().to_vec()))
        .expect("request");
    let resp = client.send(req).await.expect("the hub answers");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.unwrap_or_default();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test]
async fn apply_with_metadata_of_the_wrong_type_is_a_bad_request_not_a_dropped_connection() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":"oops"}"#;
    let (code, status) = send(
        &c,
        "PATCH",
        &format!("{CONFIGMAPS}/e?fieldManager=test"),
        "application/apply-patch+yaml",
        body,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "BadRequest");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot unmarshal string into Go struct field ConfigMap.metadata"),
        "{message}"
    );
    // The hub keeps answering.
    let (code, _) = call(&c, "GET", &format!("{CONFIGMAPS}/e"), None).await;
    assert_eq!(code, 404);
}

#[tokio::test]
async fn metadata_fields_of_the_wrong_type_are_refused_and_nothing_is_stored() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let bad = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e", "finalizers": "x"}});
    let (code, status) = call(&c, "POST", CONFIGMAPS, Some(&bad)).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["reason"], "BadRequest");
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal string \
         into Go struct field ObjectMeta.metadata.finalizers of type []string"
    );
    let (code, _) = call(&c, "GET", &format!("{CONFIGMAPS}/e"), None).await;
    assert_eq!(code, 404, "nothing was stored");

    // A patch that would leave a wrong type is refused the same way.
    let good = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e"}});
    let (code, _) = call(&c, "POST", CONFIGMAPS, Some(&good)).await;
    assert_eq!(code, 201);
    let (code, status) = send(
        &c,
        "PATCH",
        &format!("{CONFIGMAPS}/e"),
        "application/merge-patch+json",
        r#"{"metadata":{"labels":{"a":1}}}"#,
    )
    .await;
    assert_eq!(code, 400, "{status}");
    let (_, stored) = call(&c, "GET", &format!("{CONFIGMAPS}/e"), None).await;
    assert_eq!(stored["metadata"].get("labels"), None);
}

#[tokio::test]
async fn spec_of_the_wrong_type_in_a_namespace_is_refused_not_a_panic() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let bad = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "odd"}, "spec": "x"});
    let (code, status) = call(&c, "POST", "/api/v1/namespaces", Some(&bad)).await;
    assert_eq!(code, 400, "{status}");
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": "x", "stringData": {"a": "b"}});
    let (code, status) = call(&c, "POST", "/api/v1/namespaces/default/secrets", Some(&bad)).await;
    assert_eq!(code, 400, "{status}");
}

#[tokio::test]
async fn a_namespace_left_terminating_by_a_restart_finishes() {
    let first = TestHub::start().await;
    let c = client(&first, "root").await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}});
    assert_eq!(call(&c, "POST", "/api/v1/namespaces", Some(&ns)).await.0, 201);
    let held = json!({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    let held_path = "/api/v1/namespaces/doomed/configmaps/held";
    assert_eq!(
        call(&c, "POST", "/api/v1/namespaces/doomed/configmaps", Some(&held))
            .await
            .0,
        201
    );
    let (code, ns) = call(&c, "DELETE", "/api/v1/namespaces/doomed", None).await;
    assert_eq!(code, 200);
    assert_eq!(
        ns["status"]["phase"], "Terminating",
        "the DELETE answers with the namespace terminating"
    );
    // Termination deletes what is inside; the finalizer holds the ConfigMap.
    ferry_hub::testing::eventually(10, "the ConfigMap to be marked for deletion", || async {
        let (_, cm) = call(&c, "GET", held_path, None).await;
        cm["metadata"].get("deletionTimestamp").map(|_| ())
    })
    .await;

    let (running, dir) = first.into_parts();
    running.stop().await;
    let dir = dir.expect("the first hub's data directory");
    let second = TestHub::start_in(dir.path()).await;
    let c = client(&second, "root").await;
    let (code, ns) = call(&c, "GET", "/api/v1/namespaces/doomed", None).await;
    assert_eq!(code, 200);
    assert_eq!(ns["status"]["phase"], "Terminating");

    let release = r#"{"metadata":{"finalizers":null}}"#;
    let (code, _) = send(&c, "PATCH", held_path, "application/merge-patch+json", release).await;
    assert_eq!(code, 200);
    ferry_hub::testing::eventually(10, "the namespace to finish terminating", || async {
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
    assert_eq!(
        call(
            &c,
            "POST",
            "/api/v1/namespaces/default/serviceaccounts",
            Some(&sa)
        )
        .await
        .0,
        201
    );
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
                        "metadata": {"name": "legacy-token",
                                     "annotations": {"kubernetes.io/service-account.name": "legacy"}}});
    let (code, _) = call(&c, "POST", "/api/v1/namespaces/default/secrets", Some(&secret)).await;
    assert_eq!(code, 201);
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
    assert_eq!(call(&c, "POST", "/api/v1/namespaces", Some(&ns)).await.0, 201);
    assert_eq!(
        call(&c, "DELETE", "/api/v1/namespaces/short-lived", None).await.0,
        200
    );
    ferry_hub::testing::eventually(10, "the namespace to go", || async {
        (call(&c, "GET", "/api/v1/namespaces/short-lived", None).await.0 == 404).then_some(())
    })
    .await;
}
