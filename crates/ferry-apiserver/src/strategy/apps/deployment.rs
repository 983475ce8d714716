//! Deployments: kube-apiserver's `SetDefaults_Deployment` and validation
//! (selector matching the template, immutable selector, the pod template's
//! rules).

use serde_json::{json, Map, Value};

use crate::status::Cause;
use crate::strategy::core::pod_spec::default_field;
use crate::strategy::workload::{non_negative, Workload};

pub static STRATEGY: Workload = Workload {
    template: &["spec", "template"],
    selector_required: true,
    selector_immutable: true,
    template_immutable: false,
    defaults,
    validate,
    validate_create: crate::strategy::workload::no_create_rules,
};

/// `replicas: 1`, a 25%/25% rolling update, 10 old ReplicaSets kept, 600s
/// progress deadline.
pub fn defaults(spec: &mut Map<String, Value>, _meta: &Value) {
    default_field(spec, "replicas", json!(1));
    default_field(spec, "strategy", json!({}));
    if let Some(strategy) = spec.get_mut("strategy").and_then(Value::as_object_mut) {
        default_field(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate")) {
            default_field(strategy, "rollingUpdate", json!({}));
            if let Some(ru) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                default_field(ru, "maxUnavailable", json!("25%"));
                default_field(ru, "maxSurge", json!("25%"));
            }
        }
    }
    default_field(spec, "revisionHistoryLimit", json!(10));
    default_field(spec, "progressDeadlineSeconds", json!(600));
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = non_negative(obj, &["replicas", "revisionHistoryLimit", "minReadySeconds"]);
    let t = obj.pointer("/spec/strategy/type").and_then(Value::as_str);
    if let Some(t) = t.filter(|t| !matches!(*t, "RollingUpdate" | "Recreate")) {
        causes.push(Cause::unsupported(
            "spec.strategy.type",
            format!(
                "Unsupported value: {:?}: supported values: \"Recreate\", \"RollingUpdate\"",
                t
            ),
        ));
    }
    if t == Some("Recreate")
        && obj
            .pointer("/spec/strategy/rollingUpdate")
            .is_some_and(|v| !v.is_null())
    {
        causes.push(Cause::forbidden(
            "spec.strategy.rollingUpdate",
            "Forbidden: may not be specified when strategy `type` is 'Recreate'",
        ));
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_deployment_gets_kube_defaults() {
        let mut spec = Map::new();
        defaults(&mut spec, &Value::Null);
        assert_eq!(
            Value::Object(spec),
            json!({"replicas": 1, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
                   "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}})
        );
    }

    #[test]
    fn recreate_gets_no_rolling_update() {
        let mut spec = json!({"strategy": {"type": "Recreate"}, "replicas": 3});
        defaults(spec.as_object_mut().unwrap(), &Value::Null);
        assert_eq!(spec["strategy"], json!({"type": "Recreate"}));
        assert_eq!(spec["replicas"], 3);
    }

    #[test]
    fn negative_replicas_are_invalid() {
        let causes = validate(&json!({"spec": {"replicas": -1}}));
        assert_eq!(causes[0].field, "spec.replicas");
    }
}
