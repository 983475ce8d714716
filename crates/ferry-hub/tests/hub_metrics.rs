//! The hub's `/metrics` and `GET /`, as kube-apiserver serves them: who may read
//! them (the admin, and whoever root grants `get` on the non-resource URL; not an
//! anonymous client, not a tenant with rights only in its own workspace), and that a
//! scrape tells nothing about what tenants named.

mod common;

use common::tenants::{bind_cluster_role, cluster_role, Tenants};
use common::{call, eventually, expect_status, get_ok, get_raw, post_created, token, top_client_as};
use ferry_hub::kubeconfig::AuthInfo;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, WatchParams};
use serde_json::json;

/// Every label value of a Prometheus text scrape.
fn label_values(scrape: &str) -> Vec<&str> {
    scrape
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| Some(&l[l.find('{')? + 1..l.rfind('}')?]))
        .flat_map(|labels| labels.split("\",").filter_map(|kv| kv.split_once("=\"")))
        .map(|(_, v)| v.trim_end_matches('"'))
        .collect()
}

/// The value of the sample `name{...}` whose labels include every one of `has`.
fn sample(scrape: &str, name: &str, has: &[&str]) -> Option<f64> {
    scrape
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| has.iter().all(|h| l.contains(h)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_are_read_by_the_admin_and_whom_root_grants_them_not_by_tenants_or_anonymous() {
    let t = Tenants::start().await;
    t.workspace("mal", Some("mal")).await;
    let admin = top_client_as(&t.hub, token(&t.hub.running.admin_token)).await;
    let (code, scrape) = get_raw(&admin, "/metrics").await;
    assert_eq!(code, 200, "{scrape}");
    for name in [
        "apiserver_request_total",
        "apiserver_request_duration_seconds_bucket",
        "apiserver_current_inflight_requests",
        "apiserver_storage_objects",
    ] {
        assert!(scrape.contains(name), "{name} missing from the scrape:\n{scrape}");
    }

    // The attacker: cluster-admin of root:mal (every non-resource URL there) and
    // nothing in root.
    let mal = top_client_as(&t.hub, token("mal-token")).await;
    let (code, body) = get_raw(&mal, "/metrics").await;
    assert_eq!(code, 403, "{body}");
    assert!(!body.contains("apiserver_"), "{body}");
    let in_own = t.client_as("mal", "root:mal").await;
    let (code, body) = get_raw(&in_own, "/metrics").await;
    assert_eq!(code, 404, "a workspace has no /metrics of its own: {body}");
    assert!(!body.contains("apiserver_"), "{body}");
    let anonymous = top_client_as(&t.hub, AuthInfo::Token(String::new())).await;
    let (code, body) = get_raw(&anonymous, "/metrics").await;
    assert_eq!(code, 401, "{body}");

    // kube's way to let a scraper in: `get` on the non-resource URL, granted in root.
    let bob = top_client_as(&t.hub, token("bob-token")).await;
    assert_eq!(get_raw(&bob, "/metrics").await.0, 403);
    cluster_role(
        &t.hub,
        "root",
        "metrics-reader",
        json!([{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]),
    )
    .await;
    bind_cluster_role(&t.hub, "root", "bob-reads-metrics", "metrics-reader", "bob").await;
    let (code, scrape) = eventually(10, "bob may read /metrics", || async {
        let (code, body) = get_raw(&bob, "/metrics").await;
        (code == 200).then_some((code, body))
    })
    .await;
    assert!(scrape.contains("apiserver_request_total"), "{code}: {scrape}");
    // ... and only that: the grant is not a way into the rest of root.
    assert_eq!(get_raw(&bob, "/").await.0, 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scrape_counts_requests_watches_and_objects_but_names_no_workspace_object_or_tenant() {
    let t = Tenants::start().await;
    t.workspace("xq-distinctive-ws", Some("mal")).await;
    let mal = t.client_as("mal", "root:xq-distinctive-ws").await;
    post_created(
        &mal,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "xq-distinctive-ns"}}),
    )
    .await;
    post_created(
        &mal,
        "/api/v1/namespaces/xq-distinctive-ns/configmaps",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "xq-distinctive-cm"}}),
    )
    .await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "xqwidgets.xq-distinctive.io"},
        "spec": {"group": "xq-distinctive.io", "scope": "Namespaced",
            "names": {"plural": "xqwidgets", "singular": "xqwidget", "kind": "XqWidget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    post_created(
        &mal,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await;
    eventually(10, "the CRD serves its widgets", || async {
        let (code, _) = call(
            &mal,
            "POST",
            "/apis/xq-distinctive.io/v1/namespaces/xq-distinctive-ns/xqwidgets",
            Some(&json!({"apiVersion": "xq-distinctive.io/v1", "kind": "XqWidget",
                "metadata": {"name": "xq-distinctive-widget"}})),
        )
        .await;
        (code == 201).then_some(())
    })
    .await;
    // A path nobody serves, and a method nobody knows: neither may become a label.
    call(&mal, "GET", "/apis/xq-distinctive.io/v9/xq-nothing", None).await;
    call(&mal, "XQ-DISTINCTIVE", "/api/v1/namespaces", None).await;

    let admin = top_client_as(&t.hub, token(&t.hub.running.admin_token)).await;
    let configmaps = Api::<ConfigMap>::namespaced(mal.clone(), "xq-distinctive-ns");
    let watch = configmaps.watch(&WatchParams::default(), "0").await.unwrap();
    let watching = [r#"verb="WATCH""#, r#"resource="configmaps""#];
    let scrape = eventually(10, "the open watch to be counted", || async {
        let (_, scrape) = get_raw(&admin, "/metrics").await;
        (sample(&scrape, "apiserver_longrunning_requests", &watching) == Some(1.0)).then_some(scrape)
    })
    .await;

    let created = [r#"verb="POST""#, r#"resource="configmaps""#, r#"code="201""#];
    assert!(
        sample(&scrape, "apiserver_request_total", &created).is_some_and(|n| n >= 1.0),
        "the configmap's create is counted:\n{scrape}"
    );
    assert!(
        sample(
            &scrape,
            "apiserver_request_duration_seconds_count",
            &[r#"verb="POST""#, r#"resource="configmaps""#]
        )
        .is_some_and(|n| n >= 1.0),
        "{scrape}"
    );
    assert!(
        sample(
            &scrape,
            "apiserver_storage_objects",
            &[r#"resource="configmaps""#]
        )
        .is_some_and(|n| n >= 1.0),
        "{scrape}"
    );
    assert!(
        sample(&scrape, "apiserver_storage_objects", &[r#"resource="(custom)""#]).is_some_and(|n| n >= 1.0),
        "the widget and the CRD-served kinds are counted together:\n{scrape}"
    );
    assert!(
        !scrape.contains("xq-distinctive") && !scrape.contains("xq-nothing"),
        "the scrape names what a tenant chose:\n{scrape}"
    );
    for value in label_values(&scrape) {
        assert!(
            !["mal", "u-mal", "mal-token"].contains(&value) && !value.contains("root:"),
            "a label value names a tenant or workspace: {value:?}\n{scrape}"
        );
    }

    drop(watch);
    eventually(10, "the closed watch to be uncounted", || async {
        let (_, scrape) = get_raw(&admin, "/metrics").await;
        (sample(&scrape, "apiserver_longrunning_requests", &watching) == Some(0.0)).then_some(())
    })
    .await;
}

/// Each controller following the store says how it keeps up: the changes it
/// handled, how long each took, and how often it looked at everything.
#[tokio::test(flavor = "multi_thread")]
async fn a_scrape_shows_how_each_controller_keeps_up() {
    let t = Tenants::start().await;
    let admin = top_client_as(&t.hub, token(&t.hub.running.admin_token)).await;
    let (_, before) = get_raw(&admin, "/metrics").await;
    let handled = |scrape: &str| sample(scrape, "ferry_controller_events_total", &[r#"name="ApiExports""#]);
    let export = json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport",
                        "metadata": {"name": "metered"}, "spec": {}});
    post_created(&admin, "/apis/apis.kcp.io/v1alpha1/apiexports", &export).await;
    let scrape = eventually(10, "the export's change to be counted", || async {
        let (_, scrape) = get_raw(&admin, "/metrics").await;
        (handled(&scrape) > handled(&before)).then_some(scrape)
    })
    .await;
    for name in ["ApiExports", "SyncTargets", "Mailboxes", "GarbageCollector"] {
        let labels = [format!(r#"name="{name}""#)];
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        assert!(
            sample(&scrape, "ferry_controller_resyncs_total", &labels).is_some_and(|n| n >= 1.0),
            "{name} looked at everything once at start:\n{scrape}"
        );
        assert!(
            sample(
                &scrape,
                "ferry_controller_handling_duration_seconds_count",
                &labels
            )
            .is_some_and(|n| n >= 1.0),
            "{name}'s handling is timed:\n{scrape}"
        );
    }
}

/// A hundred writers patching one object at once (a hundred kcp TMC syncers each
/// adding its finalizer) take turns: every patch lands, and none is computed
/// twice (`ferry_write_retries_total`). Without turns all but one of those
/// computing at once found the object moved, and started again.
#[tokio::test(flavor = "multi_thread")]
async fn a_hundred_writers_of_one_object_take_turns_and_none_computes_twice() {
    let t = Tenants::start().await;
    let admin = top_client_as(&t.hub, token(&t.hub.running.admin_token)).await;
    let retries = |scrape: &str| {
        scrape
            .lines()
            .find_map(|l| l.strip_prefix("ferry_write_retries_total "))
            .and_then(|v| v.parse::<f64>().ok())
    };
    let (_, before) = get_raw(&admin, "/metrics").await;
    let before = retries(&before).expect("the scrape counts write retries");
    let path = "/clusters/root/api/v1/namespaces/default/configmaps";
    post_created(
        &admin,
        path,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "shared"}, "data": {}}),
    )
    .await;
    let patches = (0..100).map(|i| {
        let admin = admin.clone();
        async move {
            let body = json!([{"op": "add", "path": format!("/data/writer-{i}"), "value": "here"}]);
            let req = http::Request::builder()
                .method("PATCH")
                .uri(format!("{path}/shared"))
                .header(http::header::CONTENT_TYPE, "application/json-patch+json")
                .body(kube::client::Body::from(serde_json::to_vec(&body).unwrap()))
                .unwrap();
            admin.send(req).await.expect("response").status().as_u16()
        }
    });
    let codes = futures::future::join_all(patches).await;
    assert!(codes.iter().all(|c| *c == 200), "every patch lands: {codes:?}");
    let cm = get_ok(&admin, &format!("{path}/shared")).await;
    assert_eq!(cm["data"].as_object().map(|d| d.len()), Some(100), "{cm}");
    let (_, after) = get_raw(&admin, "/metrics").await;
    assert_eq!(retries(&after), Some(before), "no patch was computed twice");
}

/// The store's commits on `/metrics`: every write is counted in a batch and timed
/// from queued to visible, every batch's commit timed; writes sent at once may share
/// a batch, never a batch without a write.
#[tokio::test(flavor = "multi_thread")]
async fn the_stores_commits_are_counted_and_timed() {
    let t = Tenants::start().await;
    let admin = top_client_as(&t.hub, token(&t.hub.running.admin_token)).await;
    let figure = |scrape: &str, name: &str| {
        let prefix = format!("{name} ");
        scrape
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name} missing from the scrape"))
    };
    let names = [
        "ferry_storage_commit_writes_sum",
        "ferry_storage_commit_writes_count",
        "ferry_storage_write_duration_seconds_count",
        "ferry_storage_write_duration_seconds_sum",
        "ferry_storage_commit_duration_seconds_count",
        "ferry_storage_commit_duration_seconds_sum",
    ];
    let (_, before) = get_raw(&admin, "/metrics").await;
    let before: Vec<f64> = names.iter().map(|n| figure(&before, n)).collect();
    let path = "/clusters/root/api/v1/namespaces/default/configmaps";
    let creates = (0..20).map(|i| {
        let admin = admin.clone();
        async move {
            let cm =
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("commit-{i}")}});
            post_created(&admin, path, &cm).await;
        }
    });
    futures::future::join_all(creates).await;
    let (_, after) = get_raw(&admin, "/metrics").await;
    let grew: Vec<f64> = names
        .iter()
        .zip(&before)
        .map(|(n, b)| figure(&after, n) - b)
        .collect();
    let [writes, batches, timed_writes, write_seconds, commits, commit_seconds] = grew[..] else {
        unreachable!()
    };
    assert!(writes >= 20.0, "the 20 creates are counted: {grew:?}");
    assert_eq!(timed_writes, writes, "every committed write is timed: {grew:?}");
    assert_eq!(commits, batches, "one commit per batch: {grew:?}");
    assert!((1.0..=writes).contains(&batches), "batches hold writes: {grew:?}");
    assert!(
        write_seconds > 0.0 && commit_seconds > 0.0,
        "time is counted: {grew:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn get_root_lists_the_served_paths_to_whom_may_get_it() {
    let t = Tenants::start().await;
    t.workspace("mal", Some("mal")).await;
    let admin = top_client_as(&t.hub, token(&t.hub.running.admin_token)).await;
    let body = get_ok(&admin, "/").await;
    let paths: Vec<&str> = body["paths"]
        .as_array()
        .unwrap_or_else(|| panic!("{{\"paths\": [...]}} expected: {body}"))
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    for want in [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps",
        "/apis/apps/v1",
        "/healthz",
        "/metrics",
        "/version",
    ] {
        assert!(paths.contains(&want), "{want} missing: {paths:?}");
    }

    // The attacker: not at the top, which is root's.
    let mal = top_client_as(&t.hub, token("mal-token")).await;
    expect_status(&mal, "GET", "/", None, 403).await;
    // Its own workspace answers, without the hub's /metrics.
    let own = get_ok(&t.client_as("mal", "root:mal").await, "/").await;
    assert!(
        own["paths"]
            .as_array()
            .is_some_and(|p| p.contains(&json!("/api/v1"))),
        "{own}"
    );
    assert!(!own.to_string().contains("/metrics"), "{own}");
    // Another tenant cannot list what root:mal serves.
    expect_status(&t.client_as("bob", "root:mal").await, "GET", "/", None, 403).await;
}
