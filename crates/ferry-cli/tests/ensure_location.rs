//! `ferry ensure location` creates the seed's SyncTarget and Location, and the
//! hub's mailbox controller gives the SyncTarget its mailbox workspace.

use std::process::Command;
use std::time::Duration;

use ferry_testkit::clients::workspace_kubeconfig;
use ferry_testkit::resources::{ar, workspaces};
use ferry_testkit::tenants::ready_workspace;
use ferry_testkit::{client_from, TestHub};
use kube::api::{Api, DynamicObject};

#[tokio::test(flavor = "multi_thread")]
async fn ensure_location_creates_sync_target_location_and_mailbox() {
    let hub = TestHub::start().await;
    let root = client_from(hub.kubeconfig(), None).await;
    let imw_cluster = ready_workspace(&hub, "imw1").await;
    let imw_kubeconfig = workspace_kubeconfig(&hub, "root:imw1");
    let ensure = || {
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args([
                "ensure",
                "location",
                "guilder",
                "loc-name=guilder",
                "env=prod",
                "extended=yes",
                "--kubeconfig",
            ])
            .arg(&imw_kubeconfig)
            .output()
            .unwrap()
    };
    let out = ensure();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Running it twice is fine (ensure, not create).
    let again = ensure();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    let inv = client_from(&imw_kubeconfig, None).await;
    let st = Api::<DynamicObject>::all_with(
        inv.clone(),
        &ar("edge.kubestellar.io", "v2alpha1", "SyncTarget", "synctargets"),
    )
    .get("guilder")
    .await
    .unwrap();
    let labels = st.metadata.labels.clone().unwrap();
    assert_eq!(
        (labels["id"].as_str(), labels["extended"].as_str()),
        ("guilder", "yes")
    );
    let loc = Api::<DynamicObject>::all_with(
        inv,
        &ar("edge.kubestellar.io", "v2alpha1", "Location", "locations"),
    )
    .get("guilder")
    .await
    .unwrap();
    assert_eq!(
        loc.data["spec"]["instanceSelector"]["matchLabels"]["id"],
        "guilder"
    );
    assert_eq!(loc.data["spec"]["resource"]["resource"], "synctargets");

    let mailbox = format!("{imw_cluster}-mb-{}", st.metadata.uid.unwrap());
    let all_ws = Api::<DynamicObject>::all_with(root, &workspaces());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while all_ws.get_opt(&mailbox).await.unwrap().is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "mailbox workspace {mailbox} never appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
