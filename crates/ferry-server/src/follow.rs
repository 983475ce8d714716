//! The shape of a controller that follows the store's watch: it looks at
//! everything it cares about when it starts (and whenever the watch falls
//! behind), then reacts to each change, until the hub stops. Reactions must
//! be idempotent: the controller also sees its own writes, and the same
//! object may already have been handled within the write that changed it
//! (`controllers::BuiltIn`).

use std::time::Duration;

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
    tokio::spawn(async move {
        let mut lease = ctx.lease();
        while lease.is_held() {
            let rv = ctx.resource_version();
            let Ok(mut events) = ctx.watch(rv) else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            f.resync(&ctx).await;
            loop {
                tokio::select! {
                    _ = lease.lost() => return,
                    event = events.next() => match event {
                        Some(event) if f.follows(&event.key.resource) => f.changed(&ctx, &event).await,
                        Some(_) => {}
                        None => break, // fell behind: resync
                    },
                }
            }
        }
    })
}
