//! Fields owned downstream, end to end: a mailbox object lists fields the
//! workload cluster owns (`ferry.dev/owned-downstream`, as the placement
//! translator writes it from a CustomTransform), a writer in the cluster
//! (an autoscaler) changes one of them again and again, and the syncer
//! neither writes it back nor stops carrying the source's other changes.

mod common;

use common::*;
use ferry_api::well_known::OWNED_DOWNSTREAM_ANNOTATION;
use serde_json::{json, Value};

fn deployment(condition: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "web", "namespace": "default", "annotations": {
            OWNED_DOWNSTREAM_ANNOTATION: format!(r#"[{{"condition":"{condition}","jsonPaths":["$.spec.replicas"]}}]"#)
        } },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "nginx:1.0" }] }
            }
        }
    })
}

fn image(d: &Value) -> &str {
    d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
}

fn set_image(tag: &str) -> Value {
    json!({"spec": {"template": {"spec": {"containers": [{ "name": "web", "image": format!("nginx:{tag}") }]}}}})
}

/// A stage syncing Deployments in `default`, with `web` listing `spec.replicas`
/// as owned downstream under `condition`, once its copy has arrived.
async fn scaled_stage(condition: &str) -> (Stage, ferry_syncer::RunningSyncer) {
    let stage = Stage::start().await;
    sync_in_default(&stage.mb, &[("apps", "deployments")]).await;
    stage.mb.create(&deployments(), deployment(condition)).await;
    let syncer = start_syncer(&stage.up, &stage.ws, &stage.wec, "wec").await;
    wait_for(
        &stage.down,
        &deployments(),
        Some("default"),
        "web",
        "the copy",
        |d| d["spec"]["replicas"] == 1,
    )
    .await;
    (stage, syncer)
}

/// Merges `patch` into `web` on `side` (the mailbox or the cluster).
async fn patch_web(side: &Cluster, patch: Value) {
    side.merge(&deployments(), Some("default"), "web", patch).await;
}

/// The cluster's copy of `web` once its image is `nginx:<tag>`.
async fn copy_with_image(stage: &Stage, tag: &str) -> Value {
    let wanted = format!("nginx:{tag}");
    wait_for(
        &stage.down,
        &deployments(),
        Some("default"),
        "web",
        "the new image",
        |d| image(d) == wanted,
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_downstream_autoscaler_keeps_its_replicas_while_other_changes_flow_down() {
    let (stage, syncer) = scaled_stage("OnSpokePresent").await;
    for (replicas, tag) in [(3, "1.1"), (5, "1.2"), (2, "1.3")] {
        // The autoscaler scales the copy; then the source changes its image.
        // The image arriving means the syncer has handled the scaling: had it
        // written the source's replicas back, the copy would now say 1.
        patch_web(&stage.down, json!({"spec": {"replicas": replicas}})).await;
        patch_web(&stage.mb, set_image(tag)).await;
        let copy = copy_with_image(&stage, tag).await;
        assert_eq!(copy["spec"]["replicas"], replicas, "the autoscaler's value stays");
    }
    // Even a new replica count at the source does not override the cluster's.
    patch_web(&stage.mb, json!({"spec": {"replicas": 9}})).await;
    patch_web(&stage.mb, set_image("2.0")).await;
    assert_eq!(copy_with_image(&stage, "2.0").await["spec"]["replicas"], 2);
    syncer.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn on_spoke_change_keeps_a_downstream_change_until_the_source_changes() {
    let (stage, syncer) = scaled_stage("OnSpokeChange").await;
    patch_web(&stage.down, json!({"spec": {"replicas": 4}})).await;
    // A change to the copy's annotations is drift the syncer corrects; the
    // replicas it leaves alone, since the source has not changed.
    patch_web(
        &stage.down,
        json!({"metadata": {"annotations": {OWNED_DOWNSTREAM_ANNOTATION: "[]"}}}),
    )
    .await;
    let copy = wait_for(
        &stage.down,
        &deployments(),
        Some("default"),
        "web",
        "the annotation restored",
        |d| annotation(d, OWNED_DOWNSTREAM_ANNOTATION) != Some("[]"),
    )
    .await;
    assert_eq!(copy["spec"]["replicas"], 4);
    // The source changes: its next copy carries the source's replicas again.
    patch_web(&stage.mb, set_image("1.5")).await;
    assert_eq!(copy_with_image(&stage, "1.5").await["spec"]["replicas"], 1);
    syncer.stop().await;
}
