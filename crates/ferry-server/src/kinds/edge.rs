//! KubeStellar's EdgePlacement (`edge.kubestellar.io`), whoever installed
//! its CRD (Ferry's flows, or a tenant applying `ferry crds`): the hub
//! records the user who wrote the placement's spec, as kcp records the
//! requesting user at admission. The where-resolver
//! (`ferry_kubestellar::placement`) uses a Location only when the Location's
//! workspace grants that user `bind` on it, so the record is the server's
//! alone: whatever a client sends under [`PLACED_BY_ANNOTATION`] is replaced.
//!
//! It also bounds what the placement translator reads (EdgePlacements,
//! Customizers and CustomTransforms), whoever installed the CRD, so nothing
//! the translator cannot afford to evaluate is ever stored.

use serde_json::Value;

use crate::auth::{UserInfo, LOOPBACK_USER};
use crate::customize;
use crate::grants::edge as grant;
use crate::json;
use crate::request::Request;
use crate::selector::SelectorLimits;
use crate::status::{ApiError, Cause};
use crate::strategy::{ratchet, Strategy};

/// Most members of `spec.downsync`, `spec.upsync` and `spec.nonNamespacedObjects`.
pub const MAX_MEMBERS: usize = 64;
/// Most entries in one member's list of resources, namespaces or names.
pub const MAX_MEMBER_ITEMS: usize = 256;

/// Annotation on an EdgePlacement: the user who last wrote its spec, as
/// JSON (`{"username", "uid", "groups", "extra"}`, a TokenReview's user).
pub const PLACED_BY_ANNOTATION: &str = "ferry.dev/placed-by";

/// EdgePlacements, served from a CRD.
pub struct EdgePlacementStrategy;

impl Strategy for EdgePlacementStrategy {
    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        edge_placement_limit_causes(obj)
    }

    fn validate_update(&self, _r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        ratchet(
            edge_placement_limit_causes(obj),
            &edge_placement_limit_causes(old),
        )
    }

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
        if grant::may_place_somewhere(r.hub(), &r.user) {
            return Vec::new();
        }
        vec![format!(
            "EdgePlacement {:?} reaches no cluster yet: no workspace grants {:?} \"{}\" on a Location \
             (locations.{}); ask the owner of an inventory workspace for one",
            json::str_at(obj, "/metadata/name"),
            r.user.name,
            grant::BIND_VERB,
            grant::EDGE_GROUP,
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

/// What is over the limits in an EdgePlacement: its selectors (as every
/// placement's, [`SelectorLimits`]) and its member lists.
pub fn edge_placement_limit_causes(obj: &Value) -> Vec<Cause> {
    let spec = obj.get("spec");
    let at = |k: &str| spec.and_then(|s| s.get(k));
    let mut limits = SelectorLimits::default();
    limits.list("spec.locationSelectors", at("locationSelectors"));
    limits.one("spec.namespaceSelector", at("namespaceSelector"));
    let mut causes = Vec::new();
    let lists: [(&str, &[&str]); 3] = [
        ("downsync", &["resources", "namespaces", "objectNames"]),
        ("upsync", &["resources", "namespaces", "names"]),
        ("nonNamespacedObjects", &["resources", "resourceNames"]),
    ];
    for (list, item_fields) in lists {
        let Some(members) = at(list).and_then(Value::as_array) else {
            continue;
        };
        if members.len() > MAX_MEMBERS {
            causes.push(Cause::too_many(
                format!("spec.{list}"),
                members.len(),
                MAX_MEMBERS,
            ));
            continue;
        }
        for (i, m) in members.iter().enumerate() {
            let field = format!("spec.{list}[{i}]");
            for f in item_fields {
                let n = m.get(*f).and_then(Value::as_array).map_or(0, Vec::len);
                if n > MAX_MEMBER_ITEMS {
                    causes.push(Cause::too_many(format!("{field}.{f}"), n, MAX_MEMBER_ITEMS));
                }
            }
            if list == "downsync" {
                limits.list(
                    &format!("{field}.namespaceSelectors"),
                    m.get("namespaceSelectors"),
                );
                limits.list(&format!("{field}.labelSelectors"), m.get("labelSelectors"));
            }
        }
    }
    let mut all = limits.finish();
    all.extend(causes);
    all
}

/// `edge.kubestellar.io/v2alpha1` Customizer.
pub struct CustomizerStrategy;

impl Strategy for CustomizerStrategy {
    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        customize::limit_causes(obj)
    }

    fn validate_update(&self, _r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        ratchet(customize::limit_causes(obj), &customize::limit_causes(old))
    }
}

/// KubeStellar's `control.kubestellar.io/v1alpha1` CustomTransform: paths
/// checked on write (syntax, target, count and length), so the translator
/// only ever reads transforms it can apply.
pub struct CustomTransformStrategy;

fn custom_transform_causes(obj: &Value) -> Vec<Cause> {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    ferry_api::control::spec_problems(&spec)
        .into_iter()
        .map(|(field, message)| Cause::invalid(field, message))
        .collect()
}

impl Strategy for CustomTransformStrategy {
    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        custom_transform_causes(obj)
    }

    fn validate_update(&self, _r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        ratchet(custom_transform_causes(obj), &custom_transform_causes(old))
    }
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

    #[test]
    fn edge_placements_are_bounded_member_by_member() {
        let ok = json!({"spec": {
            "locationSelectors": [{"matchLabels": {"env": "prod"}}],
            "downsync": [{"apiGroup": "", "resources": ["configmaps"], "namespaces": ["a"],
                          "labelSelectors": [{"matchExpressions": [{"key": "k", "operator": "In", "values": ["x"]}]}]}],
            "upsync": [{"apiGroup": "", "resources": ["*"], "namespaces": ["*"], "names": ["*"]}],
        }});
        assert!(edge_placement_limit_causes(&ok).is_empty());
        let names: Vec<String> = (0..=MAX_MEMBER_ITEMS).map(|i| format!("n{i}")).collect();
        let selectors: Vec<Value> = (0..=crate::selector::MAX_SELECTORS).map(|_| json!({})).collect();
        let members: Vec<Value> = (0..=MAX_MEMBERS).map(|_| json!({})).collect();
        let big = json!({"spec": {
            "downsync": [{"objectNames": names, "labelSelectors": selectors}],
            "upsync": members,
        }});
        let causes: Vec<String> = edge_placement_limit_causes(&big)
            .iter()
            .map(Cause::describe)
            .collect();
        assert_eq!(
            causes,
            [
                "spec.downsync[0].labelSelectors: Too many: 17: must have at most 16 items",
                "spec.downsync[0].objectNames: Too many: 257: must have at most 256 items",
                "spec.upsync: Too many: 65: must have at most 64 items",
            ]
        );
    }
}
