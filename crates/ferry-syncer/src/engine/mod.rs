//! The core loop, shared by every profile: watches on both sides per resource type
//! ([`flow`]), a keyed work queue with per-key backoff ([`queue`]), `--workers` concurrent
//! level-based reconcilers ([`reconcile`]), and the resolver that turns the profile's
//! selection plus discovery into the set of flows. What differs between profiles is
//! behind [`crate::profile::Profile`].

pub mod drifts;
pub mod events;
mod finalizer_patch;
pub mod flow;
pub mod orphans;
pub mod problems;
pub mod queue;
pub mod raw;
pub mod reconcile;
pub mod refusals;
pub mod retry;
pub mod store;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::metrics::{Metrics, SyncDirection};
use crate::profile::{Plan, Profile};
use crate::selection::{Direction, DiscoveredResource, Resolution, WatchTarget};
use crate::side::{serves, Reachability, Side, SideClient};

pub use flow::{Flow, FlowId};
pub use orphans::OrphanCleaner;
pub use problems::Problems;
pub use queue::WorkQueue;
pub use retry::{NextAttempt, WatchFailure, WatchRetry};
pub use store::ObjectRef;

/// The log target of what the syncer does to objects: each copy written or
/// deleted and each status returned (INFO, shown from `-v 2`), each key reconciled
/// (DEBUG, from `-v 3`). The CLI's `-v` levels filter on it.
pub const SYNC_LOG: &str = "ferry_syncer::sync";

/// How often a side that stopped answering is probed, so its return is noticed at once.
pub const RECONNECT_PROBE_PERIOD: Duration = Duration::from_millis(250);
/// How long a probe waits for `GET /version` while the side answers...
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// ... and while it does not (a quicker verdict, as it is asked more often).
const RECONNECT_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// A queued object: which flow, and the object's key on each side.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The flow (resource types and direction).
    pub flow: FlowId,
    refs: KeyRefs,
}

/// Both references, held once when they are the same (every key of a profile that
/// keeps names): keys fill the queue by the ten thousand during an initial sync, and
/// the queue keeps its capacity afterwards.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum KeyRefs {
    Same(ObjectRef),
    Mapped(Box<(Option<ObjectRef>, ObjectRef)>),
}

impl Key {
    /// The key of the source `source` (`None` for a copy that maps back to no source)
    /// whose copy is `dest`.
    pub fn new(flow: FlowId, source: Option<ObjectRef>, dest: ObjectRef) -> Key {
        let refs = if source.as_ref() == Some(&dest) {
            KeyRefs::Same(dest)
        } else {
            KeyRefs::Mapped(Box::new((source, dest)))
        };
        Key { flow, refs }
    }

    /// The source object; `None` for a copy that maps back to no source (see
    /// [`crate::profile::Mapping::source_ref`]).
    pub fn source(&self) -> Option<&ObjectRef> {
        match &self.refs {
            KeyRefs::Same(object) => Some(object),
            KeyRefs::Mapped(refs) => refs.0.as_ref(),
        }
    }

    /// The copy on the destination side (which may not exist yet).
    pub fn dest(&self) -> &ObjectRef {
        match &self.refs {
            KeyRefs::Same(object) => object,
            KeyRefs::Mapped(refs) => &refs.1,
        }
    }
}

impl std::fmt::Display for Key {
    /// The source (`ns/name`), followed by where its copy lands if that differs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.source() {
            Some(source) if source == self.dest() => write!(f, "{source}"),
            Some(source) => write!(f, "{source} (copy {})", self.dest()),
            None => write!(f, "copy {} (no source)", self.dest()),
        }
    }
}

/// An upstream object, as refusals and drifts name it: what the user placed.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct UpstreamObject {
    /// `group/resource` (`core/configmaps` for the core group).
    pub resource: String,
    /// Its logical cluster, on an upstream that spans several.
    pub cluster: Option<String>,
    /// Its namespace (empty for a cluster-scoped object).
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Timers and retry limits.
#[derive(Clone, Debug)]
pub struct Timing {
    /// Discovery re-read period while something is missing.
    pub discovery_refresh: Duration,
    /// Reachability check period while a side answers (see [`RECONNECT_PROBE_PERIOD`]).
    pub probe_period: Duration,
    /// Longest delay between watch retries.
    pub max_watch_backoff: Duration,
}

/// Discovery of both sides, as last read successfully.
#[derive(Clone, Default)]
pub struct DiscoverySnapshot {
    /// Upstream resources.
    pub upstream: Arc<Vec<DiscoveredResource>>,
    /// Downstream resources.
    pub downstream: Arc<Vec<DiscoveredResource>>,
}

/// What resolving the selection against a discovery snapshot found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flows {
    /// Something selected is not served (on the side it must be).
    Missing,
    /// Flows were started or stopped (or would be).
    Changed,
    /// The flows running are the ones wanted.
    Unchanged,
}

/// The running syncer's shared state.
pub struct Engine {
    /// The syncer's name (the SyncTarget name); its copies carry it.
    pub name: String,
    /// What this kind of syncer selects, how it maps and marks copies.
    pub profile: Profile,
    /// Whether downstream status is written back upstream.
    pub return_status: bool,
    /// The version reported with each heartbeat ([`crate::SyncerOptions::version`]).
    pub version: String,
    /// Timers.
    pub timing: Timing,
    /// The upstream workspace.
    pub up: SideClient,
    /// The workload cluster.
    pub down: SideClient,
    /// Objects to reconcile.
    pub queue: Arc<WorkQueue<Key>>,
    flows: RwLock<HashMap<FlowId, Arc<Flow>>>,
    next_flow: AtomicU64,
    /// Standing problems for the conditions.
    pub problems: Problems,
    /// Deletes copies of resource types no longer synced.
    pub orphans: OrphanCleaner,
    /// Metrics.
    pub metrics: Metrics,
    /// Discovery as last read.
    pub discovery: RwLock<Option<DiscoverySnapshot>>,
    /// Wakes the resolver (config changed, a side came back).
    pub resolve_now: tokio::sync::Notify,
    /// Wakes the status writer (conditions may have changed).
    pub status_now: tokio::sync::Notify,
    initial_sync: AtomicBool,
    /// Last failure message per key, so each distinct failure posts one Event.
    pub last_errors: Mutex<HashMap<Key, String>>,
    /// Objects an API server refused, until they sync or go.
    pub refusals: refusals::Refusals,
    /// Copies changed in their cluster that the syncer restored, until they go.
    pub drifts: drifts::Drifts,
    /// Keys whose work waits for an unreachable side, queued again when it answers.
    waiting: Mutex<HashMap<Side, HashSet<Key>>>,
    /// Destination namespaces no longer wanted, and since when (see
    /// [`crate::profile::Profile::namespace_clean_delay`]).
    unwanted_namespaces: Mutex<HashMap<String, Instant>>,
    /// Destination namespaces known to exist (see [`Engine::namespace_cell`]).
    known_namespaces: Mutex<HashMap<NamespaceAt, Arc<tokio::sync::OnceCell<()>>>>,
}

/// A namespace as one client addresses it: its side, the direction whose client
/// writes there (kcp TMC writes upsynced objects through another URL), its logical
/// cluster and its name.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct NamespaceAt {
    pub side: Side,
    pub direction: Direction,
    pub cluster: Option<Arc<str>>,
    pub name: String,
}

impl Engine {
    /// A new engine over both sides' clients.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: String,
        profile: Profile,
        return_status: bool,
        version: String,
        timing: Timing,
        up: SideClient,
        down: SideClient,
        min_backoff: Duration,
        max_backoff: Duration,
    ) -> Arc<Engine> {
        let metrics = Metrics::for_profile(profile.name);
        Arc::new(Engine {
            name,
            profile,
            return_status,
            version,
            timing,
            up,
            down,
            queue: WorkQueue::new(min_backoff, max_backoff),
            flows: RwLock::new(HashMap::new()),
            next_flow: AtomicU64::new(1),
            problems: Problems::default(),
            orphans: OrphanCleaner::default(),
            metrics,
            discovery: RwLock::new(None),
            resolve_now: tokio::sync::Notify::new(),
            status_now: tokio::sync::Notify::new(),
            initial_sync: AtomicBool::new(false),
            last_errors: Mutex::new(HashMap::new()),
            refusals: refusals::Refusals::default(),
            drifts: drifts::Drifts::default(),
            waiting: Mutex::new(HashMap::new()),
            unwanted_namespaces: Mutex::new(HashMap::new()),
            known_namespaces: Mutex::new(HashMap::new()),
        })
    }

    /// The client of `side`.
    pub fn side(&self, side: Side) -> &SideClient {
        match side {
            Side::Upstream => &self.up,
            Side::Downstream => &self.down,
        }
    }

    /// The profile's configuration source changed the selection: every object is
    /// judged again, and the flows are re-resolved.
    pub fn selection_changed(&self) {
        self.reconcile_everything();
        self.resolve_now.notify_one();
        self.status_now.notify_one();
    }

    /// The flow with `id`.
    pub fn flow(&self, id: FlowId) -> Option<Arc<Flow>> {
        self.flows.read().get(&id).cloned()
    }

    /// Every flow.
    pub fn flows(&self) -> Vec<Arc<Flow>> {
        self.flows.read().values().cloned().collect()
    }

    /// Queues every object of every flow.
    pub fn reconcile_everything(&self) {
        for flow in self.flows() {
            if flow.is_synced() {
                self.enqueue_all(&flow, flow.all_keys(&*self.profile.mapping));
            }
        }
    }

    /// Queues `key` of `flow`: a Namespace ahead of the queue, since the objects
    /// going into it wait for it. (A new namespace's 500 objects listed before it
    /// were each refused with 404 until its turn came.)
    pub fn enqueue(&self, flow: &Flow, key: Key) {
        if flow.dest.id.is_namespaces() {
            self.queue.add_first(key);
        } else {
            self.queue.add(key);
        }
    }

    /// [`Engine::enqueue`] for many keys of `flow`.
    pub fn enqueue_all(&self, flow: &Flow, keys: impl IntoIterator<Item = Key>) {
        for key in keys {
            self.enqueue(flow, key);
        }
    }

    /// Whether the initial sync has completed.
    pub fn initial_sync_done(&self) -> bool {
        self.initial_sync.load(Ordering::Relaxed)
    }

    /// Ready: initial sync done and both sides reachable. `Err` says why not.
    pub fn readiness(&self) -> Result<(), String> {
        let mut reasons = vec![];
        for side in [Side::Upstream, Side::Downstream] {
            if !self.side(side).is_connected() {
                reasons.push(format!("the {side} server is unreachable"));
            }
        }
        if !self.initial_sync_done() {
            reasons.push("the initial sync has not completed".to_string());
        }
        if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join("; "))
        }
    }

    /// A request to `side` got no answer (`error` says how). The first one after contact
    /// is logged; work for the side then waits for it ([`Engine::wait_for_side`]) until
    /// a probe gets an answer ([`Engine::regained_contact`]).
    pub fn lost_contact(&self, side: Side, error: &dyn std::fmt::Display) {
        let Some(before) = self.side(side).mark_unreachable() else {
            return;
        };
        match before {
            Reachability::Reachable => tracing::warn!(
                %side,
                "lost contact with the {side} server: {error}; its work waits until it answers again"
            ),
            _ => tracing::warn!(
                %side,
                "cannot reach the {side} server: {error}; its work waits until it answers"
            ),
        }
        self.metrics.connection(side, false);
        self.status_now.notify_one();
    }

    /// `side` answered a probe: if it had not been answering, the work that waited for it
    /// is queued again, and watches waiting for it retry.
    pub fn regained_contact(&self, side: Side) {
        let Some(before) = self.side(side).mark_reachable() else {
            return;
        };
        self.metrics.connection(side, true);
        // Marked reachable first: a key is either parked before this takes them, or sees
        // the side reachable and is not parked (see `wait_for_side`).
        let keys = self.waiting.lock().remove(&side).unwrap_or_default();
        if let Reachability::Unreachable { since } = before {
            tracing::info!(
                %side,
                waiting = keys.len(),
                "the {side} server answers again after {:.1?}; resuming its work",
                since.elapsed()
            );
            self.resolve_now.notify_one();
        }
        self.queue.add_all(keys);
        self.status_now.notify_one();
    }

    /// `side`'s server moved (its client was [`SideClient::retarget`]ed): every watch
    /// starts again there with a fresh list, since the old server may still answer and
    /// its resource versions mean nothing at the new one, and the flows are resolved
    /// again against the new server's discovery. Work waiting for the side resumes when
    /// the new server answers a probe.
    pub fn moved(self: &Arc<Self>, side: Side) {
        for flow in self.flows() {
            flow.stop();
            flow.start(self);
        }
        self.resolve_now.notify_one();
        tracing::debug!(%side, "watches started again at the {side} server's new address");
    }

    /// Parks `key` until `side` answers again, if it does not answer now; returns whether
    /// it was parked (otherwise the caller retries it as usual).
    pub fn wait_for_side(&self, side: Side, key: &Key) -> bool {
        let mut waiting = self.waiting.lock();
        if !matches!(self.side(side).reachability(), Reachability::Unreachable { .. }) {
            return false;
        }
        waiting.entry(side).or_default().insert(key.clone());
        true
    }

    /// Keys waiting for `side` to answer.
    pub fn waiting_for(&self, side: Side) -> usize {
        self.waiting.lock().get(&side).map_or(0, HashSet::len)
    }

    /// One reconciler: takes keys until the queue shuts down.
    pub async fn work(self: Arc<Self>) {
        while let Some(key) = self.queue.next().await {
            if let Some(flow) = self.flow(key.flow) {
                // Work for a side that does not answer waits for it without trying.
                if !self.wait_for_side(flow.dest_side(), &key) {
                    self.reconcile_key(&flow, &key).await;
                }
            }
            self.queue.done(&key);
            self.metrics.queue_depth(self.queue.len());
        }
    }

    async fn reconcile_key(&self, flow: &Flow, key: &Key) {
        let started = Instant::now();
        tracing::debug!(target: SYNC_LOG, resource = %flow.target.id, object = %key, "sync event: reconciling");
        let result = reconcile::reconcile(self, flow, key).await;
        tracing::debug!(target: SYNC_LOG, resource = %flow.target.id, object = %key, ok = result.is_ok(), elapsed = ?started.elapsed(), "sync event: reconciled");
        let direction = match flow.target.direction {
            Direction::Downsync => SyncDirection::downsync,
            Direction::Upsync => SyncDirection::upsync,
        };
        self.metrics.observe(direction, started.elapsed().as_secs_f64());
        let error = match result {
            Ok(()) => {
                self.queue.forget(key);
                if !self.last_errors.lock().is_empty() {
                    self.last_errors.lock().remove(key);
                }
                if self.refusals.clear(key) {
                    self.status_now.notify_one();
                }
                return;
            }
            Err(error) => error,
        };
        self.metrics.error(direction, &flow.resource_name());
        if let Some(side) = error.unreachable_side() {
            // Said once for the side, not per object; the key resumes when the side does.
            self.lost_contact(side, &error);
            if self.wait_for_side(side, key) {
                self.queue.forget(key);
                tracing::debug!(resource = %flow.target.id, object = %key, "waits for the {side} server: {error}");
                return;
            }
        }
        if let Some(refusal) = self.refusal(flow, key, &error) {
            // Refused as sent: said once per change of message, retried slowly,
            // and shown to whoever placed the object through the profile's status.
            let reason = refusal.reason.clone();
            if self.refusals.set(key.clone(), refusal) {
                tracing::warn!(resource = %flow.target.id, object = %key, "refused: {}", log_line(&error));
                self.metrics.refused(&flow.resource_name(), &reason);
                self.status_now.notify_one();
            } else {
                tracing::debug!(resource = %flow.target.id, object = %key, "still refused: {error}");
            }
            reconcile::report_failure(self, flow, key, &error);
            self.queue
                .retry_with(key.clone(), refusals::SLOW_MIN, refusals::SLOW_MAX);
            return;
        }
        let failures = self.queue.failures(key);
        // A conflict (the object moved since it was read) is a race, retried from the
        // newer state once the watch brings it, which can take a second through
        // kcp TMC's syncer view: worth a warning only when it keeps failing.
        let warn_at = if error.code() == Some(409) { 8 } else { 3 };
        if failures == warn_at {
            tracing::warn!(resource = %flow.target.id, object = %key, "{} (retrying)", log_line(&error));
        } else {
            tracing::debug!(resource = %flow.target.id, object = %key, "{error}");
        }
        // A copy waiting a moment for its namespace's own copy (flows run
        // concurrently) is not worth an Event; one that keeps waiting is.
        let waiting = matches!(error, reconcile::SyncError::NamespaceMissing { .. });
        if !waiting || failures >= 3 {
            reconcile::report_failure(self, flow, key, &error);
        }
        self.queue.retry(key.clone());
    }

    /// `error` as a refusal of `key`'s object, if an API server refused the request
    /// as sent (see [`refusals::is_refusal`]). The object named is the upstream one,
    /// which is what the user placed.
    fn refusal(&self, flow: &Flow, key: &Key, error: &reconcile::SyncError) -> Option<refusals::Refusal> {
        let reconcile::SyncError::Request {
            side,
            source: kube::Error::Api(status),
            ..
        } = error
        else {
            return None;
        };
        if !refusals::is_refusal(status.code) {
            return None;
        }
        let upstream = self.upstream_object(flow, key);
        Some(refusals::Refusal {
            side: *side,
            resource: upstream.resource,
            cluster: upstream.cluster,
            namespace: upstream.namespace,
            name: upstream.name,
            reason: status.reason.clone(),
            message: refusals::server_message(&kube::Error::Api(status.clone())),
        })
    }

    /// The upstream object of `key` (the source of a downsynced copy, the copy of
    /// an upsynced object), which is what the user placed, named as refusals and
    /// drifts name it.
    pub fn upstream_object(&self, flow: &Flow, key: &Key) -> UpstreamObject {
        let upstream = match flow.target.direction {
            Direction::Downsync => key.source().unwrap_or(key.dest()),
            Direction::Upsync => key.dest(),
        };
        let id = flow.resource_id(Side::Upstream);
        let group = if id.group.is_empty() {
            "core"
        } else {
            id.group.as_str()
        };
        UpstreamObject {
            resource: format!("{group}/{}", id.resource),
            cluster: upstream.cluster.as_deref().map(String::from),
            namespace: upstream.namespace.clone().unwrap_or_default(),
            name: upstream.name.clone(),
        }
    }

    /// Re-resolves whenever woken, and every `discovery_refresh` while something is missing.
    pub async fn resolve_loop(self: Arc<Self>) {
        let mut last: Option<u64> = None;
        let mut refresh = true;
        loop {
            tokio::select! {
                _ = self.resolve_now.notified() => {}
                _ = tokio::time::sleep(self.timing.discovery_refresh) => {
                    if !refresh {
                        continue;
                    }
                }
            }
            if !self.profile.selection.is_loaded() {
                continue;
            }
            let unreachable =
                |side: Side| matches!(self.side(side).reachability(), Reachability::Unreachable { .. });
            if unreachable(Side::Upstream) || unreachable(Side::Downstream) {
                // The side's return wakes this loop.
                refresh = true;
                continue;
            }
            match self.resolve_once(&mut last).await {
                Ok(again) => refresh = again,
                Err((side, e)) if !matches!(e, kube::Error::Api(_) | kube::Error::SerdeError(_)) => {
                    self.lost_contact(side, &e);
                    refresh = true;
                }
                Err((side, e)) => {
                    tracing::warn!(
                        "reading discovery of the {side} side failed; retrying in {:?}: {e}",
                        self.timing.discovery_refresh
                    );
                    refresh = true;
                }
            }
            self.status_now.notify_one();
        }
    }

    /// Reads discovery, starts and retires flows. Returns whether to refresh again soon.
    ///
    /// A changed selection first starts what it adds from the discovery read last
    /// time, so its copies do not wait for both sides' discovery to be read again;
    /// what is read then decides (it stops what is no longer served). A change the
    /// last discovery resolves to the flows already running (other objects of the
    /// same types, as when a placement adds one) reads no discovery at all: at a
    /// fleet's scale every syncer reading both sides' discovery for each object
    /// placed was a large share of every server's work.
    async fn resolve_once(self: &Arc<Self>, last: &mut Option<u64>) -> Result<bool, (Side, kube::Error)> {
        if *last != Some(self.profile.selection.revision()) {
            let known = self.discovery.read().clone();
            if let Some(known) = known {
                if self.start_flows(&known, last, false) == Flows::Unchanged {
                    return Ok(false);
                }
            }
        }
        // An upstream that spans clusters is discovered across them.
        let up_cluster = self.profile.upstream_clusters.then_some("*");
        let (upstream, downstream) = tokio::join!(self.up.discover_in(up_cluster), self.down.discover());
        let upstream = upstream.map_err(|e| (Side::Upstream, e))?;
        let downstream = downstream.map_err(|e| (Side::Downstream, e))?;
        let snapshot = DiscoverySnapshot {
            upstream: Arc::new(upstream),
            downstream: Arc::new(downstream),
        };
        *self.discovery.write() = Some(snapshot.clone());
        Ok(self.start_flows(&snapshot, last, true) == Flows::Missing)
    }

    /// Starts the flows `discovery` resolves the selection to, and with `retire` stops
    /// those it no longer does. Says whether something selected is missing, or else
    /// whether the flows changed (or, without `retire`, would have).
    fn start_flows(
        self: &Arc<Self>,
        discovery: &DiscoverySnapshot,
        last: &mut Option<u64>,
        retire: bool,
    ) -> Flows {
        let (upstream, downstream) = (&*discovery.upstream, &*discovery.downstream);
        let revision = self.profile.selection.revision();
        let Plan { downsync, upsync } = self.profile.selection.resolve(upstream, downstream);
        let mut missing = !downsync.unresolved.is_empty() || !upsync.unresolved.is_empty();

        let mut wanted: Vec<(WatchTarget, bool)> = vec![];
        for (resolution, other) in [(&downsync, downstream), (&upsync, upstream)] {
            let Resolution { targets, .. } = resolution;
            for target in targets {
                let dest = self.profile.mapping.dest_type(target).id;
                missing |= !serves(other, &dest.group, &dest.version, &dest.resource);
                // Status lives upstream: the source of a downsync, the copy of an upsync.
                let up = match target.direction {
                    Direction::Downsync => &target.id,
                    Direction::Upsync => &dest,
                };
                let status = serves(
                    upstream,
                    &up.group,
                    &up.version,
                    &format!("{}/status", up.resource),
                );
                wanted.push((target.clone(), status));
            }
        }
        let mut started = vec![];
        let changed;
        {
            let mut flows = self.flows.write();
            let same_type = |f: &Flow, t: &WatchTarget| {
                f.target.direction == t.direction
                    && f.target.id.group == t.id.group
                    && f.target.id.resource == t.id.resource
            };
            for (target, status) in &wanted {
                let existing = flows.values().find(|f| same_type(f, target)).cloned();
                // A flow whose destination type changed (a profile's conversion added,
                // or a renamed kind's resource found at last) is started again.
                let dest = self.profile.mapping.dest_type(target);
                match existing {
                    Some(flow)
                        if flow.target == *target
                            && flow.status_subresource == *status
                            && flow.dest == dest => {}
                    other => {
                        if let Some(old) = other {
                            old.stop();
                            flows.remove(&old.id);
                        }
                        let id = self.next_flow.fetch_add(1, Ordering::Relaxed);
                        let flow =
                            Flow::new(id, target.clone(), dest, *status, self.profile.upstream_clusters);
                        flows.insert(id, flow.clone());
                        started.push(flow);
                    }
                }
            }
            // A type no longer selected: its flow stops, and the orphan cleaner deletes
            // its copies (as it does for types dropped while the syncer was down).
            let unwanted: Vec<_> = flows
                .values()
                .filter(|flow| !wanted.iter().any(|(t, _)| same_type(flow, t)))
                .map(|flow| flow.id)
                .collect();
            changed = !started.is_empty() || !unwanted.is_empty();
            for id in unwanted.into_iter().filter(|_| retire) {
                if let Some(flow) = flows.remove(&id) {
                    flow.stop();
                    tracing::info!(resource = %flow.target.id, direction = %flow.target.direction, "{} of {} is no longer selected; deleting its copies", flow.target.direction, flow.target.id);
                    self.orphans.clean(flow.dest_side(), flow.dest.clone());
                }
            }
        }
        for flow in started {
            tracing::info!(resource = %flow.target.id, direction = %flow.target.direction, "watching {} for {}", flow.target.id, flow.target.direction);
            flow.start(self);
        }
        if *last != Some(revision) {
            *last = Some(revision);
            self.reconcile_everything();
        }
        if missing {
            Flows::Missing
        } else if changed {
            Flows::Changed
        } else {
            Flows::Unchanged
        }
    }

    /// Checks `side`'s reachability every `probe_period`, and every
    /// [`RECONNECT_PROBE_PERIOD`] while it does not answer, so its return is noticed
    /// within a fraction of a second (a failed request elsewhere starts that at once).
    pub async fn probe_loop(self: Arc<Self>, side: Side) {
        let client = self.side(side);
        let mut changes = client.reachability_changes();
        loop {
            let reconnecting = !client.is_connected();
            let timeout = if reconnecting {
                RECONNECT_PROBE_TIMEOUT
            } else {
                PROBE_TIMEOUT
            };
            match client.probe(timeout).await {
                Ok(()) => self.regained_contact(side),
                Err(why) => self.lost_contact(side, &why),
            }
            changes.borrow_and_update();
            let period = if client.is_connected() {
                self.timing.probe_period
            } else {
                self.timing.probe_period.min(RECONNECT_PROBE_PERIOD)
            };
            tokio::select! {
                _ = tokio::time::sleep(period) => {}
                // Contact lost through a request: probe at the short period from now.
                _ = changes.changed() => {}
            }
        }
    }

    /// Waits as `next` says before a failed watch of `side` is retried.
    pub async fn pause_before_retry(&self, side: Side, next: NextAttempt) {
        match next {
            NextAttempt::Now => {}
            NextAttempt::After(delay) => tokio::time::sleep(delay).await,
            NextAttempt::WhenReachable(delay) => {
                tokio::time::sleep(delay).await;
                self.side(side).reachable().await;
            }
        }
    }

    /// Whether this syncer keeps copies in `namespace` downstream that are still
    /// wanted: its Namespace copy is then released rather than deleted when no longer
    /// wanted itself, since deleting it would delete those copies too, only for them to
    /// be made again (kcp#2041).
    pub fn keeps_copies_in(&self, namespace: &str) -> bool {
        let Profile {
            selection, mapping, ..
        } = &self.profile;
        self.flows().iter().any(|flow| {
            flow.target.direction == Direction::Downsync
                && flow.dest.id.namespaced
                && flow.copies.any_in_namespace(namespace, |name| {
                    let dest = ObjectRef {
                        cluster: None,
                        namespace: Some(namespace.to_string()),
                        name: name.to_string(),
                    };
                    let Some(source) = mapping.source_ref(&flow.target, &dest) else {
                        return false;
                    };
                    flow.sources
                        .get(&source)
                        .is_some_and(|obj| selection.wants(&flow.target, &source, &obj))
                })
        })
    }

    /// Whether the destination namespace `namespace`, no longer wanted, may be deleted
    /// now: only once it has been unwanted for `delay` and holds no copy of this syncer
    /// (nor a downstream object it upsyncs). Until then `key` is queued again later.
    pub fn namespace_may_go(&self, namespace: &str, delay: Duration, key: &Key) -> bool {
        let since = *self
            .unwanted_namespaces
            .lock()
            .entry(namespace.to_string())
            .or_insert_with(Instant::now);
        let waited = since.elapsed();
        if waited < delay {
            self.queue_after(key.clone(), delay - waited);
            return false;
        }
        if self.holds_anything_in(namespace) {
            tracing::debug!(%namespace, "the namespace is no longer wanted but still holds copies; checking again later");
            self.queue_after(key.clone(), delay);
            return false;
        }
        self.unwanted_namespaces.lock().remove(namespace);
        self.known_namespaces
            .lock()
            .retain(|at, _| at.side != Side::Downstream || at.name != namespace);
        tracing::info!(%namespace, "deleting the namespace: no longer wanted for {delay:?} and empty");
        true
    }

    /// The cell that is set once `at` is known to exist. The first object written into
    /// a namespace fills it by creating the namespace; writers into the same namespace
    /// meanwhile wait for that one creation instead of each sending a create that is
    /// refused for the missing namespace and then racing to make it.
    pub(crate) fn namespace_cell(&self, at: NamespaceAt) -> Arc<tokio::sync::OnceCell<()>> {
        self.known_namespaces.lock().entry(at).or_default().clone()
    }

    /// The destination namespace `namespace` is wanted (again).
    pub fn namespace_wanted(&self, namespace: &str) {
        let mut unwanted = self.unwanted_namespaces.lock();
        if !unwanted.is_empty() {
            unwanted.remove(namespace);
        }
    }

    /// Whether any flow holds a downstream object in `namespace`: a copy, or a source
    /// going up.
    fn holds_anything_in(&self, namespace: &str) -> bool {
        self.flows().iter().any(|flow| {
            let store = match flow.target.direction {
                Direction::Downsync => &flow.copies,
                Direction::Upsync => &flow.sources,
            };
            let namespaced = match flow.target.direction {
                Direction::Downsync => flow.dest.id.namespaced,
                Direction::Upsync => flow.target.id.namespaced,
            };
            namespaced && store.any_in_namespace(namespace, |_| true)
        })
    }

    /// Queues `key` again after `delay`.
    pub fn queue_after(&self, key: Key, delay: Duration) {
        let queue = self.queue.clone();
        crate::spawn(async move {
            tokio::time::sleep(delay).await;
            queue.add(key);
        });
    }

    /// Latches "initial sync done" once configs are read, every flow has listed both
    /// sides, and the queue has drained.
    pub async fn watch_initial_sync(self: Arc<Self>) {
        loop {
            tokio::time::sleep(Duration::from_millis(25)).await;
            let flows = self.flows();
            let done = self.profile.selection.is_loaded()
                && self.discovery.read().is_some()
                && flows.iter().all(|f| f.is_settled())
                && self.queue.is_empty();
            if done {
                self.initial_sync.store(true, Ordering::Relaxed);
                tracing::info!(flows = flows.len(), "initial sync complete");
                self.status_now.notify_one();
                return;
            }
        }
    }

    /// Stops every watch and worker.
    pub fn shut_down(&self) {
        self.queue.shut_down();
        for flow in self.flows.write().drain() {
            flow.1.stop();
        }
    }
}

/// How long a failure's text may be in a warning: the API server's message
/// is kept, an echoed object or schema is not.
const LOG_LINE_MAX: usize = 300;

/// `error` as one log line: line breaks become spaces and a long text is cut
/// at [`LOG_LINE_MAX`] characters (the full text stays at debug and on the
/// object's status and Events).
pub fn log_line(error: &dyn std::fmt::Display) -> String {
    let text = error.to_string();
    let mut line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = line.char_indices().nth(LOG_LINE_MAX) {
        line.truncate(cut);
        line.push_str(" …");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_one_line_of_bounded_length() {
        let long = format!("admission webhook denied the request:\n{}", "x".repeat(5000));
        let line = log_line(&long);
        assert!(!line.contains('\n'));
        assert!(line.starts_with("admission webhook denied the request: xxx"));
        assert_eq!(line.chars().count(), LOG_LINE_MAX + 2);
        assert_eq!(log_line(&"short"), "short");
    }

    fn engine() -> Arc<Engine> {
        engine_with_downstream(None)
    }

    /// An engine whose sides reach nothing, unless `down` answers its downstream
    /// requests.
    pub(super) fn engine_with_downstream(down: Option<kube::Client>) -> Arc<Engine> {
        let side = |side| {
            let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
            SideClient::new(side, config, crate::ratelimit::Pacing::from_flags(Some(0.0), 1)).unwrap()
        };
        let mut downstream = side(Side::Downstream);
        if let Some(client) = down {
            downstream.client = client;
        }
        let timing = Timing {
            discovery_refresh: Duration::from_secs(10),
            probe_period: Duration::from_secs(5),
            max_watch_backoff: Duration::from_secs(5),
        };
        let (min, max) = (Duration::from_millis(1), Duration::from_millis(10));
        Engine::new(
            "florin".into(),
            crate::profiles::kubestellar::KubeStellar::profile("florin", Duration::from_secs(20)),
            true,
            env!("CARGO_PKG_VERSION").into(),
            timing,
            side(Side::Upstream),
            downstream,
            min,
            max,
        )
    }

    fn key(name: &str) -> Key {
        let object = ObjectRef {
            cluster: None,
            namespace: Some("app".into()),
            name: name.into(),
        };
        Key::new(1, Some(object.clone()), object)
    }

    #[test]
    fn a_key_holds_one_reference_when_source_and_copy_share_it() {
        let same = key("a");
        assert_eq!(same.source(), Some(same.dest()));
        assert!(matches!(same.refs, KeyRefs::Same(_)));
        // Keys fill the queue by the ten thousand, which keeps its capacity.
        assert!(std::mem::size_of::<Key>() <= std::mem::size_of::<ObjectRef>() + 16);
        let moved = ObjectRef {
            cluster: None,
            namespace: Some("p-app".into()),
            name: "a".into(),
        };
        let mapped = Key::new(1, same.source().cloned(), moved.clone());
        assert_eq!((mapped.source(), mapped.dest()), (same.source(), &moved));
        assert_ne!(mapped, same);
    }

    #[tokio::test]
    async fn work_for_an_unreachable_side_waits_for_it_and_resumes_when_it_answers() {
        let engine = engine();
        assert!(
            !engine.wait_for_side(Side::Downstream, &key("a")),
            "not known to be down: tried as usual"
        );
        engine.lost_contact(Side::Downstream, &"connection refused");
        for name in ["a", "a", "b"] {
            assert!(engine.wait_for_side(Side::Downstream, &key(name)));
        }
        assert!(
            !engine.wait_for_side(Side::Upstream, &key("c")),
            "the other side answers"
        );
        assert_eq!(engine.waiting_for(Side::Downstream), 2);
        assert!(engine.queue.is_empty(), "nothing retried meanwhile");

        engine.regained_contact(Side::Downstream);
        assert_eq!(engine.waiting_for(Side::Downstream), 0);
        assert_eq!(engine.queue.len(), 2, "both queued again at once");
        assert!(!engine.wait_for_side(Side::Downstream, &key("d")));
    }
}
