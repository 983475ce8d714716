//! The in-memory copy of one side's objects of one resource type, fed by a watch.
//!
//! Objects are kept as the JSON text the server sent (a parsed `serde_json::Value` tree
//! costs several times more), and parsed when reconciled (see [`super::raw`]).
//!
//! A syncer holds every source and every copy, so what one entry costs decides its
//! memory at scale. Each entry is one allocation of text (resourceVersion and JSON
//! together) under a key that is one more (`namespace/name`). A copy found to match its
//! desired object is reduced further to a [`VerifiedCopy`]: its content is never read
//! again unless the copy changes, and then a watch event brings it whole.
//!
//! Relists are explicit (linkerd's `reset`): a list replaces the contents atomically when
//! it completes, and the caller then reconciles every key of both sides, so an object
//! deleted while the watch was down cannot leak.

use std::collections::HashSet;
use std::sync::Arc;

use kube::api::ObjectMeta;
use parking_lot::RwLock;
use serde_json::{Map, Value};

use ferry_api::well_known::{
    DESIRED_HASH_ANNOTATION, DOWNSYNC_OVERWRITE_ANNOTATION, KCP_CLUSTER_ANNOTATION,
    MANAGED_METADATA_ANNOTATION,
};

use super::raw::{parse_without_managed_fields, strip_unkept_metadata, RawObject};

/// An object's identity within one resource type.
///
/// `cluster` is the logical cluster of an object read from an upstream that spans many
/// (kcp TMC's syncer virtual workspace lists `/clusters/*`, each object annotated
/// `kcp.io/cluster`); it is `None` on a side that is one cluster, so a KubeStellar key
/// costs one pointer more and no allocation. Names are interned per store.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Logical cluster, on a side that spans several; `None` otherwise.
    pub cluster: Option<Arc<str>>,
    /// Namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// The identity `namespace/name` on a side that is one cluster.
    pub fn new(namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            cluster: None,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    /// The identity of `obj`, if it has a name (no cluster: see [`ObjectRef::of_in`]).
    pub fn of(obj: &Value) -> Option<ObjectRef> {
        let meta = obj.get("metadata")?;
        Some(ObjectRef {
            cluster: None,
            namespace: meta.get("namespace").and_then(Value::as_str).map(str::to_owned),
            name: meta.get("name")?.as_str()?.to_owned(),
        })
    }

    /// The identity of `obj` with its logical cluster (`kcp.io/cluster`), as read from a
    /// side that spans several clusters.
    pub fn of_in(obj: &Value) -> Option<ObjectRef> {
        let mut key = ObjectRef::of(obj)?;
        key.cluster = obj
            .pointer(&format!(
                "/metadata/annotations/{}",
                KCP_CLUSTER_ANNOTATION.replace('/', "~1")
            ))
            .and_then(Value::as_str)
            .map(Arc::from);
        Some(key)
    }

    /// The identity in `meta`, if it has a name.
    pub fn of_meta(meta: &ObjectMeta) -> Option<ObjectRef> {
        Some(ObjectRef {
            cluster: None,
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
        })
    }

    /// The logical cluster, or `""` on a side that is one cluster.
    pub fn cluster(&self) -> &str {
        self.cluster.as_deref().unwrap_or("")
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(cluster) = &self.cluster {
            write!(f, "{cluster}|")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// The key of `key` in a store's map: `namespace/name`, or `name` for a cluster-scoped
/// object (neither part can contain a `/`), prefixed `cluster|` on a side that spans
/// clusters (no cluster name contains a `|`), in one allocation.
fn encode(key: &ObjectRef) -> String {
    let mut out = String::new();
    if let Some(cluster) = &key.cluster {
        out.push_str(cluster);
        out.push('|');
    }
    if let Some(ns) = &key.namespace {
        out.push_str(ns);
        out.push('/');
    }
    out.push_str(&key.name);
    out
}

/// The inverse of [`encode`]; `intern` gives the shared name of a cluster.
fn decode(key: &str, intern: impl FnOnce(&str) -> Arc<str>) -> ObjectRef {
    let (cluster, rest) = match key.split_once('|') {
        Some((cluster, rest)) => (Some(intern(cluster)), rest),
        None => (None, key),
    };
    match rest.split_once('/') {
        Some((ns, name)) => ObjectRef {
            cluster,
            namespace: Some(ns.to_owned()),
            name: name.to_owned(),
        },
        None => ObjectRef {
            cluster,
            namespace: None,
            name: rest.to_owned(),
        },
    }
}

/// The names of the logical clusters a store has seen, shared by its keys.
#[derive(Default)]
struct ClusterNames(RwLock<std::collections::HashSet<Arc<str>>>);

impl ClusterNames {
    fn intern(&self, name: &str) -> Arc<str> {
        if let Some(known) = self.0.read().get(name) {
            return known.clone();
        }
        let mut names = self.0.write();
        if let Some(known) = names.get(name) {
            return known.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        names.insert(shared.clone());
        shared
    }
}

/// One stored object, in one allocation: `text` is its key (the first `key_len`
/// bytes, as [`encode`] writes it), then its resourceVersion (the next `rv_len`
/// bytes), then its JSON without `managedFields`, or a [`VerifiedCopy`]. The set of
/// them is looked up by key ([`Borrow<str>`]), so no entry holds its key twice.
struct Stored {
    text: Box<str>,
    key_len: u32,
    rv_len: u32,
    verified: bool,
}

impl std::borrow::Borrow<str> for Stored {
    fn borrow(&self) -> &str {
        self.key()
    }
}

impl std::hash::Hash for Stored {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

impl PartialEq for Stored {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Stored {}

impl Stored {
    fn of(key: &str, obj: &RawObject) -> Stored {
        let rv = obj.metadata.resource_version.as_deref().unwrap_or("");
        let json = strip_unkept_metadata(obj.json());
        Stored::new(key, rv, &json, false)
    }

    fn new(key: &str, rv: &str, rest: &str, verified: bool) -> Stored {
        let mut text = String::with_capacity(key.len() + rv.len() + rest.len());
        text.push_str(key);
        text.push_str(rv);
        text.push_str(rest);
        Stored {
            text: text.into(),
            key_len: key.len() as u32,
            rv_len: rv.len() as u32,
            verified,
        }
    }

    /// The key ([`encode`]).
    fn key(&self) -> &str {
        &self.text[..self.key_len as usize]
    }

    /// The resourceVersion, if the object had one.
    fn resource_version(&self) -> Option<&str> {
        let start = self.key_len as usize;
        Some(&self.text[start..start + self.rv_len as usize]).filter(|rv| !rv.is_empty())
    }

    fn rest(&self) -> &str {
        &self.text[(self.key_len + self.rv_len) as usize..]
    }

    /// The object as a `Value` (a verified copy rebuilt as [`VerifiedCopy::rebuild`] says).
    fn to_value(&self, key: &ObjectRef) -> Value {
        if self.verified {
            VerifiedCopy::decode(self.rest()).rebuild(key, self.resource_version())
        } else {
            parse_without_managed_fields(self.rest())
        }
    }
}

/// What is kept of a copy known to match the desired object whose hash it carries: its
/// uid, that hash, and whatever else an update must send back or a decision reads —
/// status, and the metadata others set (finalizers, owner references, labels and
/// annotations the syncer does not manage). Its content and the labels and annotations
/// the syncer manages are dropped: an update takes them from the desired object (as
/// [`crate::transform::merge_for_update`] does with a whole copy), and the hash decides
/// whether an update is needed.
#[derive(Debug, PartialEq)]
struct VerifiedCopy<'a> {
    uid: &'a str,
    hash: &'a str,
    /// `{"metadata": {...}, "status": ...}` with what is described above, or empty.
    extras: &'a str,
}

impl<'a> VerifiedCopy<'a> {
    /// Fields separated by newlines, which none of them contains (compact JSON escapes
    /// them; a uid or hash holding one is never reduced).
    fn encode(&self) -> String {
        format!("{}\n{}\n{}", self.uid, self.hash, self.extras)
    }

    fn decode(text: &'a str) -> VerifiedCopy<'a> {
        let mut parts = text.splitn(3, '\n');
        let mut next = || parts.next().unwrap_or("");
        VerifiedCopy {
            uid: next(),
            hash: next(),
            extras: next(),
        }
    }

    /// The copy as reconciling sees it: identity, uid, resourceVersion, the hash
    /// annotation and the extras.
    fn rebuild(&self, key: &ObjectRef, rv: Option<&str>) -> Value {
        let mut obj = match serde_json::from_str::<Value>(self.extras) {
            Ok(Value::Object(obj)) => obj,
            _ => Map::new(),
        };
        let metadata = obj.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("name".into(), key.name.clone().into());
            if let Some(ns) = &key.namespace {
                metadata.insert("namespace".into(), ns.clone().into());
            }
            metadata.insert("uid".into(), self.uid.into());
            if let Some(rv) = rv {
                metadata.insert("resourceVersion".into(), rv.into());
            }
            if let Some(annotations) = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
            {
                annotations.insert(DESIRED_HASH_ANNOTATION.into(), self.hash.into());
            }
        }
        Value::Object(obj)
    }
}

/// Metadata a verified copy does not keep: held apart (identity, uid, resourceVersion),
/// or set by the server and never sent back.
const UNKEPT_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
];

/// The reduced form of `copy` (see [`VerifiedCopy`]), or `None` if it must stay whole:
/// it is being deleted, it is create-only (decided from its own annotation once its
/// source is gone), or its bookkeeping is missing.
fn reduce(copy: &Value) -> Option<String> {
    let metadata = copy.get("metadata")?.as_object()?;
    let annotations = metadata.get("annotations").and_then(Value::as_object);
    let annotation = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    let hash = annotation(DESIRED_HASH_ANNOTATION)?;
    let record: Value = serde_json::from_str(annotation(MANAGED_METADATA_ANNOTATION)?).ok()?;
    let uid = metadata.get("uid")?.as_str()?;
    if metadata.get("deletionTimestamp").is_some_and(|v| !v.is_null())
        || annotation(DOWNSYNC_OVERWRITE_ANNOTATION).is_some()
        || uid.contains('\n')
        || hash.contains('\n')
    {
        return None;
    }
    let mut kept = Map::new();
    for (field, value) in metadata {
        if UNKEPT_METADATA.contains(&field.as_str()) {
            continue;
        }
        let value = match (field.as_str(), value) {
            (key @ ("labels" | "annotations"), Value::Object(map)) => {
                let managed: Vec<&str> = record
                    .get(key)
                    .and_then(Value::as_array)
                    .map(|keys| keys.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let others: Map<String, Value> = map
                    .iter()
                    .filter(|(k, _)| {
                        !managed.contains(&k.as_str())
                            && *k != DESIRED_HASH_ANNOTATION
                            && *k != MANAGED_METADATA_ANNOTATION
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if others.is_empty() {
                    continue;
                }
                Value::Object(others)
            }
            _ => value.clone(),
        };
        kept.insert(field.clone(), value);
    }
    let mut extras = Map::new();
    if !kept.is_empty() {
        extras.insert("metadata".into(), Value::Object(kept));
    }
    if let Some(status) = copy.get("status").filter(|s| !s.is_null()) {
        extras.insert("status".into(), status.clone());
    }
    let extras = if extras.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&Value::Object(extras)).ok()?
    };
    Some(
        VerifiedCopy {
            uid,
            hash,
            extras: &extras,
        }
        .encode(),
    )
}

#[derive(Default)]
struct Inner {
    objects: HashSet<Stored>,
    /// Objects of a list in progress; replaces `objects` when the list completes.
    listing: Option<HashSet<Stored>>,
    /// Whether the list in progress fills `objects` directly (see [`ObjectStore::begin_list`]).
    streaming: bool,
    /// Whether a list has completed at least once.
    synced: bool,
    /// Whether the last list failed because the server does not serve the resource.
    not_served: bool,
    /// Whether the last list failed because the syncer may not list or watch it.
    denied: bool,
}

/// Writes of this syncer in flight for one object, and the resourceVersions of the
/// object's watch events that arrived meanwhile (held back until an answer tells
/// whether they are a write's own echo).
#[derive(Default)]
struct InFlight {
    writes: usize,
    held: Vec<String>,
}

/// One side's objects of one resource type.
#[derive(Default)]
pub struct ObjectStore {
    inner: RwLock<Inner>,
    in_flight: parking_lot::Mutex<std::collections::HashMap<String, InFlight>>,
    /// Whether the side spans logical clusters: keys then carry each object's cluster.
    clustered: bool,
    clusters: ClusterNames,
}

impl ObjectStore {
    /// A store for a side that spans logical clusters (see [`ObjectRef::cluster`]).
    pub fn clustered() -> ObjectStore {
        ObjectStore {
            clustered: true,
            ..Default::default()
        }
    }

    /// Whether keys carry the object's logical cluster.
    pub fn is_clustered(&self) -> bool {
        self.clustered
    }

    /// The key of the object with metadata `meta` in this store.
    fn key_of_meta(&self, meta: &ObjectMeta) -> Option<ObjectRef> {
        let mut key = ObjectRef::of_meta(meta)?;
        if self.clustered {
            let cluster = meta.annotations.as_ref()?.get(KCP_CLUSTER_ANNOTATION)?;
            key.cluster = Some(self.clusters.intern(cluster));
        }
        Some(key)
    }

    /// The key of `obj` in this store.
    fn key_of(&self, obj: &Value) -> Option<ObjectRef> {
        let mut key = ObjectRef::of(obj)?;
        if self.clustered {
            let cluster = ObjectRef::of_in(obj)?.cluster?;
            key.cluster = Some(self.clusters.intern(&cluster));
        }
        Some(key)
    }

    /// The object with identity `key`.
    pub fn get(&self, key: &ObjectRef) -> Option<Arc<Value>> {
        self.get_checked(key).map(|(obj, _)| obj)
    }

    /// The object with identity `key`, and whether it is a verified copy: one found to
    /// match the desired object whose hash its `ferry.dev/desired-hash` annotation
    /// holds, kept without its content (see [`ObjectStore::keep_verified`]). Such a copy
    /// still matches any desired object with that hash, and an update built from it
    /// with [`crate::transform::merge_for_update`] is the one the whole copy would give.
    pub fn get_checked(&self, key: &ObjectRef) -> Option<(Arc<Value>, bool)> {
        let inner = self.inner.read();
        let stored = inner.objects.get(encode(key).as_str())?;
        Some((Arc::new(stored.to_value(key)), stored.verified))
    }

    /// The resourceVersion of the object held as `key`, if any: what a write sent now is
    /// based on, for [`ObjectStore::written`] when the write carries no version itself.
    pub fn resource_version(&self, key: &ObjectRef) -> Option<String> {
        let inner = self.inner.read();
        let stored = inner.objects.get(encode(key).as_str())?;
        stored.resource_version().map(str::to_owned)
    }

    /// Records that `copy` (as [`ObjectStore::get`] returned it, or a write's response)
    /// matches the desired object whose hash it carries, so that only a
    /// [`VerifiedCopy`] of it is kept. Nothing happens if the store has moved on to
    /// another version meanwhile; a later watch event or write puts the whole object
    /// back, to be checked again.
    pub fn keep_verified(&self, copy: &Value) {
        let Some(key) = self.key_of(copy) else {
            return;
        };
        let Some(rv) = copy.pointer("/metadata/resourceVersion").and_then(Value::as_str) else {
            return;
        };
        let key = encode(&key);
        let holds_whole = |inner: &Inner| {
            inner
                .objects
                .get(key.as_str())
                .is_some_and(|held| !held.verified && held.resource_version() == Some(rv))
        };
        if !holds_whole(&self.inner.read()) {
            return;
        }
        let Some(reduced) = reduce(copy) else {
            return;
        };
        let mut inner = self.inner.write();
        if holds_whole(&inner) {
            inner.objects.replace(Stored::new(&key, rv, &reduced, true));
        }
    }

    /// Every identity held.
    pub fn keys(&self) -> Vec<ObjectRef> {
        let intern = |name: &str| self.clusters.intern(name);
        self.inner
            .read()
            .objects
            .iter()
            .map(|s| decode(s.key(), intern))
            .collect()
    }

    /// Whether an object held in `namespace` has a name for which `matches` holds.
    pub fn any_in_namespace(&self, namespace: &str, matches: impl Fn(&str) -> bool) -> bool {
        self.inner.read().objects.iter().any(|stored| {
            let key = stored.key();
            let key = key.split_once('|').map_or(key, |(_, rest)| rest);
            key.split_once('/')
                .is_some_and(|(ns, name)| ns == namespace && matches(name))
        })
    }

    /// Number of objects held.
    pub fn len(&self) -> usize {
        self.inner.read().objects.len()
    }

    /// Whether no object is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a list has completed, so absence from the store means absence on the server.
    pub fn is_synced(&self) -> bool {
        self.inner.read().synced
    }

    /// Whether the server said it does not serve the resource (the store is then empty
    /// and not synced; the watch keeps retrying).
    pub fn is_not_served(&self) -> bool {
        self.inner.read().not_served
    }

    /// Records whether the server serves the resource.
    pub fn set_not_served(&self, not_served: bool) {
        self.inner.write().not_served = not_served;
    }

    /// Whether the server refused to list the resource (403); the watch keeps retrying,
    /// so granting the permission resumes syncing without a restart.
    pub fn is_denied(&self) -> bool {
        self.inner.read().denied
    }

    /// Records that the server refused to list the resource.
    pub fn set_denied(&self, denied: bool) {
        self.inner.write().denied = denied;
    }

    /// Whether the object held as `key` is at resourceVersion `rv` (so a watch event
    /// carrying that version, typically the echo of this syncer's own write, changes
    /// nothing and need not even be decoded).
    fn holds_version(&self, key: &str, rv: &str) -> bool {
        self.inner
            .read()
            .objects
            .get(key)
            .is_some_and(|old| old.resource_version() == Some(rv))
    }

    /// An object was added or changed. Returns its key, and whether it differs from
    /// what was held (a watch event echoing a write already recorded with
    /// [`ObjectStore::written`] does not).
    pub fn apply(&self, obj: &RawObject) -> Option<(ObjectRef, bool)> {
        self.record(obj, None::<fn(&str, &str) -> bool>)
    }

    /// [`ObjectStore::apply`], with whether `obj` changed decided by `differs` over the
    /// texts held and received (always, over a verified copy, whose text is reduced).
    pub fn apply_with(
        &self,
        obj: &RawObject,
        differs: impl Fn(&str, &str) -> bool,
    ) -> Option<(ObjectRef, bool)> {
        self.record(obj, Some(differs))
    }

    /// Records `obj`; without `differs`, any version not held is a change (and the
    /// object held is not looked up).
    fn record(
        &self,
        obj: &RawObject,
        differs: Option<impl Fn(&str, &str) -> bool>,
    ) -> Option<(ObjectRef, bool)> {
        let key = self.key_of_meta(&obj.metadata)?;
        let encoded = encode(&key);
        if let Some(rv) = obj.metadata.resource_version.as_deref() {
            if self.holds_version(&encoded, rv) {
                return Some((key, false));
            }
        }
        let stored = Stored::of(&encoded, obj);
        let changed = differs.is_none_or(|differs| match self.inner.read().objects.get(encoded.as_str()) {
            Some(old) if !old.verified => differs(old.rest(), stored.rest()),
            _ => true,
        });
        self.inner.write().objects.replace(stored);
        Some((key, changed))
    }

    /// A write of `key` by this syncer is about to be sent: watch events of it that
    /// arrive before [`ObjectStore::end_write`] are held back (see
    /// [`ObjectStore::hold_for_write`]).
    pub fn begin_write(&self, key: &ObjectRef) {
        self.in_flight.lock().entry(encode(key)).or_default().writes += 1;
    }

    /// Whether the change of `key` to resourceVersion `rv` that a watch event just
    /// brought is held back, because a write of `key` is in flight: its echo often
    /// arrives before the write's answer, and only the answer tells an echo from
    /// someone else's change.
    pub fn hold_for_write(&self, key: &ObjectRef, rv: Option<&str>) -> bool {
        let (Some(rv), mut in_flight) = (rv, self.in_flight.lock()) else {
            return false;
        };
        match in_flight.get_mut(&encode(key)) {
            Some(entry) => {
                entry.held.push(rv.to_string());
                true
            }
            None => false,
        }
    }

    /// A write of `key` got its answer, at resourceVersion `answered` (`None`: it
    /// failed, or was given up). Returns whether a change held back meanwhile was not
    /// that write's echo, so the object must be looked at again.
    pub fn end_write(&self, key: &ObjectRef, answered: Option<&str>) -> bool {
        let mut in_flight = self.in_flight.lock();
        let encoded = encode(key);
        let Some(entry) = in_flight.get_mut(&encoded) else {
            return false;
        };
        entry.writes = entry.writes.saturating_sub(1);
        if let Some(answered) = answered {
            entry.held.retain(|rv| rv != answered);
        }
        if entry.writes > 0 {
            // Another write's answer may still explain what is held.
            return false;
        }
        let changed = !entry.held.is_empty();
        in_flight.remove(&encoded);
        changed
    }

    /// Records an object this syncer just wrote, before its watch event arrives.
    /// `replaced` is the resourceVersion the write was based on (`None` for a create):
    /// if the store has moved on since (a newer change, or the write's own event, came
    /// first), it already holds what the server has, and a write response handled late
    /// must not put an older version back.
    pub fn written(&self, obj: &RawObject, replaced: Option<&str>) {
        let Some(key) = self.key_of_meta(&obj.metadata) else {
            return;
        };
        let key = encode(&key);
        let mut inner = self.inner.write();
        let current = inner.objects.get(key.as_str()).map(Stored::resource_version);
        let based_on_current = match (current, replaced) {
            (None, None) => true,
            (Some(current), Some(replaced)) => current == Some(replaced),
            _ => false,
        };
        if inner.synced && based_on_current {
            inner.objects.replace(Stored::of(&key, obj));
        }
    }

    /// An object was deleted.
    pub fn delete(&self, obj: &RawObject) -> Option<ObjectRef> {
        let key = self.key_of_meta(&obj.metadata)?;
        self.inner.write().objects.remove(encode(&key).as_str());
        Some(key)
    }

    /// A (re)list started. The first list into an empty store has nothing to replace,
    /// so it fills the store as its pages arrive ("streaming"): each object it has
    /// delivered may be reconciled before the list ends. Any other list is staged and
    /// replaces the contents when it completes.
    pub fn begin_list(&self) {
        let mut inner = self.inner.write();
        inner.streaming = !inner.synced && inner.objects.is_empty();
        inner.listing = (!inner.streaming).then(HashSet::new);
    }

    /// An object of the list in progress. Returns its key if it is visible at once (a
    /// streaming list).
    pub fn list_item(&self, obj: &RawObject) -> Option<ObjectRef> {
        let key = self.key_of_meta(&obj.metadata)?;
        let stored = Stored::of(&encode(&key), obj);
        let mut inner = self.inner.write();
        match inner.listing.as_mut() {
            Some(listing) => {
                listing.replace(stored);
                None
            }
            None => {
                inner.objects.replace(stored);
                Some(key)
            }
        }
    }

    /// The list completed: its objects replace the contents. Returns whether it was a
    /// streaming list (see [`ObjectStore::begin_list`]).
    pub fn finish_list(&self) -> bool {
        let mut inner = self.inner.write();
        if let Some(listing) = inner.listing.take() {
            inner.objects = listing;
        }
        inner.synced = true;
        inner.not_served = false;
        inner.denied = false;
        std::mem::take(&mut inner.streaming)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(value: Value) -> RawObject {
        RawObject::from_value(&value).unwrap()
    }

    #[test]
    fn an_echo_of_a_recorded_write_is_not_a_change() {
        let store = ObjectStore::default();
        store.begin_list();
        store.finish_list();
        let obj = raw(json!({ "metadata": { "name": "a", "resourceVersion": "5", "managedFields": [{}] } }));
        store.written(&obj, None);
        assert!(!store.apply(&obj).unwrap().1);
        let newer = raw(json!({ "metadata": { "name": "a", "resourceVersion": "6" } }));
        assert!(store.apply(&newer).unwrap().1);
        let key = ObjectRef::of_meta(&newer.metadata).unwrap();
        assert_eq!(store.get(&key).unwrap()["metadata"]["resourceVersion"], "6");
        store.apply(&obj);
        assert!(store.get(&key).unwrap()["metadata"]
            .get("managedFields")
            .is_none());
    }

    #[test]
    fn a_late_write_response_does_not_put_an_older_version_back() {
        let store = ObjectStore::default();
        store.begin_list();
        store.finish_list();
        let key = ObjectRef {
            cluster: None,
            namespace: None,
            name: "a".into(),
        };
        let rv = |store: &ObjectStore| store.get(&key).unwrap()["metadata"]["resourceVersion"].clone();
        store.apply(&raw(
            json!({ "metadata": { "name": "a", "resourceVersion": "5" } }),
        ));
        // Our update of version 5 returned version 6, but the watch already delivered 7.
        store.apply(&raw(
            json!({ "metadata": { "name": "a", "resourceVersion": "7" } }),
        ));
        store.written(
            &raw(json!({ "metadata": { "name": "a", "resourceVersion": "6" } })),
            Some("5"),
        );
        assert_eq!(rv(&store), "7");
        // Handled in time, it is recorded.
        store.written(
            &raw(json!({ "metadata": { "name": "a", "resourceVersion": "8" } })),
            Some("7"),
        );
        assert_eq!(rv(&store), "8");
        // A create whose object someone else re-created meanwhile is not recorded over it.
        store.apply(&raw(
            json!({ "metadata": { "name": "b", "resourceVersion": "9" } }),
        ));
        store.written(
            &raw(json!({ "metadata": { "name": "b", "resourceVersion": "3" } })),
            None,
        );
        let b = ObjectRef {
            cluster: None,
            namespace: None,
            name: "b".into(),
        };
        assert_eq!(store.get(&b).unwrap()["metadata"]["resourceVersion"], "9");
    }

    #[test]
    fn an_echo_arriving_before_the_write_s_answer_queues_nothing() {
        let store = ObjectStore::default();
        let key = ObjectRef::of_meta(&cm("a").metadata).unwrap();
        // The echo (version 7) comes before the answer, which says 7: nothing to do.
        store.begin_write(&key);
        assert!(store.hold_for_write(&key, Some("7")));
        assert!(!store.end_write(&key, Some("7")));
        // No write in flight: a change is not held.
        assert!(!store.hold_for_write(&key, Some("8")));
        // Someone else's change (9) after the write's echo (8): looked at again.
        store.begin_write(&key);
        assert!(store.hold_for_write(&key, Some("8")));
        assert!(store.hold_for_write(&key, Some("9")));
        assert!(store.end_write(&key, Some("8")));
        // A failed write explains nothing it held.
        store.begin_write(&key);
        assert!(store.hold_for_write(&key, Some("10")));
        assert!(store.end_write(&key, None));
        // Two writes at once: the first answer leaves what the second may explain.
        store.begin_write(&key);
        store.begin_write(&key);
        assert!(store.hold_for_write(&key, Some("12")));
        assert!(!store.end_write(&key, Some("11")));
        assert!(!store.end_write(&key, Some("12")));
        assert!(
            !store.hold_for_write(&key, Some("13")),
            "nothing in flight any more"
        );
    }

    fn cm(name: &str) -> RawObject {
        raw(json!({ "metadata": { "name": name, "namespace": "ns" } }))
    }

    #[test]
    fn the_first_list_streams_and_relists_replace_contents_atomically() {
        let store = ObjectStore::default();
        store.begin_list();
        let key = store.list_item(&cm("a"));
        assert!(!store.is_synced());
        assert_eq!(key.map(|k| k.name), Some("a".into()), "visible at once");
        assert_eq!(store.len(), 1);
        assert!(store.finish_list(), "streamed");
        assert!(store.is_synced());
        assert_eq!(store.len(), 1);

        // `a` was deleted while the watch was down; the relist only has `b`.
        store.begin_list();
        assert!(store.list_item(&cm("b")).is_none(), "staged");
        assert_eq!(store.len(), 1, "old contents stay until the list completes");
        assert!(!store.finish_list(), "not streamed");
        let keys = store.keys();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].name, "b");
    }

    #[test]
    fn a_failed_first_list_is_staged_when_retried() {
        let store = ObjectStore::default();
        store.begin_list();
        store.list_item(&cm("a"));
        // The list fails and starts over; `a` is gone meanwhile.
        store.begin_list();
        assert!(store.list_item(&cm("b")).is_none());
        assert!(!store.finish_list());
        let keys = store.keys();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].name, "b");
    }

    #[test]
    fn apply_and_delete_by_identity() {
        let store = ObjectStore::default();
        let (key, _) = store.apply(&cm("a")).unwrap();
        assert_eq!(key.to_string(), "ns/a");
        assert!(store.get(&key).is_some());
        store.delete(&cm("a"));
        assert!(store.get(&key).is_none());
    }

    /// A source, its copy as the destination holds it after the syncer wrote it (server
    /// fields, a status, and a label and a finalizer someone else added), and the key.
    fn source_and_copy() -> (Value, Value, ObjectRef) {
        use crate::transform::{downstream_copy, ObjectType};
        let ty = ObjectType::new("apps/v1", "Deployment");
        let source = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web", "namespace": "ns", "labels": { "app": "web", "tier": "front" },
                          "annotations": { "note": "kept" }, "uid": "up-uid", "resourceVersion": "3" },
            "spec": { "replicas": 2, "template": { "spec": { "containers": [{ "name": "c", "image": "nginx" }] } } }
        });
        let mut copy = downstream_copy(&source, &ty, "syncer-a");
        let meta = copy["metadata"].as_object_mut().unwrap();
        meta.insert("uid".into(), json!("down-uid"));
        meta.insert("resourceVersion".into(), json!("7"));
        meta.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
        meta.insert("generation".into(), json!(1));
        meta.insert("finalizers".into(), json!(["example.com/keep"]));
        meta["labels"]["owner-team"] = json!("blue");
        copy["spec"]["revisionHistoryLimit"] = json!(10);
        copy["status"] = json!({ "readyReplicas": 2 });
        let key = ObjectRef {
            cluster: None,
            namespace: Some("ns".into()),
            name: "web".into(),
        };
        (source, copy, key)
    }

    fn held_whole(store: &ObjectStore, copy: &Value) {
        store.begin_list();
        store.list_item(&raw(copy.clone()));
        store.finish_list();
    }

    #[test]
    fn a_verified_copy_gives_the_same_decisions_and_updates_as_the_whole_one() {
        use crate::transform::{downstream_copy, merge_for_update, needs_update, ObjectType};
        let (source, copy, key) = source_and_copy();
        let store = ObjectStore::default();
        held_whole(&store, &copy);
        assert!(!store.get_checked(&key).unwrap().1);
        store.keep_verified(&copy);
        let (kept, verified) = store.get_checked(&key).unwrap();
        assert!(verified, "reduced");
        assert!(kept.get("spec").is_none(), "content dropped: {kept}");
        assert_eq!(kept["status"], json!({ "readyReplicas": 2 }));
        assert_eq!(kept["metadata"]["uid"], "down-uid");
        assert_eq!(kept["metadata"]["resourceVersion"], "7");
        assert_eq!(kept["metadata"]["finalizers"], json!(["example.com/keep"]));
        assert_eq!(
            kept["metadata"]["labels"],
            json!({ "owner-team": "blue" }),
            "only others' labels"
        );
        assert_eq!(
            kept["metadata"]["annotations"][DESIRED_HASH_ANNOTATION],
            copy["metadata"]["annotations"][DESIRED_HASH_ANNOTATION]
        );

        // The source changes: a label goes, the spec changes. The update built from the
        // verified copy is the one the whole copy gives.
        let ty = ObjectType::new("apps/v1", "Deployment");
        let mut changed = source.clone();
        changed["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("tier");
        changed["spec"]["replicas"] = json!(3);
        let desired = downstream_copy(&changed, &ty, "syncer-a");
        assert!(needs_update(&desired, &copy));
        assert_eq!(merge_for_update(&desired, &kept), {
            let mut whole = merge_for_update(&desired, &copy);
            // Server-set fields the server ignores on update are not sent back.
            let meta = whole["metadata"].as_object_mut().unwrap();
            meta.remove("creationTimestamp");
            meta.remove("generation");
            whole
        });
        // Unchanged source: the same hash.
        let same = downstream_copy(&source, &ty, "syncer-a");
        assert_eq!(
            same["metadata"]["annotations"][DESIRED_HASH_ANNOTATION],
            kept["metadata"]["annotations"][DESIRED_HASH_ANNOTATION]
        );
    }

    #[test]
    fn a_changed_copy_comes_back_whole() {
        let (_, copy, key) = source_and_copy();
        let store = ObjectStore::default();
        held_whole(&store, &copy);
        store.keep_verified(&copy);
        // Its own echo changes nothing.
        assert!(!store.apply(&raw(copy.clone())).unwrap().1);
        assert!(store.get_checked(&key).unwrap().1);
        // Someone edits it: the new version is held whole, to be compared again.
        let mut edited = copy.clone();
        edited["metadata"]["resourceVersion"] = json!("8");
        edited["spec"]["replicas"] = json!(9);
        assert!(store.apply(&raw(edited)).unwrap().1);
        let (held, verified) = store.get_checked(&key).unwrap();
        assert!(!verified);
        assert_eq!(held["spec"]["replicas"], 9);
        // A verification of the older version does not reduce the newer one.
        store.keep_verified(&copy);
        assert!(!store.get_checked(&key).unwrap().1);
    }

    #[test]
    fn deleting_and_create_only_copies_stay_whole() {
        let (_, copy, key) = source_and_copy();
        let mut deleting = copy.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let mut create_only = copy.clone();
        create_only["metadata"]["annotations"][DOWNSYNC_OVERWRITE_ANNOTATION] = json!("false");
        for obj in [deleting, create_only] {
            let store = ObjectStore::default();
            held_whole(&store, &obj);
            store.keep_verified(&obj);
            assert!(!store.get_checked(&key).unwrap().1, "{obj}");
        }
    }

    #[test]
    fn keys_of_namespaced_and_cluster_scoped_objects_round_trip() {
        for key in [
            ObjectRef {
                cluster: None,
                namespace: Some("ns".into()),
                name: "a".into(),
            },
            ObjectRef {
                cluster: None,
                namespace: None,
                name: "system:node".into(),
            },
            ObjectRef {
                cluster: Some(Arc::from("root:org")),
                namespace: Some("ns".into()),
                name: "a".into(),
            },
            ObjectRef {
                cluster: Some(Arc::from("2x9a")),
                namespace: None,
                name: "pv".into(),
            },
        ] {
            assert_eq!(decode(&encode(&key), |c: &str| Arc::from(c)), key);
        }
        let store = ObjectStore::default();
        store.apply(&cm("a"));
        assert!(store.any_in_namespace("ns", |n| n == "a"));
        assert!(!store.any_in_namespace("other", |_| true));
    }

    #[test]
    fn a_clustered_store_keys_objects_by_their_logical_cluster_and_shares_the_names() {
        let store = ObjectStore::clustered();
        let in_cluster = |cluster: &str| {
            raw(
                json!({ "metadata": { "name": "a", "namespace": "ns", "resourceVersion": "1",
                "annotations": { KCP_CLUSTER_ANNOTATION: cluster } } }),
            )
        };
        let (one, _) = store.apply(&in_cluster("c1")).unwrap();
        let (two, _) = store.apply(&in_cluster("c2")).unwrap();
        assert_ne!(one, two, "same namespace and name, two clusters");
        assert_eq!(one.cluster(), "c1");
        assert_eq!(store.len(), 2);
        let keys = store.keys();
        let c1: Vec<_> = keys.iter().filter(|k| k.cluster() == "c1").collect();
        assert_eq!(c1.len(), 1);
        assert!(Arc::ptr_eq(
            c1[0].cluster.as_ref().unwrap(),
            one.cluster.as_ref().unwrap()
        ));
        assert_eq!(
            store.get(&one).unwrap()["metadata"]["annotations"][KCP_CLUSTER_ANNOTATION],
            "c1"
        );
        assert!(store.any_in_namespace("ns", |n| n == "a"));
        // An object without a cluster cannot be keyed on such a side.
        assert!(store.apply(&cm("b")).is_none());
        // What a key costs a one-cluster side: one pointer-sized option more than the
        // namespace and name (no allocation; cluster names are shared per store).
        assert_eq!(
            std::mem::size_of::<ObjectRef>(),
            2 * std::mem::size_of::<String>() + std::mem::size_of::<Option<Arc<str>>>()
        );
        // A plain store ignores the annotation.
        assert_eq!(
            ObjectStore::default().apply(&in_cluster("c1")).unwrap().0.cluster,
            None
        );
    }
}
