//! An acknowledged write survives `kill -9` of the hub.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ferry_hub::testing::{client_from, HubProcess};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_ferry"));
    let mut hub = HubProcess::spawn(bin, dir.path(), &[]).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client_from(&hub.kubeconfig, None).await, "default");

    let acked = Arc::new(Mutex::new(BTreeSet::<String>::new()));
    let max_rv = Arc::new(Mutex::new(0u64));
    let mut writers = Vec::new();
    for w in 0..16 {
        let (api, acked, max_rv) = (api.clone(), acked.clone(), max_rv.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{w}-{i}");
                match api.create(&PostParams::default(), &cm(&name)).await {
                    Ok(made) => {
                        let rv: u64 = made.metadata.resource_version.unwrap().parse().unwrap();
                        acked.lock().unwrap().insert(name);
                        let mut m = max_rv.lock().unwrap();
                        *m = (*m).max(rv);
                    }
                    Err(_) => return,
                }
            }
        }));
    }
    // Kill the hub mid-stream once plenty of writes have been acknowledged.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while acked.lock().unwrap().len() < 500 {
        assert!(tokio::time::Instant::now() < deadline, "writes too slow");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    hub.kill();
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();
    let max_rv = *max_rv.lock().unwrap();

    let hub = HubProcess::spawn(bin, dir.path(), &[]).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client_from(&hub.kubeconfig, None).await, "default");
    let present: BTreeSet<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let lost: Vec<&String> = acked.difference(&present).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost after kill -9, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    let after = api
        .create(&PostParams::default(), &cm("after-restart"))
        .await
        .unwrap();
    let rv: u64 = after.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv > max_rv, "resourceVersion went backwards: {rv} <= {max_rv}");
}
