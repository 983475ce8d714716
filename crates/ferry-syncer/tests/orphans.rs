//! End to end: resource types dropped from every SyncerConfig while the syncer was down.
//! No flow is started for them after the restart, so the sweep that follows the initial
//! sync is what deletes their copies, and nothing else.

mod common;

use common::*;
use serde_json::{json, Value};

const DOWNSYNCED: &str = "edge.kubestellar.io/downsynced";
const UPSYNCED: &str = "edge.kubestellar.io/upsynced";
const SYNCER_LABEL: &str = "ferry.dev/syncer";

fn secret(ns: &str, name: &str, labels: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": { "name": name, "namespace": ns, "labels": labels, "annotations": annotations },
        "data": {}
    })
}

fn report(kind: &str, ns: &str, name: &str) -> Value {
    json!({ "apiVersion": "example.com/v1", "kind": kind, "metadata": { "name": name, "namespace": ns }, "spec": { "pass": 1 } })
}

fn downsync_config(resources: &[&str]) -> Value {
    let resources: Vec<Value> = resources
        .iter()
        .map(|r| json!({ "group": "", "apiVersion": "v1", "resource": r }))
        .collect();
    syncer_config(
        "the-one",
        json!({ "namespaceScope": { "namespaces": ["app"], "resources": resources } }),
    )
}

fn upsync_entry(resources: &[&str]) -> Value {
    json!([{ "apiGroup": "example.com", "resources": resources, "namespaces": ["*"], "names": ["*"] }])
}

#[tokio::test]
async fn copies_of_a_type_dropped_while_the_syncer_was_down_are_deleted_on_restart() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    mb.create(&namespaces(), namespace("app")).await;
    mb.create(&configmaps(), configmap("app", "keep", json!({ "a": "1" })))
        .await;
    mb.create(&secrets(), secret("app", "drop", json!({}), json!({})))
        .await;
    mb.create(&syncer_configs(), downsync_config(&["configmaps", "secrets"]))
        .await;

    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_present(&down, &secrets(), Some("app"), "drop", "secret copy").await;
    wait_present(&down, &configmaps(), Some("app"), "keep", "configmap copy").await;
    syncer.stop().await;

    mb.merge(
        &syncer_configs(),
        None,
        "the-one",
        json!({ "spec": downsync_config(&["configmaps"])["spec"] }),
    )
    .await;
    // The user's own Secret; another syncer's copy; an object that only inherited the label.
    down.create(&secrets(), secret("app", "mine", json!({}), json!({})))
        .await;
    down.create(
        &secrets(),
        secret(
            "app",
            "theirs",
            json!({ SYNCER_LABEL: "guilder" }),
            json!({ DOWNSYNCED: "Secret/app/theirs" }),
        ),
    )
    .await;
    down.create(
        &secrets(),
        secret(
            "app",
            "borrowed",
            json!({ SYNCER_LABEL: "florin" }),
            json!({ DOWNSYNCED: "Secret/app/drop" }),
        ),
    )
    .await;

    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_gone(
        &down,
        &secrets(),
        Some("app"),
        "drop",
        "the copy of a type no longer downsynced",
    )
    .await;
    assert!(down.get(&configmaps(), Some("app"), "keep").await.is_some());
    for name in ["mine", "theirs", "borrowed"] {
        assert!(
            down.get(&secrets(), Some("app"), name).await.is_some(),
            "{name}: not this syncer's copy, never deleted"
        );
    }
    assert!(
        down.get(&namespaces(), None, "app").await.is_some(),
        "namespaces are still downsynced"
    );
    assert!(
        mb.get(&secrets(), Some("app"), "drop").await.is_some(),
        "upstream untouched"
    );
    syncer.stop().await;
}

#[tokio::test]
async fn upsynced_copies_of_a_type_dropped_while_the_syncer_was_down_are_deleted_on_restart() {
    let (up, wec, ws, mb, down) = Stage::start().await.parts();
    for side in [&mb, &down] {
        side.create(&crds(), crd("Report", "reports")).await;
        side.create(&crds(), crd("Gadget", "gadgets")).await;
    }
    mb.create(
        &syncer_configs(),
        syncer_config(
            "the-one",
            json!({ "upsync": upsync_entry(&["reports", "gadgets"]) }),
        ),
    )
    .await;
    // An upstream object the syncer did not upsync.
    mb.create(&namespaces(), namespace("policy")).await;
    mb.create(&reports(), report("Report", "policy", "manual")).await;

    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_ready(&syncer).await;
    down.create(&namespaces(), namespace("policy")).await;
    down.create(&reports(), report("Report", "policy", "r1")).await;
    down.create(&gadgets(), report("Gadget", "policy", "g1")).await;
    let copy = wait_present(&mb, &reports(), Some("policy"), "r1", "report upsynced").await;
    assert_eq!(copy["metadata"]["annotations"][UPSYNCED], "Report/policy/r1");
    wait_present(&mb, &gadgets(), Some("policy"), "g1", "gadget upsynced").await;
    syncer.stop().await;

    mb.merge(
        &syncer_configs(),
        None,
        "the-one",
        json!({ "spec": { "upsync": upsync_entry(&["gadgets"]) } }),
    )
    .await;

    let syncer = start_syncer(&up, &ws, &wec, "florin").await;
    wait_gone(
        &mb,
        &reports(),
        Some("policy"),
        "r1",
        "the upsynced copy of a type no longer upsynced",
    )
    .await;
    assert!(
        mb.get(&gadgets(), Some("policy"), "g1").await.is_some(),
        "the copy of a type still upsynced stays"
    );
    assert!(
        mb.get(&reports(), Some("policy"), "manual").await.is_some(),
        "an upstream object the syncer did not upsync is never deleted"
    );
    assert!(
        down.get(&reports(), Some("policy"), "r1").await.is_some(),
        "the downstream source is untouched"
    );
    syncer.stop().await;
}
