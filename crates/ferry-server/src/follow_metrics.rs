//! How the hub's controllers keep up with the store, on `/metrics`. The hub
//! holds the counters; a controller following the store
//! ([`crate::follow`]) or running a loop of its own counts into them.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// A controller's labels: its name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    pub(crate) name: &'static str,
}

/// How the hub's controllers keep up with the store, per controller: the
/// changes each handled, how long each took (the look at everything on a
/// start or after falling behind included), and how often each had to look
/// at everything again. A controller whose handling time grows, or whose
/// resyncs climb (it fell behind the watch), is where a slow hub waits.
#[derive(Clone)]
pub struct FollowMetrics {
    pub(crate) events: Family<ControllerLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
    pub(crate) resyncs: Family<ControllerLabels, Counter>,
}

impl Default for FollowMetrics {
    fn default() -> Self {
        FollowMetrics {
            events: Family::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new([
                    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ])
            }),
            resyncs: Family::default(),
        }
    }
}

impl FollowMetrics {
    /// Count one change (or batch of changes) `controller` handled, from
    /// `started` until now: for controllers with a loop of their own.
    pub fn handled(&self, controller: &'static str, started: Instant) {
        let labels = ControllerLabels { name: controller };
        self.events.get_or_create(&labels).inc();
        self.observe(&labels, started);
    }

    /// Count one look at everything by `controller`.
    pub fn resynced(&self, controller: &'static str) {
        let labels = ControllerLabels { name: controller };
        self.resyncs.get_or_create(&labels).inc();
    }

    pub(crate) fn observe(&self, labels: &ControllerLabels, started: Instant) {
        self.duration
            .get_or_create(labels)
            .observe(started.elapsed().as_secs_f64());
    }

    /// Add these metrics to `registry` (the hub's `/metrics`).
    pub fn register(&self, registry: &mut Registry) {
        // prometheus-client appends `_total` to counters.
        registry.register(
            "ferry_controller_events",
            "Changes a hub controller handled, by controller",
            self.events.clone(),
        );
        registry.register(
            "ferry_controller_handling_duration_seconds",
            "Time a hub controller took to handle a change or to look at everything, by controller",
            self.duration.clone(),
        );
        registry.register(
            "ferry_controller_resyncs",
            "Times a hub controller looked at everything: at start and after falling behind the store's watch",
            self.resyncs.clone(),
        );
    }
}
