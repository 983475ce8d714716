//! The web console's files as the hub serves them at `/console/`: without
//! credentials (the page signs in afterwards), each with its content type and
//! the console's security headers, and not at all with `--disable-console`.

mod common;

use common::client;
use ferry_testkit::TestHub;

/// A client of `hub` that sends no credentials, at the hub's origin.
async fn anonymous(hub: &TestHub) -> kube::Client {
    let mut config = hub.config("root").await;
    config.auth_info = Default::default();
    config.cluster_url = hub.url().parse().unwrap();
    kube::Client::try_from(config).unwrap()
}

/// `GET path`: the status, the headers and the body.
async fn get(c: &kube::Client, path: &str) -> (u16, http::HeaderMap, String) {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = c.send(req).await.unwrap();
    let (code, headers) = (resp.status().as_u16(), resp.headers().clone());
    let body = resp.into_body().collect_bytes().await.unwrap();
    (code, headers, String::from_utf8_lossy(&body).into_owned())
}

fn header<'a>(h: &'a http::HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
}

fn assert_secured(h: &http::HeaderMap, what: &str) {
    let csp = header(h, "content-security-policy");
    assert!(
        csp.contains("script-src 'self'")
            && csp.contains("frame-ancestors 'none'")
            && !csp.contains("unsafe"),
        "{what}: {csp}"
    );
    assert_eq!(header(h, "x-frame-options"), "DENY", "{what}");
    assert_eq!(header(h, "x-content-type-options"), "nosniff", "{what}");
    assert_eq!(header(h, "cache-control"), "no-store", "{what}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_hub_serves_the_console_without_credentials_each_file_typed_and_secured() {
    let hub = TestHub::start().await;
    let anon = anonymous(&hub).await;
    let (code, h, body) = get(&anon, "/console/").await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(header(&h, "content-type"), "text/html; charset=utf-8");
    assert!(body.contains(r#"<script type="module" src="app.js">"#), "{body}");
    assert_secured(&h, "index.html");
    for (file, kind) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("api.js", "text/javascript; charset=utf-8"),
        ("views.js", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
    ] {
        let (code, h, _) = get(&anon, &format!("/console/{file}")).await;
        assert_eq!((code, header(&h, "content-type")), (200, kind), "{file}");
        assert_secured(&h, file);
    }
    let (code, h, _) = get(&anon, "/console").await;
    assert_eq!((code, header(&h, "location")), (308, "/console/"));
    let (code, h, body) = get(&anon, "/console/secrets.json").await;
    assert_eq!(code, 404, "{body}");
    assert!(body.contains("open /console/"), "{body}");
    assert_secured(&h, "a missing file");

    // Only the console's files are open: the API still wants credentials.
    let (code, _, _) = get(&anon, "/clusters/root/api/v1/namespaces").await;
    assert_eq!(code, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hub_with_the_console_disabled_serves_no_console() {
    let hub = TestHub::start_with(|o| o.console = false).await;
    let admin = client(&hub, "root").await;
    let mut config = hub.config("root").await;
    config.cluster_url = hub.url().parse().unwrap();
    let at_origin = kube::Client::try_from(config).unwrap();
    for path in ["/console/", "/console/app.js"] {
        let (code, h, body) = get(&at_origin, path).await;
        assert_eq!(code, 404, "{path}: {body}");
        assert!(
            h.get("content-security-policy").is_none(),
            "{path}: the API's 404, not the console's"
        );
    }
    // The API itself is unchanged.
    let (code, _, _) = get(&admin, "/api/v1/namespaces/default").await;
    assert_eq!(code, 200);
}
