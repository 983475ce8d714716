//! ReplicaSets: kube-apiserver's `SetDefaults_ReplicaSet` (`replicas: 1`)
//! and validation (selector matching the template, immutable selector).

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
}

fn validate(obj: &Value) -> Vec<Cause> {
    non_negative(obj, &["replicas", "minReadySeconds"])
}
