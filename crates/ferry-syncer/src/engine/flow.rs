//! A flow: one resource type travelling one way, with a watch on each side.
//!
//! A downsync flow watches every upstream object of its type (the sources) and, downstream,
//! only this syncer's copies (selected by the profile's
//! [`crate::profile::Marks::copy_selector`]). An
//! upsync flow is the mirror image. Each side has its own resource type (the profile's
//! [`Mapping`] may rename it) and its own keys: a source's key maps to its copy's, a
//! copy's key back to its source's, and the queue [`Key`] carries both. Every change on
//! either side queues the object's key; every completed (re)list on either side queues
//! every key of both sides.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::core::ApiResource;
use kube::runtime::watcher;
use parking_lot::Mutex;

use super::problems::{permission_message, Problem, ProblemKey};
use super::raw::RawObject;
use super::retry::{needs_new_stream, WatchFailure, WatchRetry};
use super::store::{ObjectRef, ObjectStore};
use super::{Engine, Key};
use crate::profile::{Mapping, ResourceType};
use crate::selection::{Direction, ResourceId, WatchTarget};
use crate::side::Side;
use crate::transform::ObjectType;

/// Identifies a flow in queue keys.
pub type FlowId = u64;

/// Objects per page of a source list (kube-rs reads 500): a tenth of the first page's
/// wait before the first copy, for more requests on a large list.
const SOURCE_PAGE_SIZE: u32 = 100;

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
    /// The source side's resource type, and the direction.
    pub target: WatchTarget,
    /// The destination side's resource type (the profile's [`Mapping::dest_type`]).
    pub dest: ResourceType,
    source_resource: ApiResource,
    dest_resource: ApiResource,
    source_ty: ObjectType,
    dest_ty: ObjectType,
    /// Whether the upstream resource has a `/status` subresource (where reported state
    /// and upsynced status are written).
    pub status_subresource: bool,
    /// Objects on the source side.
    pub sources: ObjectStore,
    /// This syncer's copies on the destination side.
    pub copies: ObjectStore,
    /// Sources (by uid) this syncer appended its finalizer to whose store entry has
    /// not shown it yet: the store may still hold a version from before that append
    /// (another syncer's append, arriving between the patch and its answer), which
    /// must not make the syncer append its finalizer a second time.
    pub appended: Mutex<std::collections::HashSet<String>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Flow {
    /// A flow from `target` (the source type) to `dest`; start its watches with
    /// [`Flow::start`]. `upstream_clusters`: the upstream spans logical clusters, so its
    /// store keys objects with their cluster (see [`crate::profile::Profile::upstream_clusters`]).
    pub fn new(
        id: FlowId,
        target: WatchTarget,
        dest: ResourceType,
        status_subresource: bool,
        upstream_clusters: bool,
    ) -> Arc<Flow> {
        let source = ResourceType::from(&target);
        let store = |side: Side| {
            if upstream_clusters && side == Side::Upstream {
                ObjectStore::clustered()
            } else {
                ObjectStore::default()
            }
        };
        let (sources, copies) = match target.direction {
            Direction::Downsync => (store(Side::Upstream), store(Side::Downstream)),
            Direction::Upsync => (store(Side::Downstream), store(Side::Upstream)),
        };
        Arc::new(Flow {
            id,
            source_resource: source.api_resource(),
            source_ty: source.object_type(),
            dest_resource: dest.api_resource(),
            dest_ty: dest.object_type(),
            target,
            dest,
            status_subresource,
            sources,
            copies,
            appended: Mutex::default(),
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

    /// The source resource as metric labels and messages show it (`apps/v1/deployments`).
    pub fn resource_name(&self) -> String {
        self.target.id.to_string()
    }

    /// The resource type on `side`.
    pub fn resource_id(&self, side: Side) -> &ResourceId {
        if side == self.source_side() {
            &self.target.id
        } else {
            &self.dest.id
        }
    }

    /// For `kube::Api<..>` on `side`.
    pub fn api_resource(&self, side: Side) -> &ApiResource {
        if side == self.source_side() {
            &self.source_resource
        } else {
            &self.dest_resource
        }
    }

    /// `apiVersion` and `kind` of the objects on `side`.
    pub fn object_type(&self, side: Side) -> &ObjectType {
        if side == self.source_side() {
            &self.source_ty
        } else {
            &self.dest_ty
        }
    }

    /// The key of the source object `source`: its copy's key mapped by `mapping`.
    pub fn source_key(&self, mapping: &dyn Mapping, source: ObjectRef) -> Key {
        let dest = mapping.dest_ref(&self.target, &source);
        Key::new(self.id, Some(source), dest)
    }

    /// The key of the copy `dest`: its source's key mapped back by `mapping` (none if
    /// it maps to no source).
    pub fn copy_key(&self, mapping: &dyn Mapping, dest: ObjectRef) -> Key {
        Key::new(self.id, mapping.source_ref(&self.target, &dest), dest)
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
    pub fn all_keys(&self, mapping: &dyn Mapping) -> Vec<Key> {
        let mut keys: Vec<Key> = self
            .sources
            .keys()
            .into_iter()
            .map(|source| self.source_key(mapping, source))
            .collect();
        keys.extend(
            self.copies
                .keys()
                .into_iter()
                .map(|dest| self.copy_key(mapping, dest)),
        );
        keys.sort();
        keys.dedup();
        keys
    }

    /// The keys of every source.
    fn source_keys(&self, mapping: &dyn Mapping) -> Vec<Key> {
        let sources = self.sources.keys().into_iter();
        sources.map(|source| self.source_key(mapping, source)).collect()
    }

    /// The keys of every copy.
    fn copy_keys(&self, mapping: &dyn Mapping) -> Vec<Key> {
        let copies = self.copies.keys().into_iter();
        copies.map(|dest| self.copy_key(mapping, dest)).collect()
    }

    /// Starts both watches.
    pub fn start(self: &Arc<Self>, engine: &Arc<Engine>) {
        let mut tasks = self.tasks.lock();
        for role in [Role::Sources, Role::Copies] {
            tasks.push(crate::spawn(watch(engine.clone(), self.clone(), role)));
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
    // A side that spans clusters is watched across all of them.
    let client = engine
        .side(side)
        .client_for(flow.target.direction, store.is_clustered().then_some("*"));
    let api: Api<RawObject> = Api::all_with(client, flow.api_resource(side));
    let mut config = watcher::Config::default();
    match role {
        Role::Copies => config = config.labels(&engine.profile.marks.copy_selector(side)),
        // Sources are copied as their list's pages arrive: smaller pages start the
        // first copies sooner, and the later pages are read while those are written.
        Role::Sources => config = config.page_size(SOURCE_PAGE_SIZE),
    }
    let mapping = &*engine.profile.mapping;
    let key = |object: ObjectRef| match role {
        Role::Sources => flow.source_key(mapping, object),
        Role::Copies => flow.copy_key(mapping, object),
    };
    let id = flow.resource_id(side);
    let skipped = engine.metrics.changes_skipped(&flow.resource_name());
    // This syncer's own finalizer, the one a source's finalizers matter by.
    let own = match flow.target.direction {
        Direction::Downsync => engine.profile.marks.finalizer(),
        Direction::Upsync => None,
    };
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
                let applied = match role {
                    Role::Sources => store.apply_with(&obj, |old, new| {
                        let same = super::raw::only_others_finalizers_differ(old, new, own.as_deref());
                        if same {
                            skipped.inc();
                        }
                        !same
                    }),
                    Role::Copies => store.apply(&obj),
                };
                if let Some((object, true)) = applied {
                    mapping.learn(&flow.target, side, &object, &obj);
                    // While this syncer writes the object, the write's answer decides
                    // (its own echo queues nothing).
                    if !store.hold_for_write(&object, obj.metadata.resource_version.as_deref()) {
                        tracing::debug!(target: super::SYNC_LOG, resource = %id, %side, %object, "sync event: changed");
                        engine.enqueue(&flow, key(object));
                    }
                }
            }
            watcher::Event::Delete(obj) => {
                if let Some(object) = store.delete(&obj) {
                    engine.enqueue(&flow, key(object));
                }
            }
            watcher::Event::Init => store.begin_list(),
            watcher::Event::InitApply(obj) => {
                let visible = store.list_item(&obj);
                if let Some(object) = &visible {
                    mapping.learn(&flow.target, side, object, &obj);
                }
                if let (Some(object), Role::Sources) = (visible, role) {
                    // A streaming first list: copy each source as it arrives, once the
                    // copies are known (absence of a copy means "create").
                    if flow.copies.is_synced() {
                        engine.enqueue(&flow, key(object));
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
                        engine.enqueue_all(&flow, flow.copy_keys(mapping));
                    }
                    // The sources are still streaming in: queue those seen so far.
                    Role::Copies if !flow.sources.is_synced() => {
                        engine.enqueue_all(&flow, flow.source_keys(mapping));
                    }
                    // Full-set reconcile: catches whatever changed while not watching.
                    _ if flow.is_synced() => engine.enqueue_all(&flow, flow.all_keys(mapping)),
                    _ => {}
                }
            }
        }
    }
}

fn watch_failed(engine: &Engine, flow: &Flow, side: Side, store: &ObjectStore, error: &watcher::Error) {
    let id = flow.resource_id(side);
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
