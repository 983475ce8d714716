//! HTTP/2 answers are complete whatever the status: a client still sending
//! its request body when the hub answers (a 401, 403, 404 or 405 the hub
//! gives without reading the body) gets the whole answer and a stream that
//! ends normally, never a reset in its face (curl's `(92) Stream error in
//! the HTTP/2 framing layer`, which curl gave for about every second such
//! answer). Driven with curl, as an attacker or a user would.

mod common;

use std::path::Path;

use common::tenants::Tenants;
use common::{call, create, eventually};
use ferry_testkit::TestHub;
use serde_json::{json, Value};

/// Big enough that curl is still sending when the hub answers.
const BODY: usize = 300 * 1024;
/// Requests per path: the reset this guards against broke about every second
/// answer, so six tries per path catch it. The rarer one — curl ending its
/// stream short on seeing the error's headers, which `h2` answered with a
/// `PROTOCOL_ERROR` reset, about 1 in 200 answers with eight of these tests
/// running at once — shows only under load; with the answer now held until
/// the body has ended, 24 such runs of 300 tries on the export view passed
/// where 5 of 36 had failed.
const TRIES: usize = 6;

/// POST the file `body` to `path` over HTTP/2 with curl (as `bearer`, if
/// any); returns curl's exit code, the HTTP status and the answer.
fn curl_post(hub: &TestHub, dir: &Path, path: &str, bearer: Option<&str>, body: &Path) -> (i32, u16, Value) {
    let ca = dir.join("ca.crt");
    std::fs::write(&ca, &hub.running.ca_pem).unwrap();
    let out_file = dir.join("answer");
    let _ = std::fs::remove_file(&out_file);
    let mut cmd = std::process::Command::new("curl");
    cmd.args(["--http2", "--silent", "--show-error", "--cacert"])
        .arg(&ca)
        .args(["-H", "Content-Type: application/json", "-o"])
        .arg(&out_file)
        .args(["-w", "%{http_code}", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(format!("{}{path}", hub.url()));
    if let Some(t) = bearer {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = cmd.output().expect("curl runs");
    let code = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(0);
    let answer = std::fs::read(&out_file).unwrap_or_default();
    (
        out.status.code().unwrap_or(-1),
        code,
        serde_json::from_slice(&answer).unwrap_or_else(|_| json!(String::from_utf8_lossy(&out.stderr))),
    )
}

fn curl_speaks_http2() {
    let out = std::process::Command::new("curl")
        .arg("--version")
        .output()
        .expect("curl is installed");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("HTTP2"),
        "this test needs a curl built with HTTP/2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_answers_are_complete_when_the_body_is_not_read() {
    curl_speaks_http2();
    let t = Tenants::start().await;
    let mal = t.workspace("mal", Some("mal")).await;
    let alice = t.workspace("alice", Some("alice")).await;
    let hub = &t.hub;
    // mal's export with nothing in it: its virtual workspace shows no Secrets.
    create(
        hub,
        "root:mal",
        "/apis/apis.kcp.io/v1alpha1/apiexports",
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "empty"}, "spec": {}}),
    )
    .await;
    let vw = format!("/services/apiexport/{mal}/empty/clusters/{alice}/api/v1/namespaces/default/secrets");
    let m = t.client_as("mal", "root:mal").await;
    eventually(10, "mal's export is there", || async {
        let path = "/apis/apis.kcp.io/v1alpha1/apiexports/empty";
        (call(&m, "GET", path, None).await.0 == 200).then_some(())
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.json");
    std::fs::write(&body, vec![b' '; BODY]).unwrap();
    let admin = hub.running.admin_token.clone();
    let cases: Vec<(&str, Option<&str>, u16)> = vec![
        ("/api/v1/namespaces/default/configmaps", None, 401),
        (
            "/clusters/root:alice/api/v1/namespaces/default/configmaps",
            Some("mal-token"),
            403,
        ),
        ("/api/v1/namespaces/default/nosuchthings", Some(&admin), 404),
        ("/api/v1/namespaces/default/configmaps/named", Some(&admin), 405),
        (&vw, Some("mal-token"), 404),
    ];
    for (path, bearer, want) in cases {
        for i in 0..TRIES {
            let (exit, code, answer) = curl_post(hub, dir.path(), path, bearer, &body);
            assert_eq!(exit, 0, "POST {path} (try {i}): curl failed: {answer}");
            assert_eq!(code, want, "POST {path} (try {i}): {answer}");
            assert_eq!(answer["kind"], "Status", "POST {path} (try {i}): {answer}");
            assert_eq!(answer["code"], want, "POST {path} (try {i}): {answer}");
        }
    }
}

/// The twin: a body the hub reads is taken in whole over HTTP/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_creates_read_the_whole_body() {
    curl_speaks_http2();
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("configmap.json");
    let big = "x".repeat(BODY);
    for i in 0..4 {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("big-{i}")}, "data": {"big": big}});
        std::fs::write(&body, serde_json::to_vec(&cm).unwrap()).unwrap();
        let path = "/api/v1/namespaces/default/configmaps";
        let (exit, code, made) = curl_post(&hub, dir.path(), path, Some(&hub.running.admin_token), &body);
        assert_eq!((exit, code), (0, 201), "{made}");
        assert_eq!(made["data"]["big"].as_str().map(str::len), Some(BODY));
    }
}
