//! Labels and annotations kcp TMC's scheduler and syncers own: a client's
//! write that adds, changes or removes one is refused, for every kind, so
//! nobody schedules an object onto a SyncTarget by labelling it.
//!
//! The KubeStellar placement translator's marks (`ferry.dev/placed`,
//! `ferry.dev/upsynced-from`, ...) are not reserved: they travel with the
//! copies a KubeStellar syncer writes to its cluster (a hub standing in
//! for one too), and where they count — mailboxes — only the hub and the
//! mailbox's own syncer write.
//!
//! Who may write them ([`Writer`]): the hub's own controllers and members
//! of `system:masters` (the hub's admin, as kcp lets its privileged users
//! through); a syncer, through the virtual workspace of its SyncTarget,
//! the per-target keys of that target only (the view narrows further: a
//! syncer may remove its `Sync` label, not set it). Everyone else may
//! write an object that carries them as long as they stay as they are
//! (`kubectl apply` of an object read back, `kubectl edit`).

use std::collections::BTreeMap;

use ferry_api::scheduling::PLACEMENT_ANNOTATION;
use ferry_api::well_known::WORKLOAD_STATE_LABEL_PREFIX;
use serde_json::Value;

use crate::request::Request;

/// Who is writing, as far as reserved metadata goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer<'a> {
    /// The hub's controllers, and `system:masters`.
    Hub,
    /// A syncer through the virtual workspace of the SyncTarget with this key.
    Syncer(&'a str),
    /// Anyone else.
    User,
}

impl<'a> Writer<'a> {
    /// Who writes in `r`.
    pub fn of(r: &'a Request) -> Writer<'a> {
        if r.user.is_superuser() {
            return Writer::Hub;
        }
        match r.visibility.as_ref().and_then(|v| v.sync_target_key()) {
            Some(key) => Writer::Syncer(key),
            None => Writer::User,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Label,
    Annotation,
}

impl Place {
    fn field(self) -> &'static str {
        match self {
            Place::Label => "metadata.labels",
            Place::Annotation => "metadata.annotations",
        }
    }
}

/// One reserved key, or family of keys.
struct Reserved {
    place: Place,
    /// The key, or with `per_target` the prefix of `<prefix><sync target key>`.
    key: &'static str,
    per_target: bool,
    /// Who sets it, for the refusal.
    owner: &'static str,
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

impl Reserved {
    /// Whether `key` (in `place`) is this one; with `per_target`, the
    /// target's key.
    fn matches<'k>(&self, place: Place, key: &'k str) -> Option<&'k str> {
        if place != self.place {
            return None;
        }
        if self.per_target {
            key.strip_prefix(self.key)
        } else {
            (key == self.key).then_some("")
        }
    }

    fn allows(&self, writer: Writer, target: &str) -> bool {
        match writer {
            Writer::Hub => true,
            Writer::Syncer(own) => self.per_target && target == own,
            Writer::User => false,
        }
    }
}

fn map_at(obj: Option<&Value>, place: Place) -> BTreeMap<&str, &Value> {
    let pointer = match place {
        Place::Label => "/metadata/labels",
        Place::Annotation => "/metadata/annotations",
    };
    obj.and_then(|o| o.pointer(pointer))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

/// A reserved key the write may not change: its field path and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub owner: &'static str,
}

/// The first reserved label or annotation that `writer` changes between
/// `old` (`None`: a create) and `new`, if any (pure).
pub fn refusal(writer: Writer, old: Option<&Value>, new: &Value) -> Option<Refusal> {
    if writer == Writer::Hub {
        return None;
    }
    for place in [Place::Label, Place::Annotation] {
        let (before, after) = (map_at(old, place), map_at(Some(new), place));
        let keys = before.keys().chain(after.keys());
        for key in keys {
            if before.get(key) == after.get(key) {
                continue;
            }
            for r in RESERVED {
                if let Some(target) = r.matches(place, key) {
                    if !r.allows(writer, target) {
                        return Some(Refusal {
                            field: format!("{}[{key}]", place.field()),
                            owner: r.owner,
                        });
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
