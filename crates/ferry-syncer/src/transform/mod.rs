//! Transform: how a copy is made and kept up to date, as pure functions over objects.
//!
//! Objects are `serde_json::Value`s. The core loop reads and writes arbitrary resource
//! types through `kube::Api<DynamicObject>`; a `DynamicObject` converts to and from a
//! `Value` with `serde_json::{to_value, from_value}`, and a `Value` lets one function
//! strip, mark, compare and merge any kind (top-level `spec`, `data`, `rules`, ...) with
//! no per-kind code. List items may arrive without `apiVersion`/`kind`, so callers pass
//! the [`ObjectType`] they are watching.
//!
//! The life of a downsynced object:
//! 1. `desired = desired_copy(upstream, Downsync, key, ty, marks)` (for the KubeStellar
//!    profile, [`downstream_copy`])
//! 2. no downstream object → create `desired`; one that [`is_owned_by`] the syncer (or a
//!    pre-existing one, which KubeStellar also overwrites) and [`needs_update`] → PUT
//!    [`merge_for_update`]`(desired, actual)`; otherwise do nothing.
//! 3. [`status_for_upstream`]`(downstream)` → if [`status_differs`], write
//!    [`with_status`]`(upstream, status)` to the upstream `/status`.
//!
//! Upsync is the mirror image with [`upstream_copy`], which keeps `status`.
//!
//! Fields the workload cluster owns ([`keep_owned_downstream`]) are taken from the
//! copy into `desired` before steps 2's comparison and write.

pub mod allocated;
mod compare;
mod owned;
mod ownership;
mod strip;
mod tracking;

use serde_json::Value;

use crate::engine::ObjectRef;
use crate::profile::Marks;
use crate::profiles::kubestellar::KubeStellarMarks;
use crate::selection::{Direction, WatchTarget};

pub use compare::{
    apply_merge_patch, differing_fields, is_semantic_subset, merge_for_update, merge_patch_between,
    needs_update, restored_fields, three_way_update,
};
pub use owned::{has_owned_downstream, keep_owned_downstream};
pub use ownership::{allows_overwrite, is_owned_by, mark, release_patch};
pub use strip::{
    strip_server_fields, NEVER_COPIED_ANNOTATIONS, NEVER_COPIED_LABEL_PREFIXES, SERVER_SET_METADATA,
};
pub use tracking::mark_tracking;

/// `apiVersion` and `kind` of the objects being copied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectType {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    /// The kind.
    pub kind: String,
}

impl ObjectType {
    /// An object type from its parts.
    pub fn new(api_version: &str, kind: &str) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
        }
    }
}

impl From<&WatchTarget> for ObjectType {
    fn from(target: &WatchTarget) -> Self {
        Self {
            api_version: target.id.api_version(),
            kind: target.kind.clone(),
        }
    }
}

/// The object to write on the destination side for `source`, travelling in `direction`:
/// server-set fields stripped (see [`strip_server_fields`]) and what the source's API
/// server allocated for its own cluster (see [`allocated`]), `status` too when going
/// down (it is the destination's to report), `apiVersion`/`kind` of `ty`, name and
/// namespace of `dest`, marked by `marks` as this syncer's copy, plus the bookkeeping
/// annotations [`needs_update`] and [`merge_for_update`] rely on.
pub fn desired_copy(
    source: &Value,
    direction: Direction,
    dest: &ObjectRef,
    ty: &ObjectType,
    marks: &dyn Marks,
) -> Value {
    desired_copy_with(source, direction, dest, ty, marks, |_| {})
}

/// [`desired_copy`], with `transform` applied to the copy after its name and namespace
/// are mapped and before it is marked (a profile's mutators).
pub fn desired_copy_with(
    source: &Value,
    direction: Direction,
    dest: &ObjectRef,
    ty: &ObjectType,
    marks: &dyn Marks,
    transform: impl FnOnce(&mut Value),
) -> Value {
    let mut copy = source.clone();
    strip_server_fields(&mut copy);
    allocated::drop_allocated(&mut copy, ty);
    if let Some(obj) = copy.as_object_mut() {
        if direction == Direction::Downsync {
            obj.remove("status");
        }
        obj.insert("apiVersion".into(), Value::String(ty.api_version.clone()));
        obj.insert("kind".into(), Value::String(ty.kind.clone()));
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("name".into(), Value::String(dest.name.clone()));
            match &dest.namespace {
                Some(ns) => {
                    meta.insert("namespace".into(), Value::String(ns.clone()));
                }
                None => {
                    meta.remove("namespace");
                }
            }
        }
    }
    transform(&mut copy);
    marks.mark(&mut copy, direction);
    compare::record_desired(&mut copy);
    copy
}

/// The KubeStellar profile's downstream copy of `upstream` (same name and namespace):
/// [`desired_copy`] marked `edge.kubestellar.io/downsynced: <Kind>/<namespace>/<name>`
/// and labelled `ferry.dev/syncer`.
pub fn downstream_copy(upstream: &Value, ty: &ObjectType, syncer_name: &str) -> Value {
    kubestellar_copy(upstream, Direction::Downsync, ty, syncer_name)
}

/// The KubeStellar profile's upstream copy of the downstream object `downstream`: like
/// [`downstream_copy`] but marked `edge.kubestellar.io/upsynced`, and `status` is kept
/// (it is the reported state that upsync exists to carry). When the upstream resource
/// has a status subresource, write it with a second request to `/status`.
pub fn upstream_copy(downstream: &Value, ty: &ObjectType, syncer_name: &str) -> Value {
    kubestellar_copy(downstream, Direction::Upsync, ty, syncer_name)
}

fn kubestellar_copy(source: &Value, direction: Direction, ty: &ObjectType, syncer_name: &str) -> Value {
    let key = ObjectRef::of(source).unwrap_or(ObjectRef {
        cluster: None,
        namespace: None,
        name: String::new(),
    });
    desired_copy(source, direction, &key, ty, &KubeStellarMarks::new(syncer_name))
}

/// The reported state to return upstream: the downstream object's `status`, if it has a
/// non-empty one.
pub fn status_for_upstream(downstream: &Value) -> Option<Value> {
    match downstream.get("status") {
        None | Some(Value::Null) => None,
        Some(Value::Object(map)) if map.is_empty() => None,
        Some(status) => Some(status.clone()),
    }
}

/// Whether writing `status` upstream would change anything.
pub fn status_differs(upstream: &Value, status: &Value) -> bool {
    upstream.get("status") != Some(status)
}

/// `upstream` with its `status` replaced: the body for a PUT to `/status` (it keeps
/// upstream's `resourceVersion`, so a concurrent change yields 409 and a retry).
pub fn with_status(upstream: &Value, status: Value) -> Value {
    let mut out = upstream.clone();
    if let Some(obj) = out.as_object_mut() {
        obj.insert("status".into(), status);
    }
    out
}

#[cfg(test)]
mod tests;
