//! kcp's `core.kcp.io/v1alpha1 LogicalCluster` named `cluster`: in every
//! workspace, root included, saying which logical cluster and path the
//! workspace is (what the api-syncagent reads at start); read-only; and
//! readable only from inside its workspace.

mod common;
use common::tenants::{binding, cluster_role, service_account_subject, service_account_token};
use common::{
    admin, call, client_as, create, eventually, expect_status, expect_status_because, get_ok, post_created,
    put_ok, rbac_path, token,
};
use ferry_testkit::TestHub;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use kube::ResourceExt;
use serde_json::{json, Value};

const LC_PATH: &str = "/apis/core.kcp.io/v1alpha1/logicalclusters";

fn logical_clusters() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("core.kcp.io", "v1alpha1", "LogicalCluster"),
        "logicalclusters",
    )
}

/// Create Workspace `name` in `parent`; returns it as the hub answered.
async fn workspace(hub: &TestHub, parent: &str, name: &str, spec: Value) -> Value {
    let ws = create(
        hub,
        parent,
        "/apis/tenancy.kcp.io/v1alpha1/workspaces",
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}, "spec": spec}),
    )
    .await;
    assert_eq!(ws["status"]["phase"], "Ready", "{ws}");
    ws
}

fn annotation<'a>(o: &'a DynamicObject, key: &str) -> &'a str {
    o.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_workspace_has_a_cluster_object_naming_its_logical_cluster_and_path() {
    let hub = TestHub::start().await;
    let org = workspace(
        &hub,
        "root",
        "org",
        json!({"type": {"name": "organization", "path": "root"}}),
    )
    .await;
    let team = workspace(&hub, "root:org", "team", json!({})).await;

    // Root: its own name and path, kcp's root type, no owner.
    let root_lc = Api::<DynamicObject>::all_with(hub.client("root").await, &logical_clusters())
        .get("cluster")
        .await
        .unwrap();
    assert_eq!(annotation(&root_lc, "kcp.io/cluster"), "root");
    assert_eq!(annotation(&root_lc, "kcp.io/path"), "root");
    assert_eq!(annotation(&root_lc, "internal.tenancy.kcp.io/type"), "root:root");
    assert_eq!(root_lc.data["status"]["phase"], "Ready");
    assert!(root_lc.data["spec"].get("owner").is_none());

    for (path, ws, parent_cluster, ty) in [
        ("root:org", &org, "root", "root:organization"),
        (
            "root:org:team",
            &team,
            org["spec"]["cluster"].as_str().unwrap(),
            "root:universal",
        ),
    ] {
        let cluster = ws["spec"]["cluster"].as_str().unwrap();
        // Addressed by path or by logical-cluster name: the same object.
        for address in [path, cluster] {
            let api = Api::<DynamicObject>::all_with(hub.client(address).await, &logical_clusters());
            let lc = api.get("cluster").await.unwrap();
            assert_eq!(lc.types.as_ref().unwrap().kind, "LogicalCluster");
            assert_eq!(annotation(&lc, "kcp.io/cluster"), cluster, "{path}");
            assert_eq!(annotation(&lc, "kcp.io/path"), path);
            assert_eq!(annotation(&lc, "internal.tenancy.kcp.io/type"), ty);
            assert_eq!(lc.labels()["tenancy.kcp.io/phase"], "Ready");
            assert_eq!(lc.data["status"]["phase"], "Ready");
            assert_eq!(
                lc.data["status"]["URL"],
                format!("{}/clusters/{cluster}", hub.url())
            );
            let owner = &lc.data["spec"]["owner"];
            assert_eq!(owner["resource"], "workspaces");
            assert_eq!(owner["name"], ws["metadata"]["name"]);
            assert_eq!(owner["uid"], ws["metadata"]["uid"]);
            assert_eq!(owner["cluster"], parent_cluster);
            // One per workspace.
            let list = api.list(&ListParams::default()).await.unwrap();
            assert_eq!(list.items.len(), 1, "{path}");
        }
    }

    // A watch (kube-rs's watcher) starts with it.
    let api = Api::<DynamicObject>::all_with(hub.client("root:org").await, &logical_clusters());
    let mut events = watcher(api, watcher::Config::default()).boxed();
    let seen = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(event) = events.try_next().await.unwrap() {
            if let watcher::Event::InitApply(o) = event {
                return o;
            }
        }
        panic!("the watch ended");
    })
    .await
    .expect("the watch lists the cluster object");
    assert_eq!(annotation(&seen, "kcp.io/path"), "root:org");

    // Discovery: served read-only, in kcp's category.
    let resources = hub
        .client("root:org")
        .await
        .list_api_group_resources("core.kcp.io/v1alpha1")
        .await
        .unwrap();
    let lc = resources
        .resources
        .iter()
        .find(|r| r.name == "logicalclusters")
        .expect("logicalclusters in discovery");
    assert_eq!(lc.kind, "LogicalCluster");
    assert!(!lc.namespaced);
    assert_eq!(lc.verbs, vec!["get", "list", "watch"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_reads_it_and_cannot_change_it() {
    let hub = TestHub::start().await;
    let out = hub.kubectl(&["get", "logicalcluster", "cluster", "-o", "yaml"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let yaml = String::from_utf8_lossy(&out.stdout);
    assert!(yaml.contains("kind: LogicalCluster"), "{yaml}");
    assert!(yaml.contains("kcp.io/path: root"), "{yaml}");

    let out = hub.kubectl(&["get", "logicalclusters"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "PHASE", "URL", "AGE"], "{table}");
    assert!(table.contains("cluster   Ready"), "{table}");

    let out = hub.kubectl(&["delete", "logicalcluster", "cluster"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("MethodNotAllowed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let client = admin(&hub, "root").await;
    let lc = format!("{LC_PATH}/cluster");
    let replacement = json!({"apiVersion": "core.kcp.io/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": "cluster"}});
    for (method, path, body) in [
        ("PUT", lc.as_str(), Some(&replacement)),
        ("DELETE", lc.as_str(), None),
        ("DELETE", LC_PATH, None),
        ("POST", LC_PATH, Some(&replacement)),
    ] {
        let status =
            expect_status_because(&client, method, path, body, 405, format!("{method} {path}")).await;
        assert_eq!(status["reason"], "MethodNotAllowed");
    }
    let req = http::Request::patch(&lc)
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(kube::client::Body::from(
            br#"{"metadata":{"labels":{"x":"y"}}}"#.to_vec(),
        ))
        .unwrap();
    assert_eq!(client.send(req).await.unwrap().status(), 405);
    // Still there, unchanged.
    let body = get_ok(&client, &lc).await;
    assert!(body["metadata"]["labels"].get("x").is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn another_workspaces_token_cannot_read_it() {
    let hub = TestHub::start().await;
    workspace(&hub, "root", "a", json!({})).await;
    let b = workspace(&hub, "root", "b", json!({})).await;
    let b_cluster = b["spec"]["cluster"].as_str().unwrap();

    // The default ServiceAccount of root:a may read its LogicalCluster.
    cluster_role(
        &hub,
        "root:a",
        "lc-reader",
        json!([{"apiGroups": ["core.kcp.io"], "resources": ["logicalclusters"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    let own_account = service_account_subject("default", "default");
    create(
        &hub,
        "root:a",
        &rbac_path(None, "clusterrolebindings"),
        binding(
            "ClusterRoleBinding",
            "lc-reader",
            "ClusterRole",
            "lc-reader",
            own_account,
        ),
    )
    .await;
    let sa = service_account_token(&hub, "root:a", ("default", "default")).await;

    let own = client_as(&hub, "root:a", token(&sa)).await;
    let lc = eventually(
        10,
        "the ServiceAccount reads its workspace's LogicalCluster",
        || async {
            let (code, body) = call(&own, "GET", &format!("{LC_PATH}/cluster"), None).await;
            (code == 200).then_some(body)
        },
    )
    .await;
    assert_eq!(lc["metadata"]["annotations"]["kcp.io/path"], "root:a");

    // Elsewhere: refused, by path, by logical-cluster name, across all.
    for ws in ["root:b", b_cluster, "root", "*"] {
        let other = client_as(&hub, ws, token(&sa)).await;
        for path in [
            format!("{LC_PATH}/cluster"),
            LC_PATH.to_string(),
            format!("{LC_PATH}?watch=true"),
        ] {
            if ws == "*" && path.ends_with("/cluster") {
                continue;
            }
            expect_status_because(&other, "GET", &path, None, 403, format!("{ws} {path}")).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_hub_keeps_them_and_moves_their_url() {
    let dir = tempfile::tempdir().unwrap();
    let first = TestHub::start_in(dir.path()).await;
    let ws = workspace(&first, "root", "a", json!({})).await;
    let cluster = ws["spec"]["cluster"].as_str().unwrap().to_string();
    let (running, _) = first.into_parts();
    let uid = {
        let api = Api::<DynamicObject>::all_with(
            ferry_testkit::client_from(&running.kubeconfig_path, Some("root:a")).await,
            &logical_clusters(),
        );
        api.get("cluster").await.unwrap().metadata.uid.unwrap()
    };
    running.stop().await;

    // Another port: the URL follows; everything else is as it was.
    let second = TestHub::start_in(dir.path()).await;
    let api = Api::<DynamicObject>::all_with(second.client("root:a").await, &logical_clusters());
    let lc = api.get("cluster").await.unwrap();
    assert_eq!(lc.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(annotation(&lc, "kcp.io/path"), "root:a");
    assert_eq!(
        lc.data["status"]["URL"],
        format!("{}/clusters/{cluster}", second.url())
    );
    let (running, _) = second.into_parts();
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn workspace_types_are_kcps() {
    let hub = TestHub::start().await;
    let client = admin(&hub, "root").await;
    let post = |name: &str, spec: Value| json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}, "spec": spec});
    let path = "/apis/tenancy.kcp.io/v1alpha1/workspaces";
    // A name alone is found in root; nothing means root:universal.
    let ws = post_created(
        &client,
        path,
        &post("o", json!({"type": {"name": "organization"}})),
    )
    .await;
    assert_eq!(
        ws["spec"]["type"],
        json!({"name": "organization", "path": "root"})
    );
    let (_, ws) = call(&client, "POST", path, Some(&post("u", json!({})))).await;
    assert_eq!(ws["spec"]["type"], json!({"name": "universal", "path": "root"}));

    // Unknown types are refused, naming the known ones.
    let status = expect_status(
        &client,
        "POST",
        path,
        Some(&post("g", json!({"type": {"name": "galaxy", "path": "root"}}))),
        422,
    )
    .await;
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("root:galaxy") && message.contains("root:organization"),
        "{message}"
    );
    assert_eq!(status["details"]["causes"][0]["field"], "spec.type");

    // The type is immutable; an update that leaves it out keeps it.
    let mut changed = ws.clone();
    changed["spec"]["type"] = json!({"name": "team", "path": "root"});
    let status = expect_status(&client, "PUT", &format!("{path}/u"), Some(&changed), 422).await;
    assert!(
        status["message"].as_str().unwrap().contains("immutable"),
        "{status}"
    );
    let mut untyped = ws.clone();
    untyped["spec"].as_object_mut().unwrap().remove("type");
    untyped["metadata"]["labels"] = json!({"region": "eu"});
    let updated = put_ok(&client, &format!("{path}/u"), &untyped).await;
    assert_eq!(updated["spec"]["type"]["name"], "universal");

    // kubectl prints kcp's columns, and Ferry's SYNCTARGET (mailboxes).
    let out = hub.kubectl(&["get", "workspaces"]);
    let table = String::from_utf8_lossy(&out.stdout);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "TYPE", "REGION", "PHASE", "URL", "SYNCTARGET", "AGE"],
        "{table}"
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        rows[0][..4],
        [
            "o",
            "organization",
            "Ready",
            &format!("{}/clusters/root:o", hub.url())
        ],
        "{table}"
    );
    assert_eq!(
        rows[1][..5],
        [
            "u",
            "universal",
            "eu",
            "Ready",
            &format!("{}/clusters/root:u", hub.url())
        ],
        "{table}"
    );
}
