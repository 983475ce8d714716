//! The shape shared by controllers that finish deleting objects held by a
//! finalizer of theirs (namespace termination, CRD clean-up): they follow
//! the store's watch, keep the set of objects waiting for them, and step
//! each whenever something that may let it progress changes. The set is
//! rebuilt from the store when the controller starts and whenever the watch
//! falls behind, so a deletion a restart interrupted is finished.

use std::collections::BTreeSet;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use serde_json::Value;
use tokio::task::JoinHandle;

use ferry_server::controller::ControllerContext;
use ferry_server::storage::{ClusterScope, EventType, ObjectKey, StoredObject};

/// How long a waiting object goes without a look when nothing seems to
/// change (a safety net: changes elsewhere can matter, e.g. a CRD gone).
const RECHECK: Duration = Duration::from_secs(2);

/// One finalizing controller.
pub trait Finalizing: Send + Sync + 'static {
    /// For logs: `namespace termination`, `CRD clean-up`.
    const NAME: &'static str;

    /// Storage key of the objects it finalizes.
    fn resource(&self) -> &'static str;

    /// Whether the stored object (at a key under [`Self::resource`]) waits
    /// for this controller.
    fn waits(&self, obj: &Value) -> bool;

    /// Whether a change at `changed` may let the object at `waiting` progress.
    fn concerns(&self, waiting: &ObjectKey, changed: &ObjectKey) -> bool;

    /// One pass over the object at `key`; `Ok(true)` when nothing is left to do.
    fn step<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<bool, String>>;
}

/// Whether `obj` (stored JSON) is being deleted; parses only when it may be.
fn waits_for<F: Finalizing>(f: &F, obj: &StoredObject) -> bool {
    memchr::memmem::find(&obj.json, b"deletionTimestamp").is_some() && f.waits(&obj.value())
}

/// Run `f` while `ctx`'s lease is held.
pub fn spawn<F: Finalizing>(ctx: ControllerContext, f: F) -> JoinHandle<()> {
    tokio::spawn(run(ctx, f))
}

async fn run<F: Finalizing>(ctx: ControllerContext, f: F) {
    let mut lease = ctx.lease();
    while lease.is_held() {
        let rv = ctx.resource_version();
        let Ok(mut events) = ctx.watch(rv) else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        // Resync: everything stored that waits for us.
        ctx.metrics().resynced(F::NAME);
        let (stored, _) = ctx.list(&ClusterScope::All, f.resource(), None, None);
        let mut waiting: BTreeSet<ObjectKey> = stored
            .into_iter()
            .filter(|(_, obj)| waits_for(&f, obj))
            .map(|(k, _)| k)
            .collect();
        let mut dirty = waiting.clone();
        loop {
            let started = std::time::Instant::now();
            let handling = !dirty.is_empty();
            for key in std::mem::take(&mut dirty) {
                match f.step(&ctx, &key).await {
                    Ok(true) => {
                        waiting.remove(&key);
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(cluster = %key.cluster, name = %key.name, "{}: {e}", F::NAME),
                }
            }
            if handling {
                ctx.metrics().handled(F::NAME, started);
            }
            tokio::select! {
                _ = lease.lost() => return,
                _ = tokio::time::sleep(RECHECK), if !waiting.is_empty() => {
                    dirty = waiting.clone();
                }
                event = events.next() => {
                    let Some(mut event) = event else {
                        break; // fell behind: resync
                    };
                    // This event and whatever else is already there, as one batch.
                    loop {
                        if event.key.resource == f.resource() {
                            if event.kind != EventType::Deleted && waits_for(&f, &event.object) {
                                waiting.insert(event.key.clone());
                            } else {
                                waiting.remove(&event.key);
                            }
                        }
                        dirty.extend(
                            waiting
                                .iter()
                                .filter(|w| **w == event.key || f.concerns(w, &event.key))
                                .cloned(),
                        );
                        match events.next().now_or_never() {
                            Some(Some(next)) => event = next,
                            Some(None) => break,
                            None => break,
                        }
                    }
                }
            }
        }
    }
}
