//! `ferry bench placement` at a tiny size: every figure has its type and is sane.

mod common;

use common::{count, method, positive, run_bench};

#[test]
fn bench_placement_figures_are_typed_and_sane() {
    let v = run_bench(&[
        "placement",
        "--sync-targets",
        "4",
        "--objects",
        "3",
        "--timeout",
        "120s",
    ]);
    method(&v, 1);
    assert_eq!(count(&v, "/method/objects/sync_targets"), 4);
    assert_eq!(count(&v, "/method/objects/copies"), 12);
    positive(&v, "/setup/mailboxes_ready_seconds");
    let copies = positive(&v, "/place/copies_seconds");
    let all = positive(&v, "/place/copies_and_syncer_configs_seconds");
    assert!(copies <= all && all < 120.0, "{v:#}");
    let update = positive(&v, "/update/one_object_everywhere_seconds");
    assert!(update < 120.0, "{v:#}");
    let empty = positive(&v, "/rss_mib/empty");
    let placed = positive(&v, "/rss_mib/placed");
    assert!(empty < placed && placed < 4096.0, "{v:#}");
}
