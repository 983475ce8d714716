//! The dependency graph the collector keeps in memory, fed by the store's
//! watch stream: owner uid → dependents (per workspace), and the owners
//! waiting for the collector. Objects whose stored JSON never mentions
//! `ownerReferences` or `deletionTimestamp` cost one substring scan each.
//!
//! [`DependentsIndex::observe`] applies one event and says what needs a
//! look; [`DependentsIndex::reset`] rebuilds everything from a full listing
//! (start-up, or after the watch fell behind), so nothing missed can leak.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::owners::{mentions_deletion, mentions_owner_references, OwnerRef, Ownership};
use super::Work;
use ferry_server::storage::{EventType, ObjectKey, StoredObject, WatchEvent};

/// How an owner waits for the collector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// `foregroundDeletion`: for its dependents to be deleted.
    Foreground,
    /// `orphan`: for its dependents to drop their references to it.
    Orphan,
}

#[derive(Debug, Default)]
pub struct DependentsIndex {
    /// Each dependent's owner references.
    owners: HashMap<ObjectKey, Vec<OwnerRef>>,
    /// cluster → owner uid → dependents.
    dependents: HashMap<String, HashMap<String, BTreeSet<ObjectKey>>>,
    /// cluster → owner name → references naming it: whether a deletion can
    /// concern an owner, decided without parsing the deleted object.
    named: HashMap<String, HashMap<String, usize>>,
    /// Owners being deleted that wait for the collector: key → (uid, how).
    waiting: HashMap<ObjectKey, (String, Waiting)>,
    /// cluster → uid → key, the reverse of `waiting`.
    waiting_by_uid: HashMap<String, HashMap<String, ObjectKey>>,
    /// cluster → uids of owners seen deleted that still have dependents:
    /// absent for sure, even when their kind is no longer served (a CRD
    /// deleted with its custom resources). uids are never reused.
    deleted: HashMap<String, HashSet<String>>,
}

impl DependentsIndex {
    /// Forget everything and index `objects` afresh. Returns the work a
    /// fresh collector has: every dependent (its owners may have gone while
    /// nobody watched) and every owner waiting for the collector.
    pub fn reset(&mut self, objects: impl IntoIterator<Item = (ObjectKey, Arc<StoredObject>)>) -> Vec<Work> {
        *self = DependentsIndex::default();
        for (key, obj) in objects {
            let refs = mentions_owner_references(&obj.json);
            let deletion = mentions_deletion(&obj.json);
            if !refs && !deletion {
                continue;
            }
            let o = Ownership::parse(&obj.json);
            if let Some(how) = waiting_of(&o) {
                self.set_waiting(&key, &o.uid, how);
            }
            self.set_owners(&key, o.owners);
        }
        let mut work: Vec<Work> = self.owners.keys().cloned().map(Work::Dependent).collect();
        work.extend(self.waiting.keys().cloned().map(Work::Owner));
        work.sort();
        work
    }

    /// Apply one committed change; returns what the collector should look at.
    pub fn observe(&mut self, event: &WatchEvent) -> Vec<Work> {
        let key = &event.key;
        let json = &event.object.json;
        let mut work = Vec::new();
        match event.kind {
            EventType::Added | EventType::Modified => {
                let mut parsed = None;
                if self.owners.contains_key(key) || mentions_owner_references(json) {
                    let o = Ownership::parse(json);
                    let old = self.set_owners(key, o.owners.clone());
                    if old != o.owners {
                        if !o.owners.is_empty() {
                            // New references may point at nothing; changed ones may unblock.
                            work.push(Work::Dependent(key.clone()));
                        }
                        self.waiting_owners_of(key, old.iter().chain(&o.owners), &mut work);
                    }
                    parsed = Some(o);
                }
                if self.waiting.contains_key(key) || mentions_deletion(json) {
                    let o = parsed.unwrap_or_else(|| Ownership::parse(json));
                    match waiting_of(&o) {
                        Some(how) => {
                            self.set_waiting(key, &o.uid, how);
                            work.push(Work::Owner(key.clone()));
                        }
                        None => self.clear_waiting(key),
                    }
                }
            }
            EventType::Deleted => {
                if let Some(old) = self.remove_owners(key) {
                    self.waiting_owners_of(key, old.iter(), &mut work);
                }
                self.clear_waiting(key);
                if self.is_named(&key.cluster, &key.name) {
                    let uid = Ownership::parse(json).uid;
                    let dependents = self.dependents_of(&key.cluster, &uid);
                    if !dependents.is_empty() {
                        self.deleted.entry(key.cluster.clone()).or_default().insert(uid);
                    }
                    work.extend(dependents.into_iter().map(Work::Dependent));
                }
            }
        }
        work
    }

    /// The dependents of the owner with `uid` in `cluster`.
    pub fn dependents_of(&self, cluster: &str, uid: &str) -> Vec<ObjectKey> {
        self.dependents
            .get(cluster)
            .and_then(|m| m.get(uid))
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether the object with `uid` in `cluster` owns anything, and whether
    /// one of its dependents is itself being deleted in the foreground.
    pub fn descendants(&self, cluster: &str, uid: &str) -> super::decide::Descendants {
        let deps = self.dependents.get(cluster).and_then(|m| m.get(uid));
        super::decide::Descendants {
            exist: deps.is_some_and(|d| !d.is_empty()),
            one_deleting_dependents: deps.is_some_and(|d| {
                d.iter()
                    .any(|k| matches!(self.waiting.get(k), Some((_, Waiting::Foreground))))
            }),
        }
    }

    /// Whether the owner with `uid` in `cluster` was seen deleted.
    pub fn is_deleted(&self, cluster: &str, uid: &str) -> bool {
        self.deleted.get(cluster).is_some_and(|d| d.contains(uid))
    }

    /// Whether nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.owners.is_empty() && self.waiting.is_empty() && self.deleted.is_empty()
    }

    fn is_named(&self, cluster: &str, name: &str) -> bool {
        self.named.get(cluster).is_some_and(|m| m.contains_key(name))
    }

    /// Owners among `refs` that wait for the collector, as work.
    fn waiting_owners_of<'a>(
        &self,
        key: &ObjectKey,
        refs: impl Iterator<Item = &'a OwnerRef>,
        work: &mut Vec<Work>,
    ) {
        let Some(by_uid) = self.waiting_by_uid.get(&key.cluster) else {
            return;
        };
        for r in refs {
            if let Some(owner) = by_uid.get(&r.uid) {
                let w = Work::Owner(owner.clone());
                if !work.contains(&w) {
                    work.push(w);
                }
            }
        }
    }

    /// Record `key`'s references; returns the previous ones.
    fn set_owners(&mut self, key: &ObjectKey, refs: Vec<OwnerRef>) -> Vec<OwnerRef> {
        let old = self.remove_owners(key).unwrap_or_default();
        if refs.is_empty() {
            return old;
        }
        let deps = self.dependents.entry(key.cluster.clone()).or_default();
        let named = self.named.entry(key.cluster.clone()).or_default();
        for r in &refs {
            deps.entry(r.uid.clone()).or_default().insert(key.clone());
            *named.entry(r.name.clone()).or_default() += 1;
        }
        self.owners.insert(key.clone(), refs);
        old
    }

    fn remove_owners(&mut self, key: &ObjectKey) -> Option<Vec<OwnerRef>> {
        let old = self.owners.remove(key)?;
        if let Some(deps) = self.dependents.get_mut(&key.cluster) {
            for r in &old {
                if let Some(set) = deps.get_mut(&r.uid) {
                    set.remove(key);
                    if set.is_empty() {
                        deps.remove(&r.uid);
                        if let Some(deleted) = self.deleted.get_mut(&key.cluster) {
                            deleted.remove(&r.uid);
                            if deleted.is_empty() {
                                self.deleted.remove(&key.cluster);
                            }
                        }
                    }
                }
            }
            if deps.is_empty() {
                self.dependents.remove(&key.cluster);
            }
        }
        if let Some(named) = self.named.get_mut(&key.cluster) {
            for r in &old {
                if let Some(n) = named.get_mut(&r.name) {
                    *n -= 1;
                    if *n == 0 {
                        named.remove(&r.name);
                    }
                }
            }
            if named.is_empty() {
                self.named.remove(&key.cluster);
            }
        }
        Some(old)
    }

    fn set_waiting(&mut self, key: &ObjectKey, uid: &str, how: Waiting) {
        self.clear_waiting(key);
        self.waiting.insert(key.clone(), (uid.to_string(), how));
        self.waiting_by_uid
            .entry(key.cluster.clone())
            .or_default()
            .insert(uid.to_string(), key.clone());
    }

    fn clear_waiting(&mut self, key: &ObjectKey) {
        let Some((uid, _)) = self.waiting.remove(key) else {
            return;
        };
        if let Some(by_uid) = self.waiting_by_uid.get_mut(&key.cluster) {
            by_uid.remove(&uid);
            if by_uid.is_empty() {
                self.waiting_by_uid.remove(&key.cluster);
            }
        }
    }
}

fn waiting_of(o: &Ownership) -> Option<Waiting> {
    if o.deleting_dependents() {
        Some(Waiting::Foreground)
    } else if o.orphaning_dependents() {
        Some(Waiting::Orphan)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::{json, Value};

    fn key(cluster: &str, name: &str) -> ObjectKey {
        ObjectKey {
            cluster: cluster.into(),
            resource: "/configmaps".into(),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    fn stored(v: Value) -> Arc<StoredObject> {
        Arc::new(StoredObject {
            rv: 1,
            json: serde_json::to_vec(&v).unwrap().into(),
            labels: Default::default(),
        })
    }

    /// A ConfigMap `name` with uid `uid` owned by the ConfigMaps `(name, uid)` of `owners`.
    fn mk_cm(name: &str, uid: &str, owners: &[(&str, &str)]) -> Value {
        let refs: Vec<Value> = owners
            .iter()
            .map(|(n, u)| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": u}))
            .collect();
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": name, "namespace": "default", "uid": uid}});
        if !refs.is_empty() {
            v["metadata"]["ownerReferences"] = json!(refs);
        }
        v
    }

    fn deleting(mut v: Value, finalizer: &str) -> Value {
        v["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        v["metadata"]["finalizers"] = json!([finalizer]);
        v
    }

    fn event(kind: EventType, k: ObjectKey, v: Value) -> WatchEvent {
        WatchEvent::new(kind, k, stored(v), None)
    }

    #[test]
    fn deleting_an_owner_points_at_its_dependents_in_its_workspace_only() {
        let mut idx = DependentsIndex::default();
        let w = idx.observe(&event(
            EventType::Added,
            key("a", "child"),
            mk_cm("child", "c1", &[("owner", "o1")]),
        ));
        assert_eq!(w, vec![Work::Dependent(key("a", "child"))]);
        // Same names and uids in another workspace are another graph.
        idx.observe(&event(
            EventType::Added,
            key("b", "child"),
            mk_cm("child", "c2", &[("owner", "o1")]),
        ));
        let w = idx.observe(&event(
            EventType::Deleted,
            key("a", "owner"),
            mk_cm("owner", "o1", &[]),
        ));
        assert_eq!(w, vec![Work::Dependent(key("a", "child"))]);
        // An object nobody names is not even parsed for its uid.
        let w = idx.observe(&event(
            EventType::Deleted,
            key("a", "other"),
            mk_cm("other", "o1", &[]),
        ));
        assert!(w.is_empty());
    }

    #[test]
    fn owners_seen_deleted_are_remembered_while_they_have_dependents() {
        let mut idx = DependentsIndex::default();
        idx.observe(&event(
            EventType::Added,
            key("a", "child"),
            mk_cm("child", "c1", &[("owner", "o1")]),
        ));
        idx.observe(&event(
            EventType::Deleted,
            key("a", "owner"),
            mk_cm("owner", "o1", &[]),
        ));
        assert!(idx.is_deleted("a", "o1"));
        assert!(!idx.is_deleted("b", "o1"));
        idx.observe(&event(
            EventType::Deleted,
            key("a", "child"),
            mk_cm("child", "c1", &[("owner", "o1")]),
        ));
        assert!(!idx.is_deleted("a", "o1"), "forgotten with its last dependent");
        assert!(idx.is_empty());
    }

    #[test]
    fn unchanged_references_need_no_work_and_removed_ones_leave_the_index() {
        let mut idx = DependentsIndex::default();
        let child = mk_cm("child", "c1", &[("owner", "o1")]);
        idx.observe(&event(EventType::Added, key("a", "child"), child.clone()));
        assert!(idx
            .observe(&event(EventType::Modified, key("a", "child"), child))
            .is_empty());
        let w = idx.observe(&event(
            EventType::Modified,
            key("a", "child"),
            mk_cm("child", "c1", &[]),
        ));
        assert!(w.is_empty(), "no references left: nothing to collect");
        assert!(idx.dependents_of("a", "o1").is_empty());
        assert!(idx.is_empty());
    }

    #[test]
    fn owners_waiting_for_the_collector_are_tracked_and_woken_by_their_dependents() {
        let mut idx = DependentsIndex::default();
        idx.observe(&event(
            EventType::Added,
            key("a", "child"),
            mk_cm("child", "c1", &[("owner", "o1")]),
        ));
        let owner = deleting(mk_cm("owner", "o1", &[]), "foregroundDeletion");
        let w = idx.observe(&event(EventType::Modified, key("a", "owner"), owner));
        assert_eq!(w, vec![Work::Owner(key("a", "owner"))]);
        assert!(!idx.descendants("a", "o1").one_deleting_dependents);
        // The dependent going away is what the waiting owner needs to hear about.
        let w = idx.observe(&event(
            EventType::Deleted,
            key("a", "child"),
            mk_cm("child", "c1", &[("owner", "o1")]),
        ));
        assert_eq!(w, vec![Work::Owner(key("a", "owner"))]);
        // Its finalizer removed (other finalizers left), it no longer waits.
        let mut done = mk_cm("owner", "o1", &[]);
        done["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        done["metadata"]["finalizers"] = json!(["example.com/keep"]);
        assert!(idx
            .observe(&event(EventType::Modified, key("a", "owner"), done))
            .is_empty());
        assert!(idx.is_empty());
    }

    #[test]
    fn reset_rebuilds_from_a_listing_and_returns_all_pending_work() {
        let mut idx = DependentsIndex::default();
        idx.observe(&event(
            EventType::Added,
            key("a", "stale"),
            mk_cm("stale", "s1", &[("gone", "g1")]),
        ));
        let child = stored(mk_cm("child", "c1", &[("owner", "o1")]));
        let orphaning = stored(deleting(mk_cm("owner", "o1", &[]), "orphan"));
        let plain = stored(mk_cm("plain", "p1", &[]));
        let w = idx.reset([
            (key("a", "child"), child),
            (key("a", "owner"), orphaning),
            (key("a", "plain"), plain),
        ]);
        assert_eq!(
            w,
            vec![Work::Dependent(key("a", "child")), Work::Owner(key("a", "owner"))]
        );
        assert!(
            idx.dependents_of("a", "g1").is_empty(),
            "a missed deletion cannot leak"
        );
        assert_eq!(idx.dependents_of("a", "o1"), vec![key("a", "child")]);
    }
}
