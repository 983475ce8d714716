//! Ownership marks: how a copy records which syncer made it.
//!
//! A copy carries both the KubeStellar annotation (`edge.kubestellar.io/downsynced` or
//! `.../upsynced`, valued `<Kind>/<namespace>/<name>`) and the Ferry label
//! `ferry.dev/syncer`. The label lets the server select a syncer's copies; the annotation
//! value names the object itself, so an object that merely inherited both (a ReplicaSet
//! copying its Deployment's annotations, kubestellar#900) is not taken for a copy.

use serde_json::{json, Map, Value};

use ferry_api::well_known::{
    owned_value, syncer_label_value, DESIRED_HASH_ANNOTATION, DOWNSYNCED_ANNOTATION,
    DOWNSYNC_OVERWRITE_ANNOTATION, MANAGED_METADATA_ANNOTATION, SYNCER_LABEL, UPSYNCED_ANNOTATION,
};

fn meta_map<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let meta = obj
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let map = meta
        .as_object_mut()?
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if !map.is_object() {
        *map = Value::Object(Map::new());
    }
    map.as_object_mut()
}

pub(super) fn str_at<'a>(obj: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(obj, |v, key| v.get(key))?.as_str()
}

/// Adds the ownership annotation `annotation_key` (valued `<kind>/<namespace>/<name>`)
/// and the Ferry owner label.
pub fn mark(obj: &mut Value, annotation_key: &str, kind: &str, syncer_name: &str) {
    let namespace = str_at(obj, &["metadata", "namespace"]).map(str::to_owned);
    let name = str_at(obj, &["metadata", "name"]).unwrap_or_default().to_owned();
    if let Some(annotations) = meta_map(obj, "annotations") {
        annotations.insert(
            annotation_key.into(),
            owned_value(kind, namespace.as_deref(), &name).into(),
        );
    }
    if let Some(labels) = meta_map(obj, "labels") {
        labels.insert(SYNCER_LABEL.into(), syncer_label_value(syncer_name).into());
    }
}

/// Whether `obj` is a copy made by the syncer `syncer_name`: it has that syncer's
/// `ferry.dev/syncer` label and a `downsynced`/`upsynced` annotation naming this very
/// object (`<Kind>/<namespace>/<name>`; the kind is checked when `obj` carries one).
pub fn is_owned_by(obj: &Value, syncer_name: &str) -> bool {
    let label = str_at(obj, &["metadata", "labels", SYNCER_LABEL]);
    if label != Some(syncer_label_value(syncer_name).as_str()) {
        return false;
    }
    let namespace = str_at(obj, &["metadata", "namespace"]).unwrap_or("");
    let name = str_at(obj, &["metadata", "name"]).unwrap_or("");
    let kind = str_at(obj, &["kind"]);
    [DOWNSYNCED_ANNOTATION, UPSYNCED_ANNOTATION].iter().any(|key| {
        let Some(value) = str_at(obj, &["metadata", "annotations", key]) else {
            return false;
        };
        let mut parts = value.splitn(3, '/');
        let (Some(marked_kind), Some(marked_ns), Some(marked_name)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return false;
        };
        marked_ns == namespace && marked_name == name && kind.is_none_or(|k| k == marked_kind)
    })
}

/// The merge patch that turns a copy into a plain object nobody owns: the Ferry label
/// and every ownership and bookkeeping annotation removed. For a Namespace copy that
/// is no longer wanted but still holds other copies (deleting it would delete them).
pub fn release_patch() -> Value {
    let mut annotations = Map::new();
    for key in [
        DOWNSYNCED_ANNOTATION,
        UPSYNCED_ANNOTATION,
        DESIRED_HASH_ANNOTATION,
        MANAGED_METADATA_ANNOTATION,
    ] {
        annotations.insert(key.into(), Value::Null);
    }
    json!({ "metadata": { "labels": { SYNCER_LABEL: null }, "annotations": annotations } })
}

/// Whether the syncer may update and delete the copy of `source`: false when the source
/// says `edge.kubestellar.io/downsync-overwrite: "false"` (create-only).
pub fn allows_overwrite(source: &Value) -> bool {
    str_at(
        source,
        &["metadata", "annotations", DOWNSYNC_OVERWRITE_ANNOTATION],
    ) != Some("false")
}
