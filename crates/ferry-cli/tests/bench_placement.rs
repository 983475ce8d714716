//! `ferry bench placement` at a tiny size, for both profiles: every figure has
//! its type and is sane, every round is listed.

mod common;

use common::{count, method, positive, rounds, run_bench};
use serde_json::Value;

fn run_placement(profile: &str) -> Value {
    run_bench(&[
        "placement",
        "--profile",
        profile,
        "--sync-targets",
        "4",
        "--objects",
        "3",
        "--rounds",
        "2",
        "--timeout",
        "120s",
    ])
}

fn figures_are_sane(v: &Value, profile: &str) {
    method(v, 2);
    assert_eq!(v["method"]["profile"], profile, "{v:#}");
    assert_eq!(count(v, "/method/objects/sync_targets"), 4);
    assert_eq!(count(v, "/method/objects/copies"), 12);
    positive(v, "/setup/inventory_ready_seconds");
    let copies = rounds(v, "/place/copies_seconds", 2);
    let all = rounds(v, "/place/complete_seconds", 2);
    assert!(copies <= all && all < 120.0, "{v:#}");
    let update = rounds(v, "/update/one_object_everywhere_seconds", 2);
    assert!(update < 120.0, "{v:#}");
    let empty = positive(v, "/rss_mib/empty");
    let placed = positive(v, "/rss_mib/placed");
    assert!(empty < placed && placed < 4096.0, "{v:#}");
    assert_eq!(
        v.pointer("/machine/loadavg_before")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(3),
        "{v:#}"
    );
}

#[test]
fn bench_placement_figures_are_typed_and_sane() {
    figures_are_sane(&run_placement("kubestellar"), "kubestellar");
}

#[test]
fn bench_placement_measures_the_kcp_tmc_scheduler_too() {
    let v = run_placement("tmc");
    figures_are_sane(&v, "tmc");
    assert_eq!(v["method"]["objects"]["placement"]["placements"], 4, "{v:#}");
}
