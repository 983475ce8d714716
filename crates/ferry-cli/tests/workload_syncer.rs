//! `ferry workload-syncer` (= `ferry syncer --profile tmc`) as a process, with the
//! seed's flag names: it refuses a SyncTarget whose uid is not `--sync-target-uid`,
//! and with the right one it connects, serves `/readyz` and sends heartbeats.

use std::process::{Command, Stdio};

#[path = "syncagent_kit/mod.rs"]
mod syncagent_kit;

use ferry_testkit::{eventually, TestHub};
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use syncagent_kit::{client, free_address, refused_to_start, write_kubeconfig};

use ferry_testkit::resources::{workload_sync_targets as sync_targets, workspaces};

#[tokio::test(flavor = "multi_thread")]
async fn workload_syncer_takes_the_seed_flags_refuses_a_wrong_uid_and_heartbeats() {
    let kcp = TestHub::start().await;
    let pcluster = TestHub::start().await;
    let root = write_kubeconfig(&kcp, None, "kcp.kubeconfig");
    let cluster = write_kubeconfig(&pcluster, None, "pcluster.kubeconfig");
    let workspaces = Api::<DynamicObject>::all_with(client(&root).await, &workspaces());
    let ws: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": { "name": "org" }
    }))
    .unwrap();
    workspaces.create(&PostParams::default(), &ws).await.unwrap();
    let org = client(&write_kubeconfig(&kcp, Some("root:org"), "org.kubeconfig")).await;
    let targets: Api<DynamicObject> = Api::all_with(org, &sync_targets());
    let st: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget", "metadata": { "name": "east" }
    }))
    .unwrap();
    let created = eventually(10, "the SyncTarget created", || async {
        targets.create(&PostParams::default(), &st).await.ok()
    })
    .await;
    let uid = created.metadata.uid.unwrap();

    let syncer = |uid: &str, metrics: &str| {
        Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args([
                "workload-syncer",
                "--kcp-kubeconfig",
                root.to_str().unwrap(),
                "--workspace-cluster=root:org",
                "--cluster-kubeconfig",
                cluster.to_str().unwrap(),
                "--sync-target-name=east",
                &format!("--sync-target-uid={uid}"),
                "--resync-period=30s",
                "--workers=2",
                "--heartbeat-period=1s",
                "--api-import-poll-interval=1m",
                "--downstream-namespace-clean-delay=30s",
                "-r",
                "routes.route.openshift.io",
                "--metrics-address",
                metrics,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // The wrong uid: it says so and exits.
    let stderr = refused_to_start(syncer("not-the-uid", &free_address())).await;
    assert!(
        stderr.contains("not --sync-target-uid not-the-uid") && stderr.contains(&uid),
        "{stderr}"
    );

    // The right one: ready, and heartbeats land on the SyncTarget.
    let metrics = free_address();
    let mut running = syncer(&uid, &metrics);
    let http = probe_status(&metrics, "/readyz");
    eventually(30, "/readyz to answer 200", || async {
        (http().await == Some(200)).then_some(())
    })
    .await;
    eventually(15, "a heartbeat", || async {
        let st = targets.get("east").await.ok()?;
        let st = serde_json::to_value(st).ok()?;
        st["status"]["lastSyncerHeartbeatTime"].is_string().then_some(())
    })
    .await;
    let metrics_text = {
        let addr = metrics.clone();
        tokio::task::spawn_blocking(move || get(&addr, "/metrics"))
            .await
            .unwrap()
    };
    let heartbeats = metrics_text
        .lines()
        .find(|l| l.starts_with("syncer_heartbeat_total"))
        .and_then(|l| l.split_whitespace().last()?.parse::<f64>().ok());
    assert!(heartbeats.is_some_and(|n| n >= 1.0), "{metrics_text}");
    // It runs with the agent's allocator settings (the same process, restarted with them).
    let environ = std::fs::read(format!("/proc/{}/environ", running.id())).unwrap();
    let environ: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
    for setting in ["MIMALLOC_PURGE_DELAY=0", "MIMALLOC_ALLOW_THP=0"] {
        assert!(
            environ.contains(&setting.as_bytes()),
            "{setting} not in the syncer's environment"
        );
    }
    running.kill().unwrap();
    let _ = running.wait();
}

/// `GET http://addr/path`: the body (empty on failure).
fn get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return String::new();
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

/// A probe of `path` on `addr` returning its status code, if it answered.
fn probe_status(
    addr: &str,
    path: &str,
) -> impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<u16>> + Send>> {
    let (addr, path) = (addr.to_string(), path.to_string());
    move || {
        let (addr, path) = (addr.clone(), path.clone());
        Box::pin(async move {
            let response = tokio::task::spawn_blocking(move || get(&addr, &path))
                .await
                .ok()?;
            response.split_whitespace().nth(1)?.parse().ok()
        })
    }
}
