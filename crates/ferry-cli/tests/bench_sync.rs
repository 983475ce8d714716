//! `ferry bench sync` runs end to end — a real `ferry syncer` child process
//! between two hubs — and reports every figure the issue asks for.

use std::process::Command;

#[test]
fn bench_sync_reports_all_figures_as_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([
            "bench",
            "sync",
            "--json",
            "--objects",
            "60",
            "--latency-objects",
            "20",
        ])
        .args(["--rate", "100", "--rss-levels", "100", "--rounds", "2"])
        .output()
        .expect("ferry runs");
    assert!(
        out.status.success(),
        "bench failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON figures");
    let number = |ptr: &str| {
        v.pointer(ptr)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or_else(|| panic!("{ptr} missing in {v}"))
    };
    assert!(number("/initial_sync/ratio") > 0.0);
    let rounds: Vec<f64> = v
        .pointer("/initial_sync/ratio_of_each_round")
        .and_then(serde_json::Value::as_array)
        .expect("every round's ratio")
        .iter()
        .filter_map(serde_json::Value::as_f64)
        .collect();
    assert_eq!(rounds.len(), 2, "{v}");
    let mean = (rounds[0] + rounds[1]) / 2.0;
    assert!(
        (number("/initial_sync/ratio") - mean).abs() < 0.002,
        "the median of two rounds is their mean: {v}"
    );
    assert!(number("/initial_sync/baseline_raw_create_objects_per_sec") > 0.0);
    let text = v.to_string();
    for key in ["p50", "p99", "rss"] {
        assert!(text.contains(key), "{key} missing in {text}");
    }
}
