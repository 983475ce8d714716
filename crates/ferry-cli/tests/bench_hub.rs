//! `ferry bench hub` at a tiny size: every figure has its type and is sane, so a bench
//! that breaks (measures nothing, counts wrong, loses a round) fails here.

mod common;

use common::{count, method, positive, ratio, rounds, run_bench, summary};

#[test]
fn bench_hub_figures_are_typed_and_sane() {
    let (writes, lists, watchers, events) = (80usize, 5u64, 3u64, 6u64);
    let v = run_bench(&[
        "hub",
        "--writes",
        &writes.to_string(),
        "--rounds",
        "2",
        "--list-objects",
        "50",
        "--lists",
        &lists.to_string(),
        "--watchers",
        &watchers.to_string(),
        "--watch-events",
        &events.to_string(),
        "--rss-objects",
        "1000",
        "--bound-workspaces",
        "4",
        "--apiexport-events",
        "12",
        "--workspaces",
        "40",
    ]);
    method(&v, 2);
    assert!(v.pointer("/method/processes/durable_hub").is_some(), "{v:#}");
    assert!(v.pointer("/method/processes/baseline_hub").is_some(), "{v:#}");

    for clients in [1, 32] {
        let block = format!("/creates/clients_{clients}");
        rounds(&v, &format!("{block}/durable_per_sec"), 2);
        rounds(&v, &format!("{block}/in_memory_per_sec"), 2);
        ratio(&v, &format!("{block}/ratio_durable_to_in_memory"), 2);
    }
    assert_eq!(count(&v, "/creates/clients_1/objects"), (writes / 4) as u64);
    assert_eq!(count(&v, "/creates/clients_32/objects"), writes as u64);

    assert_eq!(count(&v, "/list/objects"), 50);
    summary(&v, "/list/list_ms", lists);
    summary(&v, "/list/get_ms", lists);
    positive(&v, "/list/ratio_list_to_get_p50");

    let busy = v
        .pointer("/list_during_writes/list_ms/n")
        .and_then(|n| n.as_u64());
    summary(
        &v,
        "/list_during_writes/list_ms",
        busy.expect("a LIST ran during the writes"),
    );
    let during = positive(&v, "/list_during_writes/ratio_creates_while_listing_to_alone");
    assert!(during < 10.0, "{during}");

    // Every watcher saw every event: one latency per (watcher, event).
    summary(&v, "/watch/delivery_ms", watchers * events);
    summary(&v, "/watch/create_rtt_ms", events);

    // Memory: the hub held what it was asked to, and more than when empty.
    assert_eq!(count(&v, "/rss/objects"), 1000);
    let (full, empty) = (positive(&v, "/rss/mib"), positive(&v, "/rss/empty_mib"));
    assert!(
        full >= empty && full < 4096.0,
        "rss {full} MiB, empty {empty} MiB"
    );

    // The APIExport block: every event seen through the virtual workspace.
    assert_eq!(count(&v, "/apiexport/bound_workspaces"), 4);
    assert_eq!(count(&v, "/apiexport/events"), 12);
    summary(&v, "/apiexport/virtual_workspace_ms", 12);
    summary(&v, "/apiexport/baseline_one_workspace_ms", 12);
    positive(&v, "/apiexport/ratio_p99_virtual_workspace_to_baseline");
    positive(&v, "/apiexport/rss_mib_after");

    // Empty workspaces: every one created, two rounds, and each weighs something
    // on a hub that grew (but not absurdly: under 10 MiB and 10 MB each).
    assert_eq!(count(&v, "/workspaces/workspaces"), 40);
    assert_eq!(count(&v, "/workspaces/clients"), 32);
    rounds(&v, "/workspaces/created_per_sec", 2);
    let rss = positive(&v, "/workspaces/rss_bytes_per_workspace");
    let disk = positive(&v, "/workspaces/disk_bytes_per_workspace");
    assert!(
        rss < 10.0 * 1048576.0 && disk < 10e6,
        "{rss} B of memory, {disk} B of disk"
    );
}

#[test]
fn bench_hub_on_etcd_compares_etcd_hubs_with_sqlite() {
    if ferry_testkit::TestEtcd::binary().is_none() {
        eprintln!("skipping: {}", ferry_testkit::TestEtcd::MISSING);
        return;
    }
    let writes = 40usize;
    let v = run_bench(&[
        "hub",
        "--storage",
        "etcd",
        "--writes",
        &writes.to_string(),
        "--rounds",
        "2",
        "--list-objects",
        "20",
        "--lists",
        "2",
        "--watchers",
        "2",
        "--watch-events",
        "3",
        "--rss-objects",
        "0",
        "--bound-workspaces",
        "0",
        "--workspaces",
        "0",
    ]);
    for clients in [1, 32] {
        let block = format!("/etcd/clients_{clients}");
        rounds(&v, &format!("{block}/sqlite_per_sec"), 2);
        rounds(&v, &format!("{block}/etcd_one_hub_per_sec"), 2);
        rounds(&v, &format!("{block}/etcd_three_hubs_per_sec"), 2);
        rounds(&v, &format!("{block}/etcd_cluster_three_hubs_per_sec"), 2);
        ratio(&v, &format!("{block}/ratio_etcd_to_sqlite"), 2);
        ratio(&v, &format!("{block}/ratio_three_etcd_hubs_to_sqlite"), 2);
        ratio(&v, &format!("{block}/ratio_etcd_cluster_three_hubs_to_sqlite"), 2);
    }
    assert_eq!(count(&v, "/etcd/clients_32/objects"), writes as u64);
    summary(&v, "/etcd/get_ms/sqlite", 20);
    summary(&v, "/etcd/get_ms/etcd", 20);
    assert_eq!(count(&v, "/etcd/setup/hubs_on_etcd"), 3);
    assert_eq!(count(&v, "/etcd/setup/hubs_on_etcd_cluster"), 3);
}
