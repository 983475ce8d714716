//! End to end: a Deployment placed by an EdgePlacement on three hubs standing
//! in for workload clusters, each with its own syncer in-process; what each
//! cluster reports comes back through its syncer and is combined into the
//! Deployment's CombinedStatus in the workload management workspace.

mod common;

use std::time::Instant;

use common::{deployments, start_syncer, wait_ready, Cluster};
use ferry_testkit::TestHub;
use ferry_testkit::{clients::client, edge, eventually};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn three_clusters_report_through_their_syncers_into_one_combined_status() {
    let hub = TestHub::start().await;
    let imw = edge::workspace(&hub, "imw1").await;
    edge::workspace(&hub, "wmw1").await;
    let wmw = client(&hub, "root:wmw1").await;
    edge::web(&wmw).await;
    edge::apply(
        &wmw,
        edge::collector(
            "lagging",
            json!({"filter": "obj.spec.replicas != returned.status.availableReplicas",
                   "select": [{"name": "wec", "def": "inventory.name"}]}),
        ),
    )
    .await;
    edge::place_web(
        &wmw,
        "shop",
        json!({"matchLabels": {"env": "prod"}}),
        &["lagging"],
    )
    .await;

    let mut clusters = Vec::new();
    for name in ["florin", "guilder", "pound"] {
        let mailbox = edge::location(&hub, &imw, name, json!({"env": "prod"})).await;
        let wec = TestHub::start().await;
        let syncer = start_syncer(&hub, &mailbox, &wec, name).await;
        wait_ready(&syncer).await;
        clusters.push((Cluster::of(&wec, None).await, wec, syncer));
    }
    // Each cluster runs the copy and reports on it, as its Deployment controller would.
    for ((down, _, _), n) in clusters.iter().zip([2, 2, 1]) {
        eventually(30, "the Deployment on the cluster", || async {
            down.get(&deployments(), Some("shop"), "web").await
        })
        .await;
        down.set_status(&deployments(), Some("shop"), "web", edge::available(n))
            .await;
    }
    let cs = eventually(30, "the three clusters' reports combined", || {
        let wmw = wmw.clone();
        async move {
            let cs = edge::combined_status(&wmw, "shop", "shop").await?;
            (cs["summary"] == "5/6 available on 3 clusters").then_some(cs)
        }
    })
    .await;
    assert_eq!(
        edge::result_rows(&cs, "lagging").unwrap(),
        vec![vec![json!("pound")]]
    );

    let changed = Instant::now();
    clusters[2]
        .0
        .set_status(&deployments(), Some("shop"), "web", edge::available(2))
        .await;
    eventually(10, "pound's catching up combined", || {
        let wmw = wmw.clone();
        async move {
            let cs = edge::combined_status(&wmw, "shop", "shop").await?;
            (cs["summary"] == "6/6 available on 3 clusters" && edge::result_rows(&cs, "lagging")?.is_empty())
                .then_some(())
        }
    })
    .await;
    eprintln!(
        "from the cluster's status change to the combined status: {:?}",
        changed.elapsed()
    );
    for (_, _, syncer) in clusters {
        syncer.stop().await;
    }
}
