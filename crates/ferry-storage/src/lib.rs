//! The object store: every object in memory (lists and gets never touch the
//! disk), one resourceVersion counter for the whole hub, writes made durable
//! by a [`Backend`] in batches (group commit), and a bounded event history
//! that watches replay from.
//!
//! Read committed, as kube-apiserver on etcd: a write is checked and given its
//! resourceVersion under one lock, kept as *pending* while the commit thread
//! makes it durable (in revision order, batched), and only then published —
//! to gets, lists, watches and the store's resourceVersion — and acknowledged
//! to its caller. So no client can observe an object state or a
//! resourceVersion that a crash could take back, and a restart, which resumes
//! the counter at the last committed revision, never reissues one a client
//! has seen. Writers check their expectations against the newest state,
//! pending included ([`Store::get`]), so concurrent writes stay serialized.
//!
//! This crate is Ferry's storage layer: [`Store`], its [`Backend`]s (SQLite,
//! memory, [`Etcd`]), its watch history ([`WatchSubscription`],
//! [`HistoryLimits`]), and [`testing`] (etcd processes for tests of
//! `--storage etcd`). It stores JSON objects by key and knows nothing of
//! kinds, validation, HTTP, workspaces (kcp's logical clusters) or Ferry's
//! profiles; `ferry-hub` builds its API server on it and re-exports it as
//! `ferry_hub::storage`.

mod backend;
mod etcd;
pub mod testing;
mod watch;

pub use backend::{Backend, Loaded, MemoryBackend, Mutation, SqliteBackend};
pub use etcd::{Etcd, EtcdOptions, DEFAULT_PREFIX as DEFAULT_ETCD_PREFIX};
pub use watch::{Changes, EventFilter, EventType, HistoryLimits, WatchError, WatchEvent, WatchSubscription};

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::oneshot;

use watch::History;

/// Where an object lives: logical cluster, resource (group/plural), namespace
/// (empty for cluster-scoped objects) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub cluster: String,
    pub resource: String,
    pub namespace: String,
    pub name: String,
}

/// An object as stored: its JSON (with `metadata.resourceVersion` set) and the
/// labels, kept parsed so selectors do not re-parse the JSON.
#[derive(Debug)]
pub struct StoredObject {
    pub rv: u64,
    pub json: Bytes,
    pub labels: BTreeMap<String, String>,
}

impl StoredObject {
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }
}

/// What the caller expects the object's current state to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Create: the object must not exist.
    Absent,
    /// Optimistic concurrency: the object must exist at this resourceVersion.
    Version(u64),
    /// The object must exist, at any version.
    Exists,
}

/// Why a write was refused.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object already exists (create).
    #[error("object already exists")]
    AlreadyExists,
    /// The object does not exist (update or delete).
    #[error("object not found")]
    NotFound,
    /// The object changed since the caller read it.
    #[error("the object has been modified; please apply your changes to the latest version and try again")]
    Conflict,
    /// The commit thread has stopped: the disk failed.
    #[error("storage is unavailable: {0}")]
    Unavailable(String),
    /// The object's JSON is larger than [`MAX_OBJECT_BYTES`].
    #[error("the object is {size} bytes when stored, over the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    /// The object nests deeper than [`ferry_apimachinery::json::MAX_DEPTH`] at `at`: it
    /// could not be read back.
    #[error("the object nests more than {limit} levels deep at {at}")]
    TooDeep { at: String, limit: usize },
}

/// Largest object the store keeps: etcd's default request limit
/// (`--max-request-bytes`, 1.5 MiB), which bounds every object
/// kube-apiserver stores, so what fits here fits there.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// Which clusters a list or watch covers.
#[derive(Clone)]
pub enum ClusterScope {
    One(String),
    /// kcp's `/clusters/*` wildcard.
    All,
    /// Every cluster, narrowed to what a filter admits: a virtual
    /// workspace's view (the clusters bound to an export, the objects a
    /// permission claim selects). Asked at each object and each event, so
    /// a view that widens later shows the new clusters' events at once.
    Filtered(Arc<dyn ScopeFilter>),
}

/// What a [`ClusterScope::Filtered`] admits.
pub trait ScopeFilter: Send + Sync {
    /// Whether anything in `cluster` may be visible.
    fn cluster(&self, cluster: &str) -> bool;

    /// Whether the object at `key` (in a cluster [`ScopeFilter::cluster`]
    /// admits) is visible.
    fn object(&self, _key: &ObjectKey) -> bool {
        true
    }

    /// Whether the object at `key` (admitted by [`ScopeFilter::object`]) is
    /// visible in the state `obj`: a view that selects by labels. A watch
    /// sees an object whose state stops being visible as deleted, and one
    /// that becomes visible as added.
    fn stored(&self, _key: &ObjectKey, _obj: &StoredObject) -> bool {
        true
    }

    /// Whether a write through the view may turn `old` (`None`: a create)
    /// into `new`; the error says why not. Asked after the write is
    /// prepared, so it sees what would be stored.
    fn admit_write(
        &self,
        _key: &ObjectKey,
        _old: Option<&Value>,
        _new: &Value,
    ) -> Result<(), ferry_apimachinery::status::ApiError> {
        Ok(())
    }

    /// The key of the SyncTarget whose syncer writes through this view, if
    /// any: it may write that target's reserved keys
    /// (`service::reserved`).
    fn sync_target_key(&self) -> Option<&str> {
        None
    }

    /// Whether a watcher of this view hears of a modification of an object it
    /// sees before and after: `false` for a change the view's reader has no
    /// use for (another reader's bookkeeping on the object), which then
    /// reaches it with the next change it does hear of, or as the object's
    /// state a moment later (the watch sees to that). Every change by default.
    fn hears(&self, _key: &ObjectKey, _event: &WatchEvent) -> bool {
        true
    }
}

impl std::fmt::Debug for ClusterScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterScope::One(c) => f.debug_tuple("One").field(c).finish(),
            ClusterScope::All => f.write_str("All"),
            ClusterScope::Filtered(_) => f.write_str("Filtered"),
        }
    }
}

impl PartialEq for ClusterScope {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (ClusterScope::One(a), ClusterScope::One(b)) => a == b,
            (ClusterScope::All, ClusterScope::All) => true,
            (ClusterScope::Filtered(a), ClusterScope::Filtered(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl ClusterScope {
    /// Whether anything in `cluster` may be in scope.
    pub fn contains(&self, cluster: &str) -> bool {
        match self {
            ClusterScope::One(c) => c == cluster,
            ClusterScope::All => true,
            ClusterScope::Filtered(f) => f.cluster(cluster),
        }
    }

    /// Whether the object at `key` is in scope.
    pub fn admits(&self, key: &ObjectKey) -> bool {
        match self {
            ClusterScope::Filtered(f) => f.cluster(&key.cluster) && f.object(key),
            other => other.contains(&key.cluster),
        }
    }

    /// Whether the object at `key` in the state `obj` is in scope.
    pub fn shows(&self, key: &ObjectKey, obj: &StoredObject) -> bool {
        match self {
            ClusterScope::Filtered(f) => f.cluster(&key.cluster) && f.object(key) && f.stored(key, obj),
            other => other.contains(&key.cluster),
        }
    }

    /// Whether a watcher in this scope hears of `event`, a modification of an
    /// object it [`ClusterScope::shows`] before and after
    /// ([`ScopeFilter::hears`]).
    pub fn hears(&self, key: &ObjectKey, event: &WatchEvent) -> bool {
        match self {
            ClusterScope::Filtered(f) => f.hears(key, event),
            _ => true,
        }
    }

    /// The one cluster a scope covers, if it covers one.
    pub fn single(&self) -> Option<&str> {
        match self {
            ClusterScope::One(c) => Some(c),
            _ => None,
        }
    }
}

/// One cluster's objects of one resource. Persistent maps: a list takes a
/// snapshot in O(1) under the store lock and walks it outside.
type Objects = imbl::OrdMap<(String, String), Arc<StoredObject>>;
type Clusters = imbl::OrdMap<String, Objects>;

struct State {
    /// Committed objects: resource -> cluster -> (namespace, name) -> object.
    resources: HashMap<String, Clusters>,
    /// The highest committed (and published) resourceVersion.
    committed_rv: u64,
    /// The newest uncommitted state of each key written since the last
    /// commit (`None`: deleted), with the revision that wrote it.
    pending: HashMap<ObjectKey, (u64, Option<Arc<StoredObject>>)>,
    /// The last resourceVersion handed out to a write, committed or not.
    rv: u64,
    /// The commit thread's queue; `None` once it has failed.
    commits: Option<std::sync::mpsc::Sender<PendingWrite>>,
}

impl State {
    /// The committed object at `key`, if any.
    fn committed(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.resources
            .get(&key.resource)?
            .get(&key.cluster)?
            .get(&(key.namespace.clone(), key.name.clone()))
            .cloned()
    }

    /// The newest state of `key`, pending writes included.
    fn latest(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        match self.pending.get(key) {
            Some((_, state)) => state.clone(),
            None => self.committed(key),
        }
    }

    /// Make a durable write visible: apply it to the committed objects, and
    /// forget it as pending unless a later write to the key is pending.
    fn apply_committed(&mut self, event: &WatchEvent) {
        let key = &event.key;
        let rv = event.object.rv;
        if self
            .pending
            .get(key)
            .is_some_and(|(pending_rv, _)| *pending_rv == rv)
        {
            self.pending.remove(key);
        }
        match event.kind {
            EventType::Deleted => {
                if let Some(clusters) = self.resources.get_mut(&key.resource) {
                    if let Some(objects) = clusters.get_mut(&key.cluster) {
                        objects.remove(&(key.namespace.clone(), key.name.clone()));
                        if objects.is_empty() {
                            clusters.remove(&key.cluster);
                        }
                    }
                }
            }
            EventType::Added | EventType::Modified => {
                let clusters = self.resources.entry(key.resource.clone()).or_default();
                if !clusters.contains_key(&key.cluster) {
                    clusters.insert(key.cluster.clone(), Objects::new());
                }
                if let Some(objects) = clusters.get_mut(&key.cluster) {
                    objects.insert((key.namespace.clone(), key.name.clone()), event.object.clone());
                }
            }
        }
        self.committed_rv = self.committed_rv.max(rv);
    }
}

struct PendingWrite {
    mutation: Mutation,
    event: Arc<WatchEvent>,
    done: oneshot::Sender<Result<(), String>>,
    /// When the write was queued for its commit.
    queued: Instant,
}

/// What the commits of a store in SQLite or memory cost, for the hub's `/metrics`
/// (kube-apiserver's `etcd_request_duration_seconds` answers the same question):
/// writes are committed in batches by one thread, so a write waits for the batch
/// before it and then for its own.
#[derive(Clone, Debug)]
pub struct CommitMetrics {
    /// Each batch's commit to the backend.
    pub commit_seconds: prometheus_client::metrics::histogram::Histogram,
    /// Writes per batch.
    pub batch_writes: prometheus_client::metrics::histogram::Histogram,
    /// Each write, from queued to committed and visible to reads and watches.
    pub write_seconds: prometheus_client::metrics::histogram::Histogram,
}

impl Default for CommitMetrics {
    fn default() -> Self {
        use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
        let seconds = || Histogram::new(exponential_buckets(0.0005, 2.0, 14));
        CommitMetrics {
            commit_seconds: seconds(),
            batch_writes: Histogram::new(exponential_buckets(1.0, 2.0, 12)),
            write_seconds: seconds(),
        }
    }
}

impl CommitMetrics {
    /// Register the three as `ferry_storage_commit_duration_seconds`,
    /// `ferry_storage_commit_writes` and `ferry_storage_write_duration_seconds`.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "ferry_storage_commit_duration_seconds",
            "Time to commit one batch of writes to the store (SQLite or memory)",
            self.commit_seconds.clone(),
        );
        registry.register(
            "ferry_storage_commit_writes",
            "Writes committed together in one batch",
            self.batch_writes.clone(),
        );
        registry.register(
            "ferry_storage_write_duration_seconds",
            "Time from a write being queued for its commit to it being committed and visible",
            self.write_seconds.clone(),
        );
    }
}

/// The hub's object store. Cheap to share (`Arc<Store>`).
pub struct Store {
    /// What the commits cost (a store in SQLite or memory; etcd's are etcd's).
    pub commit_metrics: CommitMetrics,
    state: Arc<Mutex<State>>,
    history: Arc<History>,
    failure: Arc<Mutex<Option<String>>>,
    /// The committed resourceVersion, for waiters on a future one.
    reached: tokio::sync::watch::Receiver<u64>,
    /// Set when etcd holds the objects: writes are etcd transactions and
    /// the in-memory state follows etcd's watch.
    remote: Option<Arc<Remote>>,
}

/// The store's link to etcd.
struct Remote {
    etcd: Etcd,
    /// The highest revision a write through this hub was given.
    acked: AtomicU64,
    /// Why the watch that feeds the cache is down, while it is.
    down: Arc<Mutex<Option<String>>>,
    /// The task following etcd's watch; stopped with the store.
    feed: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Requests to that task.
    commands: tokio::sync::mpsc::UnboundedSender<FeedCommand>,
}

/// What the task following etcd's watch can be asked to do.
enum FeedCommand {
    /// Ask etcd for a progress notification: the revision the watch has
    /// delivered everything up to, even when the last changes were not ours.
    Progress,
    /// Tests: watch again from a revision.
    #[cfg(test)]
    Rewatch(u64),
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Some(feed) = self.remote.as_ref().and_then(|r| r.feed.lock().take()) {
            feed.abort();
        }
    }
}

/// A write accepted; await [`Committed::durable`] before acknowledging it
/// (it is visible to readers from then on).
///
/// With a local backend the store has already checked the write and given it
/// its resourceVersion; it waits for the batch commit. With etcd, etcd decides
/// both when the transaction runs, so the write's outcome (a conflict
/// included) is known only from `durable`.
pub struct Committed {
    inner: Pending,
    /// What a put wrote, its resourceVersion still the store's placeholder:
    /// [`Committed::durable_value`] gives it back instead of parsing the
    /// stored JSON again.
    written: Option<Value>,
}

enum Pending {
    Local {
        object: Option<Arc<StoredObject>>,
        done: oneshot::Receiver<Result<(), String>>,
    },
    Remote(futures::future::BoxFuture<'static, Result<Option<Arc<StoredObject>>, StoreError>>),
}

impl Committed {
    /// The resourceVersion the write was given, when the store (not etcd)
    /// decides it before the write is durable.
    pub fn rv(&self) -> Option<u64> {
        match &self.inner {
            Pending::Local { object, .. } => object.as_ref().map(|o| o.rv),
            Pending::Remote(_) => None,
        }
    }

    /// Wait until the write is durable and visible to readers. Errors the
    /// store could not tell before (etcd's conflicts) come from here too.
    pub async fn durable(self) -> Result<Option<Arc<StoredObject>>, StoreError> {
        Self::wait(self.inner).await
    }

    /// As [`Committed::durable`], with the stored object also parsed. For a put
    /// that is the value written with its resourceVersion filled in — what
    /// parsing the stored JSON gives, without the parse (re-parsing each
    /// write's answer was 5% of a busy hub's time); a delete's is parsed.
    pub async fn durable_value(self) -> Result<Option<(Arc<StoredObject>, Value)>, StoreError> {
        let Some(stored) = Self::wait(self.inner).await? else {
            return Ok(None);
        };
        let value = match self.written {
            Some(mut value) => {
                let placeholder = rv_placeholder();
                if let Some(rv) = value
                    .get_mut("metadata")
                    .and_then(|meta| meta.get_mut("resourceVersion"))
                    .filter(|rv| rv.as_str() == Some(placeholder))
                {
                    *rv = Value::String(stored.rv.to_string());
                }
                value
            }
            None => stored.value(),
        };
        Ok(Some((stored, value)))
    }

    async fn wait(inner: Pending) -> Result<Option<Arc<StoredObject>>, StoreError> {
        match inner {
            Pending::Local { object, done } => match done.await {
                Ok(Ok(())) => Ok(object),
                Ok(Err(e)) => Err(StoreError::Unavailable(e)),
                Err(_) => Err(StoreError::Unavailable("commit thread stopped".into())),
            },
            Pending::Remote(write) => write.await,
        }
    }
}

/// How many events watches can replay from (older resourceVersions get 410).
pub const DEFAULT_HISTORY: usize = 50_000;
/// At most this much object JSON is kept in the watch history, whatever the
/// event count: a few large objects cannot make the history huge.
pub const DEFAULT_HISTORY_BYTES: usize = 256 << 20;

fn labels_of(value: &Value) -> BTreeMap<String, String> {
    value
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A serialised object whose `metadata.resourceVersion` is left open, so
/// that the store lock is held for a copy, not a serialisation.
struct Encoded {
    /// The JSON up to the resourceVersion's digits (or all of it, when the
    /// object has no `metadata` object to carry one).
    head: Vec<u8>,
    tail: Vec<u8>,
    labels: BTreeMap<String, String>,
}

/// A per-process placeholder for the resourceVersion: random, so no client
/// content can contain it.
fn rv_placeholder() -> &'static str {
    static PLACEHOLDER: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PLACEHOLDER.get_or_init(|| format!("ferry-rv-{}", uuid::Uuid::new_v4().simple()))
}

/// Serialise `value` with its resourceVersion left open (outside the lock).
fn encode_open(value: &mut Value) -> Encoded {
    let placeholder = rv_placeholder();
    let has_meta = match value.get_mut("metadata").and_then(Value::as_object_mut) {
        Some(meta) => {
            meta.insert("resourceVersion".into(), Value::String(placeholder.to_string()));
            true
        }
        None => false,
    };
    let json = serde_json::to_vec(value).unwrap_or_default();
    let labels = labels_of(value);
    let at = has_meta
        .then(|| memchr::memmem::find(&json, placeholder.as_bytes()))
        .flatten();
    match at {
        Some(at) => Encoded {
            head: json[..at].to_vec(),
            tail: json[at + placeholder.len()..].to_vec(),
            labels,
        },
        None => Encoded {
            head: json,
            tail: Vec::new(),
            labels,
        },
    }
}

impl Encoded {
    /// The stored object at revision `rv` (under the lock: copies only).
    fn close(self, rv: u64, has_rv: bool) -> StoredObject {
        let mut json = self.head;
        if has_rv {
            json.extend_from_slice(rv.to_string().as_bytes());
        }
        json.extend_from_slice(&self.tail);
        StoredObject {
            rv,
            json: Bytes::from(json),
            labels: self.labels,
        }
    }

    fn has_rv(&self) -> bool {
        !self.tail.is_empty()
    }
}

impl Encoded {
    /// The JSON with an empty resourceVersion: what etcd keeps, since the
    /// revision etcd gives the write is the resourceVersion.
    fn blank(&self) -> Vec<u8> {
        let mut json = self.head.clone();
        json.extend_from_slice(&self.tail);
        json
    }
}

/// An object read from etcd, with `metadata.resourceVersion` set to the
/// key's mod revision.
fn decode_at(json: &[u8], rv: u64) -> anyhow::Result<StoredObject> {
    let mut value: Value = serde_json::from_slice(json)?;
    let open = encode_open(&mut value);
    let has_rv = open.has_rv();
    Ok(open.close(rv, has_rv))
}

/// Place `obj` at `key` in `resources`.
fn insert_object(resources: &mut HashMap<String, Clusters>, key: ObjectKey, obj: Arc<StoredObject>) {
    let clusters = resources.entry(key.resource).or_default();
    let mut objects = clusters.remove(&key.cluster).unwrap_or_default();
    objects.insert((key.namespace, key.name), obj);
    clusters.insert(key.cluster, objects);
}

/// Set `metadata.resourceVersion` and serialise.
#[cfg(test)]
fn encode(value: &mut Value, rv: u64) -> StoredObject {
    let open = encode_open(value);
    let has_rv = open.has_rv();
    open.close(rv, has_rv)
}

impl Store {
    /// Load everything from `backend` and start the commit thread.
    pub fn open(backend: Box<dyn Backend>, history_size: usize) -> anyhow::Result<Arc<Store>> {
        Store::open_with(
            backend,
            HistoryLimits {
                events: history_size,
                bytes: DEFAULT_HISTORY_BYTES,
            },
        )
    }

    /// [`Store::open`] with both history limits given.
    pub fn open_with(mut backend: Box<dyn Backend>, history: HistoryLimits) -> anyhow::Result<Arc<Store>> {
        let history_limits = history;
        let loaded = backend.load()?;
        let mut resources: HashMap<String, Clusters> = HashMap::new();
        for (key, rv, json) in loaded.objects {
            let value: Value = serde_json::from_slice(&json)?;
            let obj = StoredObject {
                rv,
                json: Bytes::from(json),
                labels: labels_of(&value),
            };
            insert_object(&mut resources, key, Arc::new(obj));
        }
        let history = Arc::new(History::new(history_limits, loaded.resource_version));
        let failure = Arc::new(Mutex::new(None));
        let (tx, rx) = std::sync::mpsc::channel::<PendingWrite>();
        let commit_metrics = CommitMetrics::default();
        let (reached_tx, reached) = tokio::sync::watch::channel(loaded.resource_version);
        let state = Arc::new(Mutex::new(State {
            resources,
            committed_rv: loaded.resource_version,
            pending: HashMap::new(),
            rv: loaded.resource_version,
            commits: Some(tx),
        }));
        {
            let published = Published {
                state: state.clone(),
                history: history.clone(),
                reached: reached_tx,
            };
            let failure = failure.clone();
            let metrics = commit_metrics.clone();
            std::thread::Builder::new()
                .name("ferry-commit".into())
                .spawn(move || commit_loop(backend, rx, published, failure, metrics))?;
        }
        Ok(Arc::new(Store {
            commit_metrics,
            state,
            history,
            failure,
            reached,
            remote: None,
        }))
    }

    /// Load every object under `etcd`'s prefix and follow etcd's watch from
    /// the revision read: this hub's reads and watches then show every write
    /// to that prefix, through any hub.
    pub async fn open_etcd(etcd: Etcd, history: HistoryLimits) -> anyhow::Result<Arc<Store>> {
        let (resources, revision) = load_etcd(&etcd).await?;
        let history = Arc::new(History::new(history, revision));
        let (reached_tx, reached) = tokio::sync::watch::channel(revision);
        let state = Arc::new(Mutex::new(State {
            resources,
            committed_rv: revision,
            pending: HashMap::new(),
            rv: revision,
            commits: None,
        }));
        let down = Arc::new(Mutex::new(None));
        let (commands, commands_rx) = tokio::sync::mpsc::unbounded_channel();
        let feed = Feed {
            etcd: etcd.clone(),
            published: Published {
                state: state.clone(),
                history: history.clone(),
                reached: reached_tx,
            },
            down: down.clone(),
            commands: commands_rx,
        };
        let task = tokio::spawn(feed.run(revision));
        Ok(Arc::new(Store {
            commit_metrics: CommitMetrics::default(),
            state,
            history,
            failure: Arc::new(Mutex::new(None)),
            reached,
            remote: Some(Arc::new(Remote {
                etcd,
                acked: AtomicU64::new(revision),
                down,
                feed: Mutex::new(Some(task)),
                commands,
            })),
        }))
    }

    /// Whether other hubs write to the same objects (etcd): this hub's view
    /// may then trail a version a client read through another hub.
    pub fn shared(&self) -> bool {
        self.remote.is_some()
    }

    /// Whether the store can take writes now: its commit thread runs, or
    /// etcd answers and the watch that feeds the cache is up.
    pub async fn ready(&self) -> Result<(), String> {
        if let Some(failure) = self.failure.lock().clone() {
            return Err(failure);
        }
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        if let Some(down) = remote.down.lock().clone() {
            return Err(down);
        }
        remote.etcd.ping().await.map_err(|e| format!("etcd: {e:#}"))
    }

    /// With etcd, wait until this hub's cache holds everything etcd held
    /// when the call began, so a read through any replica sees every write
    /// acknowledged before it, through whichever replica (kube-apiserver's
    /// consistent reads from its cache). A local store is always current.
    ///
    /// When etcd cannot be asked, the cache is served as it is (writes are
    /// refused then, so this hub adds nothing to what it shows); a cache that
    /// does not catch up within `timeout` is an error.
    pub async fn catch_up(&self, timeout: Duration) -> Result<(), String> {
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        let target = match remote.etcd.revision().await {
            Ok(revision) => revision,
            Err(e) => {
                tracing::debug!("serving a read from the cache: etcd did not answer: {e:#}");
                return Ok(());
            }
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let mut reached = self.reached.clone();
        let mut pause = Duration::from_millis(20);
        loop {
            if *reached.borrow() >= target {
                return Ok(());
            }
            // etcd answers a progress request only once the watch has sent
            // everything; an early one is dropped, so ask again while waiting.
            let _ = remote.commands.send(FeedCommand::Progress);
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "this hub's cache has not caught up with etcd's revision {target} within {timeout:?} (it is at {})",
                    *reached.borrow()
                ));
            }
            if wait_reached(&mut reached, target, pause.min(left)).await {
                return Ok(());
            }
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// An in-memory store (nothing persisted).
    pub fn in_memory() -> Arc<Store> {
        Store::open(Box::new(MemoryBackend), DEFAULT_HISTORY).expect("memory backend cannot fail")
    }

    /// The committed resourceVersion: the newest one any reader can see.
    pub fn resource_version(&self) -> u64 {
        self.state.lock().committed_rv
    }

    /// The committed object at `key`: what a client's GET sees.
    pub fn get_committed(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.state.lock().committed(key)
    }

    /// The newest state of `key`, including a write not yet durable: what
    /// writes are checked against. For read-modify-write inside the hub
    /// (updates, patches, deletes, controllers): a write based on it is
    /// committed after the one it read, so it is never acknowledged without
    /// it. What a client reads comes from [`Store::get_committed`], lists and
    /// watches.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.state.lock().latest(key)
    }

    /// Wait (at most `timeout`) until every write accepted so far is
    /// committed and visible to readers: for a request whose answer depends
    /// on writes other tasks may have made a moment before.
    pub async fn settle(&self, timeout: std::time::Duration) {
        let assigned = match &self.remote {
            Some(remote) => remote.acked.load(Ordering::Acquire),
            None => self.state.lock().rv,
        };
        let _ = self.wait_for(assigned, timeout).await;
    }

    /// Wait until the committed resourceVersion reaches `rv`, for at most
    /// `timeout`. `Err(current)` if it did not (or the commit thread is gone).
    pub async fn wait_for(&self, rv: u64, timeout: std::time::Duration) -> Result<(), u64> {
        let mut reached = self.reached.clone();
        let outcome = tokio::time::timeout(timeout, reached.wait_for(|current| *current >= rv)).await;
        match outcome {
            Ok(Ok(_)) => Ok(()),
            _ => Err(*self.reached.borrow()),
        }
    }

    /// Every object of `resource` in `scope` (and `namespace`, if given), in
    /// (cluster, namespace, name) order, starting after `after` if given, and
    /// the resourceVersion the list is consistent with.
    pub fn list(
        &self,
        scope: &ClusterScope,
        resource: &str,
        namespace: Option<&str>,
        after: Option<&ObjectKey>,
    ) -> (Vec<(ObjectKey, Arc<StoredObject>)>, u64) {
        // A snapshot in O(1) under the lock; the walk happens outside it, so
        // a large list never stalls writers.
        let (snapshot, rv) = {
            let state = self.state.lock();
            (state.resources.get(resource).cloned(), state.committed_rv)
        };
        let mut out = Vec::new();
        let filtered = matches!(scope, ClusterScope::Filtered(_));
        if let Some(clusters) = &snapshot {
            // One workspace is looked up, not searched for among all of them
            // (a workspace's create lists its Services, with 100,000 others).
            let in_scope: Box<dyn Iterator<Item = (&String, &Objects)>> = match scope {
                ClusterScope::One(c) => Box::new(clusters.get_key_value(c).into_iter()),
                _ => Box::new(clusters.iter()),
            };
            for (cluster, objects) in in_scope {
                if !scope.contains(cluster) {
                    continue;
                }
                if let Some(a) = after {
                    if cluster < &a.cluster {
                        continue;
                    }
                }
                let start = match after {
                    Some(a) if &a.cluster == cluster => {
                        std::ops::Bound::Excluded((a.namespace.clone(), a.name.clone()))
                    }
                    _ => std::ops::Bound::Unbounded,
                };
                for ((ns, name), obj) in objects.range((start, std::ops::Bound::Unbounded)) {
                    if let Some(want) = namespace {
                        if ns != want {
                            continue;
                        }
                    }
                    let key = ObjectKey {
                        cluster: cluster.clone(),
                        resource: resource.to_string(),
                        namespace: ns.clone(),
                        name: name.clone(),
                    };
                    if filtered && !scope.shows(&key, obj) {
                        continue;
                    }
                    out.push((key, obj.clone()));
                }
            }
        }
        (out, rv)
    }

    /// Every resource key that has objects in some cluster.
    pub fn resource_keys(&self) -> Vec<String> {
        let state = self.state.lock();
        let mut all: Vec<String> = state
            .resources
            .iter()
            .filter(|(_, c)| c.values().any(|o| !o.is_empty()))
            .map(|(r, _)| r.clone())
            .collect();
        all.sort();
        all
    }

    /// How many committed objects each resource key holds, over every cluster
    /// (the hub's `apiserver_storage_objects`); keys without objects are left out.
    pub fn object_counts(&self) -> Vec<(String, usize)> {
        let state = self.state.lock();
        state
            .resources
            .iter()
            .map(|(r, c)| (r.clone(), c.values().map(|o| o.len()).sum::<usize>()))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    /// Names of every cluster that holds at least one object.
    pub fn clusters(&self) -> Vec<String> {
        let state = self.state.lock();
        let mut all: Vec<String> = state.resources.values().flat_map(|c| c.keys().cloned()).collect();
        all.sort();
        all.dedup();
        all
    }

    /// Every resource key that has objects in `cluster`.
    pub fn resources_in(&self, cluster: &str) -> Vec<String> {
        let state = self.state.lock();
        state
            .resources
            .iter()
            .filter(|(_, c)| c.get(cluster).is_some_and(|o| !o.is_empty()))
            .map(|(r, _)| r.clone())
            .collect()
    }

    /// Write `value` at `key` if the newest state (pending writes included)
    /// matches `expect`. The value's `metadata.resourceVersion` is set to the
    /// new revision. Readers see the write once it is durable.
    pub fn put(&self, key: ObjectKey, expect: Expect, mut value: Value) -> Result<Committed, StoreError> {
        // Before serialising, which recurses once per level.
        if let Some(at) = ferry_apimachinery::json::too_deep(&value, ferry_apimachinery::json::MAX_DEPTH) {
            ferry_apimachinery::json::drop_flat(value);
            return Err(StoreError::TooDeep {
                at,
                limit: ferry_apimachinery::json::MAX_DEPTH,
            });
        }
        let open = encode_open(&mut value);
        let has_rv = open.has_rv();
        // The resourceVersion's digits add at most 20 bytes.
        let size = open.head.len() + open.tail.len() + 20;
        if size > MAX_OBJECT_BYTES {
            return Err(StoreError::TooLarge {
                size,
                limit: MAX_OBJECT_BYTES,
            });
        }
        if let Some(remote) = &self.remote {
            let mut committed = self.remote_write(remote, key, expect, Some((open, has_rv)));
            committed.written = Some(value);
            return Ok(committed);
        }
        let mut state = self.state.lock();
        let current = state.latest(&key);
        check(&current, expect)?;
        let rv = state.rv + 1;
        let obj = Arc::new(open.close(rv, has_rv));
        let kind = if current.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        let event = Arc::new(WatchEvent::new(kind, key.clone(), obj.clone(), current));
        let mutation = Mutation::Put {
            key: key.clone(),
            rv,
            value: obj.json.clone(),
        };
        let done = self.enqueue(&mut state, mutation, event)?;
        state.rv = rv;
        state.pending.insert(key, (rv, Some(obj.clone())));
        drop(state);
        Ok(Committed {
            inner: Pending::Local {
                object: Some(obj),
                done,
            },
            written: Some(value),
        })
    }

    /// Remove the object at `key` if the newest state matches `expect`. The
    /// DELETED event carries the object at the new revision.
    pub fn delete(&self, key: ObjectKey, expect: Expect) -> Result<Committed, StoreError> {
        if let Some(remote) = &self.remote {
            return Ok(self.remote_write(remote, key, expect, None));
        }
        // The tombstone is serialised outside the lock from the state read
        // first; if the key changes meanwhile, read it again.
        let (mut state, current, tombstone) = loop {
            let current = self.state.lock().latest(&key);
            check(&current, expect)?;
            let Some(current) = current else {
                return Err(StoreError::NotFound);
            };
            let open = encode_open(&mut current.value());
            let state = self.state.lock();
            if state.latest(&key).is_some_and(|now| Arc::ptr_eq(&now, &current)) {
                break (state, current, open);
            }
        };
        let rv = state.rv + 1;
        let has_rv = tombstone.has_rv();
        let tombstone = Arc::new(tombstone.close(rv, has_rv));
        let event = Arc::new(WatchEvent::new(
            EventType::Deleted,
            key.clone(),
            tombstone.clone(),
            Some(current),
        ));
        let done = self.enqueue(&mut state, Mutation::Delete { key: key.clone() }, event)?;
        state.rv = rv;
        state.pending.insert(key, (rv, None));
        Ok(Committed {
            inner: Pending::Local {
                object: Some(tombstone),
                done,
            },
            written: None,
        })
    }

    /// An etcd transaction writing `value` at `key` (`None`: deleting it)
    /// if the key is as `expect` says. It is acknowledged once this hub's
    /// cache has the write (read your writes); a refusal waits until the
    /// cache has what refused it, so a retry reads the newer object.
    fn remote_write(
        &self,
        remote: &Arc<Remote>,
        key: ObjectKey,
        expect: Expect,
        value: Option<(Encoded, bool)>,
    ) -> Committed {
        let remote = remote.clone();
        let mut reached = self.reached.clone();
        let write = async move {
            let outcome = remote
                .etcd
                .write(&key, expect, value.as_ref().map(|(open, _)| open.blank()))
                .await;
            let accepted = match outcome {
                Ok(accepted) => accepted,
                Err(refused) => {
                    let (error, seen) = match refused {
                        etcd::Refused::AlreadyExists { mod_revision } => {
                            (StoreError::AlreadyExists, Some(mod_revision))
                        }
                        etcd::Refused::Conflict { mod_revision } => {
                            (StoreError::Conflict, Some(mod_revision))
                        }
                        etcd::Refused::NotFound => (StoreError::NotFound, None),
                        etcd::Refused::Unavailable(m) => (StoreError::Unavailable(m), None),
                    };
                    if let Some(rv) = seen {
                        wait_reached(&mut reached, rv, REMOTE_ECHO_WAIT).await;
                    }
                    return Err(error);
                }
            };
            let rv = accepted.revision;
            remote.acked.fetch_max(rv, Ordering::AcqRel);
            let object = match value {
                Some((open, has_rv)) => open.close(rv, has_rv),
                None => decode_at(&accepted.previous.unwrap_or_default(), rv)
                    .map_err(|e| StoreError::Unavailable(format!("etcd held an unreadable object: {e}")))?,
            };
            if !wait_reached(&mut reached, rv, REMOTE_ECHO_WAIT).await {
                tracing::warn!(
                    rv,
                    "a write is in etcd but this hub's cache has not seen it within {REMOTE_ECHO_WAIT:?}"
                );
            }
            Ok(Some(Arc::new(object)))
        };
        Committed {
            inner: Pending::Remote(Box::pin(write)),
            written: None,
        }
    }

    /// Tests: make the etcd feed watch again from `revision`.
    #[cfg(test)]
    fn rewatch_from(&self, revision: u64) {
        if let Some(remote) = &self.remote {
            let _ = remote.commands.send(FeedCommand::Rewatch(revision));
        }
    }

    fn enqueue(
        &self,
        state: &mut State,
        mutation: Mutation,
        event: Arc<WatchEvent>,
    ) -> Result<oneshot::Receiver<Result<(), String>>, StoreError> {
        let (done_tx, done_rx) = oneshot::channel();
        let failed = || StoreError::Unavailable(self.failure.lock().clone().unwrap_or_default());
        let Some(commits) = &state.commits else {
            return Err(failed());
        };
        if commits
            .send(PendingWrite {
                mutation,
                event,
                done: done_tx,
                queued: Instant::now(),
            })
            .is_err()
        {
            state.commits = None;
            return Err(failed());
        }
        Ok(done_rx)
    }

    /// Subscribe to every event after `from_rv`. Fails when `from_rv` is older
    /// than the history holds, or newer than the committed resourceVersion
    /// (wait for it with [`Store::wait_for`] first).
    pub fn watch(&self, from_rv: u64) -> Result<WatchSubscription, WatchError> {
        History::subscribe(&self.history, from_rv, EventFilter::all())
    }

    /// [`Store::watch`] for the events `filter` wants only: a write wakes the
    /// watchers of its own resource and workspace, not every watcher.
    pub fn watch_filtered(&self, from_rv: u64, filter: EventFilter) -> Result<WatchSubscription, WatchError> {
        History::subscribe(&self.history, from_rv, filter)
    }
}

fn check(current: &Option<Arc<StoredObject>>, expect: Expect) -> Result<(), StoreError> {
    match (current, expect) {
        (Some(_), Expect::Absent) => Err(StoreError::AlreadyExists),
        (None, Expect::Version(_)) | (None, Expect::Exists) => Err(StoreError::NotFound),
        (Some(c), Expect::Version(v)) if c.rv != v => Err(StoreError::Conflict),
        _ => Ok(()),
    }
}

/// Where the commit thread makes durable writes visible.
struct Published {
    state: Arc<Mutex<State>>,
    history: Arc<History>,
    reached: tokio::sync::watch::Sender<u64>,
}

impl Published {
    /// A durable batch becomes visible: to gets and lists (committed state),
    /// then to watches (history), then to waiters on its resourceVersion.
    fn publish(&self, batch: &[PendingWrite], rv: u64) {
        {
            let mut state = self.state.lock();
            for w in batch {
                state.apply_committed(&w.event);
            }
        }
        self.history.publish(batch.iter().map(|w| w.event.clone()));
        self.reached.send_replace(rv);
    }
}

/// How long an etcd write waits for this hub's cache to show it before it is
/// acknowledged anyway.
const REMOTE_ECHO_WAIT: Duration = Duration::from_secs(10);

/// Wait until `reached` is at least `rv`; whether it got there in `timeout`.
async fn wait_reached(reached: &mut tokio::sync::watch::Receiver<u64>, rv: u64, timeout: Duration) -> bool {
    matches!(
        tokio::time::timeout(timeout, reached.wait_for(|current| *current >= rv)).await,
        Ok(Ok(_))
    )
}

/// Every object under the prefix, decoded, and the revision read.
async fn load_etcd(etcd: &Etcd) -> anyhow::Result<(HashMap<String, Clusters>, u64)> {
    let (objects, revision) = etcd.load().await?;
    let mut resources: HashMap<String, Clusters> = HashMap::new();
    for o in objects {
        let obj = decode_at(&o.value, o.mod_revision)
            .map_err(|e| anyhow::anyhow!("etcd key {} is not an object: {e}", etcd.key(&o.key)))?;
        insert_object(&mut resources, o.key, Arc::new(obj));
    }
    Ok((resources, revision))
}

/// Follows etcd's watch on the prefix into the store: every change, through
/// any hub, in revision order.
struct Feed {
    etcd: Etcd,
    published: Published,
    down: Arc<Mutex<Option<String>>>,
    commands: tokio::sync::mpsc::UnboundedReceiver<FeedCommand>,
}

impl Feed {
    async fn run(mut self, mut revision: u64) {
        const FIRST_PAUSE: Duration = Duration::from_millis(50);
        let mut pause = FIRST_PAUSE;
        loop {
            match self.follow(&mut revision).await {
                Ok(()) => pause = FIRST_PAUSE,
                Err(why) => {
                    let first = self.down.lock().replace(why.clone()).is_none();
                    if first {
                        tracing::warn!("the etcd watch is down: {why}; retrying");
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Watch from after `revision` until the watch ends; `Ok` when it ended
    /// for a reason that needs no pause (a relist after compaction).
    async fn follow(&mut self, revision: &mut u64) -> Result<(), String> {
        let (mut requests, mut stream) = self
            .etcd
            .watch_from(*revision + 1)
            .await
            .map_err(|e| format!("watching etcd: {e}"))?
            .split();
        loop {
            let message = tokio::select! {
                m = stream.message() => m,
                Some(command) = self.commands.recv() => match command {
                    FeedCommand::Progress => {
                        requests
                            .request_progress()
                            .await
                            .map_err(|e| format!("watching etcd: {e}"))?;
                        continue;
                    }
                    #[cfg(test)]
                    FeedCommand::Rewatch(from) => {
                        *revision = from;
                        return Ok(());
                    }
                },
            };
            let response = match message {
                Ok(Some(r)) => r,
                Ok(None) => return Err("etcd ended the watch".into()),
                Err(e) => return Err(format!("watching etcd: {e}")),
            };
            if response.canceled() {
                if response.compact_revision() > 0 {
                    // etcd compacted past what this hub has seen: the changes
                    // in between are gone. Start over from a fresh read.
                    *revision = self.relist().await?;
                    return Ok(());
                }
                return Err(format!("etcd cancelled the watch: {}", response.cancel_reason()));
            }
            if self.down.lock().take().is_some() {
                tracing::info!("the etcd watch is up again");
            }
            if response.events().is_empty() {
                // A progress notification: everything up to its revision has
                // been delivered (the last changes may be outside the prefix).
                let header = response.header().map(|h| h.revision()).unwrap_or(0).max(0) as u64;
                if !response.created() && header > *revision {
                    *revision = header;
                    self.advance(header);
                }
                continue;
            }
            let mut events = Vec::with_capacity(response.events().len());
            for event in response.events() {
                if let Some(e) = self.event(event) {
                    *revision = (*revision).max(e.object.rv);
                    events.push(e);
                }
            }
            if let Some(last) = events.last().map(|e| e.object.rv) {
                self.published.history.publish(events.into_iter());
                self.published.reached.send_replace(last);
            }
        }
    }

    /// The cache holds everything etcd held at `revision`, though no object
    /// changed at it: lists and watches may be served at it.
    fn advance(&self, revision: u64) {
        {
            let mut state = self.published.state.lock();
            if revision <= state.committed_rv {
                return;
            }
            state.committed_rv = revision;
            state.rv = state.rv.max(revision);
        }
        self.published.history.advance(revision);
        self.published.reached.send_replace(revision);
    }

    /// One etcd event applied to the store's state, as the watch event to
    /// publish; `None` for keys that are not objects.
    fn event(&self, event: &etcd_client::Event) -> Option<Arc<WatchEvent>> {
        let kv = event.kv()?;
        let key = self.etcd.parse_key(kv.key())?;
        let rv = kv.mod_revision().max(0) as u64;
        let previous = self.published.state.lock().committed(&key);
        let (kind, object) = match event.event_type() {
            etcd_client::EventType::Put => {
                let kind = if previous.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (kind, decode_at(kv.value(), rv))
            }
            // The DELETED event carries the last state at the new revision.
            etcd_client::EventType::Delete => (EventType::Deleted, decode_at(&previous.as_ref()?.json, rv)),
        };
        let object = match object {
            Ok(o) => Arc::new(o),
            Err(e) => {
                tracing::warn!("etcd key {} is not an object, skipped: {e}", self.etcd.key(&key));
                return None;
            }
        };
        let event = Arc::new(WatchEvent::new(kind, key, object, previous));
        let mut state = self.published.state.lock();
        state.apply_committed(&event);
        state.rv = state.committed_rv;
        Some(event)
    }

    /// Read everything again after etcd compacted past the watch: the state
    /// is replaced and every watcher is ended, so clients re-watch and get
    /// 410 Expired for a resourceVersion older than the new read.
    async fn relist(&self) -> Result<u64, String> {
        let (resources, revision) = load_etcd(&self.etcd).await.map_err(|e| format!("{e:#}"))?;
        tracing::warn!(
            revision,
            "etcd compacted past this hub's watch; read everything again"
        );
        {
            let mut state = self.published.state.lock();
            state.resources = resources;
            state.committed_rv = revision;
            state.rv = revision;
        }
        self.published.history.reset(revision);
        self.published.reached.send_replace(revision);
        Ok(revision)
    }
}

/// Commit queued writes in batches: block for the first, take whatever else is
/// queued (up to a cap), commit once, then publish and acknowledge all.
fn commit_loop(
    mut backend: Box<dyn Backend>,
    rx: std::sync::mpsc::Receiver<PendingWrite>,
    published: Published,
    failure: Arc<Mutex<Option<String>>>,
    metrics: CommitMetrics,
) {
    const MAX_BATCH: usize = 2048;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(w) => batch.push(w),
                Err(_) => break,
            }
        }
        let mutations: Vec<Mutation> = batch.iter().map(|w| w.mutation.clone()).collect();
        let rv = batch.iter().map(|w| w.event.object.rv).max().unwrap_or(0);
        let started = Instant::now();
        let committed = backend.commit(&mutations, rv);
        metrics.commit_seconds.observe(started.elapsed().as_secs_f64());
        metrics.batch_writes.observe(batch.len() as f64);
        match committed {
            Ok(()) => {
                published.publish(&batch, rv);
                for w in batch {
                    metrics.write_seconds.observe(w.queued.elapsed().as_secs_f64());
                    let _ = w.done.send(Ok(()));
                }
            }
            Err(e) => {
                let msg = format!("committing to storage failed: {e:#}");
                tracing::error!("{msg}; the hub refuses further writes");
                *failure.lock() = Some(msg.clone());
                for w in batch {
                    let _ = w.done.send(Err(msg.clone()));
                }
                // Refuse everything still queued; the senders see a closed channel.
                while let Ok(w) = rx.try_recv() {
                    let _ = w.done.send(Err(msg.clone()));
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// ConfigMap `name` in namespace `default` of root.
    pub(crate) fn key(name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "root".into(),
            resource: "/configmaps".into(),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn cm(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn the_resource_version_is_spliced_in_where_metadata_holds_it() {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "99", "annotations": {"x": "ferry-rv-"}},
            "data": {"resourceVersion": "\"ferry-rv-\""}});
        let stored = encode(&mut v, 1234);
        let back: Value = serde_json::from_slice(&stored.json).unwrap();
        assert_eq!(back["metadata"]["resourceVersion"], "1234");
        assert_eq!(back["metadata"]["annotations"]["x"], "ferry-rv-");
        assert_eq!(back["data"]["resourceVersion"], "\"ferry-rv-\"");
        // No metadata object: stored as is.
        let stored = encode(&mut json!({"metadata": 5}), 7);
        assert_eq!(&stored.json[..], br#"{"metadata":5}"#);
    }

    #[tokio::test]
    async fn a_write_gives_back_what_parsing_its_stored_json_gives() {
        let store = Store::in_memory();
        let objects = [
            // Unusual numbers, keys whose order must survive, a resourceVersion
            // in place and the placeholder's look-alike elsewhere.
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "namespace": "default", "resourceVersion": "99", "labels": {"z": "1", "a": "2"}},
                "data": {"resourceVersion": "ferry-rv-"}, "n": [1.0, -0.0, 1e300, 18446744073709551615u64, -5]}),
            // No resourceVersion yet: appended to metadata.
            json!({"metadata": {"name": "b", "namespace": "default"}, "z": {}, "a": null}),
            // No metadata object: stored as it is.
            json!({"metadata": 5}),
        ];
        for (i, object) in objects.into_iter().enumerate() {
            let (stored, value) = store
                .put(key(&format!("o{i}")), Expect::Absent, object)
                .unwrap()
                .durable_value()
                .await
                .unwrap()
                .unwrap();
            assert_eq!(value, stored.value(), "object {i}");
            assert_eq!(
                serde_json::to_vec(&value).unwrap(),
                stored.json.to_vec(),
                "object {i}"
            );
        }
        // A delete's object is its tombstone, parsed.
        let (stored, value) = store
            .delete(key("o0"), Expect::Exists)
            .unwrap()
            .durable_value()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(value, stored.value());
        assert_eq!(value["metadata"]["resourceVersion"], stored.rv.to_string());
    }

    #[tokio::test]
    async fn writes_bump_one_counter_and_set_resource_version() {
        let store = Store::in_memory();
        let a = store
            .put(key("a"), Expect::Absent, cm("a"))
            .unwrap()
            .durable()
            .await
            .unwrap()
            .unwrap();
        let b = store
            .put(key("b"), Expect::Absent, cm("b"))
            .unwrap()
            .durable()
            .await
            .unwrap()
            .unwrap();
        assert_eq!(b.rv, a.rv + 1);
        assert_eq!(a.value()["metadata"]["resourceVersion"], a.rv.to_string());
    }

    #[tokio::test]
    async fn stale_version_conflicts_and_create_twice_already_exists() {
        let store = Store::in_memory();
        let a = store
            .put(key("a"), Expect::Absent, cm("a"))
            .unwrap()
            .rv()
            .unwrap();
        assert!(matches!(
            store.put(key("a"), Expect::Absent, cm("a")),
            Err(StoreError::AlreadyExists)
        ));
        store.put(key("a"), Expect::Version(a), cm("a")).unwrap();
        assert!(matches!(
            store.put(key("a"), Expect::Version(a), cm("a")),
            Err(StoreError::Conflict)
        ));
    }

    #[tokio::test]
    async fn sqlite_store_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.db");
        {
            let store = Store::open(Box::new(SqliteBackend::open(&path).unwrap()), 100).unwrap();
            store
                .put(key("a"), Expect::Absent, cm("a"))
                .unwrap()
                .durable()
                .await
                .unwrap();
            let b = store
                .put(key("b"), Expect::Absent, cm("b"))
                .unwrap()
                .durable()
                .await
                .unwrap();
            assert!(b.is_some());
            store
                .delete(key("b"), Expect::Exists)
                .unwrap()
                .durable()
                .await
                .unwrap();
        }
        let store = Store::open(Box::new(SqliteBackend::open(&path).unwrap()), 100).unwrap();
        assert!(store.get(&key("a")).is_some());
        assert!(store.get(&key("b")).is_none());
        assert_eq!(store.resource_version(), 3);
    }

    /// A backend whose commits wait for the test to let them through.
    struct GatedBackend {
        inner: MemoryBackend,
        gate: std::sync::mpsc::Receiver<()>,
    }

    impl Backend for GatedBackend {
        fn load(&mut self) -> anyhow::Result<Loaded> {
            self.inner.load()
        }
        fn commit(&mut self, batch: &[Mutation], rv: u64) -> anyhow::Result<()> {
            self.gate.recv().map_err(|_| anyhow::anyhow!("disk gone"))?;
            self.inner.commit(batch, rv)
        }
    }

    #[tokio::test]
    async fn writes_are_invisible_to_readers_until_durable() {
        let (open_gate, gate) = std::sync::mpsc::channel();
        let store = Store::open(
            Box::new(GatedBackend {
                inner: MemoryBackend,
                gate,
            }),
            100,
        )
        .unwrap();
        let write = store.put(key("a"), Expect::Absent, cm("a")).unwrap();
        assert_eq!(write.rv(), Some(1));
        // Pending: readers see nothing, writers see it.
        assert!(store.get_committed(&key("a")).is_none());
        assert_eq!(store.resource_version(), 0);
        let (listed, list_rv) = store.list(&ClusterScope::All, "/configmaps", None, None);
        assert!(listed.is_empty());
        assert_eq!(list_rv, 0);
        assert_eq!(store.watch(1).err(), Some(WatchError::TooLarge { current: 0 }));
        let mut sub = store.watch(0).unwrap();
        assert!(
            store.get(&key("a")).is_some(),
            "writers check against pending state"
        );
        assert!(matches!(
            store.put(key("a"), Expect::Absent, cm("a")),
            Err(StoreError::AlreadyExists)
        ));
        let waiter = {
            let store = store.clone();
            tokio::spawn(async move { store.wait_for(1, std::time::Duration::from_secs(10)).await })
        };
        assert_eq!(
            store.wait_for(1, std::time::Duration::from_millis(20)).await,
            Err(0),
            "not reached while the commit waits"
        );
        open_gate.send(()).unwrap();
        write.durable().await.unwrap();
        assert_eq!(waiter.await.unwrap(), Ok(()));
        assert_eq!(store.get_committed(&key("a")).unwrap().rv, 1);
        assert_eq!(store.resource_version(), 1);
        assert_eq!(sub.next().await.unwrap().object.rv, 1);
        // A delete is pending the same way.
        let gone = store.delete(key("a"), Expect::Exists).unwrap();
        assert!(store.get_committed(&key("a")).is_some());
        assert!(store.get(&key("a")).is_none());
        open_gate.send(()).unwrap();
        gone.durable().await.unwrap();
        assert!(store.get_committed(&key("a")).is_none());
        assert_eq!(store.resource_version(), 2);
    }

    #[tokio::test]
    async fn a_failed_commit_is_never_shown_and_its_version_never_seen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hub.db");
        let (open_gate, gate) = std::sync::mpsc::channel::<()>();
        {
            let backend = SqliteBackend::open(&path).unwrap();
            struct Gated(SqliteBackend, std::sync::mpsc::Receiver<()>);
            impl Backend for Gated {
                fn load(&mut self) -> anyhow::Result<Loaded> {
                    self.0.load()
                }
                fn commit(&mut self, batch: &[Mutation], rv: u64) -> anyhow::Result<()> {
                    self.1
                        .recv()
                        .map_err(|_| anyhow::anyhow!("crashed before the commit"))?;
                    self.0.commit(batch, rv)
                }
            }
            let store = Store::open(Box::new(Gated(backend, gate)), 100).unwrap();
            let first = store.put(key("a"), Expect::Absent, cm("a")).unwrap();
            open_gate.send(()).unwrap();
            first.durable().await.unwrap();
            let lost = store.put(key("b"), Expect::Absent, cm("b")).unwrap();
            assert_eq!(lost.rv(), Some(2));
            // What any reader could see before the "crash".
            assert_eq!(store.resource_version(), 1);
            assert!(store.get_committed(&key("b")).is_none());
            drop(open_gate); // the disk is gone: the pending commit fails
            assert!(lost.durable().await.is_err());
        }
        let store = Store::open(Box::new(SqliteBackend::open(&path).unwrap()), 100).unwrap();
        assert_eq!(store.resource_version(), 1);
        assert!(store.get_committed(&key("b")).is_none());
        // rv 2 is handed out again, but no reader ever saw it.
        let again = store.put(key("c"), Expect::Absent, cm("c")).unwrap();
        assert_eq!(again.rv(), Some(2));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn etcd_compaction_past_the_feed_relists_and_expires_older_watches() {
        let Some(etcd) = crate::testing::TestEtcd::start() else {
            return;
        };
        let connected = Etcd::connect(&etcd.options()).await.unwrap();
        let limits = HistoryLimits {
            events: 100,
            bytes: 1 << 20,
        };
        let store = Store::open_etcd(connected.clone(), limits).await.unwrap();
        let a = store
            .put(key("a"), Expect::Absent, cm("a"))
            .unwrap()
            .durable()
            .await
            .unwrap()
            .unwrap();
        let mut before = store.watch(a.rv).unwrap();
        // Written behind the feed's back: the feed is made to watch from an
        // old revision that etcd then compacts away.
        store.rewatch_from(a.rv);
        let mut client = connected.client();
        let b = store
            .put(key("b"), Expect::Absent, cm("b"))
            .unwrap()
            .durable()
            .await
            .unwrap()
            .unwrap();
        client
            .compact(
                b.rv as i64,
                Some(etcd_client::CompactionOptions::new().with_physical()),
            )
            .await
            .unwrap();
        store.rewatch_from(1);
        let c = store
            .put(key("c"), Expect::Absent, cm("c"))
            .unwrap()
            .durable()
            .await
            .unwrap()
            .unwrap();
        assert!(c.rv > b.rv);
        // Everything is there after the relist ...
        for name in ["a", "b", "c"] {
            assert!(
                store.get_committed(&key(name)).is_some(),
                "{name} after the relist"
            );
        }
        // ... and a watch from before it has ended; resuming it is 410.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::time::timeout_at(deadline, before.next())
            .await
            .unwrap()
            .is_some()
        {}
        assert!(matches!(store.watch(a.rv), Err(WatchError::Expired { .. })));
        assert!(store.watch(store.resource_version()).is_ok());
    }

    #[tokio::test]
    async fn watch_replays_history_then_streams_and_expires_old_versions() {
        let store = Store::open(Box::new(MemoryBackend), 2).unwrap();
        for n in ["a", "b", "c"] {
            store
                .put(key(n), Expect::Absent, cm(n))
                .unwrap()
                .durable()
                .await
                .unwrap();
        }
        assert_eq!(
            store.watch(0).err(),
            Some(WatchError::Expired { floor: 1 }),
            "rv 0 is older than the 2 retained events"
        );
        assert_eq!(store.watch(4).err(), Some(WatchError::TooLarge { current: 3 }));
        let mut sub = store.watch(2).unwrap();
        let replayed = sub.next().await.unwrap();
        assert_eq!(replayed.key.name, "c");
        store
            .delete(key("a"), Expect::Exists)
            .unwrap()
            .durable()
            .await
            .unwrap();
        let live = sub.next().await.unwrap();
        assert_eq!(live.kind, EventType::Deleted);
        assert_eq!(live.object.rv, 4);
    }
}
