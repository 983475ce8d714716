//! kube-rs clients of a test hub, as admin or with any credential, and raw
//! requests that return the status and body as the server sent them.

use crate::TestHub;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// A kube-rs client for `hub`, addressing `workspace` (a kcp path like `root:a`, or `*`).
pub async fn client(hub: &TestHub, workspace: &str) -> kube::Client {
    hub.client(workspace).await
}

/// A kube-rs client for `hub` at `workspace` authenticating with `auth`
/// (a bearer token or a client certificate) instead of the admin token.
pub async fn client_as(
    hub: &TestHub,
    workspace: &str,
    auth: ferry_hub::kubeconfig::AuthInfo,
) -> kube::Client {
    client_from_yaml(&user_kubeconfig(hub, workspace, auth)).await
}

/// A kube-rs client for `hub`'s top, outside any `/clusters/<workspace>` (where
/// `/metrics` and `/` are), authenticating with `auth`.
pub async fn top_client_as(hub: &TestHub, auth: ferry_hub::kubeconfig::AuthInfo) -> kube::Client {
    client_from_yaml(&kubeconfig_for(hub, None, auth, "user")).await
}

async fn client_from_yaml(yaml: &str) -> kube::Client {
    let kc = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// A kubeconfig for `hub` at `workspace` that authenticates with `auth`.
pub fn user_kubeconfig(hub: &TestHub, workspace: &str, auth: ferry_hub::kubeconfig::AuthInfo) -> String {
    kubeconfig_for(hub, Some(workspace), auth, "user")
}

/// A kubeconfig for `hub` at `workspace` (the hub's top when `None`) that
/// authenticates with `auth`; its one context (and user) is `context`.
pub fn kubeconfig_for(
    hub: &TestHub,
    workspace: Option<&str>,
    auth: ferry_hub::kubeconfig::AuthInfo,
    context: &str,
) -> String {
    let server = match workspace {
        Some(ws) => format!("{}/clusters/{ws}", hub.url()),
        None => hub.url().to_string(),
    };
    ferry_hub::kubeconfig::kubeconfig("hub", &server, &hub.running.ca_pem, auth, context, None)
}

/// An admin kubeconfig for `hub` at workspace `path`, in the hub's data
/// directory (`root-a.kubeconfig` for `root:a`), its cluster and context
/// named after the workspace as a user keeping one per workspace names
/// them; returns its path.
pub fn workspace_kubeconfig(hub: &TestHub, path: &str) -> std::path::PathBuf {
    let file = hub
        .data_dir()
        .join(format!("{}.kubeconfig", path.replace(':', "-")));
    let text = ferry_hub::kubeconfig::kubeconfig(
        path,
        &format!("{}/clusters/{path}", hub.url()),
        &hub.running.ca_pem,
        token(&hub.running.admin_token),
        path,
        None,
    );
    std::fs::write(&file, text).unwrap_or_else(|e| panic!("writing {}: {e}", file.display()));
    file
}

/// [`kubeconfig_for`] written to `path` (context `hub`), for a process or
/// kubectl to read; returns `path`.
pub fn write_kubeconfig(
    path: std::path::PathBuf,
    hub: &TestHub,
    workspace: Option<&str>,
    auth: ferry_hub::kubeconfig::AuthInfo,
) -> std::path::PathBuf {
    std::fs::write(&path, kubeconfig_for(hub, workspace, auth, "hub"))
        .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    path
}

/// A kubeconfig for `hub` at `workspace` that authenticates with `auth`,
/// written as `<name>.kubeconfig` in the hub's data directory; returns its
/// path (for [`TestHub::kubectl_as`]).
pub fn kubeconfig_file(
    hub: &TestHub,
    name: &str,
    workspace: &str,
    auth: ferry_hub::kubeconfig::AuthInfo,
) -> std::path::PathBuf {
    let path = hub.data_dir().join(format!("{name}.kubeconfig"));
    write_kubeconfig(path, hub, Some(workspace), auth)
}

/// Send `method path` (relative to the client's workspace URL) with an
/// optional JSON body; returns the status code and the body as JSON
/// (`Value::Null` when it is not JSON).
pub async fn call(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> (u16, serde_json::Value) {
    let bytes = body
        .map(|b| serde_json::to_vec(b).expect("json"))
        .unwrap_or_default();
    exchange(client, method, path, body.map(|_| "application/json"), bytes).await
}

/// [`call`] that must answer `status`; returns the body. A failure names
/// the request, the status it got and the body.
pub async fn expect_status(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    status: u16,
) -> serde_json::Value {
    expect_status_because(client, method, path, body, status, "").await
}

/// [`expect_status`] with `why`, what the status proves, leading the failure.
pub async fn expect_status_because(
    client: &kube::Client,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
    status: u16,
    why: impl std::fmt::Display,
) -> serde_json::Value {
    let answer = call(client, method, path, body).await;
    answered((method, path), answer, status, why)
}

/// GET `path` until it answers `status`, for at most `secs` seconds; `what`
/// names the wait in the failure. For what the hub starts serving (or
/// stops) a moment after a write.
pub async fn eventually_status(secs: u64, what: &str, client: &kube::Client, path: &str, status: u16) {
    crate::eventually(secs, what, || async {
        let (code, _) = call(client, "GET", path, None).await;
        (code == status).then_some(())
    })
    .await
}

/// GET `path`; it must answer 200. Returns the body.
pub async fn get_ok(client: &kube::Client, path: &str) -> serde_json::Value {
    expect_status(client, "GET", path, None, 200).await
}

/// POST `obj` to `path`; it must be created (201). Returns the object.
pub async fn post_created(client: &kube::Client, path: &str, obj: &serde_json::Value) -> serde_json::Value {
    expect_status(client, "POST", path, Some(obj), 201).await
}

/// PUT `obj` at `path`; it must answer 200. Returns the object.
pub async fn put_ok(client: &kube::Client, path: &str, obj: &serde_json::Value) -> serde_json::Value {
    expect_status(client, "PUT", path, Some(obj), 200).await
}

/// DELETE `path`; it must answer 200. Returns the body.
pub async fn delete_ok(client: &kube::Client, path: &str) -> serde_json::Value {
    expect_status(client, "DELETE", path, None, 200).await
}

/// Send `body` as `content_type` (a patch's, YAML, ...) with `method path`;
/// returns the status code and the body as JSON (`Value::Null` when it is
/// not JSON).
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    exchange(client, method, path, Some(content_type), body.as_bytes().to_vec()).await
}

/// [`send`] that must answer `status`; returns the body. A failure names
/// the request, the status it got and the body, after `why` (what the
/// status proves) when it is not empty.
pub async fn expect_sent(
    client: &kube::Client,
    (method, path): (&str, &str),
    (content_type, body): (&str, &str),
    status: u16,
    why: impl std::fmt::Display,
) -> serde_json::Value {
    let answer = send(client, method, path, content_type, body).await;
    answered((method, path), answer, status, why)
}

/// The body of `method path`'s answer `(code, body)`, which must be
/// `status`: a failure names the request, the status it got and the body,
/// after `why` when it is not empty.
fn answered(
    (method, path): (&str, &str),
    (code, answer): (u16, serde_json::Value),
    status: u16,
    why: impl std::fmt::Display,
) -> serde_json::Value {
    let why = why.to_string();
    let why = if why.is_empty() { why } else { format!("{why}: ") };
    assert_eq!(
        code, status,
        "{why}{method} {path} answered {code}, not {status}: {answer}"
    );
    answer
}

/// One request and its answer: the status code and the body as JSON.
async fn exchange(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, serde_json::Value) {
    let mut req = http::Request::builder().method(method).uri(path);
    if let Some(content_type) = content_type {
        req = req.header(http::header::CONTENT_TYPE, content_type);
    }
    let req = req.body(kube::client::Body::from(body)).expect("request");
    let resp = client.send(req).await.expect("the hub answers");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.unwrap_or_default();
    (
        code,
        serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null),
    )
}

/// Send `body` as `content_type` with `method path`: the status, or the
/// transport's error (a dropped connection, a broken stream) as text.
pub async fn send_raw(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<u16, String> {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(body))
        .expect("request");
    match client.send(req).await {
        Ok(resp) => {
            let code = resp.status().as_u16();
            let _ = resp.into_body().collect_bytes().await;
            Ok(code)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The stdout of a command (kubectl) that must have succeeded; `what` names
/// it in the failure, with both outputs.
pub fn ok(out: std::process::Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{what} failed:\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A bearer-token credential.
pub fn token(t: &str) -> ferry_hub::kubeconfig::AuthInfo {
    ferry_hub::kubeconfig::AuthInfo::Token(t.to_string())
}

/// A kube-rs client for `hub` at `workspace` with the admin token.
pub async fn admin(hub: &TestHub, workspace: &str) -> kube::Client {
    client_as(hub, workspace, token(&hub.running.admin_token)).await
}

/// POST `obj` to `path` as admin in `workspace`; it must be created.
pub async fn create(hub: &TestHub, workspace: &str, path: &str, obj: serde_json::Value) -> serde_json::Value {
    let client = admin(hub, workspace).await;
    expect_status_because(&client, "POST", path, Some(&obj), 201, format!("in {workspace}")).await
}

/// The path of an RBAC resource, namespaced when `namespace` is given.
pub fn rbac_path(namespace: Option<&str>, resource: &str) -> String {
    match namespace {
        Some(ns) => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/{resource}"),
        None => format!("/apis/rbac.authorization.k8s.io/v1/{resource}"),
    }
}

/// GET `uri` as written (query included) and return the status and the body
/// as text, read until the server ends it (watches: give `timeoutSeconds`).
pub async fn get_raw(client: &kube::Client, uri: &str) -> (u16, String) {
    use http_body_util::BodyExt;
    let req = http::Request::builder()
        .uri(uri)
        .body(kube::client::Body::empty())
        .expect("request");
    let resp = client.send(req).await.expect("response");
    let code = resp.status().as_u16();
    let body = tokio::time::timeout(std::time::Duration::from_secs(30), resp.into_body().collect())
        .await
        .expect("the response ends")
        .expect("body")
        .to_bytes();
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// The hub's `/metrics` as its admin reads them.
pub async fn scrape_metrics(hub: &TestHub) -> String {
    let admin = top_client_as(hub, token(&hub.running.admin_token)).await;
    let (code, scrape) = get_raw(&admin, "/metrics").await;
    assert_eq!(code, 200, "GET /metrics as the admin: {scrape}");
    scrape
}

/// The sum of metric `name`'s samples in a Prometheus text `scrape` whose labels
/// include each of `has` (e.g. `verb="POST"`); 0 when none does.
pub fn metric_sum(scrape: &str, name: &str, has: &[&str]) -> f64 {
    scrape
        .lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with('{')))
        .filter(|l| has.iter().all(|h| l.contains(h)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The names of everything `api` lists.
pub async fn names_of<K>(api: &kube::Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&kube::api::ListParams::default())
        .await
        .expect("the list")
        .items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .collect()
}

/// The resourceVersion of a list of `api` now: where a watch from now starts.
pub async fn list_version<K>(api: &kube::Api<K>) -> String
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&kube::api::ListParams::default())
        .await
        .expect("the list")
        .metadata
        .resource_version
        .expect("a list's resourceVersion")
}
