//! `ferry bench compare` against two hubs: both measured with the same summaries, and
//! its namespace removed afterwards; and against a server whose controllers put
//! objects of their own in the bench's namespace, as a real cluster's do.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{count, method, number, rounds, run_bench, summary};
use ferry_cli::hub_process::HubProcess;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use kube::runtime::{watcher, WatchStreamExt};

/// Two hubs, each a `ferry hub` process (the second keeping nothing on disk), with
/// their data directories.
struct TwoHubs {
    a: HubProcess,
    b: HubProcess,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl TwoHubs {
    fn start() -> TwoHubs {
        let exe = std::path::Path::new(env!("CARGO_BIN_EXE_ferry"));
        let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = HubProcess::spawn(exe, dirs.0.path(), &[]).expect("hub a");
        let b = HubProcess::spawn(exe, dirs.1.path(), &["--ephemeral"]).expect("hub b");
        TwoHubs { a, b, _dirs: dirs }
    }

    /// Both kubeconfigs' paths.
    fn kubeconfigs(&self) -> [String; 2] {
        [&self.a, &self.b].map(|h| h.kubeconfig.display().to_string())
    }

    /// `ferry bench compare` of both, 2 rounds of 10 + 40 creates, with `lists` LISTs
    /// and `watchers` × `events` watch deliveries.
    fn compare(&self, lists: usize, watchers: usize, events: usize) -> serde_json::Value {
        let [a, b] = self.kubeconfigs();
        let [lists, watchers, events] = [lists, watchers, events].map(|n| n.to_string());
        run_bench(&[
            "compare",
            "--kubeconfig",
            &a,
            "--kubeconfig",
            &b,
            "--objects",
            "40",
            "--rounds",
            "2",
            "--lists",
            &lists,
            "--watchers",
            &watchers,
            "--watch-events",
            &events,
        ])
    }
}

#[test]
fn bench_compare_measures_every_server_alike_and_cleans_up() {
    let hubs = TwoHubs::start();
    let [a_kc, b_kc] = hubs.kubeconfigs();
    let v = hubs.compare(3, 2, 5);
    method(&v, 2);
    let targets = v["targets"].as_array().expect("targets");
    assert_eq!(targets.len(), 2, "{v:#}");
    for (i, kubeconfig) in [&a_kc, &b_kc].into_iter().enumerate() {
        let t = format!("/targets/{i}");
        assert_eq!(
            v.pointer(&format!("{t}/kubeconfig")).unwrap(),
            kubeconfig.as_str()
        );
        rounds(&v, &format!("{t}/creates_per_sec/clients_1"), 2);
        rounds(&v, &format!("{t}/creates_per_sec/clients_32"), 2);
        // Two rounds of 10 + 40 creates, all listed.
        assert_eq!(count(&v, &format!("{t}/list/objects")), 100);
        summary(&v, &format!("{t}/list/latency_ms"), 3);
        summary(&v, &format!("{t}/get_ms"), 3);
        summary(&v, &format!("{t}/watch/delivery_ms"), 10);
        summary(&v, &format!("{t}/watch/create_rtt_ms"), 5);
    }
    // The bench's namespace is gone or going on both servers.
    for kubeconfig in [&a_kc, &b_kc] {
        let out = Command::new("kubectl")
            .args(["--kubeconfig", kubeconfig, "get", "namespaces", "-o"])
            .arg("jsonpath={range .items[*]}{.metadata.name} {.status.phase}{\"\\n\"}{end}")
            .output()
            .expect("kubectl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        for line in text.lines().filter(|l| l.starts_with("ferry-bench-")) {
            assert!(line.ends_with("Terminating"), "left behind: {line}");
        }
    }
    drop(hubs);
}

/// What kube-controller-manager's root-CA publisher does on a real cluster: a
/// `kube-root-ca.crt` ConfigMap in every new namespace (here: every `ferry-bench-*`
/// one). Returns how many it published so far.
fn publish_root_ca(rt: &tokio::runtime::Runtime, kubeconfig: &std::path::Path) -> Arc<AtomicUsize> {
    let published = Arc::new(AtomicUsize::new(0));
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let client = rt.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    });
    let counter = published.clone();
    rt.spawn(async move {
        let mut namespaces = watcher(Api::<Namespace>::all(client.clone()), watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(ns)) = namespaces.next().await {
            let name = ns.metadata.name.unwrap_or_default();
            if !name.starts_with("ferry-bench-") {
                continue;
            }
            let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "a cluster's CA"}
            }))
            .unwrap();
            if Api::<ConfigMap>::namespaced(client.clone(), &name)
                .create(&PostParams::default(), &cm)
                .await
                .is_ok()
            {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        }
    });
    published
}

#[test]
fn bench_compare_counts_only_its_own_objects_beside_a_clusters_own() {
    let hubs = TwoHubs::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    // Hub a runs a cluster's root-CA publisher; hub b does not.
    let published = publish_root_ca(&rt, &hubs.a.kubeconfig);
    let v = hubs.compare(2, 1, 3);
    assert_eq!(
        published.load(Ordering::SeqCst),
        1,
        "the publisher put its ConfigMap in the bench's namespace on hub a"
    );
    for i in 0..2 {
        // Two rounds of 10 + 40 creates: the bench's own, not the cluster's.
        assert_eq!(count(&v, &format!("/targets/{i}/list/objects")), 100, "{v:#}");
        summary(&v, &format!("/targets/{i}/list/latency_ms"), 2);
    }
    // The ratio table: each server against the first.
    for name in [
        "creates_per_sec_1_client",
        "creates_per_sec_32_clients",
        "list_p50",
        "get_p50",
        "watch_delivery_p99",
    ] {
        assert_eq!(number(&v, &format!("/targets/0/relative_to_first/{name}")), 1.0);
        let r = number(&v, &format!("/targets/1/relative_to_first/{name}"));
        assert!(r > 0.0, "{name} = {r}");
    }
    drop((hubs, rt));
}
