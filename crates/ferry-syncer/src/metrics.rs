//! Prometheus metrics, named as in the reference syncer documentation
//! (`syncer_resources_synced_total`, `syncer_sync_duration_seconds`,
//! `syncer_sync_errors_total`, `syncer_heartbeat_total`, `syncer_connection_status`),
//! and Ferry's own (`syncer_sync_refusals_total`, `syncer_drift_corrections_total`, ...).

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::side::Side;

/// Which way a write went.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum SyncDirection {
    /// Upstream object to its downstream copy.
    downsync,
    /// Downstream object to its upstream copy.
    upsync,
    /// Downstream status back to the upstream object (reported state).
    status,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabels {
    direction: SyncDirection,
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    resource: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DriftLabels {
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: SyncDirection,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SideLabels {
    side: &'static str,
}

/// The syncer's metrics and the registry that renders them.
pub struct Metrics {
    registry: Registry,
    synced: Family<ResourceLabels, Counter>,
    errors: Family<ResourceLabels, Counter>,
    refusals: Family<RefusalLabels, Counter>,
    drift_corrections: Family<DriftLabels, Counter>,
    skipped_changes: Family<DriftLabels, Counter>,
    duration: Family<DirectionLabels, Histogram>,
    heartbeats: Counter,
    connection: Family<SideLabels, Gauge>,
    queue_depth: Gauge,
    /// api-syncagent's gauge of its own, registered only for that profile.
    published_resources: Gauge,
    /// api-syncagent's passes over a primary's related objects, by outcome;
    /// registered only for that profile.
    related_passes: Family<OutcomeLabels, Counter>,
}

/// How a pass over an object's related objects ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelatedPass {
    /// Every related object found is in line.
    Synced,
    /// As `Synced`, but an object the primary names does not exist at its origin yet
    /// (a watch of the origin resource queues the primary when it appears).
    Waiting,
    /// An object could not be read or written; the pass is tried again.
    Failed,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric of the profile named `profile`: the shared ones, and for
    /// `syncagent` the reference's `sync_agent_published_resource` (the number of
    /// PublishedResources this agent manages, after `--published-resource-selector`)
    /// and Ferry's `sync_agent_related_object_passes_total`.
    pub fn for_profile(profile: &str) -> Self {
        let mut metrics = Self::new();
        if profile == "syncagent" {
            metrics.registry.register(
                "sync_agent_published_resource",
                "Number of PublishedResources currently managed by this syncagent instance",
                metrics.published_resources.clone(),
            );
            metrics.registry.register(
                "sync_agent_related_object_passes",
                "Passes over the related objects of a synced object, by outcome (synced: every related object found is in line; waiting: and one the object names does not exist yet; failed: one could not be read or written, and the pass is tried again)",
                metrics.related_passes.clone(),
            );
        }
        metrics
    }

    /// Registers every shared metric.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let synced = Family::<ResourceLabels, Counter>::default();
        let errors = Family::<ResourceLabels, Counter>::default();
        let refusals = Family::<RefusalLabels, Counter>::default();
        let drift_corrections = Family::<DriftLabels, Counter>::default();
        let skipped_changes = Family::<DriftLabels, Counter>::default();
        let duration = Family::<DirectionLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            ])
        });
        let heartbeats = Counter::default();
        let connection = Family::<SideLabels, Gauge>::default();
        let queue_depth = Gauge::default();
        // prometheus-client appends `_total` to counters.
        registry.register(
            "syncer_resources_synced",
            "Objects written (created, updated, deleted, or status returned), by direction and resource",
            synced.clone(),
        );
        registry.register(
            "syncer_sync_duration_seconds",
            "Time to reconcile one object, by direction",
            duration.clone(),
        );
        registry.register(
            "syncer_sync_errors",
            "Failed reconciles, by direction and resource",
            errors.clone(),
        );
        registry.register(
            "syncer_sync_refusals",
            "Objects an API server refused as sent, counted once per change of its message, by resource and Status reason",
            refusals.clone(),
        );
        registry.register(
            "syncer_drift_corrections",
            "Copies someone other than the syncer changed in the cluster, restored by the syncer, by resource",
            drift_corrections.clone(),
        );
        registry.register(
            "syncer_source_changes_skipped",
            "Changes to a source that no copy shows (nothing but other controllers' finalizers or the resourceVersion changed), taken without a reconcile, by resource",
            skipped_changes.clone(),
        );
        registry.register(
            "syncer_heartbeat",
            "Heartbeats written upstream",
            heartbeats.clone(),
        );
        registry.register(
            "syncer_connection_status",
            "1 while the side (upstream, downstream) is reachable, else 0",
            connection.clone(),
        );
        registry.register(
            "syncer_queue_depth",
            "Objects waiting to be reconciled or being reconciled",
            queue_depth.clone(),
        );
        for side in [Side::Upstream, Side::Downstream] {
            connection.get_or_create(&SideLabels { side: side.name() }).set(0);
        }
        Metrics {
            registry,
            synced,
            errors,
            refusals,
            drift_corrections,
            skipped_changes,
            duration,
            heartbeats,
            connection,
            queue_depth,
            published_resources: Gauge::default(),
            related_passes: Family::default(),
        }
    }

    /// An object of `resource` refused for `reason` (a Status reason, e.g. `Invalid`).
    pub fn refused(&self, resource: &str, reason: &str) {
        self.refusals
            .get_or_create(&RefusalLabels {
                resource: resource.into(),
                reason: reason.into(),
            })
            .inc();
    }

    /// A copy of `resource` changed in the cluster was restored.
    pub fn drift_corrected(&self, resource: &str) {
        self.drift_corrections
            .get_or_create(&DriftLabels {
                resource: resource.into(),
            })
            .inc();
    }

    /// The counter of changes to sources of `resource` taken without a reconcile (see
    /// [`crate::engine::raw::only_others_finalizers_differ`]): held by each watch, as
    /// on a fleet it counts about one event in every few.
    pub fn changes_skipped(&self, resource: &str) -> Counter {
        self.skipped_changes
            .get_or_create(&DriftLabels {
                resource: resource.into(),
            })
            .clone()
    }

    /// The number of PublishedResources the agent manages (see [`Metrics::for_profile`]).
    pub fn published_resources(&self, count: usize) {
        self.published_resources.set(count as i64);
    }

    /// One pass over an object's related objects ended (see [`Metrics::for_profile`]).
    pub fn related_pass(&self, outcome: RelatedPass) {
        let outcome = match outcome {
            RelatedPass::Synced => "synced",
            RelatedPass::Waiting => "waiting",
            RelatedPass::Failed => "failed",
        };
        self.related_passes
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// One object written.
    pub fn synced(&self, direction: SyncDirection, resource: &str) {
        self.synced
            .get_or_create(&ResourceLabels {
                direction,
                resource: resource.to_string(),
            })
            .inc();
    }

    /// One reconcile failed.
    pub fn error(&self, direction: SyncDirection, resource: &str) {
        self.errors
            .get_or_create(&ResourceLabels {
                direction,
                resource: resource.to_string(),
            })
            .inc();
    }

    /// How long one reconcile took.
    pub fn observe(&self, direction: SyncDirection, seconds: f64) {
        self.duration
            .get_or_create(&DirectionLabels { direction })
            .observe(seconds);
    }

    /// A heartbeat was written.
    pub fn heartbeat(&self) {
        self.heartbeats.inc();
    }

    /// A side became reachable or unreachable.
    pub fn connection(&self, side: Side, up: bool) {
        self.connection
            .get_or_create(&SideLabels { side: side.name() })
            .set(i64::from(up));
    }

    /// Work queue length.
    pub fn queue_depth(&self, depth: usize) {
        self.queue_depth.set(depth as i64);
    }

    /// Objects written so far in `direction`, over all resources.
    pub fn synced_total(&self, direction: SyncDirection) -> u64 {
        let mut total = 0;
        for resource in self.resources_seen() {
            total += self
                .synced
                .get_or_create(&ResourceLabels { direction, resource })
                .get();
        }
        total
    }

    fn resources_seen(&self) -> Vec<String> {
        // Families do not expose their label sets; render and parse instead (only used
        // by benchmarks and tests).
        let text = self.render();
        let mut resources: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("syncer_resources_synced_total{"))
            .filter_map(|l| l.split("resource=\"").nth(1))
            .filter_map(|r| r.split('"').next())
            .map(str::to_owned)
            .collect();
        resources.sort();
        resources.dedup();
        resources
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_reference_metric_names() {
        let m = Metrics::new();
        m.synced(SyncDirection::downsync, "v1/configmaps");
        m.error(SyncDirection::upsync, "v1/secrets");
        m.observe(SyncDirection::downsync, 0.01);
        m.heartbeat();
        m.connection(Side::Downstream, true);
        m.drift_corrected("apps/v1/deployments");
        let text = m.render();
        for needle in [
            "syncer_resources_synced_total{direction=\"downsync\",resource=\"v1/configmaps\"} 1",
            "syncer_sync_errors_total{direction=\"upsync\",resource=\"v1/secrets\"} 1",
            "syncer_sync_duration_seconds_count{direction=\"downsync\"} 1",
            "syncer_heartbeat_total 1",
            "syncer_drift_corrections_total{resource=\"apps/v1/deployments\"} 1",
            "syncer_connection_status{side=\"downstream\"} 1",
            "syncer_connection_status{side=\"upstream\"} 0",
        ] {
            assert!(text.contains(needle), "{needle} missing from\n{text}");
        }
        assert_eq!(m.synced_total(SyncDirection::downsync), 1);
    }
}
