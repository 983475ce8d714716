//! The shape of a controller that follows the store's watch: it looks at
//! everything it cares about when it starts (and whenever the watch falls
//! behind), then reacts to each change, until the hub stops. Reactions must
//! be idempotent: the controller also sees its own writes, and the same
//! object may already have been handled within the write that changed it
//! (`controllers::BuiltIn`).

use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use crate::controller::ControllerContext;
use crate::storage::WatchEvent;

/// One controller following the store.
pub trait Follower: Send + Sync + 'static {
    /// Whether changes under this storage key concern the controller.
    fn follows(&self, storage_key: &str) -> bool;

    /// Look at everything (at start, and after falling behind the watch).
    fn resync<'a>(&'a self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()>;

    /// React to one change under a followed storage key.
    fn changed<'a>(&'a self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()>;
}

/// Run `f` while `ctx`'s lease is held.
pub fn spawn<F: Follower>(ctx: ControllerContext, f: F) -> JoinHandle<()> {
    let labels = ControllerLabels {
        name: controller_name::<F>(),
    };
    let metrics = ctx.hub().follow_metrics.clone();
    tokio::spawn(async move {
        let mut lease = ctx.lease();
        while lease.is_held() {
            let rv = ctx.resource_version();
            let Ok(mut events) = ctx.watch(rv) else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            metrics.resyncs.get_or_create(&labels).inc();
            let started = Instant::now();
            f.resync(&ctx).await;
            metrics.observe(&labels, started);
            loop {
                tokio::select! {
                    _ = lease.lost() => return,
                    event = events.next() => match event {
                        Some(event) if f.follows(&event.key.resource) => {
                            let started = Instant::now();
                            f.changed(&ctx, &event).await;
                            metrics.events.get_or_create(&labels).inc();
                            metrics.observe(&labels, started);
                        }
                        Some(_) => {}
                        None => break, // fell behind: resync
                    },
                }
            }
        }
    })
}

/// The controller's name in metrics: its follower's type name, without the
/// module path (`SyncTargets`, `Placements`, ...).
fn controller_name<F>() -> &'static str {
    let full = std::any::type_name::<F>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ControllerLabels {
    name: &'static str,
}

/// How the hub's controllers keep up with the store, per controller: the
/// changes each handled, how long each took (the look at everything on a
/// start or after falling behind included), and how often each had to look
/// at everything again. A controller whose handling time grows, or whose
/// resyncs climb (it fell behind the watch), is where a slow hub waits.
#[derive(Clone)]
pub struct FollowMetrics {
    events: Family<ControllerLabels, Counter>,
    duration: Family<ControllerLabels, Histogram>,
    resyncs: Family<ControllerLabels, Counter>,
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

    fn observe(&self, labels: &ControllerLabels, started: Instant) {
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
