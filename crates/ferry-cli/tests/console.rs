//! The web console in headless Chromium against hubs the tests start: a user
//! signs in with a token, walks the workspace tree, finds the copy a cluster
//! refused and sees the fix arrive without reloading; another tenant signed
//! in never sees the first tenant's workspaces, not even their names. Also
//! `ferry console` forwarding the page's reads with the browser's token only.
//! A workload workspace's page shows each placed object's combined status,
//! live, under an EdgePlacement or a kcp Placement, and the drift each
//! cluster's syncer restored. An APIExport's page names the workspaces bound
//! to it, to its owner only.
//! Screenshots of each page land in `target/console-screenshots/`.

/// The CLI tests' kit for registering KubeStellar syncers.
#[path = "common/edge_syncer.rs"]
mod edge_syncer;

/// The refused copy's set-up, shared with `edge_refusal`.
#[path = "common/refusal.rs"]
mod refusal;

/// Headless Chromium through chromedriver.
#[path = "common/browser.rs"]
mod browser;

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use browser::Browser;
use ferry_hub::strategy::core::service::ServiceRanges;
use ferry_testkit::clients as hubkit;
use ferry_testkit::edge;
use ferry_testkit::tenants::{bind_cluster_role, cluster_role, Tenants};
use ferry_testkit::TestHub;
use serde_json::{json, Value};

/// `ferry console` serving against a hub, killed when dropped.
struct ConsoleProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`
    url: String,
}

impl ConsoleProcess {
    /// `ferry console --kubeconfig <hub's admin kubeconfig>` on a free loopback port.
    fn start(hub: &TestHub) -> ConsoleProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(["console", "--listen", "127.0.0.1:0", "--kubeconfig"])
            .arg(hub.kubeconfig())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ferry console starts");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find_map(|w| w.strip_suffix("/console/"))
            .unwrap_or_else(|| panic!("ferry console printed no URL: {line:?}"))
            .to_string();
        ConsoleProcess { child, url }
    }
}

impl Drop for ConsoleProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Open the console at `base` signed out, and sign in as `token` starting at `workspace`.
async fn sign_in(b: &Browser, base: &str, token: &str, workspace: &str) {
    b.open(&format!("{base}/console/#/")).await;
    b.run(
        "sessionStorage.clear(); window.dispatchEvent(new HashChangeEvent('hashchange')); return null;",
        json!([]),
    )
    .await;
    b.wait_text(10, "#sign-in", "the sign-in form", |t| t.contains("Token"))
        .await;
    b.type_into("#token", token).await;
    b.type_into("#workspace", workspace).await;
    b.click("#sign-in-button").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_owner_walks_the_tree_finds_the_copy_a_cluster_refused_and_sees_the_fix_arrive_live() {
    if !browser::available() {
        return;
    }
    let tenants =
        Tenants::start_with(|o| o.service_ranges = ServiceRanges::distinct(refusal::HUB_RANGES)).await;
    let hub = &tenants.hub;
    let refused = refusal::refused_copy(hub).await;
    // alice runs the KubeStellar workspaces and may list what root holds.
    for ws in ["root:imw1", "root:wmw1"] {
        bind_cluster_role(hub, ws, "alice-admin", "cluster-admin", "alice").await;
    }
    let read_workspaces = json!([{"apiGroups": ["tenancy.kcp.io"], "resources": ["workspaces"],
                                  "verbs": ["get", "list", "watch"]}]);
    cluster_role(hub, "root", "workspace-reader", read_workspaces).await;
    bind_cluster_role(hub, "root", "alice-workspaces", "workspace-reader", "alice").await;
    // ... and may read florin's syncer's reports in its mailbox.
    let read_syncer = json!([{"apiGroups": ["edge.kubestellar.io"], "resources": ["syncerconfigs"],
                              "verbs": ["get", "list", "watch"]}]);
    cluster_role(hub, &refused.mailbox, "syncer-reader", read_syncer).await;
    bind_cluster_role(hub, &refused.mailbox, "alice-syncer", "syncer-reader", "alice").await;

    let b = Browser::start("owner").await;
    b.open(&format!("{}/console/", hub.url())).await;
    b.wait_text(10, "#sign-in", "the sign-in form", |t| t.contains("Token"))
        .await;
    b.screenshot("1-sign-in").await;
    b.type_into("#token", "alice-token").await;
    b.click("#sign-in-button").await;

    b.wait_text(15, "#tree", "imw1 and wmw1 in the tree", |t| {
        t.contains("imw1") && t.contains("wmw1")
    })
    .await;
    let href = b.run("return location.href;", json!([])).await;
    assert!(
        !href.to_string().contains("alice-token"),
        "the token stays out of the URL: {href}"
    );
    b.screenshot("2-tree").await;

    b.click(r#"#tree a[data-workspace="root:imw1"]"#).await;
    let inventory = b
        .wait_text(20, "#edge-synctargets", "florin and its mailbox", |t| {
            t.contains("florin") && t.contains(&refused.mailbox)
        })
        .await;
    assert!(
        inventory.contains("in its mailbox"),
        "a KubeStellar syncer's version is read in its mailbox: {inventory}"
    );
    b.screenshot("3-inventory").await;
    b.click("#edge-synctargets a[data-workspace]").await;
    b.wait_text(
        20,
        "#syncerconfigs",
        "florin's syncer's recent heartbeat and version",
        |t| t.contains("s ago") && t.contains("Ready=") && t.contains(ferry_syncer::options::DEFAULT_VERSION),
    )
    .await;
    b.screenshot("3b-mailbox").await;

    b.click(r#"#tree a[data-workspace="root:wmw1"]"#).await;
    let placed = b
        .wait_text(30, "#placed", "florin's refusal of shop/web", |t| {
            t.contains("Refused by the cluster")
        })
        .await;
    assert!(
        placed.contains("florin")
            && placed
                .contains("provided port is not in the valid range. The range of valid ports is 30512-31023")
            && placed.contains("Change the object so the cluster's API server accepts it"),
        "the cluster's message and what to do: {placed}"
    );
    let placements = b
        .wait_text(15, "#edgeplacements", "shop not Ready: CopiesRefused", |t| {
            t.contains("CopiesRefused")
        })
        .await;
    assert!(placements.contains("services shop/web on florin"), "{placements}");
    let red = b
        .run(
            "return getComputedStyle(document.querySelector('#placed .problem')).color;",
            json!([]),
        )
        .await;
    assert_eq!(red, "rgb(179, 38, 30)", "the refusal shows in red");
    b.screenshot("4-refused").await;

    // The owner fixes the Service elsewhere (kubectl); the open page follows.
    b.run("window.ferryTestMark = 'not reloaded'; return null;", json!([]))
        .await;
    refusal::unpin(&refused.wmw).await;
    b.wait_text(30, "#edgeplacements", "shop Ready again (Placed)", |t| {
        t.contains("Placed") && !t.contains("CopiesRefused")
    })
    .await;
    b.wait_text(20, "#placed", "web's copy accepted by florin", |t| {
        t.contains("florin") && !t.contains("Refused")
    })
    .await;
    let mark = b.run("return window.ferryTestMark || null;", json!([])).await;
    assert_eq!(
        mark, "not reloaded",
        "the change arrived over the watch, without a reload"
    );
    b.screenshot("5-fixed-live").await;

    b.quit().await;
    refused.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_workload_page_shows_each_objects_combined_status_and_follows_it_live() {
    if !browser::available() {
        return;
    }
    let tenants = Tenants::start().await;
    let hub = &tenants.hub;
    let imw = edge::workspace(hub, "imw1").await;
    edge::workspace(hub, "wmw1").await;
    let florin = edge::location(hub, &imw, "florin", json!({"env": "prod"})).await;
    bind_cluster_role(hub, "root:wmw1", "alice-admin", "cluster-admin", "alice").await;
    let wmw = hubkit::client(hub, "root:wmw1").await;
    edge::web(&wmw).await;
    edge::apply(
        &wmw,
        edge::collector(
            "broken",
            json!({"filter": "returned.status.(", "combinedFields": [{"name": "n", "type": "COUNT"}]}),
        ),
    )
    .await;
    edge::place_web(&wmw, "shop", json!({"matchLabels": {"env": "prod"}}), &["broken"]).await;
    edge::copies_in(hub, std::slice::from_ref(&florin)).await;
    let syncer = edge::stand_in_syncer(hub, &florin).await;
    edge::return_status(
        hub,
        &florin,
        &edge::deployments(),
        "shop",
        "web",
        edge::available(1),
    )
    .await;

    let b = Browser::start("combined").await;
    sign_in(&b, hub.url(), "alice-token", "root:wmw1").await;
    let combined = b
        .wait_text(30, "#combined", "web's combined status", |t| {
            t.contains("1/2 available on 1 cluster")
        })
        .await;
    assert!(
        combined.contains("builtin:availability")
            && combined.contains("florin")
            && combined.contains("Not evaluated:")
            && combined.contains("spec.filter"),
        "the tables and the bad collector's field: {combined}"
    );
    b.run(
        "document.querySelector('#combined').scrollIntoView(); return null;",
        json!([]),
    )
    .await;
    b.screenshot("6-combined-status").await;

    b.run("window.ferryTestMark = 'not reloaded'; return null;", json!([]))
        .await;
    edge::return_status(
        hub,
        &florin,
        &edge::deployments(),
        "shop",
        "web",
        edge::available(2),
    )
    .await;
    b.wait_text(15, "#combined", "florin's new status combined", |t| {
        t.contains("2/2 available on 1 cluster")
    })
    .await;
    // florin's syncer restores the copy someone changed there: the drift
    // shows on florin's row of the placed object, and in its combined status.
    let image = "$.spec.template.spec.containers[0].image";
    edge::report_drift(hub, &florin, "apps/deployments", "shop", "web", &[image]).await;
    let placed = b
        .wait_text(15, "#placed", "florin's drift on the placed object", |t| {
            t.contains(image)
        })
        .await;
    assert!(placed.contains("(1 correction)"), "{placed}");
    b.wait_text(15, "#combined", "the drift combined", |t| {
        t.contains("1 drift correction on florin")
    })
    .await;
    b.run(
        "document.querySelector('#placed').scrollIntoView(); return null;",
        json!([]),
    )
    .await;
    b.screenshot("7-drift").await;
    let mark = b.run("return window.ferryTestMark || null;", json!([])).await;
    assert_eq!(mark, "not reloaded", "the change arrived over the watch");

    // A kcp TMC Placement's combined status shows on its workspace's page too.
    use ferry_testkit::tmc;
    tmc::workspace(hub, "loc").await;
    tmc::workspace(hub, "app").await;
    bind_cluster_role(hub, "root:app", "alice-admin", "cluster-admin", "alice").await;
    tmc::sync_target(hub, "root:loc", "guilder", json!({})).await;
    tmc::placement(hub, "root:app", "compute", "root:loc", json!([{}]), json!({})).await;
    tmc::namespace(hub, "root:app", "shop", json!({})).await;
    tmc::deployment(hub, "root:app", "shop", "web", 2).await;
    let web = "/apis/apps/v1/namespaces/shop/deployments/web";
    tmc::wait_for(hub, "root:app", web, "web synced to guilder", |d| {
        !tmc::states(d).is_empty()
    })
    .await;
    tmc::return_status_of_only_target(hub, "root:app", web, &edge::available(2)).await;
    sign_in(&b, hub.url(), "alice-token", "root:app").await;
    let combined = b
        .wait_text(
            30,
            "#combined",
            "web's combined status under the kcp Placement",
            |t| t.contains("2/2 available on 1 cluster"),
        )
        .await;
    assert!(
        combined.contains("Placement (kcp) compute") && combined.contains("guilder"),
        "the Placement and the SyncTarget's row: {combined}"
    );
    b.screenshot("7-tmc-combined-status").await;
    b.quit().await;
    syncer.abort();
}

#[tokio::test(flavor = "multi_thread")]
async fn another_tenants_login_never_shows_the_first_tenants_workspaces() {
    if !browser::available() {
        return;
    }
    let tenants = Tenants::start().await;
    let hub = &tenants.hub;
    tenants.workspace("acme", Some("alice")).await;
    tenants.workspace("mal", Some("mal")).await;
    hubkit::create(
        hub,
        "root:acme",
        "/apis/tenancy.kcp.io/v1alpha1/workspaces",
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "secret-project"}}),
    )
    .await;
    // Through `ferry console`, so its forwarding of lists and watches is
    // what the browser uses here.
    let console = ConsoleProcess::start(hub);
    let b = Browser::start("tenants").await;
    let leaks = |page: &str| page.contains("acme") || page.contains("secret-project");

    // mal where he belongs: his workspace, nothing of alice's.
    sign_in(&b, &console.url, "mal-token", "root:mal").await;
    b.wait_text(15, "#workspaces", "root:mal's (empty) workspace list", |t| {
        t.contains("none")
    })
    .await;
    assert!(
        !leaks(&b.source().await),
        "mal's own tree names nothing of alice's"
    );
    b.screenshot("1-mal-own-workspace").await;

    // mal from root: the hub refuses the list, and the page names nothing.
    sign_in(&b, &console.url, "mal-token", "root").await;
    let refused = b
        .wait_text(15, "#tree-error", "root's list refused to mal", |t| {
            t.contains("You may not list the workspaces in root")
        })
        .await;
    assert!(!leaks(&refused) && !leaks(&b.source().await), "{refused}");
    b.screenshot("2-mal-from-root").await;

    // mal guessing alice's workspace: refused, its children unnamed.
    sign_in(&b, &console.url, "mal-token", "root:acme").await;
    b.wait_text(15, "#main", "root:acme refused to mal", |t| {
        t.contains("You may not")
    })
    .await;
    let page = b.source().await;
    assert!(!page.contains("secret-project"), "{page}");
    b.screenshot("3-mal-guessing").await;

    // The positive twin: alice sees her workspace and what is in it.
    sign_in(&b, &console.url, "alice-token", "root:acme").await;
    b.wait_text(15, "#tree", "secret-project in alice's tree", |t| {
        t.contains("secret-project")
    })
    .await;
    b.wait_text(15, "#workspaces", "secret-project listed", |t| {
        t.contains("secret-project")
    })
    .await;
    b.screenshot("4-alice").await;
    b.quit().await;
}

/// An APIExport's page names, live, the workspaces bound to it (by logical
/// cluster, as its virtual workspace shows them to its owner) with each
/// binding's state; another tenant sees neither the bindings nor the names,
/// not even through an export of his own with the same name.
#[tokio::test(flavor = "multi_thread")]
async fn the_export_owner_sees_who_binds_each_export_live_and_another_tenant_sees_none() {
    if !browser::available() {
        return;
    }
    use ferry_testkit::exports;
    let tenants = Tenants::start().await;
    let hub = &tenants.hub;
    let bob = exports::bob_binds_alices_widgets(&tenants).await;
    let carol = tenants.workspace("carol", None).await;
    let widgets = exports::schema("example.io", "widgets", "Widget");

    let b = Browser::start("exports").await;
    sign_in(&b, hub.url(), "alice-token", "root:alice").await;
    let row = b
        .wait_text(
            30,
            "#apiexports",
            "bob's workspace bound, its claim accepted",
            |t| t.contains(&bob) && t.contains("Bound") && t.contains("1/1 claims accepted"),
        )
        .await;
    assert!(!row.contains("root:bob"), "by logical cluster, never path: {row}");
    b.run("window.ferryTestMark = 'not reloaded'; return null;", json!([]))
        .await;
    exports::bind(
        hub,
        "root:carol",
        "widgets",
        "root:alice",
        "widgets.example.io",
        json!([]),
    )
    .await;
    b.wait_text(20, "#apiexports", "carol's binding, arrived live", |t| {
        t.contains(&carol) && t.contains("0/1 claims accepted")
    })
    .await;
    let mark = b.run("return window.ferryTestMark || null;", json!([])).await;
    assert_eq!(mark, "not reloaded", "the binding arrived over the watch");
    b.run(
        "document.querySelector('#apiexports').scrollIntoView(); return null;",
        json!([]),
    )
    .await;
    b.screenshot("1-export-bindings").await;

    // mal: alice's workspace is refused, and nothing names her consumers.
    let leaks = |page: &str| page.contains(&bob) || page.contains(&carol) || page.contains("root:bob");
    sign_in(&b, hub.url(), "mal-token", "root:alice").await;
    b.wait_text(15, "#main", "root:alice refused to mal", |t| {
        t.contains("You may not")
    })
    .await;
    assert!(!leaks(&b.source().await), "mal reads nothing of alice's export");
    // ... and his own export of the same name shows only its own consumers: none.
    let m = tenants.client_as("mal", "root:mal").await;
    for (resource, obj) in [
        ("apiresourceschemas", widgets),
        (
            "apiexports",
            json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "widgets.example.io"},
                   "spec": {"latestResourceSchemas": ["v1.widgets.example.io"]}}),
        ),
    ] {
        let (code, body) =
            hubkit::call(&m, "POST", &format!("{}/{resource}", exports::APIS), Some(&obj)).await;
        assert_eq!(code, 201, "{body}");
    }
    sign_in(&b, hub.url(), "mal-token", "root:mal").await;
    b.wait_text(20, "#apiexports", "mal's own export, bound nowhere", |t| {
        t.contains("no workspace binds it yet")
    })
    .await;
    assert!(
        !leaks(&b.source().await),
        "mal's export names no one else's consumer"
    );
    b.screenshot("2-mal-own-export").await;
    b.quit().await;
}

/// `GET url` with `token` (if any): the status and the body.
async fn get(url: &str, token: Option<&str>, method: &str) -> (u16, String) {
    use http_body_util::{BodyExt, Full};
    let client =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
    let mut req = http::Request::builder().method(method).uri(url);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = client
        .request(req.body(Full::new(bytes::Bytes::new())).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread")]
async fn ferry_console_forwards_reads_with_the_browsers_token_and_never_the_kubeconfigs() {
    let tenants = Tenants::start().await;
    let hub = &tenants.hub;
    tenants.workspace("mal", Some("mal")).await;
    // The kubeconfig it is given is the hub admin's.
    let console = ConsoleProcess::start(hub);
    let (code, page) = get(&format!("{}/console/", console.url), None, "GET").await;
    assert!(code == 200 && page.contains("app.js"), "{code} {page}");

    let namespaces = format!("{}/clusters/root/api/v1/namespaces", console.url);
    let (code, body) = get(&namespaces, None, "GET").await;
    assert_eq!(code, 401, "no token, no admin rights borrowed: {body}");
    let (code, body) = get(&namespaces, Some("mal-token"), "GET").await;
    assert_eq!(code, 403, "mal reads root as mal: {body}");
    let own = format!("{}/clusters/root:mal/api/v1/namespaces", console.url);
    let (code, body) = get(&own, Some("mal-token"), "GET").await;
    let list: Value = serde_json::from_str(&body).unwrap_or_default();
    assert_eq!(
        (code, list["kind"].as_str()),
        (200, Some("NamespaceList")),
        "{body}"
    );

    let (code, body) = get(&own, Some("mal-token"), "POST").await;
    assert_eq!(code, 405, "read-only: {body}");
    assert!(body.contains("forwards GET requests only"), "{body}");
    let (code, body) = get(&format!("{}/metrics", console.url), Some("mal-token"), "GET").await;
    assert_eq!(code, 404, "only the API's paths are forwarded: {body}");
}
