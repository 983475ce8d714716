//! Combined status for kcp TMC Placements: a Deployment synced to three
//! SyncTargets (three Placements selecting its namespace, each on the
//! Location of one target, as kcp's Placements are any-cast) gets one
//! CombinedStatus per Placement next to it, with a row per SyncTarget and
//! the total, updated within a second of a cluster's status changing; rows
//! follow the targets the object leaves, and with one target left the
//! object's own status is that cluster's. A collector with a bad expression
//! is named on its Valid condition. From an attacker's side, a tenant on the
//! same SyncTarget with a same-named object neither reads another
//! workspace's CombinedStatus nor gets rows into it.
//!
//! Each cluster's syncer is stood in for by writing what it returns: the
//! per-target status annotation while several SyncTargets sync the object,
//! its status while one does (as Ferry's syncer does, and kcp's promotes).

mod common;

use std::time::Instant;

use common::edge::{
    apply, assert_five_of_six_available, assert_followed_within_a_second, available, available_saying,
    broken_and_count_collectors, broken_collector_reported, combined_status, combined_status_gone,
    combined_status_table, combined_status_when, combined_statuses_in, lagging_collector, result_error,
    result_rows, statuses_collector,
};
use common::tenants::{bind_cluster_role, cluster_role, Tenants};
use common::tmc::*;
use common::{admin, call, client, expect_status, expect_status_because};
use ferry_api::workload::sync_target_key;
use ferry_testkit::TestHub;
use serde_json::{json, Value};

const WEB: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
const CLUSTERS: [(&str, &str); 3] = [("florin", "eu"), ("guilder", "eu"), ("pound", "uk")];

/// `root:loc` with SyncTargets florin, guilder (region eu) and pound (uk),
/// each alone in a Location of its name; `root:app` with Placement
/// `on-<target>` for each, selecting namespaces labelled `purpose=workload`,
/// and Deployment `shop/web` (2 replicas) there. Returns `root:loc`'s
/// logical cluster once web is synced to all three.
async fn three_sync_targets(hub: &TestHub) -> String {
    let loc = workspace(hub, "loc").await;
    workspace(hub, "app").await;
    for (name, region) in CLUSTERS {
        // The Locations first, so no `default` one is made.
        location(
            hub,
            "root:loc",
            name,
            json!({"cluster": name}),
            json!({"matchLabels": {"cluster": name}}),
        )
        .await;
        sync_target(hub, "root:loc", name, json!({"cluster": name, "region": region})).await;
        placement(
            hub,
            "root:app",
            &format!("on-{name}"),
            "root:loc",
            json!([{"matchLabels": {"cluster": name}}]),
            json!({"matchLabels": {"purpose": "workload"}}),
        )
        .await;
    }
    namespace(hub, "root:app", "shop", json!({"purpose": "workload"})).await;
    deployment(hub, "root:app", "shop", "web", 2).await;
    wait_for(hub, "root:app", WEB, "web synced to three targets", |d| {
        states(d).values().filter(|v| *v == "Sync").count() == 3
    })
    .await;
    loc
}

/// Placement `placement` in `root:app` names StatusCollectors `collectors`.
async fn name_collectors(hub: &TestHub, placement: &str, collectors: &str) {
    admin_patch(
        hub,
        "root:app",
        &format!("{SCHEDULING}/placements/{placement}"),
        json!({"metadata": {"annotations": {"ferry.dev/status-collectors": collectors}}}),
    )
    .await;
}

/// Deletes Placement `placement` in `root:app`; returns the status and body.
async fn delete_placement(hub: &TestHub, placement: &str) -> (u16, Value) {
    let path = format!("{SCHEDULING}/placements/{placement}");
    call(&admin(hub, "root:app").await, "DELETE", &path, None).await
}

/// The CombinedStatus of shop/web under Placement `placement` once `check` holds.
async fn combined_when(
    app: &kube::Client,
    placement: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    combined_status_when(app, "shop", placement, 20, what, check).await
}

#[tokio::test(flavor = "multi_thread")]
async fn deployment_status_from_three_sync_targets_is_combined_per_cluster_and_in_total_within_a_second() {
    let hub = TestHub::start().await;
    let loc = three_sync_targets(&hub).await;
    let app = client(&hub, "root:app").await;

    // Nothing reported yet: every cluster is listed, none available.
    let cs = combined_when(&app, "on-florin", "the CombinedStatus of shop/web", |_| true).await;
    assert_eq!(cs["subject"], "deployments.apps/web");
    assert_eq!(cs["placement"], "on-florin");
    assert_eq!(
        cs["summary"], "0/6 available on 3 clusters (3 not reporting yet)",
        "{cs}"
    );

    // Each cluster reports through its own annotation.
    for ((name, _), n) in CLUSTERS.iter().zip([2, 2, 1]) {
        let key = sync_target_key(&loc, name);
        return_status_for_target(&hub, "root:app", WEB, &key, &available(n)).await;
    }
    let cs = combined_when(&app, "on-florin", "the three clusters' status combined", |cs| {
        cs["summary"] == "5/6 available on 3 clusters"
    })
    .await;
    assert_five_of_six_available(&cs);
    // Every Placement that sends web somewhere has its own, over all of web's clusters.
    for p in ["on-guilder", "on-pound"] {
        combined_when(&app, p, "the other Placements' CombinedStatus", |cs| {
            cs["summary"] == "5/6 available on 3 clusters"
        })
        .await;
    }

    // A collector named on the Placement, over the SyncTargets' labels.
    apply(&app, lagging_collector()).await;
    name_collectors(&hub, "on-florin", "lagging").await;
    let cs = combined_when(&app, "on-florin", "the collector's result", |cs| {
        result_rows(cs, "lagging").is_some()
    })
    .await;
    assert_eq!(
        result_rows(&cs, "lagging").unwrap(),
        vec![vec![json!("pound"), json!("uk")]]
    );

    // pound catches up: its row, the total and the collector follow within a second.
    let changed = Instant::now();
    let pound = sync_target_key(&loc, "pound");
    return_status_for_target(&hub, "root:app", WEB, &pound, &available(2)).await;
    let cs = combined_when(&app, "on-florin", "pound's new status combined", |cs| {
        cs["summary"] == "6/6 available on 3 clusters"
    })
    .await;
    assert_followed_within_a_second(changed);
    assert_eq!(result_rows(&cs, "lagging").unwrap(), Vec::<Vec<Value>>::new());
    assert_eq!(
        result_rows(&cs, "builtin:availability-total").unwrap(),
        vec![vec![json!(3), json!(6), json!(6)]]
    );

    // kubectl get reads as a table.
    let text = combined_status_table(&hub, "root:app", "shop");
    assert!(
        text.contains("deployments.apps/web")
            && text.contains("on-florin")
            && text.contains("6/6 available on 3 clusters"),
        "{text}"
    );
    // Written only when something changed.
    let generation = cs["metadata"]["generation"].as_i64().unwrap();
    assert!(generation <= 10, "rewritten {generation} times");
}

#[tokio::test(flavor = "multi_thread")]
async fn rows_follow_the_targets_an_object_leaves_and_one_targets_status_is_the_objects() {
    let hub = TestHub::start().await;
    let loc = three_sync_targets(&hub).await;
    let app = client(&hub, "root:app").await;
    for (name, _) in CLUSTERS {
        return_status_for_target(&hub, "root:app", WEB, &sync_target_key(&loc, name), &available(2)).await;
    }
    // A status in the object itself is no cluster's while several sync it.
    return_status_of_only_target(&hub, "root:app", WEB, &available(0)).await;
    combined_when(&app, "on-florin", "three clusters reporting", |cs| {
        cs["summary"] == "6/6 available on 3 clusters"
    })
    .await;

    // pound's Placement goes: web leaves pound, and that CombinedStatus goes with it.
    let (code, body) = delete_placement(&hub, "on-pound").await;
    assert_eq!(code, 200, "{body}");
    let cs = combined_when(&app, "on-florin", "two clusters left", |cs| {
        cs["summary"] == "4/4 available on 2 clusters"
    })
    .await;
    assert_eq!(
        result_rows(&cs, "builtin:availability").unwrap(),
        vec![
            vec![json!("florin"), json!(2), json!(2)],
            vec![json!("guilder"), json!(2), json!(2)],
        ]
    );
    combined_status_gone(&app, "shop", "on-pound", "on-pound's CombinedStatus to go").await;

    // One target left: its syncer writes the object's status, and that is its row.
    delete_placement(&hub, "on-guilder").await;
    combined_when(
        &app,
        "on-florin",
        "florin alone, from the object's status",
        |cs| cs["summary"] == "0/2 available on 1 cluster",
    )
    .await;
    return_status_of_only_target(&hub, "root:app", WEB, &available(1)).await;
    combined_when(&app, "on-florin", "florin's new status", |cs| {
        cs["summary"] == "1/2 available on 1 cluster"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_collector_with_a_bad_expression_is_named_on_its_valid_condition_and_the_others_keep_working() {
    let hub = TestHub::start().await;
    let loc = three_sync_targets(&hub).await;
    let app = client(&hub, "root:app").await;
    for (name, _) in CLUSTERS {
        return_status_for_target(&hub, "root:app", WEB, &sync_target_key(&loc, name), &available(2)).await;
    }
    // The hub gives the workspace the combined-status kinds with the first one.
    combined_when(&app, "on-florin", "the CombinedStatus", |_| true).await;
    broken_and_count_collectors(&app).await;
    name_collectors(&hub, "on-guilder", "broken,count,missing").await;

    broken_collector_reported(&app).await;
    let cs = combined_when(&app, "on-guilder", "every result", |cs| {
        result_rows(cs, "count").is_some() && result_rows(cs, "missing").is_some()
    })
    .await;
    let broken = result_error(&cs, "broken");
    assert!(
        broken.contains("StatusCollector \"broken\" is invalid (spec.filter: "),
        "{broken}"
    );
    let missing = result_error(&cs, "missing");
    assert!(
        missing.contains("does not exist in this workspace")
            && missing.contains("the Placement's ferry.dev/status-collectors annotation"),
        "{missing}"
    );
    assert_eq!(result_rows(&cs, "count").unwrap(), vec![vec![json!(3)]]);
    assert_eq!(cs["summary"], "6/6 available on 3 clusters");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_on_the_same_sync_target_with_a_same_named_object_neither_reads_nor_joins_another_workspaces_combined_status(
) {
    let t = Tenants::start().await;
    let hub = &t.hub;
    let loc = workspace(hub, "loc").await;
    workspace(hub, "app").await;
    location(hub, "root:loc", "florin", json!({}), json!({})).await;
    sync_target(hub, "root:loc", "florin", json!({"region": "eu"})).await;
    let florin = sync_target_key(&loc, "florin");

    // The victim (root:app) runs shop/web on florin, which reports a secret.
    let workload = json!({"matchLabels": {"purpose": "workload"}});
    placement(
        hub,
        "root:app",
        "compute",
        "root:loc",
        json!([{}]),
        workload.clone(),
    )
    .await;
    namespace(hub, "root:app", "shop", json!({"purpose": "workload"})).await;
    deployment(hub, "root:app", "shop", "web", 2).await;

    // mal may schedule onto root:loc too (granted bind there), and runs its own shop/web on florin.
    t.workspace("mal", Some("mal")).await;
    cluster_role(
        hub,
        "root:loc",
        "schedule-here",
        json!([{"apiGroups": ["scheduling.kcp.io"], "resources": ["locations"], "verbs": ["bind"]}]),
    )
    .await;
    bind_cluster_role(hub, "root:loc", "mal-schedules-here", "schedule-here", "mal").await;
    let mal = t.client_as("mal", "root:mal").await;
    let body = |path: &str, obj: Value| {
        let mal = mal.clone();
        let path = path.to_string();
        async move {
            expect_status_because(
                &mal,
                "POST",
                &path,
                Some(&obj),
                201,
                format!("mal creating {path}"),
            )
            .await;
        }
    };
    let mut steal = placement_object("steal", "root:loc", json!([{}]), workload.clone());
    steal["metadata"]["annotations"] = json!({"ferry.dev/status-collectors": "statuses"});
    body(&format!("{SCHEDULING}/placements"), steal).await;
    body(
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop", "labels": {"purpose": "workload"}}}),
    )
    .await;
    body(
        "/apis/apps/v1/namespaces/shop/deployments",
        deployment_object("web", 2),
    )
    .await;
    for ws in ["root:app", "root:mal"] {
        wait_for(hub, ws, WEB, "web synced to florin", |d| {
            states(d).get(&florin).map(String::as_str) == Some("Sync")
        })
        .await;
    }
    // florin's syncer returns each workspace's own report.
    let secret = available_saying(2, "victim-secret");
    return_status_of_only_target(hub, "root:app", WEB, &secret).await;
    let own = available_saying(1, "mal-status");
    return_status_of_only_target(hub, "root:mal", WEB, &own).await;

    // The positive twin: the victim's CombinedStatus has florin's report on
    // its object, and only that: one row, no trace of mal's.
    let app = client(hub, "root:app").await;
    combined_when(&app, "compute", "the victim's CombinedStatus", |_| true).await;
    apply(&app, statuses_collector("statuses")).await;
    name_collectors(hub, "compute", "statuses").await;
    let victims = combined_when(
        &app,
        "compute",
        "florin's report in the victim's CombinedStatus",
        |cs| cs.to_string().contains("victim-secret"),
    )
    .await;
    assert_eq!(victims["summary"], "2/2 available on 1 cluster");
    assert_eq!(result_rows(&victims, "statuses").unwrap().len(), 1);
    assert!(!victims.to_string().contains("mal-status"), "{victims}");

    // mal's own CombinedStatus: its report, never the victim's, and the
    // victim's collector is not mal's to use.
    let mals = combined_when(&mal, "steal", "mal's CombinedStatus", |cs| {
        cs["summary"] == "1/2 available on 1 cluster"
    })
    .await;
    let text = mals.to_string();
    assert!(!text.contains("victim-secret"), "{text}");
    assert!(
        result_error(&mals, "statuses").contains("does not exist in this workspace"),
        "{text}"
    );

    // mal cannot read the victim's, nor make its own object report as another target.
    let mal_at_app = t.client_as("mal", "root:app").await;
    expect_status(
        &mal_at_app,
        "GET",
        "/apis/control.kubestellar.io/v1alpha1/namespaces/shop/combinedstatuses",
        None,
        403,
    )
    .await;
    expect_status(
        &mal_at_app,
        "GET",
        "/apis/control.kubestellar.io/v1alpha1/combinedstatuses",
        None,
        403,
    )
    .await;
    let forged = ferry_api::well_known::workload_status_annotation(&florin);
    let (code, out) = merge_patch(
        &mal,
        WEB,
        &json!({"metadata": {"annotations": {forged: available(2).to_string()},
                             "labels": {format!("{STATE_PREFIX}{}", sync_target_key(&loc, "pound")): "Sync"}}}),
    )
    .await;
    assert_eq!(code, 403, "{out}");
    let victims_now = combined_status(&app, "shop", "compute").await.unwrap();
    assert_eq!(victims_now["summary"], "2/2 available on 1 cluster");
    let in_victims = combined_statuses_in(&app, "shop").await;
    assert_eq!(in_victims.len(), 1, "only the victim's own");
}
