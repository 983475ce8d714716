//! The kcp workload syncer's tracking annotations on a copy, for whoever reads the
//! copy on the cluster (`kubectl get deployment myapp -o yaml | grep syncer`): which
//! SyncTarget's syncer wrote it, from which workspace, and when.
//!
//! `syncer.kcp.io/last-sync` is bookkeeping, not content: [`super::needs_update`] and
//! the desired hash leave it out, so it never makes a copy look changed (no write
//! loop); it is rewritten only when the copy is written for a real change.

use serde_json::{Map, Value};

use ferry_api::well_known::{
    SYNCER_LAST_SYNC_ANNOTATION, SYNCER_SYNC_TARGET_ANNOTATION, SYNCER_WORKSPACE_ANNOTATION,
};

/// Annotations left out when deciding whether a copy needs writing.
pub(super) const UNCOMPARED_ANNOTATIONS: &[&str] = &[SYNCER_LAST_SYNC_ANNOTATION];

/// Adds the three `syncer.kcp.io/*` annotations to `copy`: `sync_target`,
/// `workspace` (of the source) and `now` (RFC 3339) as the last sync.
pub fn mark_tracking(copy: &mut Value, sync_target: &str, workspace: &str, now: &str) {
    let Some(meta) = copy
        .as_object_mut()
        .map(|obj| obj.entry("metadata").or_insert_with(|| Value::Object(Map::new())))
    else {
        return;
    };
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(SYNCER_SYNC_TARGET_ANNOTATION.into(), sync_target.into());
        annotations.insert(SYNCER_WORKSPACE_ANNOTATION.into(), workspace.into());
        annotations.insert(SYNCER_LAST_SYNC_ANNOTATION.into(), now.into());
    }
}
