//! Two `ferry syncer` processes with `--enable-leader-election` for one
//! workload cluster: one syncs, the other stands by; when the leader is
//! killed (-9, so it cannot give the Lease up) the standby takes over within
//! the lease duration and carries on without re-creating or rewriting what
//! the leader made.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ferry_testkit::{eventually, TestHub};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

const LEASE: &str = "ferry-syncer.florin";
const LEASE_DURATION: Duration = Duration::from_secs(2);

struct Syncer {
    name: &'static str,
    child: Child,
}

impl Drop for Syncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_syncer(name: &'static str, up: &TestHub, down: &TestHub, log_dir: &Path) -> Syncer {
    let log = std::fs::File::create(log_dir.join(format!("{name}.log"))).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["syncer", "--from-kubeconfig"])
        .arg(up.kubeconfig())
        .args(["--from-cluster", "root:mb", "--to-kubeconfig"])
        .arg(down.kubeconfig())
        .args([
            "--sync-target-name=florin",
            "--heartbeat-period=1s",
            "--enable-leader-election",
            "--leader-elect-lease-duration=2s",
            "--leader-elect-renew-deadline=1500ms",
            "--leader-elect-retry-period=200ms",
            "--leader-elect-resource-namespace=kube-system",
        ])
        // A pod's hostname is its name: the Lease's holderIdentity starts with it.
        .env("HOSTNAME", name)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Syncer { name, child }
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "app"}, "data": {"k": name}}))
        .unwrap()
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt(LEASE).await.ok()??.spec?.holder_identity
}

/// uid and resourceVersion of every ConfigMap in `app` downstream.
async fn copies(api: &Api<ConfigMap>) -> BTreeMap<String, (String, String)> {
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| {
            let m = c.metadata;
            (m.name.unwrap(), (m.uid.unwrap(), m.resource_version.unwrap()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn standby_syncer_takes_over_within_the_lease_duration_without_rewriting() {
    let up = TestHub::start().await;
    let wec = TestHub::start().await;
    let root = up.client("root").await;
    let workspaces = Api::<DynamicObject>::all_with(
        root,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
            "workspaces",
        ),
    );
    let ws: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "mb"}}),
    )
    .unwrap();
    workspaces.create(&PostParams::default(), &ws).await.unwrap();
    let mb = up.client("root:mb").await;
    let crds = Api::<DynamicObject>::all_with(
        mb.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    for crd in ferry_api::all_crds() {
        let crd: DynamicObject = serde_json::from_value(serde_json::to_value(crd).unwrap()).unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let configs = Api::<DynamicObject>::all_with(
        mb.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", "SyncerConfig"),
            "syncerconfigs",
        ),
    );
    let config: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig", "metadata": {"name": "the-one"},
        "spec": {"namespaceScope": {"namespaces": ["app"], "resources": [
            {"group": "", "apiVersion": "v1", "resource": "configmaps"}]}}}))
    .unwrap();
    eventually(20, "the SyncerConfig CRD to be served", || async {
        configs.create(&PostParams::default(), &config).await.ok()
    })
    .await;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "app"}})).unwrap();
    Api::<Namespace>::all(mb.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let upstream: Api<ConfigMap> = Api::namespaced(mb, "app");
    for i in 0..20 {
        upstream
            .create(&PostParams::default(), &cm(&format!("c{i}")))
            .await
            .unwrap();
    }

    let logs = tempfile::tempdir().unwrap();
    let mut a = spawn_syncer("syncer-a", &up, &wec, logs.path());
    let mut b = spawn_syncer("syncer-b", &up, &wec, logs.path());
    let down = wec.client("root").await;
    let leases: Api<Lease> = Api::namespaced(down.clone(), "kube-system");
    let downstream: Api<ConfigMap> = Api::namespaced(down, "app");
    let first = eventually(20, "one syncer to hold the Lease", || async {
        holder(&leases).await
    })
    .await;
    eventually(30, "the 20 ConfigMaps downstream", || async {
        let n = copies(&downstream)
            .await
            .keys()
            .filter(|k| k.starts_with('c'))
            .count();
        (n == 20).then_some(())
    })
    .await;
    let (leader, standby) = if first.starts_with("syncer-a_") {
        (&mut a, &mut b)
    } else {
        assert!(first.starts_with("syncer-b_"), "holder {first}");
        (&mut b, &mut a)
    };
    // Both run; the standby has not taken the Lease.
    assert!(
        standby.child.try_wait().unwrap().is_none(),
        "{} exited",
        standby.name
    );
    assert_eq!(holder(&leases).await.as_deref(), Some(first.as_str()));
    let before = copies(&downstream).await;

    leader.child.kill().unwrap();
    leader.child.wait().unwrap();
    let killed = Instant::now();
    upstream
        .create(&PostParams::default(), &cm("after"))
        .await
        .unwrap();
    let prefix = format!("{}_", standby.name);
    let new_holder = eventually(20, "the standby to take the Lease over", || async {
        holder(&leases).await.filter(|h| h.starts_with(&prefix))
    })
    .await;
    let takeover = killed.elapsed();
    // The standby saw the Lease unchanged for its duration, and tries every 200ms.
    assert!(
        takeover < LEASE_DURATION + Duration::from_millis(1500),
        "took {takeover:?} to take over a {LEASE_DURATION:?} Lease"
    );
    eventually(
        20,
        "the ConfigMap made after the kill, synced by the new leader",
        || async { downstream.get_opt("after").await.ok()? },
    )
    .await;
    let lease = leases.get(LEASE).await.unwrap().spec.unwrap();
    assert_eq!(lease.lease_transitions, Some(1), "one takeover: {lease:?}");
    assert_eq!(lease.lease_duration_seconds, Some(2));
    assert!(lease.acquire_time.is_some() && lease.renew_time.is_some());
    assert_ne!(new_holder, first);

    // What the first leader made is left as it was: same uids (not re-created)
    // and same resourceVersions (not rewritten).
    let after = copies(&downstream).await;
    for (name, was) in &before {
        assert_eq!(
            after.get(name),
            Some(was),
            "{name} was re-created or rewritten by the new leader"
        );
    }
    assert!(
        standby.child.try_wait().unwrap().is_none(),
        "the new leader runs on"
    );
}
