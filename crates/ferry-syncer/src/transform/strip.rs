//! The one place that decides which fields a copy never carries.

use serde_json::Value;

use ferry_api::well_known::{
    DESIRED_HASH_ANNOTATION, DOWNSYNCED_ANNOTATION, KCP_CLUSTER_ANNOTATION, LAST_APPLIED_CONFIG_ANNOTATION,
    MANAGED_METADATA_ANNOTATION, SYNCER_LABEL, UPSYNCED_ANNOTATION, WORKLOAD_STATE_LABEL_PREFIX,
};

/// Metadata the server sets, or that only makes sense in the source cluster.
///
/// Owner references and finalizers name objects and controllers of the source cluster
/// (KubeStellar copies them; kcp and api-syncagent strip them, and Ferry follows the
/// latter: a dangling owner reference downstream gets the copy garbage-collected).
pub const SERVER_SET_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
];

/// Annotations never copied: source-cluster bookkeeping and the marks of other copies
/// (each copy gets its own marks afterwards). The TMC scheduler's placement annotation
/// on a Namespace names kcp Placements, and a Ferry hub standing in for the cluster
/// reserves it to its own scheduler: a copy carrying it is refused.
pub const NEVER_COPIED_ANNOTATIONS: &[&str] = &[
    KCP_CLUSTER_ANNOTATION,
    ferry_api::scheduling::PLACEMENT_ANNOTATION,
    LAST_APPLIED_CONFIG_ANNOTATION,
    DOWNSYNCED_ANNOTATION,
    UPSYNCED_ANNOTATION,
    DESIRED_HASH_ANNOTATION,
    MANAGED_METADATA_ANNOTATION,
];

/// Annotation prefixes never copied (kcp's claim bookkeeping).
const NEVER_COPIED_ANNOTATION_PREFIXES: &[&str] = &["claimed.internal.apis.kcp.io/"];

/// The label the API server sets on every Namespace to its own name. A copy whose
/// name is mapped (kcp TMC's `kcp-<hash>`) would carry the source's name, which the
/// server overwrites on every write: copying it makes a write loop.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Label keys (exact or prefixes) never copied: Ferry's own owner label, kcp TMC
/// scheduling state, which means nothing on the other side, and the server's own
/// [`NAMESPACE_NAME_LABEL`].
pub const NEVER_COPIED_LABEL_PREFIXES: &[&str] =
    &[SYNCER_LABEL, WORKLOAD_STATE_LABEL_PREFIX, NAMESPACE_NAME_LABEL];

/// Removes [`SERVER_SET_METADATA`], [`NEVER_COPIED_ANNOTATIONS`] and
/// [`NEVER_COPIED_LABEL_PREFIXES`] from `obj` in place; empty label and annotation maps
/// are removed. Leaves `status` alone (callers decide).
pub fn strip_server_fields(obj: &mut Value) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    for field in SERVER_SET_METADATA {
        meta.remove(*field);
    }
    if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
        annotations.retain(|key, _| {
            !NEVER_COPIED_ANNOTATIONS.contains(&key.as_str())
                && !NEVER_COPIED_ANNOTATION_PREFIXES
                    .iter()
                    .any(|p| key.starts_with(p))
        });
    }
    if let Some(labels) = meta.get_mut("labels").and_then(Value::as_object_mut) {
        labels.retain(|key, _| !NEVER_COPIED_LABEL_PREFIXES.iter().any(|p| key.starts_with(p)));
    }
    for map in ["annotations", "labels"] {
        let empty = match meta.get(map) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Null) => true,
            _ => false,
        };
        if empty {
            meta.remove(map);
        }
    }
}
