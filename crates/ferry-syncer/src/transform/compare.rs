//! Deciding whether a copy needs writing, and building the update.
//!
//! Two checks, both needed:
//! - a hash of what the syncer last wrote (`ferry.dev/desired-hash`) catches every
//!   change at the source, including removed fields, labels and annotations;
//! - a semantic-subset check (every field the syncer sets has that value in the copy;
//!   fields the server or other controllers added are ignored) catches edits made to
//!   the copy. Defaults filled in by the destination server never count as a change.
//!
//! Known limit: a value the destination rewrites into another form (e.g. quantity
//! `1000m` stored as `1`) looks changed, so such an object is rewritten on each
//! reconcile; the server treats those writes as no-ops (no new resourceVersion, no event).

use std::collections::BTreeSet;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use ferry_api::field_path::{FieldPath, Step, MAX_PATH_STEPS};
use ferry_api::well_known::{DESIRED_HASH_ANNOTATION, MANAGED_METADATA_ANNOTATION};

use super::ownership::str_at;
use super::tracking::UNCOMPARED_ANNOTATIONS;

/// Top-level keys that are not content: identity and metadata.
const NOT_CONTENT: &[&str] = &["apiVersion", "kind", "metadata"];

fn string_map<'a>(obj: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    obj.get("metadata")?.get(key)?.as_object()
}

/// Labels or annotations of `obj` without the bookkeeping annotations.
fn managed_keys(obj: &Value, key: &str) -> Map<String, Value> {
    let mut map = string_map(obj, key).cloned().unwrap_or_default();
    map.remove(DESIRED_HASH_ANNOTATION);
    map.remove(MANAGED_METADATA_ANNOTATION);
    if key == "annotations" {
        for uncompared in UNCOMPARED_ANNOTATIONS {
            map.remove(*uncompared);
        }
    }
    map
}

/// Feeds JSON text to the hash as it is written.
struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `value` as compact JSON with object keys sorted, so equal content always
/// hashes the same.
fn write_canonical(out: &mut HashWriter, value: &Value) {
    match value {
        Value::Object(map) => write_sorted(out, map.iter().map(|(k, v)| (k.as_str(), v))),
        Value::Array(items) => {
            out.0.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.0.update(b",");
                }
                write_canonical(out, item);
            }
            out.0.update(b"]");
        }
        other => serde_json::to_writer(out, other).expect("writing to a hash cannot fail"),
    }
}

/// Writes a JSON object from `entries`, sorted by key.
fn write_sorted<'a>(out: &mut HashWriter, entries: impl Iterator<Item = (&'a str, &'a Value)>) {
    let mut entries: Vec<_> = entries.collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.0.update(b"{");
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.0.update(b",");
        }
        serde_json::to_writer(&mut *out, key).expect("writing to a hash cannot fail");
        out.0.update(b":");
        write_canonical(out, value);
    }
    out.0.update(b"}");
}

/// The hash of what the syncer manages in `desired`: its content fields plus its labels
/// and annotations without the bookkeeping ones, as canonical JSON
/// `{"annotations":{..},"data":..,"labels":{..},..}`. Streamed into the hash: building
/// that document first cost a tenth of the syncer's CPU.
fn content_hash(desired: &Value) -> String {
    let mut out = HashWriter(Sha256::new());
    let fields = desired.as_object().into_iter().flat_map(|obj| {
        obj.iter()
            .filter(|(k, _)| !NOT_CONTENT.contains(&k.as_str()) && *k != "labels" && *k != "annotations")
            .map(|(k, v)| (k.as_str(), v))
    });
    let labels = Value::Object(managed_keys(desired, "labels"));
    let annotations = Value::Object(managed_keys(desired, "annotations"));
    write_sorted(
        &mut out,
        fields.chain([("labels", &labels), ("annotations", &annotations)]),
    );
    hex::encode(&out.0.finalize()[..16])
}

/// Records the content hash and the managed label/annotation keys on a desired copy.
pub(super) fn record_desired(desired: &mut Value) {
    let hash = content_hash(desired);
    let keys = |key: &str| -> Vec<Value> {
        managed_keys(desired, key)
            .keys()
            .cloned()
            .map(Value::String)
            .collect()
    };
    let record =
        serde_json::json!({ "labels": keys("labels"), "annotations": keys("annotations") }).to_string();
    if let Some(annotations) = desired
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
        .and_then(Value::as_object_mut)
    {
        annotations.insert(DESIRED_HASH_ANNOTATION.into(), hash.into());
        annotations.insert(MANAGED_METADATA_ANNOTATION.into(), record.into());
    }
}

/// Whether every value in `desired` is present and equal in `actual`, ignoring anything
/// `actual` has in addition (server defaults, fields other controllers set). Lists must
/// have the same length, compared element by element; numbers compare by value.
pub fn is_semantic_subset(desired: &Value, actual: &Value) -> bool {
    match (desired, actual) {
        (Value::Object(d), Value::Object(a)) => d.iter().all(|(key, dv)| match a.get(key) {
            Some(av) => is_semantic_subset(dv, av),
            None => dv.is_null(),
        }),
        (Value::Array(d), Value::Array(a)) => {
            d.len() == a.len() && d.iter().zip(a).all(|(dv, av)| is_semantic_subset(dv, av))
        }
        (Value::Number(d), Value::Number(a)) => d == a || d.as_f64() == a.as_f64(),
        (d, a) => d == a,
    }
}

/// Whether the copy `actual` must be written to match `desired` (a result of
/// `downstream_copy` / `upstream_copy`). Compares only what the syncer manages: the
/// top-level content fields of `desired` (`spec`, `data`, ...; `status` only when
/// `desired` has one), its labels and annotations, and the recorded content hash.
/// Server-set metadata and fields other writers added are ignored.
pub fn needs_update(desired: &Value, actual: &Value) -> bool {
    if str_at(desired, &["metadata", "annotations", DESIRED_HASH_ANNOTATION])
        != str_at(actual, &["metadata", "annotations", DESIRED_HASH_ANNOTATION])
    {
        return true;
    }
    let Some(desired_obj) = desired.as_object() else {
        return false;
    };
    let content_differs = desired_obj
        .iter()
        .filter(|(key, _)| !NOT_CONTENT.contains(&key.as_str()))
        .any(|(key, value)| !is_semantic_subset(value, actual.get(key).unwrap_or(&Value::Null)));
    // Each wanted label and annotation, looked up in place: this runs for every
    // object written, so neither map is copied.
    let metadata_differs = ["labels", "annotations"].iter().any(|key| {
        let present = string_map(actual, key);
        string_map(desired, key)
            .into_iter()
            .flatten()
            .filter(|(name, _)| !UNCOMPARED_ANNOTATIONS.contains(&name.as_str()))
            .any(|(name, wanted)| match present.and_then(|p| p.get(name)) {
                Some(value) => !is_semantic_subset(wanted, value),
                None => !wanted.is_null(),
            })
    });
    content_differs || metadata_differs
}

/// The fields that make [`needs_update`] true, the recorded hash aside: where
/// `actual` does not hold what `desired` says, as field paths
/// (`$.spec.template.spec.containers[0].image`, `$.metadata.labels.app`),
/// at most `limit` of them. A list of another length is named as a whole;
/// below [`MAX_PATH_STEPS`] steps the deepest differing field is named.
/// Never values: they may be secret.
pub fn differing_fields(desired: &Value, actual: &Value, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = Vec::new();
    let content = desired
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, _)| !NOT_CONTENT.contains(&key.as_str()));
    for (key, value) in content {
        path.push(Step::Member(key.clone()));
        collect_differences(
            value,
            actual.get(key).unwrap_or(&Value::Null),
            &mut path,
            &mut out,
            limit,
        );
        path.pop();
    }
    for map in ["labels", "annotations"] {
        let present = string_map(actual, map);
        for (key, value) in string_map(desired, map).into_iter().flatten() {
            if UNCOMPARED_ANNOTATIONS.contains(&key.as_str()) || out.len() >= limit {
                continue;
            }
            if present
                .and_then(|p| p.get(key))
                .is_none_or(|p| !is_semantic_subset(value, p))
            {
                let steps = vec![
                    Step::Member("metadata".into()),
                    Step::Member(map.into()),
                    Step::Member(key.clone()),
                ];
                out.push(FieldPath::from_steps(steps).to_string());
            }
        }
    }
    out
}

/// Fields looked at for drift, of which [`restored_fields`] names at most its `limit`.
const DRIFT_FIELDS_SEEN: usize = 64;

/// The drift a write of `desired` restored: the fields in which the copy
/// `before` the write differed from `desired` and the copy as `written` no
/// longer does, at most `limit`. A value the cluster only stores in another
/// form (a quantity `1000m` kept as `1`) differs after the write too:
/// rewriting it restores nothing, so it is no drift.
pub fn restored_fields(desired: &Value, before: &Value, written: &Value, limit: usize) -> Vec<String> {
    let after = differing_fields(desired, written, DRIFT_FIELDS_SEEN);
    differing_fields(desired, before, DRIFT_FIELDS_SEEN)
        .into_iter()
        .filter(|field| !after.contains(field))
        .take(limit)
        .collect()
}

/// [`differing_fields`] below `path` (depth bounded by [`MAX_PATH_STEPS`]).
fn collect_differences(
    desired: &Value,
    actual: &Value,
    path: &mut Vec<Step>,
    out: &mut Vec<String>,
    limit: usize,
) {
    if out.len() >= limit {
        return;
    }
    let deeper = path.len() < MAX_PATH_STEPS;
    match (desired, actual) {
        (Value::Object(d), Value::Object(a)) if deeper => {
            for (key, dv) in d {
                path.push(Step::Member(key.clone()));
                collect_differences(dv, a.get(key).unwrap_or(&Value::Null), path, out, limit);
                path.pop();
            }
        }
        (Value::Array(d), Value::Array(a)) if deeper && d.len() == a.len() => {
            for (i, (dv, av)) in d.iter().zip(a).enumerate() {
                path.push(Step::Index(i));
                collect_differences(dv, av, path, out, limit);
                path.pop();
            }
        }
        _ if is_semantic_subset(desired, actual) => {}
        _ => out.push(FieldPath::from_steps(path.clone()).to_string()),
    }
}

/// Keys previously set by the syncer on `actual`, from its managed-metadata record.
fn previously_managed(actual: &Value, key: &str) -> BTreeSet<String> {
    str_at(actual, &["metadata", "annotations", MANAGED_METADATA_ANNOTATION])
        .and_then(|record| serde_json::from_str::<Value>(record).ok())
        .and_then(|record| record.get(key).and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// The body for updating `actual` to `desired` (a full PUT).
///
/// - Content fields come from `desired`; fields only `actual` has are dropped, so a field
///   removed at the source disappears from the copy.
/// - `status`: `desired`'s if it has one (upsync), otherwise `actual`'s (downsync: the
///   copy's reported state is never wiped, kubestellar#938).
/// - `metadata`: `actual`'s (so `resourceVersion` makes the write conditional, and
///   `uid`, finalizers and owner references set at the destination survive), with
///   labels and annotations merged: `desired`'s keys win, keys the syncer set earlier but
///   no longer wants are removed, and keys others added are kept. `managedFields` is
///   left out (the server keeps it).
pub fn merge_for_update(desired: &Value, actual: &Value) -> Value {
    let mut out = Map::new();
    if let Some(desired_obj) = desired.as_object() {
        for (key, value) in desired_obj.iter().filter(|(k, _)| k.as_str() != "metadata") {
            out.insert(key.clone(), value.clone());
        }
    }
    if !out.contains_key("status") {
        if let Some(status) = actual.get("status") {
            out.insert("status".into(), status.clone());
        }
    }

    let mut metadata = actual
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    metadata.remove("managedFields");
    for key in ["labels", "annotations"] {
        let stale = previously_managed(actual, key);
        let mut merged = string_map(actual, key).cloned().unwrap_or_default();
        merged.retain(|k, _| !stale.contains(k));
        if let Some(wanted) = string_map(desired, key) {
            merged.extend(wanted.clone());
        }
        if merged.is_empty() {
            metadata.remove(key);
        } else {
            metadata.insert(key.into(), Value::Object(merged));
        }
    }
    out.insert("metadata".into(), Value::Object(metadata));
    Value::Object(out)
}

/// The JSON merge patch (RFC 7386) that turns `from` into `to`: changed keys with
/// `to`'s value (objects recursively), removed keys as `null`.
pub fn merge_patch_between(from: &Value, to: &Value) -> Value {
    match (from, to) {
        (Value::Object(f), Value::Object(t)) => {
            let mut out = Map::new();
            for (k, tv) in t {
                match f.get(k) {
                    Some(fv) if fv == tv => {}
                    Some(fv) if fv.is_object() && tv.is_object() => {
                        out.insert(k.clone(), merge_patch_between(fv, tv));
                    }
                    _ => {
                        out.insert(k.clone(), tv.clone());
                    }
                }
            }
            for k in f.keys() {
                if !t.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(out)
        }
        _ => to.clone(),
    }
}

/// Applies the JSON merge patch `patch` to `target`.
pub fn apply_merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let t = target.as_object_mut().expect("made an object above");
    for (k, pv) in p {
        if pv.is_null() {
            t.remove(k);
        } else {
            apply_merge_patch(t.entry(k.clone()).or_insert(Value::Null), pv);
        }
    }
}

/// The body for updating `actual` to `desired` when `last` is what the syncer last
/// wrote (the api-syncagent's last-known state): like [`merge_for_update`], but each
/// content field of `actual` only receives the changes from `last` to `desired`, so
/// fields the destination's controllers set (and the syncer never did) survive.
pub fn three_way_update(desired: &Value, actual: &Value, last: &Value) -> Value {
    let mut out = merge_for_update(desired, actual);
    let content_keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .filter(|k| !NOT_CONTENT.contains(&k.as_str()) && k != "status")
            .collect()
    };
    let mut keys = content_keys(desired);
    keys.extend(content_keys(last));
    keys.extend(content_keys(actual));
    keys.sort();
    keys.dedup();
    for key in keys {
        let (d, l) = (desired.get(&key), last.get(&key));
        let mut merged = actual.get(&key).cloned().unwrap_or(Value::Null);
        match (l, d) {
            (_, Some(d)) => {
                apply_merge_patch(&mut merged, &merge_patch_between(l.unwrap_or(&Value::Null), d))
            }
            // The syncer set it before and no longer wants it.
            (Some(_), None) => merged = Value::Null,
            // Only the destination has it.
            (None, None) => {}
        }
        match (out.as_object_mut(), merged) {
            (Some(o), Value::Null) => {
                o.remove(&key);
            }
            (Some(o), v) => {
                o.insert(key, v);
            }
            (None, _) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differing_fields_name_the_paths_that_changed_never_the_values() {
        let desired = json!({
            "metadata": { "name": "web", "labels": { "app": "web", "tier": "front" },
                          "annotations": { "team.example/owner": "a" } },
            "spec": { "replicas": 2, "template": { "spec": { "containers": [
                { "name": "web", "image": "nginx:1.0" }, { "name": "log", "image": "fluent" } ] } } },
            "data": { "password": "hunter2" },
        });
        let mut actual = desired.clone();
        actual["metadata"]["resourceVersion"] = json!("7");
        actual["status"] = json!({ "ready": true });
        actual["spec"]["defaulted"] = json!("by the server");
        assert!(differing_fields(&desired, &actual, 10).is_empty());

        actual["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil:latest");
        actual["data"]["password"] = json!("changed");
        actual["metadata"]["labels"]["tier"] = json!("back");
        actual["metadata"]["annotations"] = json!({});
        let fields = differing_fields(&desired, &actual, 10);
        assert_eq!(
            fields,
            vec![
                "$.spec.template.spec.containers[0].image",
                "$.data.password",
                "$.metadata.labels.tier",
                "$.metadata.annotations[\"team.example/owner\"]",
            ]
        );
        assert!(!fields.iter().any(|f| f.contains("hunter2") || f.contains("evil")));
        // Each path reads back as a path a CustomTransform may name.
        for f in &fields {
            FieldPath::parse(f).unwrap_or_else(|e| panic!("{f}: {e}"));
        }
        assert_eq!(differing_fields(&desired, &actual, 2).len(), 2);

        // A list of another length is named as a whole.
        let mut shorter = desired.clone();
        shorter["spec"]["template"]["spec"]["containers"] = json!([{ "name": "web", "image": "nginx:1.0" }]);
        assert_eq!(
            differing_fields(&desired, &shorter, 10),
            vec!["$.spec.template.spec.containers"]
        );
    }

    #[test]
    fn only_what_the_write_put_back_is_drift() {
        let desired = json!({ "spec": { "cpu": "1000m", "image": "nginx", "paused": false } });
        // The cluster keeps the quantity as `1` and someone changed the image.
        let before = json!({ "spec": { "cpu": "1", "image": "evil", "paused": false } });
        let written = json!({ "spec": { "cpu": "1", "image": "nginx", "paused": false } });
        assert_eq!(
            restored_fields(&desired, &before, &written, 10),
            vec!["$.spec.image"]
        );
        // Only the stored form differs: nothing was restored.
        assert!(restored_fields(&desired, &written, &written, 10).is_empty());
    }

    #[test]
    fn differing_fields_stop_at_the_deepest_path_a_transform_may_name() {
        let nested = |leaf: &str| {
            let mut deep = json!(leaf);
            for _ in 0..100 {
                deep = json!({ "n": deep });
            }
            json!({ "spec": deep })
        };
        let fields = differing_fields(&nested("leaf"), &nested("changed"), 10);
        assert_eq!(fields.len(), 1);
        assert_eq!(fields[0].matches(".n").count(), MAX_PATH_STEPS - 1);
    }

    #[test]
    fn a_three_way_update_keeps_what_the_destination_added() {
        let last = json!({ "spec": { "size": 1, "old": true } });
        let desired = json!({ "metadata": { "name": "x" }, "spec": { "size": 2 } });
        let actual = json!({ "metadata": { "name": "x", "resourceVersion": "7" },
                             "spec": { "size": 1, "old": true, "defaulted": "by-controller" },
                             "extra": { "set": "by-service" }, "status": { "ok": true } });
        let body = three_way_update(&desired, &actual, &last);
        assert_eq!(body["spec"], json!({ "size": 2, "defaulted": "by-controller" }));
        assert_eq!(body["extra"], json!({ "set": "by-service" }));
        assert_eq!(body["status"], json!({ "ok": true }));
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        // Without the last state, the plain update drops what only the copy had.
        assert!(merge_for_update(&desired, &actual)["spec"]
            .get("defaulted")
            .is_none());
    }

    /// The hash as first defined: build the canonical document, then hash its text.
    /// Copies written by earlier versions carry this value, so the streamed hash must
    /// match it byte for byte (or every copy would be rewritten once after an upgrade).
    fn reference_hash(desired: &Value) -> String {
        fn canonical(value: &Value) -> Value {
            match value {
                Value::Object(map) => {
                    let mut keys: Vec<&String> = map.keys().collect();
                    keys.sort();
                    Value::Object(
                        keys.into_iter()
                            .map(|k| (k.clone(), canonical(&map[k])))
                            .collect(),
                    )
                }
                Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
                other => other.clone(),
            }
        }
        let mut content = Map::new();
        for (key, value) in desired.as_object().unwrap() {
            if !NOT_CONTENT.contains(&key.as_str()) {
                content.insert(key.clone(), value.clone());
            }
        }
        content.insert("labels".into(), Value::Object(managed_keys(desired, "labels")));
        content.insert(
            "annotations".into(),
            Value::Object(managed_keys(desired, "annotations")),
        );
        let bytes = serde_json::to_vec(&canonical(&Value::Object(content))).unwrap();
        Sha256::digest(bytes)[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn the_streamed_hash_equals_the_canonical_document_hash() {
        let objects = [
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" } }),
            json!({
                "kind": "Deployment", "apiVersion": "apps/v1",
                "metadata": { "name": "d", "namespace": "n",
                    "labels": { "z": "1", "a": "2" },
                    "annotations": { "ferry.dev/desired-hash": "x", "b": "q\"uote\n", "a": "é" } },
                "spec": { "replicas": 3, "ratio": 0.5, "big": 12345678901234567u64, "neg": -4,
                    "template": { "spec": { "containers": [ { "name": "c", "image": "i", "args": ["b", "a"] } ] } },
                    "nothing": null, "flag": true, "empty": {}, "list": [] },
                "data": { "y": "2", "x": "1" },
                "status": { "ready": false },
            }),
            json!({ "metadata": { "name": "odd", "labels": {} }, "labels": { "top": "level" }, "annotations": 5 }),
        ];
        for obj in &objects {
            assert_eq!(content_hash(obj), reference_hash(obj), "{obj}");
        }
        assert_ne!(content_hash(&objects[0]), content_hash(&objects[1]));
    }
}
