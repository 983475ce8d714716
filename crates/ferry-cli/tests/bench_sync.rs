//! `ferry bench sync` at a tiny size — hubs, the syncer and the baseline client each a
//! child process — with every figure typed and sane.

mod common;

use common::{count, method, positive, ratio, rounds, run_bench, summary};

/// `ferry bench sync EXTRA` with `objects` for the initial sync, `latency_objects` per
/// latency measurement at 100/s, RSS read at `rss_level` synced objects, `rounds` rounds.
fn run_tiny(
    extra: &[&str],
    objects: u64,
    latency_objects: u64,
    rss_level: u64,
    rounds: u64,
) -> serde_json::Value {
    let numbers = [objects, latency_objects, rss_level, rounds].map(|n| n.to_string());
    let mut args = vec!["sync"];
    args.extend(extra);
    args.extend([
        "--objects",
        &numbers[0],
        "--latency-objects",
        &numbers[1],
        "--rate",
        "100",
        "--rss-levels",
        &numbers[2],
        "--rounds",
        &numbers[3],
    ]);
    run_bench(&args)
}

/// The syncer's flags, as the `method` block reports them.
fn syncer_flags(v: &serde_json::Value) -> Vec<&str> {
    v.pointer("/method/syncer_flags")
        .and_then(|f| f.as_array())
        .expect("syncer_flags")
        .iter()
        .filter_map(|f| f.as_str())
        .collect()
}

/// The initial sync's requests per object to `server` with one of `verbs` on
/// `resource`, counting only kinds the hub timed.
fn requests_per_object(v: &serde_json::Value, server: &str, verbs: &[&str], resource: &str) -> f64 {
    let requests = v
        .pointer("/initial_sync/requests_last_round/by_kind")
        .and_then(|r| r.as_array())
        .unwrap_or_else(|| panic!("no requests per object in {v:#}"));
    requests
        .iter()
        .filter(|r| r["server"] == server && verbs.iter().any(|verb| r["verb"] == *verb))
        .filter(|r| r["resource"] == resource)
        .filter(|r| r["server_ms_per_request"].as_f64().is_some_and(|ms| ms > 0.0))
        .filter_map(|r| r["per_object"].as_f64())
        .sum()
}

/// The syncer's reconciles during the initial sync: at least one per object.
fn reconciles_counted(v: &serde_json::Value) {
    let reconciles = v.pointer("/initial_sync/requests_last_round/reconciles_per_object");
    assert!(
        reconciles.and_then(|r| r.as_f64()).is_some_and(|r| r >= 1.0),
        "{v:#}"
    );
}

#[test]
fn bench_sync_figures_are_typed_and_sane() {
    let (objects, latency_objects) = (60u64, 20u64);
    let v = run_tiny(&[], objects, latency_objects, 150, 2);
    method(&v, 2);
    for process in ["upstream_hub", "downstream_hub", "syncer", "baseline_client"] {
        assert!(
            v.pointer(&format!("/method/processes/{process}")).is_some(),
            "{process} missing in {v:#}"
        );
    }
    // The syncer's flags are reported as run, --qps included.
    let flags = syncer_flags(&v);
    let qps = flags.iter().position(|f| *f == "--qps").expect("--qps reported");
    assert_eq!(flags[qps + 1], "0", "{flags:?}");
    assert!(flags.contains(&"--workers"), "{flags:?}");

    // Initial sync: every object copied, the ratio a median of both rounds.
    assert_eq!(count(&v, "/initial_sync/objects"), objects);
    assert_eq!(count(&v, "/initial_sync/objects_seen_downstream"), objects);
    let r = ratio(&v, "/initial_sync/ratio", 2);
    let each: Vec<f64> = (0..2)
        .map(|i| positive(&v, &format!("/initial_sync/ratio/rounds/{i}")))
        .collect();
    assert!(
        (r - (each[0] + each[1]) / 2.0).abs() < 0.002,
        "the median of two rounds is their mean: {v:#}"
    );
    for figure in [
        "syncer_objects_per_sec",
        "baseline_objects_per_sec",
        "syncer_cpu_us_per_object",
        "baseline_cpu_us_per_object",
    ] {
        rounds(&v, &format!("/initial_sync/{figure}"), 2);
    }
    rounds(&v, "/syncer_startup_to_ready_ms", 2);
    // Where the time went: each copy's create on the downstream hub, counted.
    assert!(requests_per_object(&v, "downstream", &["POST"], "configmaps") >= 1.0);
    reconciles_counted(&v);

    // Latencies: one sample per object created or status written.
    assert_eq!(count(&v, "/steady_state/objects_created"), latency_objects);
    summary(&v, "/steady_state/latency_ms", latency_objects);
    let statuses = count(&v, "/status_return/statuses_written");
    assert_eq!(statuses, latency_objects);
    summary(&v, "/status_return/latency_ms", statuses);

    // Memory at the one level asked for.
    let rss = v
        .pointer("/syncer_rss")
        .and_then(|r| r.as_array())
        .expect("syncer_rss");
    assert_eq!(rss.len(), 1, "{v:#}");
    assert_eq!(count(&v, "/syncer_rss/0/synced_objects"), 150);
    let mib = positive(&v, "/syncer_rss/0/mib");
    assert!(mib < 1024.0, "{mib}");
}

/// `ferry bench sync --profile tmc --qps default`: the same figures for kcp's workload
/// syncer (a SyncTarget, a Placement, the syncer through its virtual workspace into a
/// `kcp-<hash>` namespace), with the syncer at its default pace and saying so.
#[test]
fn bench_sync_tmc_figures_are_typed_and_sane() {
    let (objects, latency_objects) = (40u64, 15u64);
    let v = run_tiny(
        &["--profile", "tmc", "--qps", "default"],
        objects,
        latency_objects,
        80,
        1,
    );
    method(&v, 1);
    assert_eq!(
        v.pointer("/method/profile").and_then(|p| p.as_str()),
        Some("tmc"),
        "{v:#}"
    );
    let flags = syncer_flags(&v);
    assert!(
        !flags.contains(&"--qps"),
        "the default pace passes no --qps: {flags:?}"
    );
    assert!(flags.windows(2).any(|w| w == ["--profile", "tmc"]), "{flags:?}");
    assert_eq!(count(&v, "/initial_sync/objects_seen_downstream"), objects);
    ratio(&v, "/initial_sync/ratio", 1);
    // Each copy applied server-side downstream (as kcp's syncer writes), counted.
    assert!(requests_per_object(&v, "downstream", &["APPLY"], "configmaps") >= 1.0);
    reconciles_counted(&v);
    summary(&v, "/steady_state/latency_ms", latency_objects);
    let statuses = count(&v, "/status_return/statuses_written");
    summary(&v, "/status_return/latency_ms", statuses);
    assert_eq!(count(&v, "/syncer_rss/0/synced_objects"), 80);
    positive(&v, "/syncer_rss/0/mib");
}

/// `ferry bench sync --profile syncagent`: kcp's api-syncagent serving several bound
/// consumer workspaces, its copies on a stand-in service cluster next to raw creates
/// there, spec changes down and status back, and the agent's memory.
#[test]
fn bench_sync_syncagent_figures_are_typed_and_sane() {
    let (consumers, objects, latency_objects) = (3u64, 30u64, 10u64);
    let consumers_flag = consumers.to_string();
    let v = run_tiny(
        &["--profile", "syncagent", "--consumers", &consumers_flag],
        objects,
        latency_objects,
        60,
        1,
    );
    method(&v, 1);
    assert_eq!(
        v.pointer("/method/profile").and_then(|p| p.as_str()),
        Some("syncagent"),
        "{v:#}"
    );
    assert_eq!(count(&v, "/method/consumers"), consumers);
    for process in ["kcp_hub", "service_hub", "syncer", "baseline_client"] {
        assert!(
            v.pointer(&format!("/method/processes/{process}")).is_some(),
            "{process} missing in {v:#}"
        );
    }
    let flags = syncer_flags(&v);
    assert!(flags.windows(2).any(|w| w == ["--qps", "0"]), "{flags:?}");
    assert!(flags.contains(&"--apiexportendpointslice-ref"), "{flags:?}");
    // Each worker keeps the profile's number of objects in flight.
    let workers = count(&v, "/method/concurrency/syncer_workers");
    let in_flight = count(&v, "/method/concurrency/syncer_objects_in_flight");
    assert!(
        workers > 0 && in_flight >= workers && in_flight.is_multiple_of(workers),
        "{v:#}"
    );

    // Every consumer object copied to the service cluster.
    assert_eq!(count(&v, "/initial_sync/objects_seen_downstream"), objects);
    ratio(&v, "/initial_sync/ratio", 1);
    for figure in [
        "syncer_objects_per_sec",
        "baseline_objects_per_sec",
        "syncer_cpu_us_per_object",
        "baseline_cpu_us_per_object",
    ] {
        rounds(&v, &format!("/initial_sync/{figure}"), 1);
    }
    rounds(&v, "/syncer_startup_to_ready_ms", 1);

    // Where the time went: every object's finalizer on kcp and copy on the service
    // cluster are among the requests counted, each with the hub's time.
    assert!(requests_per_object(&v, "kcp", &["PATCH"], "(custom)") >= 1.0);
    assert!(requests_per_object(&v, "service", &["POST"], "(custom)") >= 1.0);
    reconciles_counted(&v);

    // One sample per spec changed and per status written.
    assert_eq!(count(&v, "/steady_state/objects_updated"), latency_objects);
    summary(&v, "/steady_state/latency_ms", latency_objects);
    assert_eq!(count(&v, "/status_return/statuses_written"), latency_objects);
    summary(&v, "/status_return/latency_ms", latency_objects);

    assert_eq!(count(&v, "/syncer_rss/0/synced_objects"), 60);
    let mib = positive(&v, "/syncer_rss/0/mib");
    assert!(mib < 1024.0, "{mib}");
}
