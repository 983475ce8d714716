//! The shape of a controller that follows the store's watch: it looks at
//! everything it cares about when it starts (and whenever the watch falls
//! behind), then reacts to each change, until the hub stops. Reactions must
//! be idempotent: the controller also sees its own writes, and the same
//! object may already have been handled within the write that changed it
//! (`controllers::BuiltIn`).

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use crate::controller::ControllerContext;
use crate::follow_metrics::ControllerLabels;
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
