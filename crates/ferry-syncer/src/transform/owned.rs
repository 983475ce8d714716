//! Fields owned downstream: what the workload cluster's own controllers and
//! webhooks set on a copy (an autoscaler's `spec.replicas`, an injected
//! `caBundle`), which the syncer leaves alone so the two never fight. OCM's
//! `ignoreFields` semantics, read from the copy's
//! [`OWNED_DOWNSTREAM_ANNOTATION`] (set by the object's owner, or by the
//! placement translator from the WMW's CustomTransforms):
//!
//! - `OnSpokePresent`: once the copy has the field, its value is the
//!   cluster's, whatever the source says.
//! - `OnSpokeChange`: the copy's value is kept while the source is as the
//!   syncer last wrote it (the copy's desired hash matches); when the source
//!   changes, the next write carries the source's value again.
//!
//! Applied to the desired copy before it is compared or written, so the
//! field is neither overwritten nor counted as drift.

use serde_json::Value;

use ferry_api::control::{owned_downstream_of, OwnedCondition};
use ferry_api::well_known::{DESIRED_HASH_ANNOTATION, OWNED_DOWNSTREAM_ANNOTATION};

use super::ownership::str_at;

/// Whether `desired` lists fields owned downstream.
pub fn has_owned_downstream(desired: &Value) -> bool {
    str_at(desired, &["metadata", "annotations", OWNED_DOWNSTREAM_ANNOTATION]).is_some()
}

/// `desired` with the fields the workload cluster owns taken from `actual`,
/// the copy there (whole, not a verified stand-in).
pub fn keep_owned_downstream(desired: &Value, actual: &Value) -> Value {
    let mut out = desired.clone();
    let hash = |v| str_at(v, &["metadata", "annotations", DESIRED_HASH_ANNOTATION]);
    let source_unchanged = hash(desired).is_some() && hash(desired) == hash(actual);
    for rule in owned_downstream_of(desired) {
        let present_only = match rule.condition {
            OwnedCondition::OnSpokePresent => true,
            OwnedCondition::OnSpokeChange if source_unchanged => false,
            OwnedCondition::OnSpokeChange => continue,
        };
        for path in &rule.paths {
            path.keep_actual(&mut out, actual, present_only);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transform::{merge_for_update, needs_update};
    use serde_json::json;

    fn desired(condition: &str, replicas: i64, hash: &str) -> Value {
        json!({"metadata": {"name": "d", "annotations": {
                  OWNED_DOWNSTREAM_ANNOTATION: format!(r#"[{{"condition":"{condition}","jsonPaths":["$.spec.replicas"]}}]"#),
                  DESIRED_HASH_ANNOTATION: hash}},
               "spec": {"replicas": replicas, "paused": false}})
    }

    /// The copy as last written for `condition` at `hash`, then scaled downstream.
    fn copy(condition: &str, replicas: i64, hash: &str) -> Value {
        let mut c = desired(condition, 1, hash);
        c["spec"]["replicas"] = json!(replicas);
        c["metadata"]["resourceVersion"] = json!("9");
        c
    }

    #[test]
    fn on_spoke_present_the_clusters_value_is_neither_drift_nor_overwritten() {
        let wanted = desired("OnSpokePresent", 1, "h1");
        let scaled = copy("OnSpokePresent", 5, "h1");
        assert!(needs_update(&wanted, &scaled), "without the rule it is drift");
        let kept = keep_owned_downstream(&wanted, &scaled);
        assert!(!needs_update(&kept, &scaled));
        // The source changed something else: written, with the cluster's replicas.
        let mut changed = desired("OnSpokePresent", 2, "h2");
        changed["spec"]["paused"] = json!(true);
        let body = merge_for_update(&keep_owned_downstream(&changed, &scaled), &scaled);
        assert_eq!(body["spec"], json!({"replicas": 5, "paused": true}));
        // Not there yet: the source's value goes down.
        let fresh = json!({"metadata": {"name": "d"}, "spec": {"paused": false}});
        assert_eq!(keep_owned_downstream(&wanted, &fresh)["spec"]["replicas"], 1);
    }

    #[test]
    fn on_spoke_change_holds_until_the_source_changes() {
        let scaled = copy("OnSpokeChange", 5, "h1");
        let same_source = keep_owned_downstream(&desired("OnSpokeChange", 1, "h1"), &scaled);
        assert!(!needs_update(&same_source, &scaled));
        let new_source = keep_owned_downstream(&desired("OnSpokeChange", 3, "h2"), &scaled);
        assert_eq!(new_source["spec"]["replicas"], 3);
    }

    #[test]
    fn without_the_annotation_nothing_changes() {
        let plain = json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}});
        assert!(!has_owned_downstream(&plain));
        assert_eq!(
            keep_owned_downstream(&plain, &copy("OnSpokePresent", 5, "h1")),
            plain
        );
    }
}
