//! The shape shared by controllers that finish deleting objects held by a
//! finalizer of theirs (namespace termination, CRD clean-up): they follow
//! the store's watch, keep the set of objects waiting for them, and step
//! each whenever something that may let it progress changes, in one pass
//! per batch of changes ([`follow`]). The set is rebuilt from the store
//! when the controller starts and whenever the watch falls behind, so a
//! deletion a restart interrupted is finished.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::follow::{self, Due, Follower};
use ferry_server::controller::ControllerContext;
use ferry_server::registry::ResourceInfo;
use ferry_server::service::propagation::PropagationPolicy;
use ferry_server::service::{self, DeleteOptions};
use ferry_server::storage::{ClusterScope, EventType, Expect, ObjectKey, StoredObject, WatchEvent};

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
    follow::spawn(
        ctx,
        Finalizer {
            f,
            waiting: BTreeSet::new(),
            dirty: BTreeSet::new(),
        },
    )
}

/// A finalizing controller following the store: the objects waiting for
/// it, and those to step in its next pass.
struct Finalizer<F> {
    f: F,
    waiting: BTreeSet<ObjectKey>,
    dirty: BTreeSet<ObjectKey>,
}

impl<F: Finalizing> Follower for Finalizer<F> {
    fn name(&self) -> &'static str {
        F::NAME
    }

    /// A change anywhere may let a waiting object progress.
    fn follows(&self, _storage_key: &str) -> bool {
        true
    }

    /// Everything stored that waits for the controller, each stepped next.
    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let (stored, _) = ctx.list(&ClusterScope::All, self.f.resource(), None, None);
            self.waiting = stored
                .into_iter()
                .filter(|(_, obj)| waits_for(&self.f, obj))
                .map(|(k, _)| k)
                .collect();
            self.dirty = self.waiting.clone();
        })
    }

    fn note(&mut self, _ctx: &ControllerContext, event: &WatchEvent) -> bool {
        if event.key.resource == self.f.resource() {
            if event.kind != EventType::Deleted && waits_for(&self.f, &event.object) {
                self.waiting.insert(event.key.clone());
            } else {
                self.waiting.remove(&event.key);
            }
        }
        let f = &self.f;
        self.dirty.extend(
            self.waiting
                .iter()
                .filter(|w| **w == event.key || f.concerns(w, &event.key))
                .cloned(),
        );
        false
    }

    /// A pass at once for what changes concern, else every waiting object
    /// again after [`RECHECK`] without news.
    fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
        Box::pin(async move {
            if self.dirty.is_empty() {
                if self.waiting.is_empty() {
                    return std::future::pending().await;
                }
                tokio::time::sleep(RECHECK).await;
                self.dirty = self.waiting.clone();
            }
            Due::Pass
        })
    }

    fn pass<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for key in std::mem::take(&mut self.dirty) {
                match self.f.step(ctx, &key).await {
                    Ok(true) => {
                        self.waiting.remove(&key);
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(cluster = %key.cluster, name = %key.name, "{}: {e}", F::NAME),
                }
            }
        })
    }
}

/// Delete `objects`, the contents a finalizer waits for (of the resource
/// served as `info`), as `manager`: in the background, as Kubernetes'
/// namespace and CRD finalizers do. Not served (`None`: its CRD is gone or
/// invalid), nothing can finalize them, and they leave storage at once.
/// Returns how many are left; `what` names the controller in logs.
pub(crate) async fn delete_contents(
    ctx: &ControllerContext,
    info: Option<&ResourceInfo>,
    objects: Vec<(ObjectKey, Arc<StoredObject>)>,
    manager: &str,
    what: &str,
) -> Result<usize, String> {
    let mut remaining = 0;
    for (key, obj) in objects {
        match info {
            Some(info) if !crate::is_deleting(&obj) => {
                let options = DeleteOptions {
                    propagation: Some(PropagationPolicy::Background),
                    ..Default::default()
                };
                let request = ctx
                    .request_at(info.clone(), &key, "delete", manager)
                    .map_err(|e| e.message)?;
                match service::delete(&request, &options).await {
                    Ok(_) => {}
                    Err(e) if e.code == 404 => {}
                    Err(e) => tracing::debug!(object = %key.name, "{what}: {}", e.message),
                }
            }
            Some(_) => {}
            None => {
                if let Ok(c) = ctx.purge(key.clone(), Expect::Exists) {
                    let _ = c.durable().await;
                }
            }
        }
        if ctx.get(&key).is_some() {
            remaining += 1;
        }
    }
    Ok(remaining)
}
