//! The in-memory copy of one side's objects of one resource type, fed by a watch.
//!
//! Objects are kept as compact JSON bytes without `managedFields` (a parsed
//! `serde_json::Value` tree costs several times more), and parsed when reconciled.
//!
//! Relists are explicit (linkerd's `reset`): a list replaces the contents atomically when
//! it completes, and the caller then reconciles every key of both sides, so an object
//! deleted while the watch was down cannot leak.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

/// An object's identity within one resource type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// The identity of `obj`, if it has a name.
    pub fn of(obj: &Value) -> Option<ObjectRef> {
        let meta = obj.get("metadata")?;
        Some(ObjectRef {
            namespace: meta.get("namespace").and_then(Value::as_str).map(str::to_owned),
            name: meta.get("name")?.as_str()?.to_owned(),
        })
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// One stored object: its resourceVersion and its JSON.
struct Stored {
    resource_version: Option<Box<str>>,
    json: Box<[u8]>,
}

impl Stored {
    fn of(obj: &Value) -> Stored {
        let mut obj = obj.clone();
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        Stored {
            resource_version: resource_version(&obj).map(Into::into),
            json: serde_json::to_vec(&obj)
                .expect("JSON value serializes")
                .into_boxed_slice(),
        }
    }
}

fn resource_version(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str)
}

#[derive(Default)]
struct Inner {
    objects: HashMap<ObjectRef, Stored>,
    /// Objects of a list in progress; replaces `objects` when the list completes.
    listing: Option<HashMap<ObjectRef, Stored>>,
    /// Whether a list has completed at least once.
    synced: bool,
    /// Whether the last list failed because the server does not serve the resource.
    not_served: bool,
}

/// One side's objects of one resource type.
#[derive(Default)]
pub struct ObjectStore {
    inner: RwLock<Inner>,
}

impl ObjectStore {
    /// The object with identity `key`.
    pub fn get(&self, key: &ObjectRef) -> Option<Arc<Value>> {
        let inner = self.inner.read();
        let stored = inner.objects.get(key)?;
        serde_json::from_slice(&stored.json).ok().map(Arc::new)
    }

    /// Every identity held.
    pub fn keys(&self) -> Vec<ObjectRef> {
        self.inner.read().objects.keys().cloned().collect()
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

    /// An object was added or changed. Returns its key, and whether it differs from
    /// what was held (a watch event echoing a write already recorded with
    /// [`ObjectStore::written`] does not).
    pub fn apply(&self, obj: &Value) -> Option<(ObjectRef, bool)> {
        let key = ObjectRef::of(obj)?;
        let stored = Stored::of(obj);
        let mut inner = self.inner.write();
        let changed = match (inner.objects.get(&key), &stored.resource_version) {
            (Some(old), Some(rv)) => old.resource_version.as_deref() != Some(&**rv),
            _ => true,
        };
        inner.objects.insert(key.clone(), stored);
        Some((key, changed))
    }

    /// Records an object this syncer just wrote, before its watch event arrives.
    pub fn written(&self, obj: &Value) {
        if self.is_synced() {
            self.apply(obj);
        }
    }

    /// An object was deleted.
    pub fn delete(&self, obj: &Value) -> Option<ObjectRef> {
        let key = ObjectRef::of(obj)?;
        self.inner.write().objects.remove(&key);
        Some(key)
    }

    /// A (re)list started.
    pub fn begin_list(&self) {
        self.inner.write().listing = Some(HashMap::new());
    }

    /// An object of the list in progress.
    pub fn list_item(&self, obj: &Value) {
        let Some(key) = ObjectRef::of(obj) else {
            return;
        };
        let stored = Stored::of(obj);
        let mut inner = self.inner.write();
        match inner.listing.as_mut() {
            Some(listing) => {
                listing.insert(key, stored);
            }
            None => {
                inner.objects.insert(key, stored);
            }
        }
    }

    /// The list completed: its objects replace the contents.
    pub fn finish_list(&self) {
        let mut inner = self.inner.write();
        if let Some(listing) = inner.listing.take() {
            inner.objects = listing;
        }
        inner.synced = true;
        inner.not_served = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_echo_of_a_recorded_write_is_not_a_change() {
        let store = ObjectStore::default();
        store.begin_list();
        store.finish_list();
        let obj = json!({ "metadata": { "name": "a", "resourceVersion": "5", "managedFields": [{}] } });
        store.written(&obj);
        assert!(!store.apply(&obj).unwrap().1);
        let newer = json!({ "metadata": { "name": "a", "resourceVersion": "6" } });
        assert!(store.apply(&newer).unwrap().1);
        let got = store.get(&ObjectRef::of(&newer).unwrap()).unwrap();
        assert_eq!(got["metadata"]["resourceVersion"], "6");
        store.apply(&obj);
        assert!(store.get(&ObjectRef::of(&obj).unwrap()).unwrap()["metadata"]
            .get("managedFields")
            .is_none());
    }

    fn cm(name: &str) -> Value {
        json!({ "metadata": { "name": name, "namespace": "ns" } })
    }

    #[test]
    fn relist_replaces_contents_atomically() {
        let store = ObjectStore::default();
        store.begin_list();
        store.list_item(&cm("a"));
        assert!(!store.is_synced());
        assert!(store.is_empty(), "nothing visible before the list completes");
        store.finish_list();
        assert!(store.is_synced());
        assert_eq!(store.len(), 1);

        // `a` was deleted while the watch was down; the relist only has `b`.
        store.begin_list();
        store.list_item(&cm("b"));
        assert_eq!(store.len(), 1, "old contents stay until the list completes");
        store.finish_list();
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
}
