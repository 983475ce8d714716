//! `ferry bench fleet` at a tiny size for both profiles: a hub, two stand-in clusters
//! and their syncers, each a process, and every figure typed, complete and sane.

mod common;

use common::{count, method, number, positive, rounds, run_bench, summary};

/// Two clusters × five objects, two rounds: every object × cluster is counted.
fn fleet(profile: &str) {
    let v = run_bench(&[
        "fleet",
        "--profile",
        profile,
        "--clusters",
        "2",
        "--objects",
        "5",
        "--rate",
        "20",
        "--rounds",
        "2",
    ]);
    method(&v, 2);
    assert_eq!(v["method"]["profile"], profile, "{v:#}");
    // 5 objects × 2 clusters × 2 rounds, each arrival measured once.
    summary(&v, "/copy_latency_ms", 20);
    assert_eq!(count(&v, "/copies_seen"), 20);
    // The same journeys in two parts, the hub's and the syncer's.
    summary(&v, "/copy_stages_ms/hub", 20);
    summary(&v, "/copy_stages_ms/syncer", 20);
    rounds(&v, "/copy_p99_ms", 2);
    // A status from each cluster, and one change reaching each cluster, per round.
    summary(&v, "/status_return_ms", 4);
    summary(&v, "/converge_per_cluster_ms", 4);
    let slowest = rounds(&v, "/converge_ms", 2);
    assert!(slowest <= number(&v, "/converge_per_cluster_ms/max"));
    // Memory and CPU of every process, from /proc.
    summary(&v, "/syncers/rss_mib", 2);
    summary(&v, "/cluster_hubs/rss_mib", 2);
    for ptr in [
        "/hub/rss_mib_idle",
        "/hub/rss_mib_after",
        "/setup_secs",
        "/measured_secs",
    ] {
        positive(&v, ptr);
    }
    for ptr in [
        "/hub/cpu_seconds",
        "/syncers/cpu_seconds/max",
        "/syncers/cpu_seconds_total",
    ] {
        assert!(number(&v, ptr) >= 0.0, "{ptr} in {v:#}");
    }
    assert_eq!(count(&v, "/syncers/cpu_seconds/n"), 2);
    // The hub's requests while measured: at least the bench's own creates of its
    // ConfigMaps, one per object and round.
    assert!(
        number(&v, "/hub_requests/configmap_patches_refused") >= 0.0,
        "{v:#}"
    );
    let created = v["hub_requests"]["by_kind_per_object"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["verb"] == "POST" && r["resource"] == "configmaps" && r["code"] == "201");
    assert!(
        created.is_some_and(|r| r["requests"].as_f64() >= Some(10.0)),
        "{v:#}"
    );
    // The hub's controllers while measured, each with what it handled: the profile's
    // own among them (the TMC scheduler labels each object; the KubeStellar
    // translator puts it into each mailbox).
    let controllers = v["hub_controllers"].as_array().cloned().unwrap_or_default();
    for row in &controllers {
        assert!(row["handled"].as_f64() > Some(0.0), "{row}");
        assert!(row["seconds"].as_f64() >= Some(0.0), "{row}");
    }
    let own = if profile == "tmc" {
        "TmcScheduler"
    } else {
        "PlacementTranslator"
    };
    assert!(
        controllers.iter().any(|r| r["controller"] == own),
        "{own} among the hub's controllers: {v:#}"
    );
    // The hub's store while measured: the objects written were committed.
    let storage = v["hub_storage"].as_array().cloned().unwrap_or_default();
    assert!(
        storage.iter().any(|r| r["server"] == "hub"
            && r["writes"].as_f64() >= Some(1.0)
            && r["commits"].as_f64() >= Some(1.0)),
        "the hub's commits are reported: {v:#}"
    );
    assert_eq!(
        v.pointer("/machine/loadavg_before")
            .and_then(|l| l.as_array())
            .map(Vec::len),
        Some(3),
        "the machine's load is reported: {v:#}"
    );
}

#[test]
fn bench_fleet_kubestellar_counts_every_object_in_every_cluster() {
    fleet("kubestellar");
}

#[test]
fn bench_fleet_tmc_counts_every_object_in_every_cluster() {
    fleet("tmc");
}
