//! ReplicationControllers: kube-apiserver's `SetDefaults_ReplicationController`
//! (`replicas: 1`; the selector and labels default to the template's labels)
//! and validation.

use serde_json::{json, Map, Value};

use crate::status::Cause;
use crate::strategy::core::pod_spec::default_field;
use crate::strategy::workload::{non_negative, Workload};

pub static STRATEGY: Workload = Workload {
    template: &["spec", "template"],
    // A plain label map, checked in `validate`.
    selector_required: false,
    selector_immutable: false,
    template_immutable: false,
    defaults,
    validate,
    validate_create: crate::strategy::workload::no_create_rules,
};

fn defaults(spec: &mut Map<String, Value>, _meta: &Value) {
    default_field(spec, "replicas", json!(1));
    let labels = spec
        .get("template")
        .and_then(|t| t.pointer("/metadata/labels"))
        .cloned();
    if let Some(labels) = labels.filter(|l| l.as_object().is_some_and(|m| !m.is_empty())) {
        // An RC's selector is a plain label map.
        default_field(spec, "selector", labels);
    }
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = non_negative(obj, &["replicas", "minReadySeconds"]);
    let selector = obj.pointer("/spec/selector").and_then(Value::as_object);
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    match selector.filter(|s| !s.is_empty()) {
        None => causes.push(Cause::required("spec.selector")),
        Some(s) if !s.iter().all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v)) => {
            causes.push(Cause::invalid(
                "spec.template.metadata.labels",
                crate::validation::invalid_value(
                    &labels.cloned().map(Value::Object).unwrap_or_default(),
                    "`selector` does not match template `labels`",
                ),
            ))
        }
        Some(_) => {}
    }
    causes
}
