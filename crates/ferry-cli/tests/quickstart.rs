//! `ferry quickstart --exit` runs to completion and its table matches what the
//! hubs hold afterwards.

use std::process::Command;

use ferry_hub::testing::TestHub;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

fn resource(kind: &str) -> ApiResource {
    let (g, plural) = match kind {
        "Namespace" => ("", "namespaces"),
        "ConfigMap" => ("", "configmaps"),
        "Deployment" => ("apps", "deployments"),
        other => panic!("unexpected kind {other}"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, "v1", kind), plural)
}

#[tokio::test(flavor = "multi_thread")]
async fn quickstart_lands_the_workload_and_its_table_matches_the_hubs() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["quickstart", "--exit", "--timeout", "120s", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "quickstart failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Rows: CLUSTER KIND [NS/]NAME SYNCED REPORTED...
    let rows: Vec<Vec<String>> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("CLUSTER"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(String::from).collect())
        .collect();
    assert_eq!(rows.len(), 9, "3 objects for florin, 6 for guilder:\n{stdout}");
    assert!(
        rows.iter().all(|r| r[3] == "yes"),
        "every object synced:\n{stdout}"
    );

    let hub = TestHub::start_in(&dir.path().join("hub")).await;
    let mailboxes: Vec<String> = stdout
        .lines()
        .filter_map(|l| l.split("/clusters/").nth(1))
        .map(|rest| rest.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(mailboxes.len(), 2, "{stdout}");
    for (cluster, mailbox) in ["florin", "guilder"].iter().zip(&mailboxes) {
        let stand_in = TestHub::start_in(&dir.path().join(cluster)).await;
        let down = stand_in.client("root").await;
        let up = hub.client(mailbox).await;
        for row in rows.iter().filter(|r| r[0] == *cluster) {
            let ar = resource(&row[1]);
            let (ns, name) = match row[2].split_once('/') {
                Some((ns, name)) => (Some(ns), name),
                None => (None, row[2].as_str()),
            };
            let api = |c: &kube::Client| match ns {
                Some(ns) => Api::<DynamicObject>::namespaced_with(c.clone(), ns, &ar),
                None => Api::<DynamicObject>::all_with(c.clone(), &ar),
            };
            let copy = api(&down)
                .get(name)
                .await
                .unwrap_or_else(|e| panic!("{cluster} lacks {row:?}: {e}"));
            assert!(copy
                .metadata
                .annotations
                .unwrap_or_default()
                .contains_key("edge.kubestellar.io/downsynced"));
            if row[1] == "Deployment" {
                let upstream = api(&up).get(name).await.unwrap();
                let reported = format!(
                    "{}/{}",
                    upstream.data["status"]["availableReplicas"], upstream.data["spec"]["replicas"]
                );
                assert_eq!(
                    row[4], reported,
                    "the table's reported status is what the mailbox holds"
                );
            }
        }
        stand_in.running.stop().await;
    }
}
