//! How related objects follow their origin without polling: each origin resource that
//! a PublishedResource's `spec.related[]` names is watched on its origin side (the
//! service cluster, or every consumer cluster through the APIExport virtual workspace),
//! and an event queues exactly the primaries it concerns:
//!
//! - those whose last resolution looked for it ([`InterestIndex`]: by name from
//!   `object.reference`/`object.template`, by labels from `object.selector`), so an
//!   object created after its primary is seen too;
//! - with `watch.byOwner`, the primary its owner references name ([`owners`]);
//! - with `watch.bySelector`, the primaries carrying those labels.
//!
//! A primary is also queued whenever the engine brings its copy in line (its spec or its
//! copy changed), and every primary on a slow safety resync, so an event a watch missed
//! is not lost. Failures are retried per primary with backoff ([`RelatedQueue`]).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use ferry_api::syncagent::RelatedResourceWatch;

use super::related::{origin_resource, Interest, Origin};
use super::{Published, Slot};
use crate::engine::ObjectRef;
use crate::profile::ResourceType;

/// Default period of the safety resync of every primary's related objects.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(30);

/// Longest wait before a failed primary is tried again.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// An origin resource that is watched.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OriginResource {
    /// On the service cluster (else: in kcp, across consumer clusters).
    pub service: bool,
    /// Group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name.
    pub resource: String,
}

/// Every origin resource the related resources of `published` name.
pub fn wanted_watches(published: &[Published]) -> BTreeSet<OriginResource> {
    published
        .iter()
        .flat_map(|p| p.spec.related.iter())
        .filter(|spec| spec.origin == "service" || spec.origin == "kcp")
        .map(|spec| {
            let (group, version, resource) = origin_resource(spec);
            OriginResource {
                service: spec.origin == "service",
                group,
                version,
                resource,
            }
        })
        .filter(|r| !r.resource.is_empty())
        .collect()
}

/// The names that `obj`'s owner references give to owners of `group` and `kind` (any
/// version: the versions of one resource are the same objects).
pub fn owners(obj: &Value, group: &str, kind: &str) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| {
            let api_version = r["apiVersion"].as_str().unwrap_or_default();
            let ref_group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            ref_group == group && r["kind"].as_str() == Some(kind)
        })
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect()
}

/// The primaries on the origin side (kcp objects in `cluster`, or their copies on the
/// service cluster when `cluster` is `None`) that `watch` maps the origin object `obj`
/// to, as the reference does: with `byOwner`, those its owner references name (of the
/// primary's group and kind, in `obj`'s namespace when the primary is namespaced);
/// with `bySelector`, each of `candidates` whose labels match.
pub fn watched_primaries(
    watch: &RelatedResourceWatch,
    primary: &ResourceType,
    cluster: Option<&str>,
    obj: &Value,
    candidates: impl Iterator<Item = (ObjectRef, Arc<Value>)>,
) -> Vec<ObjectRef> {
    let mut out = vec![];
    if watch.by_owner.is_some() {
        let namespace = obj["metadata"]["namespace"]
            .as_str()
            .filter(|ns| !ns.is_empty() && primary.id.namespaced);
        for name in owners(obj, &primary.id.group, &primary.kind) {
            out.push(ObjectRef {
                cluster: cluster.map(Into::into),
                namespace: namespace.map(str::to_string),
                name,
            });
        }
    }
    if let Some(selector) = &watch.by_selector {
        out.extend(
            candidates
                .filter(|(_, o)| super::filter::matches(selector, &super::filter::labels_of(o)))
                .map(|(k, _)| k),
        );
    }
    out
}

type Place = (Origin, String, String, Option<String>);

/// Which primaries look for which origin objects, as their last resolution found.
#[derive(Default)]
pub struct InterestIndex {
    inner: RwLock<IndexInner>,
}

#[derive(Default)]
struct IndexInner {
    by_slot: HashMap<Slot, Vec<Interest>>,
    by_place: HashMap<Place, HashSet<Slot>>,
}

fn place(i: &Interest) -> Place {
    (
        i.origin.clone(),
        i.group.clone(),
        i.resource.clone(),
        i.namespace.clone(),
    )
}

impl InterestIndex {
    /// Replaces what the primary `slot` looks for.
    pub fn set(&self, slot: &Slot, interests: Vec<Interest>) {
        let mut inner = self.inner.write();
        if inner.by_slot.get(slot) == Some(&interests) {
            return;
        }
        Self::remove(&mut inner, slot);
        for i in &interests {
            inner.by_place.entry(place(i)).or_default().insert(slot.clone());
        }
        if !interests.is_empty() {
            inner.by_slot.insert(slot.clone(), interests);
        }
    }

    /// Forgets the primary `slot`.
    pub fn forget(&self, slot: &Slot) {
        Self::remove(&mut self.inner.write(), slot);
    }

    /// Forgets every primary for which `keep` is false.
    pub fn retain(&self, keep: impl Fn(&Slot) -> bool) {
        let mut inner = self.inner.write();
        let gone: Vec<Slot> = inner.by_slot.keys().filter(|s| !keep(s)).cloned().collect();
        for slot in &gone {
            Self::remove(&mut inner, slot);
        }
    }

    fn remove(inner: &mut IndexInner, slot: &Slot) {
        let Some(old) = inner.by_slot.remove(slot) else {
            return;
        };
        for i in &old {
            let p = place(i);
            if let Some(slots) = inner.by_place.get_mut(&p) {
                slots.remove(slot);
                if slots.is_empty() {
                    inner.by_place.remove(&p);
                }
            }
        }
    }

    /// The primaries that look for the origin object `obj` of `group`/`resource` at
    /// `origin`.
    pub fn affected(&self, origin: &Origin, group: &str, resource: &str, obj: &Value) -> Vec<Slot> {
        let namespace = obj["metadata"]["namespace"].as_str().unwrap_or_default();
        let inner = self.inner.read();
        let mut out = vec![];
        for ns in [Some(namespace.to_string()), None] {
            let p = (origin.clone(), group.to_string(), resource.to_string(), ns);
            for slot in inner.by_place.get(&p).into_iter().flatten() {
                let hit = inner
                    .by_slot
                    .get(slot)
                    .is_some_and(|is| is.iter().any(|i| i.matches(origin, group, resource, obj)));
                if hit && !out.contains(slot) {
                    out.push(slot.clone());
                }
            }
        }
        out
    }

    /// How many primaries look for something.
    pub fn len(&self) -> usize {
        self.inner.read().by_slot.len()
    }

    /// Whether no primary looks for anything.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Primaries whose related objects are to be synced, each once however often queued
/// and never by two workers at once. What a watch or a changed copy asks for goes
/// before what the safety resync asks for, so a resync of many primaries never holds
/// up a change.
#[derive(Default)]
pub struct RelatedQueue {
    state: Mutex<QueueState>,
    wake: tokio::sync::Notify,
    failures: Mutex<HashMap<Slot, u32>>,
}

#[derive(Default)]
struct QueueState {
    urgent: VecDeque<Slot>,
    background: VecDeque<Slot>,
    /// Queued (in one of the deques; a stale entry in the other is skipped).
    queued: HashSet<Slot>,
    /// Being synced.
    active: HashSet<Slot>,
    /// Queued again while being synced: queued once done.
    again: HashSet<Slot>,
}

impl RelatedQueue {
    /// Queues `slot` ahead of the resync's work.
    pub fn add(&self, slot: Slot) {
        self.push(slot, true);
    }

    /// Queues `slot` behind everything else (the safety resync).
    pub fn add_background(&self, slot: Slot) {
        self.push(slot, false);
    }

    fn push(&self, slot: Slot, urgent: bool) {
        let mut state = self.state.lock();
        if state.active.contains(&slot) {
            state.again.insert(slot);
            return;
        }
        let fresh = state.queued.insert(slot.clone());
        if urgent {
            state.urgent.push_back(slot);
        } else if fresh {
            state.background.push_back(slot);
        }
        drop(state);
        self.wake.notify_one();
    }

    /// Waits for a queued primary and takes it; [`RelatedQueue::done`] must follow.
    pub async fn next(&self) -> Slot {
        loop {
            {
                let mut state = self.state.lock();
                while let Some(slot) = state.urgent.pop_front().or_else(|| state.background.pop_front()) {
                    if state.queued.remove(&slot) {
                        state.active.insert(slot.clone());
                        return slot;
                    }
                }
            }
            self.wake.notified().await;
        }
    }

    /// `slot` is synced (or failed): queued again if asked for meanwhile.
    pub fn done(&self, slot: &Slot) {
        let again = {
            let mut state = self.state.lock();
            state.active.remove(slot);
            state.again.remove(slot)
        };
        if again {
            self.add(slot.clone());
        }
    }

    /// How many primaries are queued.
    pub fn len(&self) -> usize {
        self.state.lock().queued.len()
    }

    /// Whether none is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records a failure of `slot`; returns how long to wait before trying it again
    /// (doubling from half a second up to [`MAX_RETRY`]).
    pub fn failed(&self, slot: &Slot) -> Duration {
        let mut failures = self.failures.lock();
        let n = failures.entry(slot.clone()).or_insert(0);
        *n = n.saturating_add(1);
        let delay = Duration::from_millis(500).saturating_mul(1 << (*n - 1).min(10));
        delay.min(MAX_RETRY)
    }

    /// `slot` succeeded (or is gone): its backoff starts over.
    pub fn succeeded(&self, slot: &Slot) {
        let mut failures = self.failures.lock();
        if !failures.is_empty() {
            failures.remove(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slot(name: &str) -> Slot {
        (
            "g".into(),
            "certs".into(),
            ObjectRef {
                cluster: Some("c1".into()),
                namespace: Some("default".into()),
                name: name.into(),
            },
        )
    }

    fn by_name(origin: Origin, ns: &str, name: &str) -> Interest {
        Interest {
            origin,
            group: "".into(),
            resource: "secrets".into(),
            namespace: Some(ns.into()),
            name: Some(name.into()),
            labels: None,
        }
    }

    fn secret(ns: &str, name: &str, labels: Value) -> Value {
        json!({ "metadata": { "namespace": ns, "name": name, "labels": labels } })
    }

    #[test]
    fn an_origin_event_finds_the_primaries_that_look_for_it() {
        let idx = InterestIndex::default();
        idx.set(&slot("a"), vec![by_name(Origin::Service, "c1", "a-tls")]);
        let labelled = Interest {
            namespace: None,
            name: None,
            labels: Some(serde_json::from_value(json!({ "matchLabels": { "cert": "b" } })).unwrap()),
            ..by_name(Origin::Kcp("c1".into()), "", "")
        };
        idx.set(&slot("b"), vec![labelled]);
        let s = Origin::Service;
        assert_eq!(
            idx.affected(&s, "", "secrets", &secret("c1", "a-tls", json!({}))),
            [slot("a")]
        );
        assert!(idx
            .affected(&s, "", "secrets", &secret("c2", "a-tls", json!({})))
            .is_empty());
        assert!(idx
            .affected(&s, "", "configmaps", &secret("c1", "a-tls", json!({})))
            .is_empty());
        // By labels, in any namespace, in its own cluster only.
        let k1 = Origin::Kcp("c1".into());
        let b = secret("any", "x", json!({ "cert": "b" }));
        assert_eq!(idx.affected(&k1, "", "secrets", &b), [slot("b")]);
        assert!(idx
            .affected(&Origin::Kcp("c2".into()), "", "secrets", &b)
            .is_empty());
        assert!(idx
            .affected(&k1, "", "secrets", &secret("any", "x", json!({ "cert": "z" })))
            .is_empty());
        // A new resolution replaces the old; a forgotten primary is found no more.
        idx.set(&slot("a"), vec![by_name(Origin::Service, "c1", "renamed")]);
        assert!(idx
            .affected(&s, "", "secrets", &secret("c1", "a-tls", json!({})))
            .is_empty());
        idx.forget(&slot("a"));
        assert_eq!(idx.len(), 1);
        idx.retain(|s| s.2.name != "b");
        assert!(idx.is_empty());
        assert!(idx.inner.read().by_place.is_empty());
    }

    #[test]
    fn owner_references_name_owners_of_the_primarys_group_and_kind() {
        let obj = json!({ "metadata": { "ownerReferences": [
            { "apiVersion": "example.com/v1", "kind": "Certificate", "name": "web", "uid": "1" },
            { "apiVersion": "example.com/v2", "kind": "Certificate", "name": "web2", "uid": "2" },
            { "apiVersion": "other.com/v1", "kind": "Certificate", "name": "no", "uid": "3" },
            { "apiVersion": "v1", "kind": "ConfigMap", "name": "no2", "uid": "4" },
        ] } });
        assert_eq!(owners(&obj, "example.com", "Certificate"), ["web", "web2"]);
        assert_eq!(owners(&obj, "", "ConfigMap"), ["no2"]);
        assert!(owners(&json!({}), "example.com", "Certificate").is_empty());
    }

    #[test]
    fn watch_by_owner_or_by_selector_maps_to_primaries_as_the_reference_does() {
        let primary = ResourceType {
            id: crate::selection::ResourceId::new("example.com", "v1", "certificates", true),
            kind: "Certificate".into(),
        };
        let by_owner: RelatedResourceWatch = serde_json::from_value(json!({ "byOwner": {} })).unwrap();
        let by_selector: RelatedResourceWatch =
            serde_json::from_value(json!({ "bySelector": { "matchLabels": { "tier": "web" } } })).unwrap();
        let related = json!({ "metadata": { "namespace": "default", "name": "tls", "ownerReferences": [
            { "apiVersion": "example.com/v1", "kind": "Certificate", "name": "web", "uid": "1" }] } });
        let at = |cluster: Option<&str>, name: &str| ObjectRef {
            cluster: cluster.map(Into::into),
            namespace: Some("default".into()),
            name: name.into(),
        };
        let none = std::iter::empty();
        assert_eq!(
            watched_primaries(&by_owner, &primary, Some("c1"), &related, none),
            [at(Some("c1"), "web")]
        );
        assert_eq!(
            watched_primaries(&by_owner, &primary, None, &related, std::iter::empty()),
            [at(None, "web")]
        );
        let candidates = vec![
            (
                at(Some("c1"), "a"),
                Arc::new(json!({ "metadata": { "labels": { "tier": "web" } } })),
            ),
            (
                at(Some("c1"), "b"),
                Arc::new(json!({ "metadata": { "labels": { "tier": "db" } } })),
            ),
        ];
        assert_eq!(
            watched_primaries(
                &by_selector,
                &primary,
                Some("c1"),
                &related,
                candidates.into_iter()
            ),
            [at(Some("c1"), "a")]
        );
        // Neither: the index alone says.
        let neither = RelatedResourceWatch::default();
        assert!(watched_primaries(&neither, &primary, None, &related, std::iter::empty()).is_empty());
    }

    #[tokio::test]
    async fn the_queue_puts_changes_before_the_resync_and_never_syncs_one_primary_twice_at_once() {
        let q = RelatedQueue::default();
        for name in ["r1", "r2", "a"] {
            q.add_background(slot(name));
        }
        q.add(slot("w"));
        q.add(slot("w"));
        q.add_background(slot("w"));
        assert_eq!(q.len(), 4, "each once");
        assert_eq!(q.next().await, slot("w"), "a change first");
        // Asked for again while being synced: once more when done, before the resync.
        q.add(slot("w"));
        q.add_background(slot("w"));
        assert_eq!(q.next().await, slot("r1"));
        q.done(&slot("w"));
        q.add(slot("a"));
        assert_eq!(q.next().await, slot("w"));
        assert_eq!(q.next().await, slot("a"), "moved ahead by a change");
        assert_eq!(q.next().await, slot("r2"));
        assert!(q.is_empty());
        for name in ["w", "r1", "a", "r2"] {
            q.done(&slot(name));
        }
        assert!(q.is_empty(), "nothing was asked for meanwhile");
        let waiting = tokio::time::timeout(Duration::from_millis(50), q.next()).await;
        assert!(waiting.is_err(), "next waits while nothing is queued");
    }

    #[test]
    fn failures_back_off_and_start_over_after_a_success() {
        let q = RelatedQueue::default();
        let s = slot("a");
        assert_eq!(q.failed(&s), Duration::from_millis(500));
        assert_eq!(q.failed(&s), Duration::from_secs(1));
        for _ in 0..20 {
            q.failed(&s);
        }
        assert_eq!(q.failed(&s), MAX_RETRY);
        q.succeeded(&s);
        assert_eq!(q.failed(&s), Duration::from_millis(500));
    }
}
