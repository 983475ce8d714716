//! `ferry bench compare` against two hubs: both measured with the same summaries, and
//! its namespace removed afterwards.

mod common;

use std::process::Command;

use common::{count, method, rounds, run_bench, summary};
use ferry_hub::testing::HubProcess;

#[test]
fn bench_compare_measures_every_server_alike_and_cleans_up() {
    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_ferry"));
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = HubProcess::spawn(exe, a_dir.path(), &[]).expect("hub a");
    let b = HubProcess::spawn(exe, b_dir.path(), &["--ephemeral"]).expect("hub b");
    let (a_kc, b_kc) = (
        a.kubeconfig.display().to_string(),
        b.kubeconfig.display().to_string(),
    );
    let v = run_bench(&[
        "compare",
        "--kubeconfig",
        &a_kc,
        "--kubeconfig",
        &b_kc,
        "--objects",
        "40",
        "--rounds",
        "2",
        "--lists",
        "3",
        "--watchers",
        "2",
        "--watch-events",
        "5",
    ]);
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
    drop((a, b));
}
