//! Inputs that used to stall the hub (issue 9, findings 3, 4, 5 and 8):
//! backtracking CRD patterns, OpenAPI rebuilt per request, oversize
//! objects, a world-readable data directory, and connections that never
//! finish their handshake or headers. Load tests assert with generous
//! bounds that `/readyz` keeps answering; nothing here waits on a bare sleep.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{call, eventually, expect_status, expect_status_because, get_ok, post_created};
use ferry_testkit::TestHub;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest a `/readyz` probe may take while the hub is under load: far
/// above a healthy probe (milliseconds), far below a stall (a pattern that
/// backtracks, a blocked runtime: tens of seconds or for ever), and loose
/// enough that a machine shared with parallel builds does not trip it.
const READYZ_BOUND: Duration = Duration::from_secs(5);

/// A namespaced CRD `plural.group` at `v1` with `schema` as `spec`'s schema.
fn crd(group: &str, plural: &str, kind: &str, spec_schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}},
            }],
        },
    })
}

const CRDS_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// Create `crd` and wait until its resource is served.
async fn install(client: &kube::Client, crd: Value) {
    expect_status_because(client, "POST", CRDS_PATH, Some(&crd), 201, "creating the CRD").await;
    let list = format!(
        "/apis/{}/v1/namespaces/default/{}",
        crd["spec"]["group"].as_str().unwrap(),
        crd["spec"]["names"]["plural"].as_str().unwrap()
    );
    eventually(20, "the CRD's resource to be served", || {
        let list = list.clone();
        async move { (call(client, "GET", &list, None).await.0 == 200).then_some(()) }
    })
    .await;
}

/// Probe `/readyz` on its own connection until `load` finishes; every probe
/// must answer 200 within [`READYZ_BOUND`]. Returns the slowest probe and
/// the number of probes made.
async fn probe_readyz_while<T>(hub: &TestHub, load: tokio::task::JoinHandle<T>) -> (Duration, usize, T) {
    let prober = hub.client("root").await;
    let mut slowest = Duration::ZERO;
    let mut probes = 0;
    let deadline = Instant::now() + Duration::from_secs(300);
    while !load.is_finished() {
        assert!(Instant::now() < deadline, "the load did not finish within 300 s");
        let start = Instant::now();
        let probe = tokio::time::timeout(READYZ_BOUND * 5, call(&prober, "GET", "/readyz", None)).await;
        let took = start.elapsed();
        let code = probe.map(|(code, _)| code).unwrap_or(0);
        assert_eq!(
            code, 200,
            "/readyz failed or timed out under load (after {took:?})"
        );
        assert!(
            took < READYZ_BOUND,
            "/readyz took {took:?} under load (bound {READYZ_BOUND:?})"
        );
        slowest = slowest.max(took);
        probes += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (slowest, probes, load.await.expect("load task"))
}

/// Run the future `load` makes on a runtime of its own (two workers, as
/// another process's clients would have), so the load's client side does
/// not compete with the hub for the test runtime's workers.
fn on_own_runtime<F, Fut, T>(load: F) -> tokio::task::JoinHandle<T>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(move || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime for the load")
            .block_on(load())
    })
}

/// `clients` clients of `hub` at `root` at once, each making the requests
/// `requests` makes, on a runtime of their own ([`on_own_runtime`]); every
/// status they got.
fn clients_at_once<F, Fut>(hub: &TestHub, clients: usize, requests: F) -> tokio::task::JoinHandle<Vec<u16>>
where
    F: Fn(kube::Client) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Vec<u16>> + Send + 'static,
{
    let kubeconfig = hub.kubeconfig().to_path_buf();
    on_own_runtime(move || async move {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..clients {
            let c = ferry_testkit::client_from(&kubeconfig, Some("root")).await;
            tasks.spawn(requests(c));
        }
        let mut codes = Vec::new();
        while let Some(r) = tasks.join_next().await {
            codes.extend(r.expect("client task"));
        }
        codes
    })
}

/// Send a JSON `body` and read the whole answer, returning only its status:
/// the load's client side stays light, since it shares the runtime with the
/// hub under test.
async fn status_of(client: &kube::Client, method: &str, path: &str, body: bytes::Bytes) -> u16 {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(body.to_vec()))
        .unwrap();
    let resp = client.send(req).await.expect("response");
    let code = resp.status().as_u16();
    resp.into_body().collect_bytes().await.expect("the whole answer");
    code
}

fn trap(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "dos.example.com/v1", "kind": "Trap", "metadata": {"name": name}, "spec": spec})
}

const TRAPS: &str = "/apis/dos.example.com/v1/namespaces/default/traps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backtracking_pattern_is_decided_exactly_and_readyz_keeps_answering() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let pattern = "^(a|a)*$";
    install(
        &client,
        crd(
            "dos.example.com",
            "traps",
            "Trap",
            json!({"type": "object", "properties": {
                "s": {"type": "string", "pattern": pattern},
                "many": {"type": "array", "items": {"type": "string", "pattern": pattern}},
            }}),
        ),
    )
    .await;

    // A backtracking matcher needs 2^40 steps to refuse this; RE2 semantics
    // refuse it (the `!` is not an `a`), and nothing is passed unchecked.
    let bad = format!("{}!", "a".repeat(40));
    let body = expect_status(&client, "POST", TRAPS, Some(&trap("bad", json!({"s": bad}))), 422).await;
    assert_eq!(body["details"]["causes"][0]["field"], "spec.s", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("should match '^(a|a)*$'"),
        "{body}"
    );
    let good = "a".repeat(40);
    post_created(&client, TRAPS, &trap("good", json!({"s": good}))).await;

    // 32 clients at once, each sending bodies of about 1 MiB of such strings.
    let many: Vec<String> = (0..400).map(|_| format!("{}!", "a".repeat(2500))).collect();
    let body =
        bytes::Bytes::from(serde_json::to_vec(&trap("heavy", json!({"s": "a", "many": many}))).unwrap());
    let load = clients_at_once(&hub, 32, move |c| {
        let body = body.clone();
        async move {
            let mut codes = Vec::new();
            for _ in 0..3 {
                codes.push(status_of(&c, "POST", TRAPS, body.clone()).await);
            }
            codes
        }
    });
    let (slowest, probes, codes) = probe_readyz_while(&hub, load).await;
    assert_eq!(codes.len(), 96);
    assert!(
        codes.iter().all(|c| *c == 422),
        "every heavy body is refused: {codes:?}"
    );
    eprintln!("pattern load: {probes} /readyz probes, slowest {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_pattern_is_refused_when_the_crd_is_created() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let bad = crd(
        "dos.example.com",
        "traps",
        "Trap",
        json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "^(ab"}}}),
    );
    let body = expect_status(&client, "POST", CRDS_PATH, Some(&bad), 422).await;
    let cause = &body["details"]["causes"][0];
    assert_eq!(
        cause["field"], "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].pattern",
        "{body}"
    );
    assert!(
        cause["message"]
            .as_str()
            .unwrap()
            .contains(r#"Invalid value: "^(ab": must be a valid regular expression, but isn't"#),
        "{body}"
    );

    // A pattern whose compiled program is too large is refused now, not
    // when a custom resource is checked against it.
    let huge = crd(
        "dos.example.com",
        "traps",
        "Trap",
        json!({"type": "object", "properties": {"x": {"type": "string", "pattern": "((a{1000}){1000}){1000}"}}}),
    );
    let body = expect_status(&client, "POST", CRDS_PATH, Some(&huge), 422).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("larger than the limit"),
        "{body}"
    );
}

/// A CRD whose schema is about `kib` KiB: many described properties.
fn large_crd(group: &str, kib: usize) -> Value {
    let description = "d".repeat(1000);
    let properties: serde_json::Map<String, Value> = (0..kib)
        .map(|i| {
            (
                format!("field{i}"),
                json!({"type": "string", "description": description, "maxLength": 64}),
            )
        })
        .collect();
    crd(
        group,
        "bigs",
        "Big",
        json!({"type": "object", "properties": properties}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_is_built_once_per_change_and_readyz_keeps_answering() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    install(&client, large_crd("big.example.com", 1200)).await;

    let root = get_ok(&client, "/openapi/v3").await;
    assert!(root["paths"]["apis/big.example.com/v1"].is_object(), "{root}");

    let load = clients_at_once(&hub, 64, |c| async move {
        let mut codes = Vec::new();
        for path in [
            "/openapi/v3",
            "/openapi/v3/apis/big.example.com/v1",
            "/openapi/v2",
        ] {
            codes.push(status_of(&c, "GET", path, bytes::Bytes::new()).await);
        }
        codes
    });
    let (slowest, probes, codes) = probe_readyz_while(&hub, load).await;
    assert!(codes.iter().all(|c| *c == 200), "{codes:?}");
    eprintln!("openapi load: {probes} /readyz probes, slowest {slowest:?}");

    // A new CRD shows in the next document: the cache follows changes.
    install(
        &client,
        crd("extra.example.com", "extras", "Extra", json!({"type": "object"})),
    )
    .await;
    let (_, root) = call(&client, "GET", "/openapi/v3", None).await;
    assert!(root["paths"]["apis/extra.example.com/v1"].is_object(), "{root}");
    let (_, gv) = call(&client, "GET", "/openapi/v3/apis/extra.example.com/v1", None).await;
    assert!(gv["components"]["schemas"].to_string().contains("Extra"), "{gv}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_objects_are_refused_with_the_limit() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    // Under the 3 MiB body limit, over the 1.5 MiB object limit.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big-cm"},
                    "data": {"big": "x".repeat(2 * 1024 * 1024)}});
    let (code, body) = call(
        &client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        Some(&cm),
    )
    .await;
    assert_eq!(code, 413, "{}", body["message"]);
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(r#"configmaps "big-cm" is too large to store"#) && message.contains("1572864 bytes"),
        "{message}"
    );

    let huge = large_crd("huge.example.com", 2000);
    let (code, body) = call(&client, "POST", CRDS_PATH, Some(&huge)).await;
    assert_eq!(code, 413, "{}", body["message"]);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(r#"customresourcedefinitions "bigs.huge.example.com" is too large to store"#),
        "{}",
        body["message"]
    );

    // A small object still goes through, and growing it past the limit by
    // a patch is refused the same way.
    let small =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "small"}, "data": {"a": "b"}});
    post_created(&client, "/api/v1/namespaces/default/configmaps", &small).await;
    let grow = json!({"data": {"big": "x".repeat(2 * 1024 * 1024)}});
    let (code, body) = call_with(
        &client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/small",
        "application/merge-patch+json",
        &grow,
    )
    .await;
    assert_eq!(code, 413, "{}", body["message"]);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(r#"configmaps "small""#),
        "{body}"
    );
    expect_status(
        &client,
        "GET",
        "/api/v1/namespaces/default/configmaps/big-cm",
        None,
        404,
    )
    .await;
}

/// `call` with a content type of the caller's choosing.
async fn call_with(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(serde_json::to_vec(body).unwrap()))
        .unwrap();
    let resp = client.send(req).await.expect("response");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.unwrap_or_default();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[cfg(unix)]
fn modes_in(dir: &Path) -> Vec<(String, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        out.push((p.display().to_string(), meta.permissions().mode() & 0o777));
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                stack.push(e.unwrap().path());
            }
        }
    }
    out
}

#[cfg(unix)]
fn assert_owner_only(dir: &Path) {
    for (path, mode) in modes_in(dir) {
        let wanted = if Path::new(&path).is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode, wanted, "{path} has mode {mode:04o}");
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_directory_is_owner_only_and_loose_modes_are_fixed_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let hub = TestHub::start_in(&dir).await;
    // A write, so the database's WAL exists too.
    let client = hub.client("root").await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    post_created(&client, "/api/v1/namespaces/default/configmaps", &cm).await;
    assert!(dir.join("hub.db-wal").exists());
    assert_owner_only(&dir);
    let (running, _) = hub.into_parts();
    running.stop().await;

    for (p, m) in [
        ("", 0o755),
        ("pki", 0o755),
        ("hub.db", 0o644),
        ("admin.token", 0o644),
        ("pki/ca.key", 0o644),
    ] {
        std::fs::set_permissions(dir.join(p), std::fs::Permissions::from_mode(m)).unwrap();
    }
    let hub = TestHub::start_in(&dir).await;
    assert_owner_only(&dir);
    let (running, _) = hub.into_parts();
    running.stop().await;
}

/// Read from `stream` until the hub closes it; the time that took.
async fn closed_within<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, bound: Duration) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(bound, stream.read(&mut buf)).await {
            Err(_) => panic!("the hub kept the connection open for more than {bound:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => continue,
        }
    }
}

fn tls_connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_handshakes_and_half_sent_headers_are_cut_off() {
    let timeout = Duration::from_millis(500);
    let hub = TestHub::start_with(|o| {
        o.tls_handshake_timeout = timeout;
        o.request_header_timeout = timeout;
        o.idle_timeout = timeout * 2;
    })
    .await;
    let addr = hub.running.addr;
    let bound = Duration::from_secs(10);

    // TCP connected, TLS never started.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let took = closed_within(&mut tcp, bound).await;
    assert!(took >= timeout / 2, "closed after {took:?}, before the timeout");

    let connector = tls_connector(&hub.running.ca_pem);
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();

    // TLS done, nothing sent.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = connector.connect(name.clone(), tcp).await.unwrap();
    closed_within(&mut tls, bound).await;

    // Half a request header.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = connector.connect(name.clone(), tcp).await.unwrap();
    tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    tls.flush().await.unwrap();
    closed_within(&mut tls, bound).await;

    // A whole request is still answered, and the idle keep-alive connection
    // it leaves is closed too.
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = connector.connect(name, tcp).await.unwrap();
    tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut answer = vec![0u8; 256];
    let n = tokio::time::timeout(bound, tls.read(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert!(
        answer[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer[..n])
    );
    closed_within(&mut tls, bound).await;
}
