//! The in-memory copy of one side's objects of one resource type, fed by a watch.
//!
//! Objects are kept as the JSON text the server sent (a parsed `serde_json::Value` tree
//! costs several times more), and parsed when reconciled (see [`super::raw`]).
//!
//! Relists are explicit (linkerd's `reset`): a list replaces the contents atomically when
//! it completes, and the caller then reconciles every key of both sides, so an object
//! deleted while the watch was down cannot leak.

use std::collections::HashMap;
use std::sync::Arc;

use kube::api::ObjectMeta;
use parking_lot::RwLock;
use serde_json::Value;

use super::raw::{parse_without_managed_fields, strip_managed_fields, RawObject};

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

    /// The identity in `meta`, if it has a name.
    pub fn of_meta(meta: &ObjectMeta) -> Option<ObjectRef> {
        Some(ObjectRef {
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
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
    json: Box<str>,
}

impl Stored {
    fn of(obj: &RawObject) -> Stored {
        Stored {
            resource_version: obj.metadata.resource_version.as_deref().map(Into::into),
            json: strip_managed_fields(obj.json()).into(),
        }
    }
}

#[derive(Default)]
struct Inner {
    objects: HashMap<ObjectRef, Stored>,
    /// Objects of a list in progress; replaces `objects` when the list completes.
    listing: Option<HashMap<ObjectRef, Stored>>,
    /// Whether the list in progress fills `objects` directly (see [`ObjectStore::begin_list`]).
    streaming: bool,
    /// Whether a list has completed at least once.
    synced: bool,
    /// Whether the last list failed because the server does not serve the resource.
    not_served: bool,
    /// Whether the last list failed because the syncer may not list or watch it.
    denied: bool,
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
        Some(Arc::new(parse_without_managed_fields(&stored.json)))
    }

    /// Every identity held.
    pub fn keys(&self) -> Vec<ObjectRef> {
        self.inner.read().objects.keys().cloned().collect()
    }

    /// Whether an object held in `namespace` has a name for which `matches` holds.
    pub fn any_in_namespace(&self, namespace: &str, matches: impl Fn(&str) -> bool) -> bool {
        self.inner
            .read()
            .objects
            .keys()
            .any(|key| key.namespace.as_deref() == Some(namespace) && matches(&key.name))
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
    fn holds_version(&self, key: &ObjectRef, rv: &str) -> bool {
        self.inner
            .read()
            .objects
            .get(key)
            .is_some_and(|old| old.resource_version.as_deref() == Some(rv))
    }

    /// An object was added or changed. Returns its key, and whether it differs from
    /// what was held (a watch event echoing a write already recorded with
    /// [`ObjectStore::written`] does not).
    pub fn apply(&self, obj: &RawObject) -> Option<(ObjectRef, bool)> {
        let key = ObjectRef::of_meta(&obj.metadata)?;
        if let Some(rv) = obj.metadata.resource_version.as_deref() {
            if self.holds_version(&key, rv) {
                return Some((key, false));
            }
        }
        let stored = Stored::of(obj);
        self.inner.write().objects.insert(key.clone(), stored);
        Some((key, true))
    }

    /// Records an object this syncer just wrote, before its watch event arrives.
    /// `replaced` is the resourceVersion the write was based on (`None` for a create):
    /// if the store has moved on since (a newer change, or the write's own event, came
    /// first), it already holds what the server has, and a write response handled late
    /// must not put an older version back.
    pub fn written(&self, obj: &RawObject, replaced: Option<&str>) {
        let Some(key) = ObjectRef::of_meta(&obj.metadata) else {
            return;
        };
        let mut inner = self.inner.write();
        let current = inner.objects.get(&key).map(|s| s.resource_version.as_deref());
        let based_on_current = match (current, replaced) {
            (None, None) => true,
            (Some(current), Some(replaced)) => current == Some(replaced),
            _ => false,
        };
        if inner.synced && based_on_current {
            inner.objects.insert(key, Stored::of(obj));
        }
    }

    /// An object was deleted.
    pub fn delete(&self, obj: &RawObject) -> Option<ObjectRef> {
        let key = ObjectRef::of_meta(&obj.metadata)?;
        self.inner.write().objects.remove(&key);
        Some(key)
    }

    /// A (re)list started. The first list into an empty store has nothing to replace,
    /// so it fills the store as its pages arrive ("streaming"): each object it has
    /// delivered may be reconciled before the list ends. Any other list is staged and
    /// replaces the contents when it completes.
    pub fn begin_list(&self) {
        let mut inner = self.inner.write();
        inner.streaming = !inner.synced && inner.objects.is_empty();
        inner.listing = (!inner.streaming).then(HashMap::new);
    }

    /// An object of the list in progress. Returns its key if it is visible at once (a
    /// streaming list).
    pub fn list_item(&self, obj: &RawObject) -> Option<ObjectRef> {
        let key = ObjectRef::of_meta(&obj.metadata)?;
        let stored = Stored::of(obj);
        let mut inner = self.inner.write();
        match inner.listing.as_mut() {
            Some(listing) => {
                listing.insert(key, stored);
                None
            }
            None => {
                inner.objects.insert(key.clone(), stored);
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
            namespace: None,
            name: "b".into(),
        };
        assert_eq!(store.get(&b).unwrap()["metadata"]["resourceVersion"], "9");
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
}
