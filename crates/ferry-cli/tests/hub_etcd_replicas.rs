//! Three `ferry hub` processes on a three-member etcd: `kill -9` of one under
//! write load loses no acknowledged write, its clients carry on through the
//! others, and another takes over the built-in controllers' Lease once it
//! expires.
//! Skipped (saying so) when the etcd binary is not installed.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ferry_cli::hub_process::HubProcess;
use ferry_testkit::{client_from, eventually, TestEtcdCluster};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

/// `127.0.0.1:PORT` of a hub, as its Lease holder identity contains it.
fn address(hub: &HubProcess) -> String {
    format!("_{}_", hub.url.trim_start_matches("https://"))
}

async fn lease_holder(api: &Api<Lease>) -> Option<String> {
    api.get("ferry-hub-controllers").await.ok()?.spec?.holder_identity
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn killing_one_of_three_hubs_on_etcd_loses_no_acknowledged_write() {
    let Some(etcd) = TestEtcdCluster::start() else {
        return;
    };
    let bin = Path::new(env!("CARGO_BIN_EXE_ferry"));
    let urls = etcd.urls();
    let flags = [
        "--storage",
        "etcd",
        "--etcd-servers",
        urls.as_str(),
        "--leader-elect-lease-duration",
        "2",
    ];
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // a first, so that it makes the shared identity and takes the Lease.
    let mut a = HubProcess::spawn(bin, dirs[0].path(), &flags).unwrap();
    let b = HubProcess::spawn(bin, dirs[1].path(), &flags).unwrap();
    let c = HubProcess::spawn(bin, dirs[2].path(), &flags).unwrap();
    let client_b = client_from(&b.kubeconfig, None).await;
    let leases: Api<Lease> = Api::namespaced(client_b.clone(), "kube-system");
    let a_addr = address(&a);
    eventually(10, "a to hold the controllers' Lease", || async {
        lease_holder(&leases).await.filter(|h| h.contains(&a_addr))
    })
    .await;

    // Writers go through a; when a request fails they reconnect to the next
    // replica and carry on. A create whose answer was lost is retried there:
    // 409 AlreadyExists then means the first attempt was written.
    let mut replicas = Vec::new();
    for hub in [&a, &b, &c] {
        replicas.push(Api::<ConfigMap>::namespaced(
            client_from(&hub.kubeconfig, None).await,
            "default",
        ));
    }
    let acked = Arc::new(Mutex::new(BTreeSet::<String>::new()));
    let moved = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..6 {
        let (replicas, acked, moved, stop) = (replicas.clone(), acked.clone(), moved.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut at = 0;
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let name = format!("w{w}-{i}");
                match replicas[at].create(&PostParams::default(), &cm(&name)).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(_) => {
                        at = (at + 1) % replicas.len();
                        moved.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                }
                acked.lock().unwrap().insert(name);
                i += 1;
            }
        }));
    }
    eventually(60, "150 writes acknowledged through a", || async {
        (acked.lock().unwrap().len() >= 150).then_some(())
    })
    .await;
    a.kill();
    let at_kill = acked.lock().unwrap().len();
    eventually(30, "writers to carry on through another replica", || async {
        (acked.lock().unwrap().len() >= at_kill + 150).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    assert!(moved.load(Ordering::Relaxed) >= 1, "no writer saw a's death");
    let acked = acked.lock().unwrap().clone();

    // Both survivors have every acknowledged write, whichever replica took it.
    for (name, hub) in [("b", &b), ("c", &c)] {
        let api: Api<ConfigMap> = Api::namespaced(client_from(&hub.kubeconfig, None).await, "default");
        let present: BTreeSet<String> = eventually(10, "the survivor to list every write", || async {
            let names: BTreeSet<String> = api
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect();
            acked.is_subset(&names).then_some(names)
        })
        .await;
        let lost: Vec<&String> = acked.difference(&present).collect();
        assert!(lost.is_empty(), "acknowledged, missing on {name}: {lost:?}");
    }

    // a never gave the Lease up: b or c takes it once it has gone 2s unrenewed.
    let (b_addr, c_addr) = (address(&b), address(&c));
    let lease = eventually(15, "a survivor to take over the expired Lease", || async {
        leases.get("ferry-hub-controllers").await.ok().filter(|l| {
            l.spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_ref())
                .is_some_and(|h| h.contains(&b_addr) || h.contains(&c_addr))
        })
    })
    .await;
    let transitions = lease.spec.and_then(|s| s.lease_transitions).unwrap_or_default();
    assert!(transitions >= 1, "a takeover counts as a transition");
}
