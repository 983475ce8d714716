//! An acknowledged write survives `kill -9` of the hub.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ferry_cli::hub_process::HubProcess;
use ferry_testkit::client_from;
use ferry_testkit::clients::names_of;
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
    let present: BTreeSet<String> = names_of(&api).await.into_iter().collect();
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

/// Read committed: nothing a reader saw before a `kill -9` is missing or
/// older afterwards, and no resourceVersion a reader saw is handed out again.
/// Writers create and update ConfigMaps while readers list them; each of
/// four kill rounds on one data directory kills the hub right after a list
/// was answered, when what it showed is most likely still in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_a_reader_saw_is_taken_back_by_sigkill() {
    use std::collections::BTreeMap;
    let dir = tempfile::tempdir().unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_ferry"));
    for round in 0..4 {
        let mut hub = HubProcess::spawn(bin, dir.path(), &[]).unwrap();
        let listed = Arc::new(tokio::sync::Notify::new());
        let api: Api<ConfigMap> = Api::namespaced(client_from(&hub.kubeconfig, None).await, "default");
        // name -> newest resourceVersion any reader saw; and the newest list RV.
        let seen = Arc::new(Mutex::new(BTreeMap::<String, u64>::new()));
        let max_seen = Arc::new(Mutex::new(0u64));
        let reads = Arc::new(Mutex::new(0usize));
        let mut tasks = Vec::new();
        for w in 0..12 {
            let api = api.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    // Create a few, then keep updating them: updates of an
                    // existing object are what a lost write would roll back.
                    let name = format!("r{round}-w{w}-{}", i % 8);
                    let result = if i < 8 {
                        api.create(&PostParams::default(), &cm(&name)).await.map(|_| ())
                    } else {
                        let mut obj = cm(&name);
                        obj.data = Some([("i".to_string(), i.to_string())].into());
                        api.replace(&name, &PostParams::default(), &{
                            let mut o = obj;
                            o.metadata.resource_version = None;
                            o
                        })
                        .await
                        .map(|_| ())
                    };
                    if let Err(kube::Error::Api(e)) = &result {
                        if e.code == 409 {
                            continue;
                        }
                    }
                    if result.is_err() {
                        return;
                    }
                }
            }));
        }
        for _ in 0..2 {
            let (api, seen, max_seen, reads, listed) = (
                api.clone(),
                seen.clone(),
                max_seen.clone(),
                reads.clone(),
                listed.clone(),
            );
            tasks.push(tokio::spawn(async move {
                loop {
                    let Ok(list) = api.list(&ListParams::default()).await else {
                        return;
                    };
                    let list_rv: u64 = list.metadata.resource_version.unwrap().parse().unwrap();
                    let mut seen = seen.lock().unwrap();
                    for c in list.items {
                        let rv: u64 = c.metadata.resource_version.unwrap().parse().unwrap();
                        let e = seen.entry(c.metadata.name.unwrap()).or_default();
                        *e = (*e).max(rv);
                    }
                    let mut m = max_seen.lock().unwrap();
                    *m = (*m).max(list_rv);
                    *reads.lock().unwrap() += 1;
                    listed.notify_one();
                }
            }));
        }
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        while *reads.lock().unwrap() < 40 + 20 * round {
            assert!(tokio::time::Instant::now() < deadline, "reads too slow");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        listed.notified().await;
        hub.kill();
        // Each ends on its first failed request; one left waiting on a connection
        // to the dead hub (seen once in CI: the run stalled for 14 minutes) is
        // stopped, since what the readers saw is already recorded.
        for t in tasks {
            let stop = t.abort_handle();
            if tokio::time::timeout(std::time::Duration::from_secs(30), t)
                .await
                .is_err()
            {
                eprintln!("round {round}: a writer or reader still waiting 30 s after kill -9; stopped");
                stop.abort();
            }
        }
        let seen = seen.lock().unwrap().clone();
        let max_seen = (*max_seen.lock().unwrap()).max(seen.values().copied().max().unwrap_or(0));

        let mut hub = HubProcess::spawn(bin, dir.path(), &[]).unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client_from(&hub.kubeconfig, None).await, "default");
        let after: BTreeMap<String, u64> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|c| {
                (
                    c.metadata.name.unwrap(),
                    c.metadata.resource_version.unwrap().parse().unwrap(),
                )
            })
            .collect();
        let taken_back: Vec<String> = seen
            .iter()
            .filter(|(name, rv)| after.get(*name).is_none_or(|now| now < *rv))
            .map(|(name, rv)| format!("{name}@{rv} -> {:?}", after.get(name)))
            .collect();
        assert!(
            taken_back.is_empty(),
            "round {round}: {} states read before kill -9 are gone or older after it, e.g. {:?}",
            taken_back.len(),
            &taken_back[..taken_back.len().min(5)]
        );
        let next = api
            .create(&PostParams::default(), &cm(&format!("after-{round}")))
            .await
            .unwrap();
        let rv: u64 = next.metadata.resource_version.unwrap().parse().unwrap();
        assert!(
            rv > max_seen,
            "round {round}: resourceVersion {rv} handed out again (readers saw up to {max_seen})"
        );
        hub.kill();
    }
}
