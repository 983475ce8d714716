//! The shape of a controller that follows the store's watch: it looks at
//! everything it cares about when it starts (and whenever the watch falls
//! behind), then reacts to each change, until the hub stops. Reactions must
//! be idempotent: the controller also sees its own writes, and the same
//! object may already have been handled within the write that changed it
//! (`controllers::BuiltIn`).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::hub::Hub;
use crate::storage::WatchEvent;

/// One controller following the store.
pub trait Follower: Send + Sync + 'static {
    /// Whether changes under this storage key concern the controller.
    fn follows(&self, storage_key: &str) -> bool;

    /// Look at everything (at start, and after falling behind the watch).
    fn resync<'a>(&'a self, hub: &'a Arc<Hub>) -> BoxFuture<'a, ()>;

    /// React to one change under a followed storage key.
    fn changed<'a>(&'a self, hub: &'a Arc<Hub>, event: &'a WatchEvent) -> BoxFuture<'a, ()>;
}

fn stopped(stop: &watch::Receiver<bool>) -> bool {
    *stop.borrow() || stop.has_changed().is_err()
}

/// Run `f` until `stop` turns true (or its sender is dropped).
pub fn spawn<F: Follower>(hub: Arc<Hub>, f: F, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        while !stopped(&stop) {
            let rv = hub.store.resource_version();
            let Ok(mut events) = hub.store.watch(rv) else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            f.resync(&hub).await;
            loop {
                tokio::select! {
                    _ = stop.changed() => {
                        if stopped(&stop) {
                            return;
                        }
                    }
                    event = events.next() => match event {
                        Some(event) if f.follows(&event.key.resource) => f.changed(&hub, &event).await,
                        Some(_) => {}
                        None => break, // fell behind: resync
                    },
                }
            }
        }
    })
}
