//! KubeStellar's kinds (`edge.kubestellar.io`) that the placement translator
//! reads: EdgePlacement and Customizer. They are served by CRDs (Ferry's, or
//! ones a tenant installs with `ferry crds`), so their CRD schemas say
//! little; these strategies bound their sizes, whoever installed the CRD, so
//! nothing the translator cannot afford to evaluate is ever stored.

use serde_json::Value;

use crate::controllers::placement::customize;
use crate::selector::SelectorLimits;
use crate::service::Request;
use crate::status::Cause;
use crate::strategy::{ratchet, Strategy};

/// Most members of `spec.downsync`, `spec.upsync` and `spec.nonNamespacedObjects`.
pub const MAX_MEMBERS: usize = 64;
/// Most entries in one member's list of resources, namespaces or names.
pub const MAX_MEMBER_ITEMS: usize = 256;

/// `edge.kubestellar.io/v2alpha1` EdgePlacement.
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
