//! Labels and annotations kcp TMC's scheduler and syncers own, which the
//! hub reserves ([`ReservedMetadata`], see the API server's
//! `service::reserved`): a client's write that adds, changes or removes one
//! is refused, for every kind, so nobody schedules an object onto a
//! SyncTarget by labelling it.
//!
//! The KubeStellar placement translator's marks (`ferry.dev/placed`,
//! `ferry.dev/upsynced-from`, ...) are not reserved: they travel with the
//! copies a KubeStellar syncer writes to its cluster (a hub standing in
//! for one too), and where they count — mailboxes — only the hub and the
//! mailbox's own syncer write.

use ferry_api::scheduling::PLACEMENT_ANNOTATION;
use ferry_api::well_known::WORKLOAD_STATE_LABEL_PREFIX;
use ferry_apiserver::service::reserved::{Place, Reserved, ReservedMetadata};

/// kcp TMC's reserved keys, for the hub's extensions.
pub fn metadata() -> ReservedMetadata {
    ReservedMetadata(RESERVED)
}

const SCHEDULER: &str = "the hub's TMC scheduler sets it";
const SYNCER: &str = "the SyncTarget's syncer sets it, through its virtual workspace";

const RESERVED: &[Reserved] = &[
    Reserved {
        place: Place::Label,
        key: WORKLOAD_STATE_LABEL_PREFIX,
        per_target: true,
        owner: "the hub's TMC scheduler sets it from Placements, and the SyncTarget's syncer may \
                remove its own through its virtual workspace",
    },
    Reserved {
        place: Place::Annotation,
        key: "deletion.internal.workload.kcp.io/",
        per_target: true,
        owner: SCHEDULER,
    },
    Reserved {
        place: Place::Annotation,
        key: "finalizers.workload.kcp.io/",
        per_target: true,
        owner: SYNCER,
    },
    Reserved {
        place: Place::Annotation,
        key: "experimental.status.workload.kcp.io/",
        per_target: true,
        owner: SYNCER,
    },
    Reserved {
        place: Place::Annotation,
        key: ferry_api::drift::DRIFT_ANNOTATION_PREFIX,
        per_target: true,
        owner: SYNCER,
    },
    Reserved {
        place: Place::Annotation,
        key: PLACEMENT_ANNOTATION,
        per_target: false,
        owner: SCHEDULER,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_apiserver::service::reserved::{Refusal, Writer};
    use serde_json::{json, Value};

    /// What a write meets on a hub with this layer's reserved keys.
    fn refusal(writer: Writer, old: Option<&Value>, new: &Value) -> Option<Refusal> {
        ferry_apiserver::service::reserved::refusal(RESERVED, writer, old, new)
    }

    fn obj(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels, "annotations": annotations}})
    }

    const STATE: &str = "state.workload.kcp.io/abc";

    #[test]
    fn a_user_may_not_add_change_or_remove_a_state_label() {
        let none = obj(json!({"app": "x"}), json!({}));
        let set = obj(json!({"app": "x", STATE: "Sync"}), json!({}));
        let r = refusal(Writer::User, None, &set).expect("refused");
        assert_eq!(r.field, format!("metadata.labels[{STATE}]"));
        assert!(refusal(Writer::User, Some(&none), &set).is_some());
        assert!(refusal(Writer::User, Some(&set), &none).is_some());
        let upsync = obj(json!({"app": "x", STATE: "Upsync"}), json!({}));
        assert!(refusal(Writer::User, Some(&set), &upsync).is_some());
        // Unchanged, with other changes around it: fine.
        let relabelled = obj(json!({"app": "y", STATE: "Sync"}), json!({"note": "n"}));
        assert_eq!(refusal(Writer::User, Some(&set), &relabelled), None);
        assert_eq!(refusal(Writer::User, None, &none), None);
    }

    #[test]
    fn a_syncer_writes_only_its_own_targets_keys_and_the_hub_everything() {
        let before = obj(json!({STATE: "Sync"}), json!({}));
        let soft = obj(
            json!({STATE: "Sync"}),
            json!({"finalizers.workload.kcp.io/abc": "x"}),
        );
        assert_eq!(refusal(Writer::Syncer("abc"), Some(&before), &soft), None);
        assert!(refusal(Writer::Syncer("other"), Some(&before), &soft).is_some());
        // A syncer records drift on its own target's key only.
        let drifted = obj(json!({STATE: "Sync"}), json!({"drift.ferry.dev/abc": "{}"}));
        assert_eq!(refusal(Writer::Syncer("abc"), Some(&before), &drifted), None);
        assert!(refusal(Writer::Syncer("other"), Some(&before), &drifted).is_some());
        let placed = obj(json!({STATE: "Sync"}), json!({"scheduling.kcp.io/placement": ""}));
        assert!(refusal(Writer::Syncer("abc"), Some(&before), &placed).is_some());
        assert_eq!(refusal(Writer::Hub, Some(&before), &placed), None);
    }

    #[test]
    fn the_schedulers_and_syncers_annotations_are_reserved_too() {
        for (labels, annotations) in [
            (json!({}), json!({"scheduling.kcp.io/placement": ""})),
            (json!({}), json!({"finalizers.workload.kcp.io/abc": "x"})),
            (json!({}), json!({"deletion.internal.workload.kcp.io/abc": "now"})),
            (json!({}), json!({"drift.ferry.dev/abc": "{}"})),
        ] {
            let o = obj(labels, annotations);
            let r = refusal(Writer::User, None, &o).expect("refused");
            assert!(!r.owner.is_empty(), "{o}");
        }
        // Look-alikes are not reserved.
        let o = obj(
            json!({"ferry.dev/placed": "true", "x.state.workload.kcp.io/a": "Sync"}),
            json!({}),
        );
        assert_eq!(refusal(Writer::User, None, &o), None);
    }
}
