//! Two `ferry hub` processes on one etcd: `kill -9` of one under write load
//! loses no acknowledged write, its clients carry on through the other, and
//! the other takes over the built-in controllers' Lease once it expires.
//! Skipped (saying so) when the etcd binary is not installed.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ferry_hub::testing::{client_from, eventually, HubProcess, TestEtcd};
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
async fn killing_one_of_two_hubs_on_etcd_loses_no_acknowledged_write() {
    let Some(etcd) = TestEtcd::start() else { return };
    let bin = Path::new(env!("CARGO_BIN_EXE_ferry"));
    let url = etcd.url();
    let flags = [
        "--storage",
        "etcd",
        "--etcd-servers",
        url.as_str(),
        "--leader-elect-lease-duration",
        "2",
    ];
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = HubProcess::spawn(bin, dir_a.path(), &flags).unwrap();
    let b = HubProcess::spawn(bin, dir_b.path(), &flags).unwrap();
    let client_b = client_from(&b.kubeconfig, None).await;
    let leases: Api<Lease> = Api::namespaced(client_b.clone(), "kube-system");
    let a_addr = address(&a);
    eventually(10, "a to hold the controllers' Lease", || async {
        lease_holder(&leases).await.filter(|h| h.contains(&a_addr))
    })
    .await;

    let on_a: Api<ConfigMap> = Api::namespaced(client_from(&a.kubeconfig, None).await, "default");
    let acked = Arc::new(Mutex::new(BTreeSet::<String>::new()));
    let mut writers = Vec::new();
    for w in 0..8 {
        let (api, acked) = (on_a.clone(), acked.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{w}-{i}");
                match api.create(&PostParams::default(), &cm(&name)).await {
                    Ok(_) => {
                        acked.lock().unwrap().insert(name);
                    }
                    Err(_) => return,
                }
            }
        }));
    }
    eventually(60, "200 writes acknowledged through a", || async {
        (acked.lock().unwrap().len() >= 200).then_some(())
    })
    .await;
    a.kill();
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();

    // The clients carry on through b, and b has every write a acknowledged.
    let on_b: Api<ConfigMap> = Api::namespaced(client_b.clone(), "default");
    on_b.create(&PostParams::default(), &cm("after-the-kill"))
        .await
        .expect("writes continue through b");
    let present: BTreeSet<String> = on_b
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let lost: Vec<&String> = acked.difference(&present).collect();
    assert!(lost.is_empty(), "acknowledged through a, missing on b: {lost:?}");
    assert!(present.contains("after-the-kill"));

    // a never gave the Lease up: b takes it once it has gone 2s unrenewed.
    let b_addr = address(&b);
    let lease = eventually(15, "b to take over the expired Lease", || async {
        leases.get("ferry-hub-controllers").await.ok().filter(|l| {
            l.spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_ref())
                .is_some_and(|h| h.contains(&b_addr))
        })
    })
    .await;
    let transitions = lease.spec.and_then(|s| s.lease_transitions).unwrap_or_default();
    assert!(transitions >= 1, "a takeover counts as a transition");
}
