//! A flow: one resource type travelling one way, with a watch on each side.
//!
//! A downsync flow watches every upstream object of its type (the sources) and, downstream,
//! only this syncer's copies (label `ferry.dev/syncer=<name>`). An upsync flow is the
//! mirror image. Every change on either side queues the object's key; every completed
//! (re)list on either side queues every key of both sides.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::watcher;
use parking_lot::Mutex;

use ferry_api::well_known::{syncer_label_value, SYNCER_LABEL};

use super::problems::{permission_message, Problem, ProblemKey};
use super::raw::RawObject;
use super::retry::{needs_new_stream, WatchFailure, WatchRetry};
use super::store::{ObjectRef, ObjectStore};
use super::{Engine, Key};
use crate::selection::{Direction, WatchTarget};
use crate::side::Side;
use crate::transform::ObjectType;

/// Identifies a flow in queue keys.
pub type FlowId = u64;

/// Which of a flow's two watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// All objects of the type on the source side.
    Sources,
    /// This syncer's copies on the destination side.
    Copies,
}

/// One resource type travelling one way.
pub struct Flow {
    /// Its id in queue keys.
    pub id: FlowId,
    /// The resource type and direction.
    pub target: WatchTarget,
    /// For `kube::Api<DynamicObject>`.
    pub api_resource: ApiResource,
    /// `apiVersion` and `kind` of its objects.
    pub ty: ObjectType,
    /// Whether the upstream resource has a `/status` subresource (where reported state
    /// and upsynced status are written).
    pub status_subresource: bool,
    /// Objects on the source side.
    pub sources: ObjectStore,
    /// This syncer's copies on the destination side.
    pub copies: ObjectStore,
    retiring: AtomicBool,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Flow {
    /// A flow for `target`; start its watches with [`Flow::start`].
    pub fn new(id: FlowId, target: WatchTarget, status_subresource: bool) -> Arc<Flow> {
        let id_ = &target.id;
        let api_resource = ApiResource {
            group: id_.group.clone(),
            version: id_.version.clone(),
            api_version: id_.api_version(),
            kind: target.kind.clone(),
            plural: id_.resource.clone(),
        };
        Arc::new(Flow {
            id,
            ty: ObjectType::from(&target),
            target,
            api_resource,
            status_subresource,
            sources: ObjectStore::default(),
            copies: ObjectStore::default(),
            retiring: AtomicBool::new(false),
            tasks: Mutex::new(vec![]),
        })
    }

    /// Where objects come from.
    pub fn source_side(&self) -> Side {
        match self.target.direction {
            Direction::Downsync => Side::Upstream,
            Direction::Upsync => Side::Downstream,
        }
    }

    /// Where copies go.
    pub fn dest_side(&self) -> Side {
        match self.target.direction {
            Direction::Downsync => Side::Downstream,
            Direction::Upsync => Side::Upstream,
        }
    }

    /// The resource as metric labels and messages show it (`apps/v1/deployments`).
    pub fn resource_name(&self) -> String {
        self.target.id.to_string()
    }

    /// Whether the configs no longer name this resource type: every copy is deleted,
    /// then the flow stops.
    pub fn is_retiring(&self) -> bool {
        self.retiring.load(Ordering::Relaxed)
    }

    /// Marks the flow retiring (or not).
    pub fn set_retiring(&self, retiring: bool) {
        self.retiring.store(retiring, Ordering::Relaxed);
    }

    /// Whether both stores are listed, so reconciling can trust absence.
    pub fn is_synced(&self) -> bool {
        self.sources.is_synced() && self.copies.is_synced()
    }

    /// Whether both watches have either listed, found the resource not served, or been
    /// refused (both reported in the conditions): the initial sync does not wait for them.
    pub fn is_settled(&self) -> bool {
        let settled = |s: &ObjectStore| s.is_synced() || s.is_not_served() || s.is_denied();
        settled(&self.sources) && settled(&self.copies)
    }

    /// Every key of both sides.
    pub fn all_keys(&self) -> Vec<Key> {
        let mut objects = self.sources.keys();
        objects.extend(self.copies.keys());
        objects.sort();
        objects.dedup();
        objects
            .into_iter()
            .map(|object| Key {
                flow: self.id,
                object,
            })
            .collect()
    }

    /// Starts both watches.
    pub fn start(self: &Arc<Self>, engine: &Arc<Engine>) {
        let mut tasks = self.tasks.lock();
        for role in [Role::Sources, Role::Copies] {
            tasks.push(tokio::spawn(watch(engine.clone(), self.clone(), role)));
        }
    }

    /// Stops both watches.
    pub fn stop(&self) {
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }
}

/// Runs one watch of `flow` until aborted, retrying with backoff.
async fn watch(engine: Arc<Engine>, flow: Arc<Flow>, role: Role) {
    let (side, store) = match role {
        Role::Sources => (flow.source_side(), &flow.sources),
        Role::Copies => (flow.dest_side(), &flow.copies),
    };
    let client = engine.side(side).client.clone();
    let api: Api<RawObject> = Api::all_with(client, &flow.api_resource);
    let mut config = watcher::Config::default();
    if role == Role::Copies {
        config = config.labels(&format!("{SYNCER_LABEL}={}", syncer_label_value(&engine.name)));
    }
    let id = &flow.target.id;
    let mut stream = watcher(api.clone(), config.clone()).boxed();
    let mut retry = WatchRetry::new(engine.timing.max_watch_backoff);
    let mut failed = false;
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                watch_failed(&engine, &flow, side, store, &e);
                if needs_new_stream(&e) {
                    stream = watcher(api.clone(), config.clone()).boxed();
                }
                failed = true;
                let next = retry.failed(WatchFailure::of(&e));
                engine.pause_before_retry(side, next).await;
                continue;
            }
        };
        match event {
            watcher::Event::InitDone => retry.listed(),
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => retry.delivered(),
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
        if std::mem::take(&mut failed) {
            store.set_denied(false);
            if engine.problems.clear(side, &id.group, &id.resource, "list") {
                engine.status_now.notify_one();
            }
        }
        match event {
            watcher::Event::Apply(obj) => {
                if let Some((object, true)) = store.apply(&obj) {
                    engine.queue.add(Key {
                        flow: flow.id,
                        object,
                    });
                }
            }
            watcher::Event::Delete(obj) => {
                if let Some(object) = store.delete(&obj) {
                    engine.queue.add(Key {
                        flow: flow.id,
                        object,
                    });
                }
            }
            watcher::Event::Init => store.begin_list(),
            watcher::Event::InitApply(obj) => {
                let visible = store.list_item(&obj);
                if let (Some(object), Role::Sources) = (visible, role) {
                    // A streaming first list: copy each source as it arrives, once the
                    // copies are known (absence of a copy means "create").
                    if flow.copies.is_synced() {
                        engine.queue.add(key(&flow, object));
                    }
                }
            }
            watcher::Event::InitDone => {
                let streamed = store.finish_list();
                if engine.problems.clear(side, &id.group, &id.resource, "list") {
                    engine.status_now.notify_one();
                }
                match role {
                    // Every source was queued as it arrived (or when the copies were
                    // listed); what is left is the copies whose sources may be gone. (Not
                    // yet listed copies queue everything when they are.)
                    Role::Sources if streamed && flow.copies.is_synced() => {
                        engine
                            .queue
                            .add_all(flow.copies.keys().into_iter().map(|o| key(&flow, o)));
                    }
                    // The sources are still streaming in: queue those seen so far.
                    Role::Copies if !flow.sources.is_synced() => {
                        engine
                            .queue
                            .add_all(flow.sources.keys().into_iter().map(|o| key(&flow, o)));
                    }
                    // Full-set reconcile: catches whatever changed while not watching.
                    _ if flow.is_synced() => engine.queue.add_all(flow.all_keys()),
                    _ => {}
                }
            }
        }
    }
}

fn watch_failed(engine: &Engine, flow: &Flow, side: Side, store: &ObjectStore, error: &watcher::Error) {
    let id = &flow.target.id;
    let source = match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => Some(e),
        _ => None,
    };
    let code = match (source, error) {
        (Some(kube::Error::Api(status)), _) => Some(status.code),
        (_, watcher::Error::WatchError(status)) => Some(status.code),
        _ => None,
    };
    let key = ProblemKey {
        side,
        group: id.group.clone(),
        resource: id.resource.clone(),
        verb: "list".into(),
    };
    match code {
        Some(403) => {
            store.set_denied(true);
            let problem = Problem {
                permission: true,
                message: permission_message(side, "list and watch", &id.to_string(), &error.to_string()),
            };
            if engine.problems.set(key, problem) {
                engine.status_now.notify_one();
            }
        }
        Some(404) => {
            store.set_not_served(true);
            engine.problems.set(
                key,
                Problem {
                    permission: false,
                    message: format!(
                        "resource {id} is not served on the {side} side: install its CRD there; \
                         its objects wait and sync once it is established"
                    ),
                },
            );
        }
        Some(_) => {}
        None if WatchFailure::of(error) == WatchFailure::Unreachable => engine.lost_contact(side, error),
        None => {}
    }
    tracing::debug!(resource = %id, %side, ?code, "watch failed: {error}");
}

/// The key of an object of `flow`.
pub fn key(flow: &Flow, object: ObjectRef) -> Key {
    Key {
        flow: flow.id,
        object,
    }
}
