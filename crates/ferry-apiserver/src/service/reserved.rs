//! Labels and annotations a layer above reserves for its own components
//! ([`ReservedMetadata`], among the hub's extensions: kcp TMC's scheduler
//! and syncers' keys): a client's write that adds, changes or removes one is
//! refused, for every kind, so nobody schedules an object onto a SyncTarget
//! by labelling it. A hub built without them reserves nothing.
//!
//! Who may write them ([`Writer`]): the hub's own controllers and members
//! of `system:masters` (the hub's admin, as kcp lets its privileged users
//! through); a syncer, through the view of its SyncTarget, the per-target
//! keys of that target only (the view narrows further: a syncer may remove
//! its `Sync` label, not set it). Everyone else may write an object that
//! carries them as long as they stay as they are (`kubectl apply` of an
//! object read back, `kubectl edit`).

use std::collections::BTreeMap;

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

/// Where a reserved key is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
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
#[derive(Debug, Clone, Copy)]
pub struct Reserved {
    pub place: Place,
    /// The key, or with `per_target` the prefix of `<prefix><sync target key>`.
    pub key: &'static str,
    pub per_target: bool,
    /// Who sets it, for the refusal.
    pub owner: &'static str,
}

/// The labels and annotations a layer above reserves, among the hub's
/// extensions ([`crate::hub::Extensions`]).
#[derive(Debug, Clone, Copy)]
pub struct ReservedMetadata(pub &'static [Reserved]);

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

/// The first label or annotation of `reserved` that `writer` changes
/// between `old` (`None`: a create) and `new`, if any (pure).
pub fn refusal(reserved: &[Reserved], writer: Writer, old: Option<&Value>, new: &Value) -> Option<Refusal> {
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
            for r in reserved {
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

    const RESERVED: &[Reserved] = &[
        Reserved {
            place: Place::Label,
            key: "state.example.com/",
            per_target: true,
            owner: "the scheduler sets it",
        },
        Reserved {
            place: Place::Annotation,
            key: "example.com/placed",
            per_target: false,
            owner: "the scheduler sets it",
        },
    ];

    fn obj(labels: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": "x", "labels": labels, "annotations": annotations}})
    }

    #[test]
    fn only_the_reserved_keys_are_refused_and_to_whom() {
        let set = obj(json!({"state.example.com/abc": "Sync"}), json!({}));
        let r = refusal(RESERVED, Writer::User, None, &set).expect("refused");
        assert_eq!(r.field, "metadata.labels[state.example.com/abc]");
        assert_eq!(r.owner, "the scheduler sets it");
        assert_eq!(refusal(RESERVED, Writer::Syncer("abc"), None, &set), None);
        assert!(refusal(RESERVED, Writer::Syncer("other"), None, &set).is_some());
        assert_eq!(refusal(RESERVED, Writer::Hub, None, &set), None);
        // Unchanged: fine. A label of the annotation's name: not reserved.
        assert_eq!(refusal(RESERVED, Writer::User, Some(&set), &set), None);
        let placed = obj(json!({}), json!({"example.com/placed": ""}));
        assert!(refusal(RESERVED, Writer::Syncer("abc"), None, &placed).is_some());
        let labelled = obj(json!({"example.com/placed": ""}), json!({}));
        assert_eq!(refusal(RESERVED, Writer::User, None, &labelled), None);
        // Nothing reserved: nothing refused.
        assert_eq!(refusal(&[], Writer::User, None, &set), None);
    }
}
