//! flowcontrol.apiserver.k8s.io/v1: kube-apiserver's defaults for
//! FlowSchemas and PriorityLevelConfigurations. The hub has no API priority
//! and fairness of its own; these are stored for placing onto clusters.

use serde_json::{json, Value};

use crate::strategy::core::pod_spec::{default_field, object_at};
use crate::strategy::Defaults;

pub static FLOW_SCHEMA: Defaults = Defaults(flow_schema_defaults);
pub static PRIORITY_LEVEL: Defaults = Defaults(priority_level_defaults);

/// `matchingPrecedence` 0 (or unset) means 1000, as in kube.
fn flow_schema_defaults(obj: &mut Value) {
    if let Some(spec) = object_at(obj, &["spec"]) {
        if spec
            .get("matchingPrecedence")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
        {
            spec.insert("matchingPrecedence".into(), json!(1000));
        }
    }
}

fn priority_level_defaults(obj: &mut Value) {
    if let Some(exempt) = object_at(obj, &["spec", "exempt"]) {
        default_field(exempt, "nominalConcurrencyShares", json!(0));
        default_field(exempt, "lendablePercent", json!(0));
    }
    if let Some(limited) = object_at(obj, &["spec", "limited"]) {
        default_field(limited, "nominalConcurrencyShares", json!(30));
        default_field(limited, "lendablePercent", json!(0));
    }
    if let Some(queuing) = object_at(obj, &["spec", "limited", "limitResponse", "queuing"]) {
        for (field, default) in [("handSize", 8), ("queues", 64), ("queueLengthLimit", 50)] {
            if queuing.get(field).and_then(Value::as_i64).unwrap_or(0) == 0 {
                queuing.insert(field.into(), json!(default));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_control_defaults() {
        let mut fs = json!({"spec": {"priorityLevelConfiguration": {"name": "x"}}});
        flow_schema_defaults(&mut fs);
        assert_eq!(fs["spec"]["matchingPrecedence"], 1000);
        let mut pl = json!({"spec": {"type": "Limited", "limited": {"limitResponse": {"type": "Queue", "queuing": {}}}}});
        priority_level_defaults(&mut pl);
        assert_eq!(pl["spec"]["limited"]["nominalConcurrencyShares"], 30);
        assert_eq!(pl["spec"]["limited"]["limitResponse"]["queuing"]["queues"], 64);
    }
}
