//! How the hub's controllers keep up with the store, on `/metrics`. The hub
//! holds the counters; the one loop every controller runs on (`ferry-server`'s
//! `follow`) counts into them.

use std::time::Instant;

use futures::future::BoxFuture;

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
/// changes each handled (a pass over a burst of noted changes counts once),
/// how long each took (the look at everything on a start or after falling
/// behind included), and how often each had to look at everything again. A controller whose handling time grows, or whose
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
    /// The changes the controller named `name` handled so far.
    pub fn events_of(&self, name: &'static str) -> u64 {
        self.events.get_or_create(&ControllerLabels { name }).get()
    }

    /// The times the controller named `name` looked at everything so far.
    pub fn resyncs_of(&self, name: &'static str) -> u64 {
        self.resyncs.get_or_create(&ControllerLabels { name }).get()
    }

    /// The metrics of the controller named `name`, looked up once.
    pub fn of(&self, name: &'static str) -> Counted {
        let labels = ControllerLabels { name };
        Counted {
            events: self.events.get_or_create(&labels).clone(),
            duration: self.duration.get_or_create(&labels).clone(),
            resyncs: self.resyncs.get_or_create(&labels).clone(),
        }
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

/// One controller's metrics, as `follow::run` counts them: a look at everything
/// is a resync, a change handled or a pass is an event, and each is timed.
pub struct Counted {
    events: Counter,
    duration: Histogram,
    resyncs: Counter,
}

impl Counted {
    /// Count and time a look at everything.
    pub async fn resync(&self, work: BoxFuture<'_, ()>) {
        self.resyncs.inc();
        self.time(work).await;
    }

    /// Count and time a change handled, or a pass.
    pub async fn handle(&self, work: BoxFuture<'_, ()>) {
        self.time(work).await;
        self.events.inc();
    }

    async fn time(&self, work: BoxFuture<'_, ()>) {
        let started = Instant::now();
        work.await;
        self.duration.observe(started.elapsed().as_secs_f64());
    }
}
