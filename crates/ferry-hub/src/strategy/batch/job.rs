//! Jobs: kube-apiserver's `SetDefaults_Job`, the generated selector
//! (`batch.kubernetes.io/controller-uid`) and validation (selector and
//! template immutable).

use serde_json::{json, Map, Value};

use crate::status::Cause;
use crate::strategy::core::pod_spec::default_field;
use crate::strategy::workload::{non_negative, Workload};

pub static STRATEGY: Workload = Workload {
    template: &["spec", "template"],
    selector_required: true,
    selector_immutable: true,
    template_immutable: true,
    defaults,
    validate,
};

/// The labels kube-apiserver puts on a Job's pods (and selects them by).
const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
const JOB_NAME: &str = "batch.kubernetes.io/job-name";

pub fn defaults(spec: &mut Map<String, Value>, meta: &Value) {
    defaults_of_spec(spec);
    let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    let uid = meta.get("uid").and_then(Value::as_str);
    if let (false, Some(uid)) = (manual, uid) {
        if spec.get("selector").is_none_or(Value::is_null) {
            spec.insert("selector".into(), json!({"matchLabels": {CONTROLLER_UID: uid}}));
            let name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
            let template = spec.entry("template").or_insert_with(|| json!({}));
            if let Some(t) = template.as_object_mut() {
                let m = t.entry("metadata").or_insert_with(|| json!({}));
                if let Some(m) = m.as_object_mut() {
                    let labels = m.entry("labels").or_insert_with(|| json!({}));
                    if let Some(l) = labels.as_object_mut() {
                        for (k, v) in [
                            (CONTROLLER_UID, uid),
                            ("controller-uid", uid),
                            (JOB_NAME, name),
                            ("job-name", name),
                        ] {
                            l.insert(k.into(), json!(v));
                        }
                    }
                }
            }
        }
    }
}

/// A Job's spec defaults without the selector (shared with CronJobs'
/// job templates).
pub fn defaults_of_spec(spec: &mut Map<String, Value>) {
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    default_field(spec, "parallelism", json!(1));
    default_field(spec, "backoffLimit", json!(6));
    default_field(spec, "completionMode", json!("NonIndexed"));
    default_field(spec, "suspend", json!(false));
    default_field(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = non_negative(
        obj,
        &[
            "parallelism",
            "completions",
            "backoffLimit",
            "activeDeadlineSeconds",
        ],
    );
    causes.extend(restart_policy(
        obj,
        "/spec/template/spec/restartPolicy",
        "spec.template.spec.restartPolicy",
    ));
    causes
}

/// A Job's pods must not restart forever: `OnFailure` or `Never`.
pub fn restart_policy(obj: &Value, pointer: &str, field: &str) -> Option<Cause> {
    let policy = obj.pointer(pointer).and_then(Value::as_str)?;
    (!matches!(policy, "OnFailure" | "Never")).then(|| {
        Cause::unsupported(
            field,
            format!("Unsupported value: {policy:?}: supported values: \"OnFailure\", \"Never\""),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_selects_its_pods_by_its_uid() {
        let mut spec = json!({"template": {"spec": {"restartPolicy": "Never"}}});
        defaults(
            spec.as_object_mut().unwrap(),
            &json!({"name": "pi", "uid": "u-1"}),
        );
        assert_eq!(spec["selector"], json!({"matchLabels": {CONTROLLER_UID: "u-1"}}));
        assert_eq!(spec["template"]["metadata"]["labels"][JOB_NAME], "pi");
        assert_eq!(spec["completions"], 1);
        assert_eq!(spec["backoffLimit"], 6);
        assert!(spec.get("manualSelector").is_none());
    }
}
