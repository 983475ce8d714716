//! StatefulSets: kube-apiserver's `SetDefaults_StatefulSet` and validation
//! (selector matching the template, immutable selector).

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

fn defaults(spec: &mut Map<String, Value>, _meta: &Value) {
    default_field(spec, "replicas", json!(1));
    default_field(spec, "podManagementPolicy", json!("OrderedReady"));
    default_field(spec, "updateStrategy", json!({}));
    if let Some(u) = spec.get_mut("updateStrategy").and_then(Value::as_object_mut) {
        default_field(u, "type", json!("RollingUpdate"));
        if u.get("type") == Some(&json!("RollingUpdate")) {
            default_field(u, "rollingUpdate", json!({}));
            if let Some(ru) = u.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
                default_field(ru, "partition", json!(0));
            }
        }
    }
    default_field(spec, "revisionHistoryLimit", json!(10));
    default_field(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
}

fn validate(obj: &Value) -> Vec<Cause> {
    non_negative(obj, &["replicas", "revisionHistoryLimit", "minReadySeconds"])
}
