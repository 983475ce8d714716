//! The object store: every object in memory (lists and gets never touch the
//! disk), one resourceVersion counter for the whole hub, writes made durable
//! by a [`Backend`] in batches (group commit), and a bounded event history
//! that watches replay from.
//!
//! A write is applied to memory under one lock, handed to the commit thread in
//! revision order, and acknowledged to its caller only after the batch holding
//! it is durable. Watch events are published after the commit, so a watcher
//! never sees a write that a crash could take back.

mod backend;
mod watch;

pub use backend::{Backend, Loaded, MemoryBackend, Mutation, SqliteBackend};
pub use watch::{EventType, WatchEvent, WatchSubscription};

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

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
}

/// Largest object the store keeps: etcd's default request limit
/// (`--max-request-bytes`, 1.5 MiB), which bounds every object
/// kube-apiserver stores, so what fits here fits there.
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;

/// Which clusters a list or watch covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterScope {
    One(String),
    /// kcp's `/clusters/*` wildcard.
    All,
}

impl ClusterScope {
    pub fn contains(&self, cluster: &str) -> bool {
        match self {
            ClusterScope::One(c) => c == cluster,
            ClusterScope::All => true,
        }
    }
}

type Objects = BTreeMap<(String, String), Arc<StoredObject>>;

struct State {
    /// resource -> cluster -> (namespace, name) -> object.
    resources: HashMap<String, BTreeMap<String, Objects>>,
    /// The last resourceVersion handed out.
    rv: u64,
    /// The commit thread's queue; `None` once it has failed.
    commits: Option<std::sync::mpsc::Sender<PendingWrite>>,
}

impl State {
    /// The object at `key`, if any.
    fn current(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.resources
            .get(&key.resource)?
            .get(&key.cluster)?
            .get(&(key.namespace.clone(), key.name.clone()))
            .cloned()
    }
}

struct PendingWrite {
    mutation: Mutation,
    event: Arc<WatchEvent>,
    done: oneshot::Sender<Result<(), String>>,
}

/// The hub's object store. Cheap to share (`Arc<Store>`).
pub struct Store {
    state: Mutex<State>,
    history: Arc<History>,
    failure: Arc<Mutex<Option<String>>>,
}

/// A write applied in memory; await [`Committed::durable`] before acknowledging it.
pub struct Committed {
    pub object: Option<Arc<StoredObject>>,
    pub rv: u64,
    done: oneshot::Receiver<Result<(), String>>,
}

impl Committed {
    /// Wait until the write is on disk.
    pub async fn durable(self) -> Result<Option<Arc<StoredObject>>, StoreError> {
        match self.done.await {
            Ok(Ok(())) => Ok(self.object),
            Ok(Err(e)) => Err(StoreError::Unavailable(e)),
            Err(_) => Err(StoreError::Unavailable("commit thread stopped".into())),
        }
    }
}

/// How many events watches can replay from (older resourceVersions get 410).
pub const DEFAULT_HISTORY: usize = 50_000;

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

/// Set `metadata.resourceVersion` and serialise.
fn encode(value: &mut Value, rv: u64) -> StoredObject {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    let json = Bytes::from(serde_json::to_vec(value).unwrap_or_default());
    StoredObject {
        rv,
        json,
        labels: labels_of(value),
    }
}

impl Store {
    /// Load everything from `backend` and start the commit thread.
    pub fn open(mut backend: Box<dyn Backend>, history_size: usize) -> anyhow::Result<Arc<Store>> {
        let loaded = backend.load()?;
        let mut resources: HashMap<String, BTreeMap<String, Objects>> = HashMap::new();
        for (key, rv, json) in loaded.objects {
            let value: Value = serde_json::from_slice(&json)?;
            let obj = StoredObject {
                rv,
                json: Bytes::from(json),
                labels: labels_of(&value),
            };
            resources
                .entry(key.resource)
                .or_default()
                .entry(key.cluster)
                .or_default()
                .insert((key.namespace, key.name), Arc::new(obj));
        }
        let history = Arc::new(History::new(history_size, loaded.resource_version));
        let failure = Arc::new(Mutex::new(None));
        let (tx, rx) = std::sync::mpsc::channel::<PendingWrite>();
        {
            let history = history.clone();
            let failure = failure.clone();
            std::thread::Builder::new()
                .name("ferry-commit".into())
                .spawn(move || commit_loop(backend, rx, history, failure))?;
        }
        Ok(Arc::new(Store {
            state: Mutex::new(State {
                resources,
                rv: loaded.resource_version,
                commits: Some(tx),
            }),
            history,
            failure,
        }))
    }

    /// An in-memory store (nothing persisted).
    pub fn in_memory() -> Arc<Store> {
        Store::open(Box::new(MemoryBackend), DEFAULT_HISTORY).expect("memory backend cannot fail")
    }

    /// The last resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        self.state.lock().rv
    }

    pub fn get(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.state.lock().current(key)
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
        let state = self.state.lock();
        let mut out = Vec::new();
        if let Some(clusters) = state.resources.get(resource) {
            for (cluster, objects) in clusters {
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
                    out.push((
                        ObjectKey {
                            cluster: cluster.clone(),
                            resource: resource.to_string(),
                            namespace: ns.clone(),
                            name: name.clone(),
                        },
                        obj.clone(),
                    ));
                }
            }
        }
        (out, state.rv)
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

    /// Write `value` at `key` if the current state matches `expect`. The
    /// value's `metadata.resourceVersion` is set to the new revision.
    pub fn put(&self, key: ObjectKey, expect: Expect, mut value: Value) -> Result<Committed, StoreError> {
        let mut state = self.state.lock();
        let current = state.current(&key);
        check(&current, expect)?;
        let rv = state.rv + 1;
        let obj = Arc::new(encode(&mut value, rv));
        if obj.json.len() > MAX_OBJECT_BYTES {
            return Err(StoreError::TooLarge {
                size: obj.json.len(),
                limit: MAX_OBJECT_BYTES,
            });
        }
        let event = Arc::new(WatchEvent {
            kind: if current.is_some() {
                EventType::Modified
            } else {
                EventType::Added
            },
            key: key.clone(),
            object: obj.clone(),
            previous: current,
        });
        let mutation = Mutation::Put {
            key: key.clone(),
            rv,
            value: obj.json.clone(),
        };
        let done = self.enqueue(&mut state, mutation, event)?;
        state.rv = rv;
        state
            .resources
            .entry(key.resource)
            .or_default()
            .entry(key.cluster)
            .or_default()
            .insert((key.namespace, key.name), obj.clone());
        Ok(Committed {
            object: Some(obj),
            rv,
            done,
        })
    }

    /// Remove the object at `key` if the current state matches `expect`. The
    /// DELETED event carries the object at the new revision.
    pub fn delete(&self, key: ObjectKey, expect: Expect) -> Result<Committed, StoreError> {
        let mut state = self.state.lock();
        let current = state.current(&key);
        check(&current, expect)?;
        let Some(current) = current else {
            return Err(StoreError::NotFound);
        };
        let rv = state.rv + 1;
        let mut last = current.value();
        let tombstone = Arc::new(encode(&mut last, rv));
        let event = Arc::new(WatchEvent {
            kind: EventType::Deleted,
            key: key.clone(),
            object: tombstone.clone(),
            previous: Some(current),
        });
        let done = self.enqueue(&mut state, Mutation::Delete { key: key.clone() }, event)?;
        state.rv = rv;
        if let Some(clusters) = state.resources.get_mut(&key.resource) {
            if let Some(objects) = clusters.get_mut(&key.cluster) {
                objects.remove(&(key.namespace, key.name));
                if objects.is_empty() {
                    clusters.remove(&key.cluster);
                }
            }
        }
        Ok(Committed {
            object: Some(tombstone),
            rv,
            done,
        })
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
            })
            .is_err()
        {
            state.commits = None;
            return Err(failed());
        }
        Ok(done_rx)
    }

    /// Subscribe to every event after `from_rv`. Fails with the oldest
    /// resourceVersion still replayable when `from_rv` is older than that.
    pub fn watch(&self, from_rv: u64) -> Result<WatchSubscription, u64> {
        self.history.subscribe(from_rv)
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

/// Commit queued writes in batches: block for the first, take whatever else is
/// queued (up to a cap), commit once, then publish and acknowledge all.
fn commit_loop(
    mut backend: Box<dyn Backend>,
    rx: std::sync::mpsc::Receiver<PendingWrite>,
    history: Arc<History>,
    failure: Arc<Mutex<Option<String>>>,
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
        match backend.commit(&mutations, rv) {
            Ok(()) => {
                history.publish(batch.iter().map(|w| w.event.clone()));
                for w in batch {
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

    fn key(name: &str) -> ObjectKey {
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
        let a = store.put(key("a"), Expect::Absent, cm("a")).unwrap().rv;
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
            Some(1),
            "rv 0 is older than the 2 retained events"
        );
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
