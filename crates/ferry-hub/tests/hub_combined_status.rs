//! Combined status (KubeStellar's StatusCollector and CombinedStatus): a
//! Deployment placed on three clusters gets one CombinedStatus next to it,
//! with the built-in availability per cluster and in total and the results
//! of the StatusCollectors its EdgePlacement names, updated within a second
//! of a cluster's status changing; a collector with a bad expression is
//! named on its condition while the others keep working; and from an
//! attacker's side, a tenant placing a same-named object onto a shared
//! cluster never reads the status another workspace's copy returned, the
//! drift its syncer restored there, nor the cluster's refusal of it.
//!
//! Each cluster's syncer is stood in for by writing what it returns (the
//! copy's status) into the mailbox copy, and what it restored (the drift)
//! and what its cluster refused on the mailbox's SyncerConfig, as the syncer
//! does.

mod common;

use std::time::Instant;

use common::edge::*;
use common::tenants::{Tenants, RBAC};
use common::{client, eventually, post_created};
use ferry_testkit::TestHub;
use serde_json::{json, Value};

/// The field a drift reported in these tests changed.
const IMAGE: &str = "$.spec.template.spec.containers[0].image";

/// `root:imw1` with florin and guilder (region eu) and pound (region uk),
/// all `env=prod`, and `root:wmw1`; returns the three mailbox paths.
async fn three_clusters(hub: &TestHub) -> Vec<String> {
    let imw = workspace(hub, "imw1").await;
    workspace(hub, "wmw1").await;
    let mut mailboxes = Vec::new();
    for (name, region) in [("florin", "eu"), ("guilder", "eu"), ("pound", "uk")] {
        mailboxes.push(location(hub, &imw, name, json!({"env": "prod", "region": region})).await);
    }
    mailboxes
}

#[tokio::test(flavor = "multi_thread")]
async fn deployment_status_from_three_clusters_is_combined_per_cluster_and_in_total_within_a_second() {
    let hub = TestHub::start().await;
    let mailboxes = three_clusters(&hub).await;
    let wmw = client(&hub, "root:wmw1").await;
    web(&wmw).await;
    apply(&wmw, lagging_collector()).await;
    apply(
        &wmw,
        collector(
            "histogram",
            json!({"groupBy": [{"name": "numAvailable", "def": "returned.status.availableReplicas"}],
                   "combinedFields": [{"name": "count", "type": "COUNT"}]}),
        ),
    )
    .await;
    apply(
        &wmw,
        collector(
            "totals",
            json!({"combinedFields": [
                {"name": "clusters", "type": "COUNT"},
                {"name": "available", "type": "SUM", "subject": "returned.status.availableReplicas"},
                {"name": "fewest", "type": "MIN", "subject": "returned.status.availableReplicas"}]}),
        ),
    )
    .await;
    place_web(
        &wmw,
        "shop",
        json!({"matchLabels": {"env": "prod"}}),
        &["lagging", "histogram", "totals"],
    )
    .await;
    copies_in(&hub, &mailboxes).await;

    // Nothing reported yet: every cluster is listed, none available.
    let cs = eventually(20, "the CombinedStatus of shop/web", || {
        let wmw = wmw.clone();
        async move { combined_status(&wmw, "shop", "shop").await }
    })
    .await;
    assert_eq!(cs["subject"], "deployments.apps/web");
    assert_eq!(cs["placement"], "shop");
    assert_eq!(
        cs["summary"], "0/6 available on 3 clusters (3 not reporting yet)",
        "{cs}"
    );

    for (mb, n) in mailboxes.iter().zip([2, 2, 1]) {
        return_status(&hub, mb, &deployments(), "shop", "web", available(n)).await;
    }
    let cs = combined_status_when(
        &wmw,
        "shop",
        "shop",
        10,
        "the three clusters' status combined",
        |cs| cs["summary"] == "5/6 available on 3 clusters",
    )
    .await;
    assert_five_of_six_available(&cs);
    assert_eq!(
        result_rows(&cs, "lagging").unwrap(),
        vec![vec![json!("pound"), json!("uk")]]
    );
    assert_eq!(
        result_rows(&cs, "histogram").unwrap(),
        vec![vec![json!(1), json!(1)], vec![json!(2), json!(2)]]
    );
    assert_eq!(
        result_rows(&cs, "totals").unwrap(),
        vec![vec![json!(3), json!(5), json!(1)]]
    );

    // pound catches up: every row and aggregate follows within a second.
    let changed = Instant::now();
    return_status(&hub, &mailboxes[2], &deployments(), "shop", "web", available(2)).await;
    let cs = combined_status_when(&wmw, "shop", "shop", 5, "pound's new status combined", |cs| {
        cs["summary"] == "6/6 available on 3 clusters"
    })
    .await;
    assert_followed_within_a_second(changed);
    assert_eq!(result_rows(&cs, "lagging").unwrap(), Vec::<Vec<Value>>::new());
    assert_eq!(
        result_rows(&cs, "histogram").unwrap(),
        vec![vec![json!(2), json!(3)]]
    );
    assert_eq!(
        result_rows(&cs, "totals").unwrap(),
        vec![vec![json!(3), json!(6), json!(2)]]
    );

    // kubectl get reads as a table.
    let text = combined_status_table(&hub, "root:wmw1", "shop");
    assert!(
        text.contains("SUBJECT")
            && text.contains("deployments.apps/web")
            && text.contains("6/6 available on 3 clusters"),
        "{text}"
    );

    // Written only when something changed: a handful of versions, not one per pass.
    let cs = combined_status(&wmw, "shop", "shop").await.unwrap();
    let generation = cs["metadata"]["generation"].as_i64().unwrap();
    assert!(generation <= 10, "rewritten {generation} times");

    // The placement lets go of the object: its CombinedStatus goes.
    api(&wmw, &edge("EdgePlacement", "edgeplacements"), None)
        .delete("shop", &Default::default())
        .await
        .unwrap();
    combined_status_gone(
        &wmw,
        "shop",
        "shop",
        "the CombinedStatus to go with the placement",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_with_a_bad_expression_is_named_on_its_condition_and_the_others_keep_working() {
    let hub = TestHub::start().await;
    let mailboxes = three_clusters(&hub).await;
    let wmw = client(&hub, "root:wmw1").await;
    web(&wmw).await;
    broken_and_count_collectors(&wmw).await;
    apply(
        &wmw,
        collector(
            "typo",
            json!({"select": [{"name": "zone", "def": "inventory.labelz.zone"}]}),
        ),
    )
    .await;
    place_web(
        &wmw,
        "shop",
        json!({"matchLabels": {"env": "prod"}}),
        &["broken", "typo", "count", "missing"],
    )
    .await;
    copies_in(&hub, &mailboxes).await;
    for mb in &mailboxes {
        return_status(&hub, mb, &deployments(), "shop", "web", available(2)).await;
    }

    let collectors = api(&wmw, &status_collectors(), None);
    let broken = broken_collector_reported(&wmw).await;
    assert_eq!(broken.data["status"]["errors"].as_array().unwrap().len(), 1);
    let count = collectors.get("count").await.unwrap();
    assert_eq!(condition(&count, "Valid").0, "True");

    let cs = combined_status_when(
        &wmw,
        "shop",
        "shop",
        10,
        "the CombinedStatus with every result",
        |cs| cs["summary"] == "6/6 available on 3 clusters",
    )
    .await;
    assert!(
        result_error(&cs, "broken").contains("StatusCollector \"broken\" is invalid (spec.filter: "),
        "{cs}"
    );
    assert!(
        result_error(&cs, "missing").contains("does not exist in this workspace"),
        "{cs}"
    );
    // An expression that fails on every row: each row's error, and null cells.
    let typo = result_named(&cs, "typo");
    assert_eq!(typo["rowErrors"].as_array().unwrap().len(), 3, "{typo}");
    assert_eq!(typo["rowErrors"][0]["columnName"], "zone");
    assert_eq!(result_rows(&cs, "count").unwrap(), vec![vec![json!(3)]]);

    // Fixed, it works and its condition says so.
    apply(
        &wmw,
        collector(
            "broken",
            json!({"filter": "returned.status.availableReplicas == 2", "combinedFields": [{"name": "n", "type": "COUNT"}]}),
        ),
    )
    .await;
    eventually(10, "the fixed collector's result", || {
        let wmw = wmw.clone();
        async move {
            let cs = combined_status(&wmw, "shop", "shop").await?;
            (result_rows(&cs, "broken")? == vec![vec![json!(3)]]).then_some(())
        }
    })
    .await;
    let fixed = collectors.get("broken").await.unwrap();
    assert_eq!(condition(&fixed, "Valid").0, "True");
    assert!(fixed.data["status"].get("errors").is_none());
}

/// Many StatusCollectors cannot multiply the CEL work one placed object
/// makes: those that would take the (object, placement)'s total past its
/// budget are not evaluated, and the CombinedStatus's `Evaluated` condition
/// names them and the budget; the same object under a placement naming
/// two of them gets both, and the hub carries on.
#[tokio::test(flavor = "multi_thread")]
async fn many_collectors_share_one_cost_budget_per_object_and_placement_and_the_excess_is_named() {
    let hub = TestHub::start().await;
    let mailboxes = three_clusters(&hub).await;
    let wmw = client(&hub, "root:wmw1").await;
    web(&wmw).await;
    // Each expression reads rows that weigh as much as a 200 kB annotation:
    // cheap enough per call, but twelve collectors of sixteen columns over
    // three clusters are far past the budget.
    let heavy = "x".repeat(200_000);
    api(&wmw, &deployments(), Some("shop"))
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&json!({"metadata": {"annotations": {"notes": heavy}}})),
        )
        .await
        .unwrap();
    let columns: Vec<Value> = (0..16)
        .map(|i| json!({"name": format!("c{i}"), "def": "obj.metadata.name"}))
        .collect();
    let names: Vec<String> = (1..=12).map(|i| format!("wide{i:02}")).collect();
    for name in &names {
        apply(&wmw, collector(name, json!({"select": columns}))).await;
    }
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    place_web(&wmw, "many", json!({"matchLabels": {"env": "prod"}}), &all).await;
    place_web(&wmw, "few", json!({"matchLabels": {"env": "prod"}}), &all[..2]).await;
    copies_in(&hub, &mailboxes).await;

    let evaluated = |cs: &Value| -> Value {
        cs["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "Evaluated")
            .cloned()
            .unwrap_or(Value::Null)
    };
    let many = combined_status_when(&wmw, "shop", "many", 20, "many's Evaluated condition", |cs| {
        evaluated(cs)["status"] == "False"
    })
    .await;
    let condition = evaluated(&many);
    assert_eq!(condition["reason"], "CostBudgetExceeded", "{condition}");
    let ran: Vec<&str> = all
        .iter()
        .copied()
        .filter(|n| {
            result_named(&many, n)["rows"]
                .as_array()
                .is_some_and(|r| r.len() == 3)
        })
        .collect();
    let skipped: Vec<&str> = all.iter().copied().filter(|n| !ran.contains(n)).collect();
    assert!(
        !ran.is_empty() && !skipped.is_empty(),
        "some fit, the rest not: {many}"
    );
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("{:?}", skipped[0]))
            && message.contains("placement \"many\" may cost 10000000 in all"),
        "names the collector and the budget: {message}"
    );
    let error = result_named(&many, skipped[0])["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        error.starts_with("not evaluated: it would cost an estimated"),
        "{error}"
    );

    // The positive twin: two of them under another placement are both evaluated.
    let few = combined_status_when(&wmw, "shop", "few", 20, "few's Evaluated condition", |cs| {
        evaluated(cs)["status"] == "True"
    })
    .await;
    for name in &all[..2] {
        assert_eq!(
            result_named(&few, name)["rows"].as_array().map(Vec::len),
            Some(3),
            "{few}"
        );
    }
    // The hub carries on: a cluster's new status still reaches the CombinedStatus.
    return_status(&hub, &mailboxes[0], &deployments(), "shop", "web", available(2)).await;
    combined_status_when(&wmw, "shop", "few", 10, "florin's status combined", |cs| {
        cs["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("2/6 available"))
    })
    .await;
}

/// shop/web in `c`'s workspace with StatusCollector `name` listing what each
/// cluster returned, placed on every `env=prod` Location by `placement`
/// naming `collectors`.
async fn web_listing_statuses(c: &kube::Client, name: &str, placement: &str, collectors: &[&str]) {
    web(c).await;
    apply(c, statuses_collector(name)).await;
    place_web(c, placement, json!({"matchLabels": {"env": "prod"}}), collectors).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_placing_a_same_named_object_never_reads_another_workspaces_returned_status_or_refusal() {
    let t = Tenants::start().await;
    let hub = &t.hub;
    let imw = workspace(hub, "imw1").await;
    workspace(hub, "wmw1").await;
    let florin = location(hub, &imw, "florin", json!({"env": "prod"})).await;
    // The victim (wmw1) places shop/web on florin, which reports a secret.
    let wmw = client(hub, "root:wmw1").await;
    web_listing_statuses(&wmw, "statuses", "shop", &["statuses"]).await;
    copies_in(hub, std::slice::from_ref(&florin)).await;
    let secret = available_saying(2, "victim-secret");
    return_status(hub, &florin, &deployments(), "shop", "web", secret).await;
    // ... and whose syncer restored its copy there ...
    report_drift(hub, &florin, "apps/deployments", "shop", "web", &[IMAGE]).await;
    // ... and whose cluster refused the copy's latest version, saying what it holds.
    report_refusal(hub, &florin, "apps/deployments", "shop", "web", REFUSAL).await;
    let victim_refused = || async {
        let summary = web_summary(&wmw).await?;
        let placement = placement_status(&wmw, "shop").await?;
        (on_florin(&summary)["statusDigest"] == format!("refused: {REFUSAL}")
            && placement["refusedCount"] == 1
            && ready_message(&placement).contains(REFUSAL))
        .then_some(())
    };
    eventually(
        20,
        "the victim's summary and placement to name the refusal",
        victim_refused,
    )
    .await;

    // mal may place on florin too (granted bind on it), and places its own shop/web there.
    t.workspace("mal", Some("mal")).await;
    let mal = t.client_as("mal", "root:mal").await;
    install_edge_api(&mal).await;
    let admin = client(hub, "root:imw1").await;
    post_created(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &json!({"metadata": {"name": "place-on-florin"},
            "rules": [{"apiGroups": ["edge.kubestellar.io"], "resources": ["locations"],
                       "verbs": ["bind"], "resourceNames": ["florin"]}]}),
    )
    .await;
    post_created(
        &admin,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &json!({"metadata": {"name": "mal-places-on-florin"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "place-on-florin"},
            "subjects": [{"kind": "User", "apiGroup": RBAC, "name": "mal"}]}),
    )
    .await;
    // "statuses" exists only in the victim's workspace.
    web_listing_statuses(&mal, "steal", "steal", &["steal", "statuses"]).await;

    // The victim's CombinedStatus carries what florin returned and the drift
    // there (the positive twin), and so does its PlacementSummary.
    let victims = eventually(20, "the victim's CombinedStatus", || {
        let wmw = wmw.clone();
        async move {
            let cs = combined_status(&wmw, "shop", "shop").await?;
            (cs.to_string().contains("victim-secret") && result_rows(&cs, "builtin:drift").is_some())
                .then_some(cs)
        }
    })
    .await;
    assert_eq!(
        victims["summary"],
        "2/2 available on 1 cluster; 1 drift correction on florin"
    );
    let summary = web_summary(&wmw).await.unwrap();
    assert_eq!(drift_on(&summary, "florin").unwrap()["fields"], json!([IMAGE]));

    // mal's placement reaches florin, and its CombinedStatus exists — without the victim's status.
    let placements = api(&mal, &edge("EdgePlacement", "edgeplacements"), None);
    eventually(20, "mal's placement to reach florin", || {
        let placements = placements.clone();
        async move {
            let p = placements.get("steal").await.ok()?;
            (p.data["status"]["matchingLocationCount"] == 1).then_some(())
        }
    })
    .await;
    let mals = eventually(20, "mal's CombinedStatus", || {
        let mal = mal.clone();
        async move { combined_status(&mal, "shop", "steal").await }
    })
    .await;
    let text = mals.to_string();
    assert!(!text.contains("victim-secret"), "{text}");
    assert_eq!(
        mals["summary"], "0/2 available on 1 cluster (1 not reporting yet)",
        "no drift either: {text}"
    );
    assert!(result_rows(&mals, "builtin:drift").is_none(), "{text}");
    let summary = eventually(20, "mal's PlacementSummary", || {
        let mal = mal.clone();
        async move { web_summary(&mal).await }
    })
    .await;
    assert_eq!(drift_on(&summary, "florin"), None, "{summary}");
    assert_eq!(summary["driftCorrections"], 0, "{summary}");
    // Nor the cluster's refusal of the victim's copy, on the summary or the placement.
    assert_eq!(
        on_florin(&summary)["statusDigest"],
        "the mailbox holds another workspace's copy",
        "{summary}"
    );
    let steal = placement_status(&mal, "steal").await.unwrap();
    assert!(!steal.to_string().contains("victim"), "{steal}");
    assert!(!ready_message(&steal).contains("refused"), "{steal}");
    assert_eq!(steal["refusedCount"], 0, "{steal}");
    assert_eq!(
        result_rows(&mals, "steal").unwrap(),
        vec![vec![json!("florin"), json!({})]]
    );
    assert!(
        result_error(&mals, "statuses").contains("does not exist in this workspace"),
        "{text}"
    );
    // Each CombinedStatus stays in its own workspace.
    let in_victims = combined_statuses_in(&wmw, "shop").await;
    assert_eq!(in_victims.len(), 1);
    let in_mals = combined_statuses_in(&mal, "shop").await;
    assert_eq!(in_mals.len(), 1);
    assert_eq!(in_mals[0].data["placement"], "steal");
    // The victim still reads its refusal: it stood while mal looked.
    assert_eq!(victim_refused().await, Some(()));
}

/// What the victim's cluster says refusing its copy.
const REFUSAL: &str = "Deployment.apps \"web\" is invalid: victim-secret in the refused copy";

/// The status of EdgePlacement `name` in `c`'s workspace, once it has one.
async fn placement_status(c: &kube::Client, name: &str) -> Option<Value> {
    let p = api(c, &edge("EdgePlacement", "edgeplacements"), None)
        .get(name)
        .await
        .ok()?;
    p.data
        .get("status")
        .filter(|s| s.get("refusedCount").is_some())
        .cloned()
}

/// The message of a placement status's Ready condition.
fn ready_message(status: &Value) -> String {
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let ready = conditions.iter().find(|c| c["type"] == "Ready");
    ready
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// What PlacementSummary `summary` says of florin.
fn on_florin(summary: &Value) -> Value {
    summary["destinations"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["cluster"] == "florin"))
        .cloned()
        .unwrap_or_default()
}
