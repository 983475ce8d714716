//! End to end: a Namespace copy that is no longer wanted is deleted, unless it still
//! holds copies that are: then it is released (the syncer's marks removed) instead,
//! because deleting it would delete those copies only for them to be made again
//! (the delete/re-create loop of kcp#2041). Both while the syncer runs and when the
//! change happened while it was down.

mod common;

use common::*;
use serde_json::{json, Value};

const DOWNSYNCED: &str = "edge.kubestellar.io/downsynced";
const SYNCER_LABEL: &str = "ferry.dev/syncer";

/// Downsyncs the Namespace objects of `namespaces` and every ConfigMap in them.
fn whole_namespaces(name: &str, namespaces: &[&str]) -> Value {
    syncer_config(
        name,
        json!({ "namespaceScope": { "namespaces": namespaces, "resources": [
            { "group": "", "apiVersion": "v1", "resource": "configmaps" }
        ] } }),
    )
}

/// Downsyncs ConfigMap `app/keep` only (not the Namespace object).
fn just_keep_spec() -> Value {
    json!({ "namespacedObjects": [{ "group": "", "apiVersion": "v1", "resource": "configmaps",
        "objectsByNamespace": [{ "namespace": "app", "names": ["keep"] }] }] })
}

fn uid(obj: &Value) -> String {
    obj["metadata"]["uid"].as_str().unwrap_or_default().to_string()
}

/// Creates namespaces `app` (ConfigMaps `keep` and `other`) and `gone` (ConfigMap `x`).
async fn objects(mb: &Cluster) {
    for ns in ["app", "gone"] {
        mb.create(&namespaces(), namespace(ns)).await;
    }
    for (ns, name) in [("app", "keep"), ("app", "other"), ("gone", "x")] {
        mb.create(&configmaps(), configmap(ns, name, json!({ "k": name })))
            .await;
    }
}

/// Waits until the copies of all three ConfigMaps exist; returns the uid of `app/keep`'s.
async fn all_copied(down: &Cluster) -> String {
    for (ns, name) in [("app", "other"), ("gone", "x")] {
        wait_for(down, &configmaps(), Some(ns), name, "copy", |_| true).await;
    }
    let keep = wait_for(down, &configmaps(), Some("app"), "keep", "copy of keep", |_| true).await;
    let app = down
        .get(&namespaces(), None, "app")
        .await
        .expect("namespace copy");
    assert_eq!(annotation(&app, DOWNSYNCED), Some("Namespace//app"));
    uid(&keep)
}

/// `app` is released, `gone` and `app/other` deleted, and `app/keep` was never touched.
async fn app_released_and_keep_untouched(down: &Cluster, keep_uid: &str) {
    wait_gone(
        down,
        &configmaps(),
        Some("app"),
        "other",
        "app/other no longer wanted",
    )
    .await;
    wait_gone(
        down,
        &namespaces(),
        None,
        "gone",
        "namespace gone, which holds nothing wanted",
    )
    .await;
    let app = wait_for(down, &namespaces(), None, "app", "namespace app released", |ns| {
        label(ns, SYNCER_LABEL).is_none()
    })
    .await;
    assert_eq!(annotation(&app, DOWNSYNCED), None, "{app}");
    assert!(app["metadata"]["deletionTimestamp"].is_null(), "{app}");
    let keep = down
        .get(&configmaps(), Some("app"), "keep")
        .await
        .expect("app/keep still there");
    assert_eq!(uid(&keep), keep_uid, "app/keep was deleted and made again");
    assert_eq!(label(&keep, SYNCER_LABEL), Some("florin"), "still a copy");
}

#[tokio::test]
async fn a_namespace_copy_holding_wanted_copies_is_released_when_no_longer_wanted() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    objects(&mb).await;
    mb.create(&syncer_configs(), whole_namespaces("whole", &["app", "gone"]))
        .await;
    mb.create(&syncer_configs(), syncer_config("names", just_keep_spec()))
        .await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    let keep_uid = all_copied(&down).await;

    mb.delete(&syncer_configs(), None, "whole").await;
    app_released_and_keep_untouched(&down, &keep_uid).await;
    assert!(
        mb.get(&namespaces(), None, "app").await.is_some(),
        "upstream untouched"
    );
    syncer.stop().await;
}

#[tokio::test]
async fn the_same_holds_when_namespaces_stopped_being_downsynced_while_the_syncer_was_down() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    objects(&mb).await;
    mb.create(&syncer_configs(), whole_namespaces("the-one", &["app", "gone"]))
        .await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    let keep_uid = all_copied(&down).await;
    syncer.stop().await;

    // No Namespace objects are downsynced any more, so no flow will watch them: the
    // sweep after the restart finds the copies.
    // The stopped syncer's last status write may land after the read: read again.
    let mut attempts = 0;
    loop {
        let mut config = mb.get(&syncer_configs(), None, "the-one").await.unwrap();
        config["spec"] = just_keep_spec();
        match mb
            .api(&syncer_configs(), None)
            .replace(
                "the-one",
                &Default::default(),
                &serde_json::from_value(config).unwrap(),
            )
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 && attempts < 20 => attempts += 1,
            Err(e) => panic!("replace the SyncerConfig: {e}"),
        }
    }
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    app_released_and_keep_untouched(&down, &keep_uid).await;
    syncer.stop().await;
}

/// A downsynced namespace is made before the objects going into it are tried: its
/// Namespace goes ahead of the queue. When it waited its turn, each of its objects
/// listed before it was first refused with 404 for the missing namespace.
#[tokio::test]
async fn a_new_namespace_is_made_before_the_objects_going_into_it() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    let objects = 200;
    mb.create(&namespaces(), namespace("bulk")).await;
    for i in 0..objects {
        mb.create(
            &configmaps(),
            configmap("bulk", &format!("cm-{i}"), json!({ "i": i.to_string() })),
        )
        .await;
    }
    mb.create(&syncer_configs(), whole_namespaces("whole", &["bulk"]))
        .await;
    let refused = || async {
        let scrape = ferry_testkit::clients::scrape_metrics(&wec).await;
        let has = ["verb=\"POST\"", "resource=\"configmaps\"", "code=\"404\""];
        ferry_testkit::clients::metric_sum(&scrape, "apiserver_request_total", &has)
    };
    let before = refused().await;
    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    eventually(60, "every ConfigMap copied", || {
        let down = &down;
        async move { (down.list(&configmaps(), Some("bulk")).await.len() == objects).then_some(()) }
    })
    .await;
    let refused = refused().await - before;
    // At most the creates already in flight when the namespace's turn came.
    assert!(
        refused <= 8.0,
        "{refused} of {objects} copies were refused for a missing namespace"
    );
    syncer.stop().await;
}
