//! A copy the workload cluster refuses, end to end through KubeStellar: an
//! EdgePlacement in a WMW, a Location and SyncTarget in an inventory workspace,
//! the mailbox, the syncer `syncer-gen` makes running against it and a stand-in
//! cluster with service ranges of its own. The refusal comes from the stand-in's
//! API server and reaches the person who placed the object, on the object's
//! PlacementSummary and on the EdgePlacement, until they fix the object.

/// The CLI tests' kit for registering KubeStellar syncers.
#[path = "common/edge_syncer.rs"]
mod edge_syncer;

/// The refused copy's set-up, shared with the console test.
#[path = "common/refusal.rs"]
mod refusal;

use ferry_hub::strategy::core::service::ServiceRanges;
use ferry_testkit::edge;
use ferry_testkit::{eventually, TestHub};
use kube::api::{Api, DynamicObject};
use refusal::HUB_RANGES;

/// The EdgePlacement `shop`: `(Ready status, reason, message, refusedCount)`.
async fn ready(placements: &Api<DynamicObject>) -> Option<(String, String, String, u64)> {
    let p = placements.get("shop").await.ok()?;
    let c = p.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")?
        .clone();
    let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((
        text("status"),
        text("reason"),
        text("message"),
        p.data["status"]["refusedCount"].as_u64()?,
    ))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_copy_the_cluster_refuses_is_named_on_its_placement_until_the_owner_fixes_it() {
    let hub = TestHub::start_with(|o| o.service_ranges = ServiceRanges::distinct(HUB_RANGES)).await;
    let refused = refusal::refused_copy(&hub).await;
    let (wmw, admin) = (refused.wmw.clone(), refused.admin.clone());

    // The cluster's own message, on one line, on the Service's summary.
    let summaries = edge::api(&wmw, &edge::summaries(), None);
    let digest = eventually(20, "web's summary to say florin refused it", || {
        let summaries = summaries.clone();
        async move {
            let s = summaries.get_opt("services.core.shop.web").await.ok()??;
            let d = s.data["destinations"].as_array()?.first()?.clone();
            let digest = d["statusDigest"].as_str()?.to_string();
            (d["cluster"] == "florin" && digest.starts_with("refused: ")).then_some(digest)
        }
    })
    .await;
    assert_eq!(
        digest,
        "refused: Service \"web\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: \
         provided port is not in the valid range. The range of valid ports is 30512-31023",
        "the API server's message, nothing of the syncer's internals"
    );
    let placements = edge::api(&wmw, &edge::edge("EdgePlacement", "edgeplacements"), None);
    let (status, reason, message, count) = eventually(15, "shop not Ready for the refusal", || {
        let placements = placements.clone();
        async move { ready(&placements).await.filter(|r| r.0 == "False") }
    })
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str(), count),
        ("False", "CopiesRefused", 1)
    );
    assert!(
        message.starts_with(
            "1 copy refused by their clusters: services shop/web on florin: Service \"web\" is invalid"
        ) && !message.contains('\n'),
        "{message}"
    );

    // The owner lets the cluster choose the port: the copy lands, Ready comes back.
    refusal::unpin(&wmw).await;
    let services = edge::api(&admin, &edge::ar("", "v1", "Service", "services"), Some("shop"));
    let landed = eventually(20, "web to land on the cluster", || {
        let services = services.clone();
        async move { services.get_opt("web").await.ok()? }
    })
    .await;
    let port = landed.data["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!(
        (30512..=31023).contains(&port),
        "the cluster allocated the port from its own range: {port}"
    );
    let (_, reason, _, count) = eventually(15, "shop Ready again", || {
        let placements = placements.clone();
        async move { ready(&placements).await.filter(|r| r.0 == "True") }
    })
    .await;
    assert_eq!((reason.as_str(), count), ("Placed", 0));
    // Synced once the syncer has acknowledged it (its next heartbeat).
    let d = eventually(20, "web synced on florin", || {
        let summaries = summaries.clone();
        async move {
            let s = summaries.get("services.core.shop.web").await.ok()?;
            let d = s.data["destinations"][0].clone();
            (d["synced"] == true).then_some(d)
        }
    })
    .await;
    assert!(!d["statusDigest"].as_str().unwrap().starts_with("refused"), "{d}");
    refused.stop().await;
}
