//! Drift made visible, end to end: a Deployment placed by an EdgePlacement on
//! a hub standing in for a workload cluster, with its syncer in-process.
//! Someone edits the copy in the cluster; the syncer restores it, counts it
//! on its metrics, logs the field (never the value), and the hub's placement
//! translator shows the drift on the Deployment's PlacementSummary and
//! CombinedStatus. A field the cluster owns (`ownedDownstream`) changing is
//! no drift.

mod common;
/// The hub tests' kits: clients and the KubeStellar set-up.
#[path = "../../ferry-hub/tests/common/mod.rs"]
mod hubkit;

use common::{deployments, drift_corrections, start_syncer, wait_for, wait_ready, Cluster, LogCapture};
use ferry_syncer::RunningSyncer;
use ferry_testkit::TestHub;
use hubkit::edge;
use serde_json::{json, Value};

const IMAGE: &str = "$.spec.template.spec.containers[0].image";
const DEPLOYMENTS: &str = "apps/v1/deployments";

/// Everything a test here needs: the hub and its WMW, the cluster, its syncer.
struct Placed {
    _hub: TestHub,
    wmw: kube::Client,
    _wec: TestHub,
    down: Cluster,
    syncer: RunningSyncer,
}

/// `shop/web` (image `nginx`) placed on florin, with `transform` (a
/// CustomTransform) in the WMW first if given; returns once its copy is in
/// the cluster.
async fn placed_web(transform: Option<Value>) -> Placed {
    let hub = TestHub::start().await;
    let imw = edge::workspace(&hub, "imw1").await;
    edge::workspace(&hub, "wmw1").await;
    let wmw = hubkit::client(&hub, "root:wmw1").await;
    if let Some(transform) = transform {
        edge::apply(&wmw, transform).await;
    }
    edge::web(&wmw).await;
    edge::place_web(&wmw, "shop", json!({"matchLabels": {"env": "prod"}}), &[]).await;
    let mailbox = edge::location(&hub, &imw, "florin", json!({"env": "prod"})).await;
    let wec = TestHub::start().await;
    let syncer = start_syncer(&hub, &mailbox, &wec, "florin").await;
    wait_ready(&syncer).await;
    let down = Cluster::of(&wec, None).await;
    wait_for(&down, &deployments(), Some("shop"), "web", "the copy", |d| {
        image(d) == "nginx"
    })
    .await;
    Placed {
        _hub: hub,
        wmw,
        _wec: wec,
        down,
        syncer,
    }
}

fn image(d: &Value) -> &str {
    d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
}

/// Someone in the cluster sets the copy's image.
async fn edit_image(down: &Cluster, image: &str) {
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": image}]}}}});
    down.merge(&deployments(), Some("shop"), "web", patch).await;
}

/// The PlacementSummary once florin's drift there has `corrections`.
async fn summary_with_drift(wmw: &kube::Client, corrections: u64) -> Value {
    hubkit::eventually(20, "florin's drift on the PlacementSummary", || {
        let wmw = wmw.clone();
        async move {
            let summary = edge::web_summary(&wmw).await?;
            let drift = edge::drift_on(&summary, "florin")?;
            (drift["corrections"] == corrections).then_some(summary)
        }
    })
    .await
}

#[test]
fn an_image_changed_in_the_cluster_is_restored_counted_and_shown_where_the_placer_looks() {
    let log = LogCapture::new("ferry_syncer=info");
    log.runtime().block_on(async {
        let p = placed_web(None).await;
        assert_eq!(drift_corrections(&p.syncer.metrics_text(), DEPLOYMENTS), 0);

        edit_image(&p.down, "evil:latest").await;
        wait_for(
            &p.down,
            &deployments(),
            Some("shop"),
            "web",
            "the image restored",
            |d| image(d) == "nginx",
        )
        .await;
        common::eventually(10, "the correction counted", || async {
            (drift_corrections(&p.syncer.metrics_text(), DEPLOYMENTS) == 1).then_some(())
        })
        .await;

        // The placer sees it in the WMW: per destination, with the field.
        let summary = summary_with_drift(&p.wmw, 1).await;
        let drift = edge::drift_on(&summary, "florin").unwrap();
        assert_eq!(drift["fields"], json!([IMAGE]), "{summary}");
        assert_eq!(summary["driftCorrections"], 1, "{summary}");
        let cs = hubkit::eventually(20, "the drift on the CombinedStatus", || {
            let wmw = p.wmw.clone();
            async move {
                let cs = edge::combined_status(&wmw, "shop", "shop").await?;
                cs["summary"]
                    .as_str()?
                    .ends_with("; 1 drift correction on florin")
                    .then_some(cs)
            }
        })
        .await;
        let rows = edge::result_rows(&cs, "builtin:drift").unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0][0], "florin");
        assert_eq!(rows[0][1], 1);
        assert_eq!(rows[0][3], json!([IMAGE]));

        // One INFO line names the object and the field, never the value.
        let lines: Vec<String> = log
            .lines()
            .into_iter()
            .filter(|l| l.contains("(drift)"))
            .collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains(" INFO ") && lines[0].contains("shop/web") && lines[0].contains(IMAGE),
            "{}",
            lines[0]
        );
        assert!(
            !log.lines().iter().any(|l| l.contains("evil")),
            "a value was logged"
        );

        // Again: counted again, the newest drift shown.
        edit_image(&p.down, "evil:2").await;
        summary_with_drift(&p.wmw, 2).await;
        assert_eq!(drift_corrections(&p.syncer.metrics_text(), DEPLOYMENTS), 2);
        p.syncer.stop().await;
    });
}

#[test]
fn a_change_to_a_field_the_cluster_owns_is_neither_restored_nor_counted() {
    // Captured like the other test's log: a process whose tests log both
    // with and without a capture loses lines (tracing caches per call site).
    let log = LogCapture::new("ferry_syncer=info");
    log.runtime().block_on(async {
        let transform = json!({"apiVersion": "control.kubestellar.io/v1alpha1", "kind": "CustomTransform",
            "metadata": {"name": "autoscaled"},
            "spec": {"apiGroup": "apps", "resource": "deployments",
                     "ownedDownstream": [{"condition": "OnSpokePresent", "jsonPaths": ["$.spec.replicas"]}]}});
        let p = placed_web(Some(transform)).await;
        // An autoscaler in the cluster scales the copy; then someone edits its
        // image. The image restored means the syncer has handled both.
        p.down
            .merge(&deployments(), Some("shop"), "web", json!({"spec": {"replicas": 5}}))
            .await;
        edit_image(&p.down, "evil:latest").await;
        let copy = wait_for(&p.down, &deployments(), Some("shop"), "web", "the image restored", |d| {
            image(d) == "nginx"
        })
        .await;
        assert_eq!(copy["spec"]["replicas"], 5, "the cluster's replicas stay");
        common::eventually(10, "the image's correction counted", || async {
            (drift_corrections(&p.syncer.metrics_text(), DEPLOYMENTS) == 1).then_some(())
        })
        .await;
        let summary = summary_with_drift(&p.wmw, 1).await;
        assert_eq!(
            edge::drift_on(&summary, "florin").unwrap()["fields"],
            json!([IMAGE]),
            "only the image drifted: {summary}"
        );
        // Scaled again and the image edited again: the image counts, the replicas never.
        p.down
            .merge(&deployments(), Some("shop"), "web", json!({"spec": {"replicas": 7}}))
            .await;
        edit_image(&p.down, "evil:2").await;
        summary_with_drift(&p.wmw, 2).await;
        assert_eq!(drift_corrections(&p.syncer.metrics_text(), DEPLOYMENTS), 2);
        let copy = p.down.get(&deployments(), Some("shop"), "web").await.unwrap();
        assert_eq!(copy["spec"]["replicas"], 7);
        p.syncer.stop().await;
        assert!(
            !log.lines().iter().any(|l| l.contains("$.spec.replicas")),
            "the replicas were never drift"
        );
    });
}
