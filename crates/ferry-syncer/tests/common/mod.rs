//! The tests' kit is `ferry_testkit`; this module keeps the names the syncer
//! tests import with `use common::*` (stand-in clusters, the syncer stage, a
//! syncer run in-process, waiting with a deadline).
#![allow(dead_code, unused_imports)]

pub use ferry_testkit::cluster::*;
pub use ferry_testkit::eventually;
pub use ferry_testkit::resources::*;
pub use ferry_testkit::syncer::*;

/// `syncer_drift_corrections_total` of `resource` (`apps/v1/deployments`) in the
/// metrics text `metrics`; 0 before the first.
pub fn drift_corrections(metrics: &str, resource: &str) -> u64 {
    per_resource(metrics, "syncer_drift_corrections_total", resource)
}

/// `syncer_source_changes_skipped_total` of `resource` (`v1/configmaps`) in `metrics`.
pub fn changes_skipped(metrics: &str, resource: &str) -> u64 {
    per_resource(metrics, "syncer_source_changes_skipped_total", resource)
}

/// The counter `name` of `resource` in the metrics text `metrics`; 0 before the first.
fn per_resource(metrics: &str, name: &str, resource: &str) -> u64 {
    let prefix = format!("{name}{{resource=\"{resource}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}
