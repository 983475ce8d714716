//! The per-object rules of kcp TMC scheduling, as changes to an object's
//! metadata: which `state.workload.kcp.io/<key>` labels a namespace and the
//! objects in it carry, and the deletion handshake when they leave a
//! target. Pure: metadata in, a [`MetaPatch`] out.
//!
//! The handshake (kcp's): an object leaving target K first gets the
//! annotation `deletion.internal.workload.kcp.io/K` (its syncer then removes
//! the downstream copy); its label `state.workload.kcp.io/K` goes only once
//! the object no longer carries the syncer's finalizer
//! `workload.kcp.io/syncer-K` nor soft finalizers in
//! `finalizers.workload.kcp.io/K`. An object deleted upstream gets the
//! annotation for every target, with the deletion time, and stays (held by
//! the finalizers) until each syncer lets go.

use std::collections::{BTreeMap, BTreeSet};

use ferry_api::well_known::{
    workload_deletion_annotation, workload_finalizer_target, workload_soft_finalizers_annotation,
    workload_syncer_finalizer, WORKLOAD_STATE_LABEL_PREFIX, WORKLOAD_STATE_SYNC, WORKLOAD_STATE_UPSYNC,
};
use serde_json::{json, Map, Value};

const DELETION_PREFIX: &str = "deletion.internal.workload.kcp.io/";

/// The metadata the rules read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub finalizers: Vec<String>,
    /// `metadata.deletionTimestamp`, when the object is being deleted.
    pub deletion_timestamp: Option<String>,
}

impl Meta {
    pub fn of(obj: &Value) -> Meta {
        let map = |path: &str| -> BTreeMap<String, String> {
            obj.pointer(path)
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        };
        Meta {
            labels: map("/metadata/labels"),
            annotations: map("/metadata/annotations"),
            finalizers: obj
                .pointer("/metadata/finalizers")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
            deletion_timestamp: obj
                .pointer("/metadata/deletionTimestamp")
                .and_then(Value::as_str)
                .map(String::from),
        }
    }

    /// [`Meta::of`] a stored object, without building its JSON tree: the labels
    /// the store parsed already, the rest of the metadata read on its own (a
    /// namespace placed on thousands of targets carries thousands of labels).
    pub fn of_stored(obj: &ferry_server::storage::StoredObject) -> Meta {
        #[derive(serde::Deserialize, Default)]
        struct Object {
            #[serde(default)]
            metadata: Rest,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct Rest {
            #[serde(default)]
            annotations: BTreeMap<String, String>,
            #[serde(default)]
            finalizers: Vec<String>,
            deletion_timestamp: Option<String>,
        }
        match serde_json::from_slice::<Object>(&obj.json) {
            Ok(Object { metadata }) => Meta {
                labels: obj.labels.clone(),
                annotations: metadata.annotations,
                finalizers: metadata.finalizers,
                deletion_timestamp: metadata.deletion_timestamp,
            },
            Err(_) => Meta::of(&obj.value()),
        }
    }

    /// Keys of the targets the object has a state label for (any value).
    pub fn keys(&self) -> BTreeSet<String> {
        self.labels
            .keys()
            .filter_map(|k| k.strip_prefix(WORKLOAD_STATE_LABEL_PREFIX))
            .map(String::from)
            .collect()
    }

    /// Keys being removed, with their deletion time.
    pub fn deleting(&self) -> BTreeMap<String, String> {
        self.annotations
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(DELETION_PREFIX)?.to_string(), v.clone())))
            .collect()
    }

    /// Whether the syncer of `key` still holds the object (its finalizer,
    /// or soft finalizers).
    pub fn held_by(&self, key: &str) -> bool {
        self.finalizers.contains(&workload_syncer_finalizer(key))
            || self
                .annotations
                .get(&workload_soft_finalizers_annotation(key))
                .is_some_and(|v| !v.is_empty())
    }

    /// Whether the object is upsynced from some target (the syncer owns it).
    pub fn upsynced(&self) -> bool {
        self.labels
            .iter()
            .any(|(k, v)| k.starts_with(WORKLOAD_STATE_LABEL_PREFIX) && v == WORKLOAD_STATE_UPSYNC)
    }

    /// Whether any scheduling metadata is present (a cheap first test).
    pub fn scheduled(&self) -> bool {
        !self.keys().is_empty()
            || !self.deleting().is_empty()
            || self
                .finalizers
                .iter()
                .any(|f| workload_finalizer_target(f).is_some())
    }
}

/// Changes to an object's metadata (`None`: remove the key).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetaPatch {
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
    /// The whole new list, when it changes.
    pub finalizers: Option<Vec<String>>,
}

impl MetaPatch {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty() && self.finalizers.is_none()
    }

    /// The JSON merge patch, pinned to `resource_version`.
    pub fn to_merge_patch(&self, resource_version: u64) -> Value {
        let to_map = |m: &BTreeMap<String, Option<String>>| -> Value {
            Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), v.clone().map_or(Value::Null, Value::String)))
                    .collect::<Map<String, Value>>(),
            )
        };
        let mut meta = json!({"resourceVersion": resource_version.to_string()});
        if !self.labels.is_empty() {
            meta["labels"] = to_map(&self.labels);
        }
        if !self.annotations.is_empty() {
            meta["annotations"] = to_map(&self.annotations);
        }
        if let Some(f) = &self.finalizers {
            meta["finalizers"] = json!(f);
        }
        json!({ "metadata": meta })
    }

    fn label(&mut self, key: &str, value: Option<&str>) {
        self.labels.insert(
            format!("{WORKLOAD_STATE_LABEL_PREFIX}{key}"),
            value.map(String::from),
        );
    }

    fn deletion(&mut self, key: &str, value: Option<&str>) {
        self.annotations
            .insert(workload_deletion_annotation(key), value.map(String::from));
    }
}

/// Which SyncTarget keys exist.
pub trait LiveTargets {
    fn is_live(&self, key: &str) -> bool;
}

/// The keys of every existing target.
impl LiveTargets for BTreeSet<String> {
    fn is_live(&self, key: &str) -> bool {
        self.contains(key)
    }
}

/// Syncer finalizers of targets that no longer exist (`live`: the existing
/// targets) are dropped, as kcp does: nothing would ever remove them.
fn strip_dead_finalizers(meta: &Meta, live: &impl LiveTargets, patch: &mut MetaPatch) {
    let kept: Vec<String> = meta
        .finalizers
        .iter()
        .filter(|f| workload_finalizer_target(f).is_none_or(|key| live.is_live(key)))
        .cloned()
        .collect();
    if kept.len() != meta.finalizers.len() {
        patch.finalizers = Some(kept);
    }
}

/// Leaving `key`: the deletion annotation first, the label once the
/// syncer has let go.
fn leave(meta: &Meta, key: &str, now: &str, patch: &mut MetaPatch) {
    let announced = meta.deleting().contains_key(key);
    if !announced {
        patch.deletion(key, Some(now));
    } else if !meta.held_by(key) {
        patch.label(key, None);
        patch.deletion(key, None);
    }
}

/// A namespace's labels, given the targets it should be on (`desired`, one
/// per Placement that selects it).
pub fn schedule_namespace(
    meta: &Meta,
    desired: &BTreeSet<String>,
    live: &impl LiveTargets,
    now: &str,
) -> MetaPatch {
    let mut patch = MetaPatch::default();
    let current = meta.keys();
    let deleting = meta.deleting();
    if let Some(ts) = &meta.deletion_timestamp {
        propagate_deletion(meta, ts, &mut patch);
    } else {
        for key in &current {
            if !desired.contains(key) || deleting.contains_key(key) {
                leave(meta, key, now, &mut patch);
            }
        }
        for key in desired {
            if !current.contains(key) {
                patch.label(key, Some(WORKLOAD_STATE_SYNC));
            }
        }
    }
    for key in deleting.keys() {
        if !current.contains(key) {
            patch.deletion(key, None);
        }
    }
    strip_dead_finalizers(meta, live, &mut patch);
    patch
}

/// An object deleted upstream: every target is told, with the deletion time.
fn propagate_deletion(meta: &Meta, deletion_timestamp: &str, patch: &mut MetaPatch) {
    let deleting = meta.deleting();
    for key in meta.keys() {
        if deleting.get(&key).is_none_or(String::is_empty) {
            patch.deletion(&key, Some(deletion_timestamp));
        }
    }
}

/// An object's labels in a namespace (`namespace`: the namespace's
/// metadata), as kcp's resource controller computes them: the namespace's
/// targets, with the namespace's deletion annotations.
///
/// A target's syncer holds each object it copies with its finalizer
/// `workload.kcp.io/syncer-<key>`, which under kcp it appends itself once it
/// sees the label. Where `copied_by(key)` says that target's syncer copies this
/// object, the finalizer goes on in the same write as the label: one write for
/// every target together, where N syncers appending theirs are N writes, each
/// seen by all N syncers' watches. The syncer finds its finalizer in place and
/// copies at once; it removes it as before.
pub fn schedule_object(
    meta: &Meta,
    namespace: &Meta,
    live: &impl LiveTargets,
    now: &str,
    copied_by: impl Fn(&str) -> bool,
) -> MetaPatch {
    let mut patch = MetaPatch::default();
    let mut held_from_the_start = Vec::new();
    if meta.upsynced() {
        return patch;
    }
    let expected = namespace.keys();
    let expected_deleting = namespace.deleting();
    let current = meta.keys();
    let deleting = meta.deleting();
    if let Some(ts) = &meta.deletion_timestamp {
        propagate_deletion(meta, ts, &mut patch);
    } else {
        for key in current.difference(&expected) {
            if meta.held_by(key) {
                if !deleting.contains_key(key) {
                    patch.deletion(key, Some(now));
                }
            } else {
                patch.label(key, None);
                if deleting.contains_key(key) {
                    patch.deletion(key, None);
                }
            }
        }
        for key in current.intersection(&expected) {
            match (expected_deleting.get(key), deleting.get(key)) {
                (Some(ts), None) => patch.deletion(key, Some(ts)),
                (None, Some(_)) => patch.deletion(key, None),
                _ => {}
            }
        }
        for key in expected.difference(&current) {
            if !expected_deleting.contains_key(key) {
                patch.label(key, Some(WORKLOAD_STATE_SYNC));
                if copied_by(key) {
                    held_from_the_start.push(workload_syncer_finalizer(key));
                }
            }
        }
    }
    strip_dead_finalizers(meta, live, &mut patch);
    let missing: Vec<String> = held_from_the_start
        .into_iter()
        .filter(|f| !meta.finalizers.contains(f))
        .collect();
    if !missing.is_empty() {
        let mut list = patch.finalizers.take().unwrap_or_else(|| meta.finalizers.clone());
        list.extend(missing);
        patch.finalizers = Some(list);
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn metadata_read_from_a_stored_object_is_what_its_json_says() {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "ns", "labels": {"state.workload.kcp.io/k1": "Sync", "team": "a"},
                         "annotations": {"deletion.internal.workload.kcp.io/k1": NOW},
                         "finalizers": ["workload.kcp.io/syncer-k1"], "deletionTimestamp": NOW},
            "spec": {"finalizers": ["kubernetes"]}});
        let labels = Meta::of(&obj).labels;
        let stored = ferry_server::storage::StoredObject {
            rv: 7,
            json: serde_json::to_vec(&obj).unwrap().into(),
            labels: labels.clone(),
        };
        assert_eq!(Meta::of_stored(&stored), Meta::of(&obj));
        let bare = ferry_server::storage::StoredObject {
            rv: 8,
            json: br#"{"metadata":{"name":"ns"}}"#.to_vec().into(),
            labels: Default::default(),
        };
        assert_eq!(Meta::of_stored(&bare), Meta::default());
    }

    fn meta(labels: &[(&str, &str)], annotations: &[(&str, &str)], finalizers: &[&str]) -> Meta {
        Meta {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            annotations: annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
            deletion_timestamp: None,
        }
    }

    fn set(keys: &[&str]) -> BTreeSet<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    fn apply(m: &Meta, p: &MetaPatch) -> Meta {
        let mut m = m.clone();
        for (k, v) in &p.labels {
            match v {
                Some(v) => m.labels.insert(k.clone(), v.clone()),
                None => m.labels.remove(k),
            };
        }
        for (k, v) in &p.annotations {
            match v {
                Some(v) => m.annotations.insert(k.clone(), v.clone()),
                None => m.annotations.remove(k),
            };
        }
        if let Some(f) = &p.finalizers {
            m.finalizers = f.clone();
        }
        m
    }

    #[test]
    fn a_namespace_gets_its_targets_label() {
        let p = schedule_namespace(&meta(&[], &[], &[]), &set(&["a"]), &set(&["a"]), NOW);
        assert_eq!(
            p.labels.get("state.workload.kcp.io/a"),
            Some(&Some("Sync".into()))
        );
        // Already there: nothing to do.
        let m = apply(&meta(&[], &[], &[]), &p);
        assert!(schedule_namespace(&m, &set(&["a"]), &set(&["a"]), NOW).is_empty());
    }

    #[test]
    fn a_namespace_moving_keeps_the_old_label_until_the_syncer_lets_go() {
        let m = meta(
            &[("state.workload.kcp.io/a", "Sync")],
            &[],
            &["workload.kcp.io/syncer-a"],
        );
        let live = set(&["a", "b"]);
        let p = schedule_namespace(&m, &set(&["b"]), &live, NOW);
        assert_eq!(
            p.annotations.get("deletion.internal.workload.kcp.io/a"),
            Some(&Some(NOW.into()))
        );
        assert_eq!(
            p.labels.get("state.workload.kcp.io/b"),
            Some(&Some("Sync".into()))
        );
        assert!(!p.labels.contains_key("state.workload.kcp.io/a"));
        let m = apply(&m, &p);
        // Held by the finalizer: stays.
        assert!(schedule_namespace(&m, &set(&["b"]), &live, NOW).is_empty());
        // Soft finalizers hold it too.
        let mut soft = m.clone();
        soft.finalizers.clear();
        soft.annotations
            .insert("finalizers.workload.kcp.io/a".into(), "x".into());
        assert!(schedule_namespace(&soft, &set(&["b"]), &live, NOW).is_empty());
        // Let go: the label and the annotation go.
        let mut free = m.clone();
        free.finalizers.clear();
        let p = schedule_namespace(&free, &set(&["b"]), &live, NOW);
        assert_eq!(p.labels.get("state.workload.kcp.io/a"), Some(&None));
        assert_eq!(
            p.annotations.get("deletion.internal.workload.kcp.io/a"),
            Some(&None)
        );
        assert!(schedule_namespace(&apply(&free, &p), &set(&["b"]), &live, NOW).is_empty());
    }

    #[test]
    fn finalizers_of_deleted_targets_are_dropped() {
        let m = meta(
            &[("state.workload.kcp.io/gone", "Sync")],
            &[("deletion.internal.workload.kcp.io/gone", NOW)],
            &["workload.kcp.io/syncer-gone", "other/finalizer"],
        );
        let p = schedule_namespace(&m, &set(&[]), &set(&["a"]), NOW);
        assert_eq!(p.finalizers, Some(vec!["other/finalizer".to_string()]));
    }

    #[test]
    fn objects_follow_their_namespace_including_its_deletions() {
        let ns = meta(&[("state.workload.kcp.io/a", "Sync")], &[], &[]);
        let live = set(&["a", "b"]);
        let obj = meta(&[("app", "x")], &[], &[]);
        let p = schedule_object(&obj, &ns, &live, NOW, |_| false);
        assert_eq!(
            p.labels.get("state.workload.kcp.io/a"),
            Some(&Some("Sync".into()))
        );
        let obj = apply(&obj, &p);
        assert!(schedule_object(&obj, &ns, &live, NOW, |_| false).is_empty());
        // The namespace starts leaving a: the object is told.
        let ns = meta(
            &[
                ("state.workload.kcp.io/a", "Sync"),
                ("state.workload.kcp.io/b", "Sync"),
            ],
            &[("deletion.internal.workload.kcp.io/a", NOW)],
            &[],
        );
        let obj = meta(
            &[("state.workload.kcp.io/a", "Sync")],
            &[],
            &["workload.kcp.io/syncer-a"],
        );
        let p = schedule_object(&obj, &ns, &live, NOW, |_| false);
        assert_eq!(
            p.annotations.get("deletion.internal.workload.kcp.io/a"),
            Some(&Some(NOW.into()))
        );
        assert_eq!(
            p.labels.get("state.workload.kcp.io/b"),
            Some(&Some("Sync".into()))
        );
        // The namespace has left a; the object's finalizer still holds it.
        let obj = apply(&obj, &p);
        let ns = meta(&[("state.workload.kcp.io/b", "Sync")], &[], &[]);
        assert!(schedule_object(&obj, &ns, &live, NOW, |_| false).is_empty());
        // The syncer lets go: the label goes.
        let mut free = obj.clone();
        free.finalizers.clear();
        let p = schedule_object(&free, &ns, &live, NOW, |_| false);
        assert_eq!(p.labels.get("state.workload.kcp.io/a"), Some(&None));
        assert_eq!(
            p.annotations.get("deletion.internal.workload.kcp.io/a"),
            Some(&None)
        );
    }

    #[test]
    fn a_copying_targets_finalizer_goes_on_with_its_label_and_only_then() {
        let ns = meta(
            &[
                ("state.workload.kcp.io/a", "Sync"),
                ("state.workload.kcp.io/b", "Sync"),
            ],
            &[],
            &[],
        );
        let live = set(&["a", "b"]);
        let copies = |key: &str| key == "a";
        // Labelled for both; only a's syncer copies it, so only a's finalizer goes
        // on, after what was there (a dead target's finalizer dropped).
        let obj = meta(
            &[("app", "x")],
            &[],
            &["example.com/keep", "workload.kcp.io/syncer-gone"],
        );
        let p = schedule_object(&obj, &ns, &live, NOW, copies);
        assert_eq!(
            p.labels.get("state.workload.kcp.io/b"),
            Some(&Some("Sync".into()))
        );
        assert_eq!(
            p.finalizers,
            Some(vec![
                "example.com/keep".to_string(),
                "workload.kcp.io/syncer-a".to_string()
            ])
        );
        let obj = apply(&obj, &p);
        assert!(schedule_object(&obj, &ns, &live, NOW, copies).is_empty());
        // Already labelled (its syncer let go, or labelled before): not put back.
        let mut released = obj.clone();
        released.finalizers.retain(|f| f != "workload.kcp.io/syncer-a");
        assert!(schedule_object(&released, &ns, &live, NOW, copies).is_empty());
        // Already there (its syncer was first): not twice.
        let mut first = meta(&[], &[], &["workload.kcp.io/syncer-a"]);
        let p = schedule_object(&first, &ns, &live, NOW, copies);
        assert!(p.finalizers.is_none(), "{p:?}");
        // Being deleted: no new label, no new finalizer.
        first.deletion_timestamp = Some(NOW.into());
        let p = schedule_object(&first, &ns, &live, NOW, copies);
        assert!(p.labels.is_empty() && p.finalizers.is_none(), "{p:?}");
    }

    #[test]
    fn an_object_deleted_upstream_tells_every_target() {
        let ns = meta(&[("state.workload.kcp.io/a", "Sync")], &[], &[]);
        let mut obj = meta(
            &[("state.workload.kcp.io/a", "Sync")],
            &[],
            &["workload.kcp.io/syncer-a"],
        );
        obj.deletion_timestamp = Some("2026-02-02T00:00:00Z".into());
        let p = schedule_object(&obj, &ns, &set(&["a"]), NOW, |_| false);
        assert_eq!(
            p.annotations.get("deletion.internal.workload.kcp.io/a"),
            Some(&Some("2026-02-02T00:00:00Z".into()))
        );
        assert!(p.labels.is_empty() && p.finalizers.is_none());
    }

    #[test]
    fn upsynced_objects_are_left_alone() {
        let ns = meta(&[("state.workload.kcp.io/a", "Sync")], &[], &[]);
        let pod = meta(&[("state.workload.kcp.io/a", "Upsync")], &[], &[]);
        assert!(schedule_object(&pod, &ns, &set(&["a"]), NOW, |_| false).is_empty());
    }

    #[test]
    fn the_merge_patch_is_pinned_and_removes_with_null() {
        let mut p = MetaPatch::default();
        p.label("a", None);
        p.deletion("b", Some(NOW));
        let v = p.to_merge_patch(7);
        assert_eq!(v["metadata"]["resourceVersion"], "7");
        assert_eq!(v["metadata"]["labels"]["state.workload.kcp.io/a"], Value::Null);
        assert_eq!(
            v["metadata"]["annotations"]["deletion.internal.workload.kcp.io/b"],
            NOW
        );
    }
}
