//! What a new user sees with `kubectl get` and `kubectl ferry`: status that
//! never flatters and names that say what things are. A PlacementSummary
//! counts a destination as synced only once its syncer acknowledged the copy;
//! KubeStellar SyncTargets show READY and HEARTBEAT while their syncers run;
//! `kubectl get locations` in an inventory workspace lists KubeStellar's
//! Locations while kcp's kinds still resolve where TMC is used; a cordoned
//! TMC SyncTarget does not look schedulable; mailbox workspaces say whose
//! they are; `ferry crds` on a hub leaves out what the hub serves built in.

/// The CLI tests' kit for registering KubeStellar syncers.
#[path = "common/edge_syncer.rs"]
mod edge_syncer;

#[path = "common/kubectl_async.rs"]
#[allow(dead_code)]
mod kubectl_async;

use ferry_hub::strategy::core::service::ServiceRanges;
use ferry_testkit::edge;
use ferry_testkit::{eventually, TestHub};
use kube::api::{Api, DynamicObject};
use kubectl_async::Kubectl;
use serde_json::json;

/// `kubectl get ARGS` against `workspace` of `hub`: the rows, each split on
/// runs of two or more spaces, header first.
async fn rows(k: &Kubectl, hub: &TestHub, workspace: &str, args: &[&str]) -> Vec<Vec<String>> {
    let server = format!("--server={}/clusters/{workspace}", hub.url());
    let mut all = vec![server.as_str(), "get"];
    all.extend_from_slice(args);
    let out = k.run(&all).await;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "kubectl {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let Some(header) = text.lines().next() else {
        return Vec::new();
    };
    // Cells start where the header's do (an empty cell is blank there).
    let mut starts = vec![0];
    let bytes = header.as_bytes();
    for i in 2..bytes.len() {
        if bytes[i] != b' ' && bytes[i - 1] == b' ' && bytes[i - 2] == b' ' {
            starts.push(i);
        }
    }
    text.lines()
        .map(|l| {
            starts
                .iter()
                .enumerate()
                .map(|(n, &from)| {
                    let to = starts.get(n + 1).copied().unwrap_or(l.len()).min(l.len());
                    l.get(from.min(to)..to).unwrap_or_default().trim().to_string()
                })
                .collect()
        })
        .collect()
}

/// The cell of column `column` in the row whose first cell is `name`.
fn cell<'a>(rows: &'a [Vec<String>], name: &str, column: &str) -> Option<&'a str> {
    let i = rows.first()?.iter().position(|h| h == column)?;
    rows.iter()
        .skip(1)
        .find(|r| r.first().map(String::as_str) == Some(name))?
        .get(i)
        .map(String::as_str)
}

/// `(synced, executingCount, guilder's digest)` of the ConfigMap's summary.
async fn summary(summaries: &Api<DynamicObject>) -> Option<(String, i64, String)> {
    let s = summaries.get_opt("configmaps.core.shop.web").await.ok()??;
    let guilder = s.data["destinations"]
        .as_array()?
        .iter()
        .find(|d| d["cluster"] == "guilder")?["statusDigest"]
        .as_str()?
        .to_string();
    Some((
        s.data["synced"].as_str()?.to_string(),
        s.data["executingCount"].as_i64()?,
        guilder,
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_destination_counts_as_synced_only_once_its_syncer_acknowledges_it() {
    let hub = TestHub::start_with(|o| o.service_ranges = ServiceRanges::distinct(0)).await;
    let imw = edge::workspace(&hub, "imw1").await;
    edge::workspace(&hub, "wmw1").await;
    let florin = edge::location(&hub, &imw, "florin", json!({"env": "prod"})).await;
    let guilder = edge::location(&hub, &imw, "guilder", json!({"env": "prod"})).await;
    let cluster = |ranges| {
        TestHub::start_with(move |o| {
            o.mailbox_controller = false;
            o.service_ranges = ServiceRanges::distinct(ranges);
        })
    };
    let (florin_cluster, guilder_cluster) = (cluster(1).await, cluster(2).await);
    let florin_admin = florin_cluster.client("root").await;
    let florin_syncer =
        edge_syncer::generated_syncer(&hub, &florin, "florin", &florin_cluster, &florin_admin).await;

    let wmw = hub.client("root:wmw1").await;
    edge::apply(
        &wmw,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
    )
    .await;
    edge::apply(
        &wmw,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web", "namespace": "shop"},
               "data": {"greeting": "hello"}}),
    )
    .await;
    edge::apply(
        &wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
               "metadata": {"name": "shop"},
               "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                        "downsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["shop"]}]}}),
    )
    .await;

    // Both mailboxes hold the copy; only florin has a syncer.
    let summaries = edge::api(&wmw, &edge::summaries(), None);
    let (_, _, digest) = eventually(30, "1/2 synced, guilder pending", || {
        let summaries = summaries.clone();
        async move { summary(&summaries).await.filter(|s| s.0 == "1/2" && s.1 == 1) }
    })
    .await;
    assert!(
        digest.starts_with("pending: no syncer has reported for SyncTarget guilder"),
        "{digest}"
    );
    let in_guilders = edge::placed(&hub, &guilder).await;
    assert!(
        in_guilders.contains(&"configmaps shop/web".to_string()),
        "guilder's mailbox holds the copy all the same: {in_guilders:?}"
    );

    // `kubectl get synctargets` in the inventory workspace: florin's syncer runs.
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::admin_of(&hub, dir.path(), "admin.kubeconfig");
    let targets = rows(&k, &hub, "root:imw1", &["synctargets"]).await;
    assert_eq!(targets[0][..3], ["NAME", "READY", "HEARTBEAT"], "{targets:?}");
    assert_eq!(cell(&targets, "florin", "READY"), Some("True"), "{targets:?}");
    let heartbeat = cell(&targets, "florin", "HEARTBEAT").unwrap_or_default();
    assert!(heartbeat.ends_with('s'), "an age: {targets:?}");
    assert_eq!(cell(&targets, "guilder", "READY"), Some("False"), "{targets:?}");

    // guilder's syncer starts: 2/2.
    let guilder_admin = guilder_cluster.client("root").await;
    let guilder_syncer =
        edge_syncer::generated_syncer(&hub, &guilder, "guilder", &guilder_cluster, &guilder_admin).await;
    eventually(30, "2/2 synced", || {
        let summaries = summaries.clone();
        async move { summary(&summaries).await.filter(|s| s.0 == "2/2" && s.1 == 2) }
    })
    .await;
    let cms = edge::api(&wmw, &edge::configmaps(), Some("shop"));
    let web = cms.get("web").await.unwrap();
    assert_eq!(
        web.metadata.annotations.unwrap()["kubestellar.io/executing-count"],
        "2"
    );
    florin_syncer.stop().await;
    guilder_syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_get_locations_in_an_inventory_workspace_lists_kubestellars() {
    let hub = TestHub::start().await;
    let imw = edge::workspace(&hub, "imw1").await;
    edge::location(&hub, &imw, "florin", json!({"env": "prod"})).await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::admin_of(&hub, dir.path(), "admin.kubeconfig");
    for plural in ["locations", "synctargets"] {
        let listed = rows(&k, &hub, "root:imw1", &[plural]).await;
        assert!(
            listed
                .iter()
                .skip(1)
                .any(|r| r.first().map(String::as_str) == Some("florin")),
            "kubectl get {plural}: {listed:?}"
        );
    }
    // The kcp kinds are there under their full names.
    let kcp = rows(
        &k,
        &hub,
        "root:imw1",
        &["synctargets.workload.kcp.io", "-o", "name"],
    )
    .await;
    assert!(kcp.is_empty(), "{kcp:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn kcp_synctargets_resolve_where_tmc_is_used_and_a_cordoned_one_is_not_schedulable() {
    let hub = TestHub::start().await;
    let root = hub.client("root").await;
    edge::apply(
        &root,
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "compute"}}),
    )
    .await;
    let compute = hub.client("root:compute").await;
    for name in ["east", "west"] {
        edge::apply(
            &compute,
            json!({"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget", "metadata": {"name": name},
                   "spec": {"unschedulable": name == "west"}}),
        )
        .await;
    }
    // A Placement no Location matches: Pending, and says so.
    edge::apply(
        &compute,
        json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement", "metadata": {"name": "nowhere"},
               "spec": {"locationSelectors": [{"matchLabels": {"region": "mars"}}],
                        "locationResource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"}}}),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::admin_of(&hub, dir.path(), "admin.kubeconfig");
    let targets = rows(&k, &hub, "root:compute", &["synctargets"]).await;
    assert_eq!(cell(&targets, "east", "SCHEDULABLE"), Some("True"), "{targets:?}");
    assert_eq!(
        cell(&targets, "west", "SCHEDULABLE"),
        Some("False"),
        "{targets:?}"
    );
    let placements = eventually(15, "the Placement's phase", || {
        let (k, hub) = (&k, &hub);
        async move {
            let listed = rows(k, hub, "root:compute", &["placements"]).await;
            (cell(&listed, "nowhere", "PHASE") == Some("Pending")).then_some(listed)
        }
    })
    .await;
    assert_eq!(
        placements[0][..3],
        ["NAME", "PHASE", "LOCATION"],
        "{placements:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mailbox_workspaces_say_whose_they_are() {
    let hub = TestHub::start().await;
    let imw = edge::workspace(&hub, "imw1").await;
    let mailbox = edge::location(&hub, &imw, "florin", json!({"env": "prod"})).await;
    let mailbox_name = mailbox.trim_start_matches("root:");
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::admin_of(&hub, dir.path(), "admin.kubeconfig");
    let workspaces = rows(&k, &hub, "root", &["workspaces"]).await;
    assert_eq!(
        cell(&workspaces, mailbox_name, "SYNCTARGET"),
        Some("florin"),
        "{workspaces:?}"
    );
    let tree = k.ok(&["ferry", "ws", "tree"]).await;
    assert!(
        tree.contains(&format!("{mailbox_name} (SyncTarget florin in root:imw1)")),
        "{tree}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn ferry_crds_on_a_hub_leaves_out_what_it_serves_built_in() {
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::admin_of(&hub, dir.path(), "admin.kubeconfig");
    let crds = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
            .arg("crds")
            .args(args)
            .env("KUBECONFIG", &k.kubeconfig)
            .env("HOME", dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    // Asked, the hub says it is one; every CRD otherwise.
    let for_hub = crds(&[]);
    assert!(
        !for_hub.contains("name: synctargets.workload.kcp.io"),
        "{for_hub}"
    );
    assert!(for_hub.contains("name: synctargets.edge.kubestellar.io"));
    let all = crds(&["--for", "kubernetes"]);
    assert!(all.contains("name: synctargets.workload.kcp.io"));

    let applied = k.ok_with(&["apply", "-f", "-"], Some(&for_hub)).await;
    assert!(
        applied.contains("synctargets.edge.kubestellar.io created"),
        "{applied}"
    );
    let listed = rows(&k, &hub, "root", &["customresourcedefinitions", "-o", "name"]).await;
    assert!(
        !listed
            .iter()
            .flatten()
            .any(|c| c.ends_with("synctargets.workload.kcp.io")),
        "{listed:?}"
    );
}
