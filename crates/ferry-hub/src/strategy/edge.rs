//! KubeStellar's EdgePlacement (`edge.kubestellar.io`), whoever installed
//! its CRD (Ferry's flows, or a tenant applying `ferry crds`): the hub
//! records the user who wrote the placement's spec, as kcp records the
//! requesting user at admission. The where-resolver
//! (`controllers::placement`) uses a Location only when the Location's
//! workspace grants that user `bind` on it, so the record is the server's
//! alone: whatever a client sends under [`PLACED_BY_ANNOTATION`] is replaced.

use serde_json::Value;

use crate::auth::{UserInfo, LOOPBACK_USER};
use crate::controllers::placement::grant;
use crate::json;
use crate::service::Request;
use crate::status::ApiError;
use crate::strategy::Strategy;

/// Annotation on an EdgePlacement: the user who last wrote its spec, as
/// JSON (`{"username", "uid", "groups", "extra"}`, a TokenReview's user).
pub const PLACED_BY_ANNOTATION: &str = "ferry.dev/placed-by";

/// EdgePlacements, served from a CRD.
pub struct EdgePlacementStrategy;

impl Strategy for EdgePlacementStrategy {
    fn prepare_for_create(&self, r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        set_placer(obj, Some(placer_record(&r.user)))
    }

    fn prepare_for_update(&self, r: &Request, old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        let recorded = recorded_after_update(&r.user, r.subresource.as_deref(), old, obj);
        set_placer(obj, recorded)
    }

    /// A placer no workspace grants any Location is told at once (the
    /// write stands: a grant may come later, and the where-resolver checks
    /// again on every pass). Says nothing of any Location.
    fn warnings(&self, r: &Request, obj: &Value) -> Vec<String> {
        if r.subresource.is_some() || r.user.is_superuser() || placer_of(obj).as_ref() != Some(&r.user) {
            return Vec::new();
        }
        if grant::may_place_somewhere(&r.hub, &r.user) {
            return Vec::new();
        }
        vec![format!(
            "EdgePlacement {:?} reaches no cluster yet: no workspace grants {:?} \"{}\" on a Location \
             (locations.{}); ask the owner of an inventory workspace for one",
            json::str_at(obj, "/metadata/name"),
            r.user.name,
            grant::BIND_VERB,
            crate::controllers::placement::EDGE_GROUP,
        )]
    }
}

/// The annotation's value for `user`.
pub fn placer_record(user: &UserInfo) -> String {
    user.to_json().to_string()
}

/// The user recorded as having placed `placement`, if any.
pub fn placer_of(placement: &Value) -> Option<UserInfo> {
    let recorded = placement
        .pointer("/metadata/annotations")?
        .get(PLACED_BY_ANNOTATION)?
        .as_str()?;
    UserInfo::from_json(&serde_json::from_str(recorded).ok()?)
}

/// Who is recorded after `user` updates `old` into `new`: `user` when the
/// spec changes, or when nobody is recorded yet and the update is a
/// client's (re-applying a placement written before placers were
/// recorded); otherwise whoever was. Status writes and the hub's own
/// bookkeeping never change it.
fn recorded_after_update(
    user: &UserInfo,
    subresource: Option<&str>,
    old: &Value,
    new: &Value,
) -> Option<String> {
    let before = old
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(PLACED_BY_ANNOTATION))
        .and_then(Value::as_str)
        .map(String::from);
    if subresource.is_some() {
        return before;
    }
    let spec_changed = old.get("spec") != new.get("spec");
    let first_by_a_client = before.is_none() && user.name != LOOPBACK_USER;
    if spec_changed || first_by_a_client {
        Some(placer_record(user))
    } else {
        before
    }
}

fn set_placer(obj: &mut Value, placer: Option<String>) -> Result<(), ApiError> {
    let meta = json::object_mut(obj, &["metadata"])?;
    match placer {
        Some(p) => {
            let annotations = meta
                .entry("annotations")
                .or_insert_with(|| Value::Object(Default::default()));
            if !annotations.is_object() {
                *annotations = Value::Object(Default::default());
            }
            if let Some(a) = annotations.as_object_mut() {
                a.insert(PLACED_BY_ANNOTATION.into(), Value::String(p));
            }
        }
        None => {
            if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                a.remove(PLACED_BY_ANNOTATION);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn placement(spec: Value, placed_by: Option<&UserInfo>) -> Value {
        let mut v = json!({"metadata": {"name": "p", "annotations": {}}, "spec": spec});
        set_placer(&mut v, placed_by.map(placer_record)).unwrap();
        v
    }

    #[test]
    fn the_writer_of_the_spec_is_recorded_and_nobody_else() {
        let mal = UserInfo::new("mal", "u-mal", vec![]);
        let alice = UserInfo::new("alice", "u-alice", vec![]);
        let old = placement(json!({"a": 1}), Some(&alice));
        // A forged record in what the client sent is replaced either way.
        let forged = placement(json!({"a": 2}), Some(&UserInfo::admin()));
        let after = recorded_after_update(&mal, None, &old, &forged);
        assert_eq!(
            after,
            Some(placer_record(&mal)),
            "the spec changed: mal placed it"
        );
        let forged_same_spec = placement(json!({"a": 1}), Some(&UserInfo::admin()));
        let after = recorded_after_update(&mal, None, &old, &forged_same_spec);
        assert_eq!(after, Some(placer_record(&alice)), "a label edit keeps alice");
        let status = recorded_after_update(&mal, Some("status"), &old, &forged);
        assert_eq!(status, Some(placer_record(&alice)));
    }

    #[test]
    fn a_placement_without_a_record_gets_one_when_a_client_applies_it_again() {
        let alice = UserInfo::new("alice", "u-alice", vec![]);
        let old = placement(json!({"a": 1}), None);
        let same = placement(json!({"a": 1}), None);
        assert_eq!(
            recorded_after_update(&alice, None, &old, &same),
            Some(placer_record(&alice))
        );
        assert_eq!(
            recorded_after_update(&UserInfo::loopback(), None, &old, &same),
            None,
            "the hub's bookkeeping places nothing"
        );
    }

    #[test]
    fn the_record_reads_back_as_the_user() {
        let alice = UserInfo::new("alice", "u-alice", vec!["team".into()]);
        assert_eq!(placer_of(&placement(json!({}), Some(&alice))), Some(alice));
        assert_eq!(placer_of(&placement(json!({}), None)), None);
        let garbage = json!({"metadata": {"annotations": {PLACED_BY_ANNOTATION: "{not json"}}});
        assert_eq!(placer_of(&garbage), None);
    }
}
