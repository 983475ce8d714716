//! Shared by the CLI tests: real kubectl with the built plugin ([`kubectl`]), and the
//! bench checks: every figure a bench reports must have the right type and be sane, so a
//! bench that measured nothing (or measured nonsense) fails.

#![allow(dead_code)]

pub mod kubectl;
pub mod kubectl_async;

use std::process::Command;

use serde_json::Value;

/// Runs `ferry ARGS --kubeconfig KUBECONFIG`; what it printed and how it ended.
pub fn ferry_with(args: &[&str], kubeconfig: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .expect("ferry runs")
}

/// Runs `ferry bench ARGS --json` and returns its JSON.
pub fn run_bench(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("bench")
        .args(args)
        .arg("--json")
        .output()
        .expect("ferry runs");
    assert!(
        out.status.success(),
        "bench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The hubs a bench starts get owner-only data directories from the
    // start: the hub has nothing to tighten, and no warning to print.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("was readable by others"),
        "bench {args:?} gave a hub a data directory others could read: {stderr}"
    );
    serde_json::from_slice(&out.stdout).expect("JSON figures")
}

/// The number at `ptr`, which must be finite.
pub fn number(v: &Value, ptr: &str) -> f64 {
    let n = v
        .pointer(ptr)
        .unwrap_or_else(|| panic!("{ptr} missing in {v:#}"))
        .as_f64()
        .unwrap_or_else(|| panic!("{ptr} is not a number in {v:#}"));
    assert!(n.is_finite(), "{ptr} = {n}");
    n
}

/// The non-negative integer at `ptr`.
pub fn count(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{ptr} is not a count in {v:#}"))
}

/// A positive, finite number at `ptr`.
pub fn positive(v: &Value, ptr: &str) -> f64 {
    let n = number(v, ptr);
    assert!(n > 0.0, "{ptr} = {n}, expected > 0");
    n
}

/// A latency summary at `ptr`: `{p50, p90, p99, max, n}`, positive and ordered, over
/// exactly `n` samples. Returns it as (p50, p99).
pub fn summary(v: &Value, ptr: &str, n: u64) -> (f64, f64) {
    let s = v.pointer(ptr).unwrap_or_else(|| panic!("{ptr} missing in {v:#}"));
    let keys: Vec<&String> = s.as_object().expect("an object").keys().collect();
    assert_eq!(keys.len(), 5, "{ptr} has exactly p50, p90, p99, max, n: {s}");
    let [p50, p90, p99, max] = ["p50", "p90", "p99", "max"].map(|k| positive(v, &format!("{ptr}/{k}")));
    assert!(p50 <= p90 && p90 <= p99 && p99 <= max, "{ptr} not ordered: {s}");
    assert!(
        max < 60_000.0,
        "{ptr}: a latency over a minute is a broken bench: {s}"
    );
    assert_eq!(
        count(v, &format!("{ptr}/n")),
        n,
        "{ptr} is over every sample: {s}"
    );
    (p50, p99)
}

/// A per-round figure at `ptr`: `{median, rounds}` with `rounds` positive values and
/// the median between their extremes. Returns the median.
pub fn rounds(v: &Value, ptr: &str, rounds: usize) -> f64 {
    let median = positive(v, &format!("{ptr}/median"));
    let values: Vec<f64> = (0..rounds)
        .map(|i| positive(v, &format!("{ptr}/rounds/{i}")))
        .collect();
    assert_eq!(
        v.pointer(&format!("{ptr}/rounds"))
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(rounds),
        "{ptr}: every round is reported"
    );
    let (lo, hi) = values
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    assert!(lo <= median && median <= hi, "{ptr}: median outside the rounds");
    median
}

/// A ratio of a measured figure to its baseline: positive and finite. How
/// large it may be is the benchmark's to report, not a test's to bound: on
/// a loaded two-core machine an etcd hub took 4.6 times the SQLite hub's
/// time in one run (and failed a bound of 2) while nothing was wrong.
pub fn ratio(v: &Value, ptr: &str, n_rounds: usize) -> f64 {
    let r = rounds(v, ptr, n_rounds);
    assert!(r > 0.0 && r.is_finite(), "{ptr} = {r}, not a positive ratio");
    r
}

/// The `method` block names its processes, concurrency, objects and rounds.
pub fn method(v: &Value, n_rounds: usize) {
    for key in ["processes", "concurrency", "objects"] {
        assert!(
            v.pointer(&format!("/method/{key}")).is_some_and(Value::is_object),
            "method.{key} missing in {v:#}"
        );
    }
    assert_eq!(count(v, "/method/rounds"), n_rounds as u64);
}
