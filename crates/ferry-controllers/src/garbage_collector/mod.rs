//! The garbage collector: deletes objects whose `ownerReferences` owners are
//! all gone, as kube-controller-manager's garbage collector does, in every
//! workspace separately.
//!
//! - A delete request's propagation policy ([`policy`]) is recorded on the
//!   owner by the delete path: nothing for `Background` (the owner goes at
//!   once), the `foregroundDeletion` or `orphan` finalizer otherwise.
//! - The collector follows the store's watch ([`follow`]) and keeps a
//!   [`index::DependentsIndex`] (owner uid → dependents). Only objects whose
//!   stored JSON mentions `ownerReferences` or `deletionTimestamp` are parsed.
//! - What needs a look goes into a [`queue::WorkQueue`]: a dependent whose
//!   owner was deleted or whose references changed, an owner waiting for
//!   the collector. Workers decide ([`decide`]) from the live store and act
//!   through the same delete and patch paths as API clients, so finalizers,
//!   namespace termination, watch events and after-write hooks all apply.
//! - At start (and whenever the watch falls behind) the index is rebuilt
//!   from the store and every dependent and waiting owner is looked at
//!   again, so work left by a restart is picked up.
//! - A failure on one object is logged and retried with backoff.

pub mod decide;
pub mod index;
pub mod owners;
/// Propagation policies belong to the delete path; the collector honours them.
pub use ferry_server::service::propagation as policy;
pub mod queue;
mod reconcile;

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::follow::{self, Due, Follower};
use ferry_server::controller::ControllerContext;
use ferry_server::storage::{ClusterScope, ObjectKey, WatchEvent};
use index::DependentsIndex;
use queue::WorkQueue;
pub use reconcile::CollectError;

/// What the collector looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    /// An object with owner references: is any owner left?
    Dependent(ObjectKey),
    /// An owner being deleted that waits for the collector (`foregroundDeletion` or `orphan`).
    Owner(ObjectKey),
}

/// Items processed at once (deletes wait for durable commits, so a few run side by side).
const WORKERS: usize = 8;

/// Start the collector; it runs while `ctx`'s lease is held. Await the
/// handle to know it has stopped writing.
pub fn spawn(ctx: ControllerContext) -> tokio::task::JoinHandle<()> {
    let collector = GarbageCollector {
        ctx: ctx.clone(),
        index: Arc::default(),
        queue: WorkQueue::default(),
        workers: JoinSet::new(),
        in_process: HashMap::new(),
    };
    tokio::spawn(async move {
        let mut collector = follow::run(ctx, collector).await;
        collector.workers.shutdown().await;
    })
}

type Outcome = (Work, Result<Vec<Work>, CollectError>);

/// The collector's state: the index, the queue, and the items in process.
struct GarbageCollector {
    ctx: ControllerContext,
    index: Arc<Mutex<DependentsIndex>>,
    queue: WorkQueue<Work>,
    workers: JoinSet<Outcome>,
    in_process: HashMap<tokio::task::Id, Work>,
}

impl Follower for GarbageCollector {
    /// Any object may have owners, or be one.
    fn follows(&self, _storage_key: &str) -> bool {
        true
    }

    /// Index everything stored and queue all pending work.
    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let stored = ctx
                .resource_keys()
                .into_iter()
                .flat_map(|resource| ctx.list(&ClusterScope::All, &resource, None, None).0);
            let pending = self.index.lock().reset(stored);
            tracing::debug!(pending = pending.len(), "garbage collector (re)built its index");
            self.queue.clear();
            for w in pending {
                self.queue.add(w);
            }
        })
    }

    fn changed<'a>(&'a mut self, _ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for w in self.index.lock().observe(event) {
                self.queue.add(w);
            }
        })
    }

    /// The workers: ready items start, finished ones queue their
    /// follow-up work or their retry. Never due: they run between changes.
    fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
        Box::pin(self.work())
    }
}

impl GarbageCollector {
    async fn work(&mut self) -> Due {
        loop {
            self.start_ready();
            let retry = self.queue.next_retry();
            let idle = self.workers.len() < WORKERS;
            tokio::select! {
                Some(joined) = self.workers.join_next_with_id(), if !self.workers.is_empty() => self.finished(joined),
                _ = sleep_until(retry), if retry.is_some() && idle => {}
                else => std::future::pending::<()>().await,
            }
        }
    }

    /// Hand ready items to workers, up to [`WORKERS`] at a time.
    fn start_ready(&mut self) {
        while self.workers.len() < WORKERS {
            let Some(item) = self.queue.next(Instant::now()) else {
                return;
            };
            let (ctx, index, work) = (self.ctx.clone(), self.index.clone(), item.clone());
            let handle = self.workers.spawn(async move {
                let result = reconcile::process(&ctx, &index, &work).await;
                (work, result)
            });
            self.in_process.insert(handle.id(), item);
        }
    }

    /// A worker is done: queue its follow-up work, or its retry.
    fn finished(&mut self, joined: Result<(tokio::task::Id, Outcome), tokio::task::JoinError>) {
        let (item, result) = match joined {
            Ok((id, outcome)) => {
                self.in_process.remove(&id);
                outcome
            }
            Err(e) => {
                let Some(item) = self.in_process.remove(&e.id()) else {
                    return;
                };
                (item, Err(CollectError::Panicked(e.to_string())))
            }
        };
        match result {
            Ok(follow_up) => {
                self.queue.done(item, true, Instant::now());
                for w in follow_up {
                    self.queue.add(w);
                }
            }
            Err(e) => {
                let delay = self.queue.done(item.clone(), false, Instant::now());
                let failures = self.queue.failures(&item);
                // Warn at the 1st, 2nd, 4th, 8th... failure in a row, so a
                // lasting problem stays visible without flooding the log.
                if failures.is_power_of_two() {
                    tracing::warn!(failures, retry_in = ?delay, "garbage collector: {e}");
                } else {
                    tracing::debug!(failures, retry_in = ?delay, "garbage collector: {e}");
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}
