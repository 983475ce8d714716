//! Drift: a cluster's copy changed by someone other than its syncer (a
//! `kubectl edit` in the cluster, another controller), which the syncer then
//! restored. Beyond KubeStellar and kcp, whose syncers restore such changes
//! silently. The syncer counts each restoration and records the last one
//! where whoever placed the object looks:
//!
//! - KubeStellar: on the mailbox's SyncerConfigs (`status.drifted`), which
//!   the hub's placement translator carries to each object's
//!   `PlacementSummary` (per destination `drift`) and `CombinedStatus`
//!   (the `builtin:drift` result);
//! - kcp TMC: on the upstream object, as the annotation
//!   `drift.ferry.dev/<sync target key>` ([`drift_annotation`]), one per
//!   SyncTarget like kcp's own per-target annotations.
//!
//! A drift names the fields that changed as field paths
//! (`$.spec.template.spec.containers[0].image`, the syntax of
//! [`crate::field_path`], so one can go straight into a CustomTransform's
//! `ownedDownstream`), never their values, which may be secret.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Most fields one drift lists.
pub const MAX_DRIFT_FIELDS: usize = 10;

/// Prefix of the kcp TMC per-target drift annotation.
pub const DRIFT_ANNOTATION_PREFIX: &str = "drift.ferry.dev/";

/// The annotation on an upstream object recording the last drift of its
/// copy on the SyncTarget with key `sync_target_key` (value: a [`Drift`] as JSON).
pub fn drift_annotation(sync_target_key: &str) -> String {
    format!("{DRIFT_ANNOTATION_PREFIX}{sync_target_key}")
}

/// The last drift the syncer restored on one copy, and how many in all.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    /// When the syncer last restored the copy (RFC 3339).
    pub time: String,
    /// The fields it found changed then, as field paths such as
    /// `$.spec.template.spec.containers[0].image` (at most 10; never values).
    #[serde(default)]
    pub fields: Vec<String>,
    /// How many times the syncer has restored this copy.
    #[serde(default)]
    pub corrections: u64,
}

impl Drift {
    /// The drift recorded in an annotation's `value`, if it reads as one.
    pub fn parse(value: &str) -> Option<Drift> {
        serde_json::from_str(value).ok()
    }

    /// `$.a, $.b (3 corrections)`: the fields and the count, for one line of text.
    pub fn describe(&self) -> String {
        let times = if self.corrections == 1 {
            "1 correction".to_string()
        } else {
            format!("{} corrections", self.corrections)
        };
        format!("{} ({times})", self.fields.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drift_round_trips_through_its_annotation() {
        let drift = Drift {
            time: "2026-11-27T12:00:00Z".into(),
            fields: vec!["$.spec.replicas".into(), "$.metadata.labels.app".into()],
            corrections: 2,
        };
        let text = serde_json::to_string(&drift).unwrap();
        assert_eq!(Drift::parse(&text), Some(drift.clone()));
        assert_eq!(Drift::parse("not json"), None);
        assert_eq!(
            drift.describe(),
            "$.spec.replicas, $.metadata.labels.app (2 corrections)"
        );
        assert_eq!(drift_annotation("abc"), "drift.ferry.dev/abc");
    }
}
