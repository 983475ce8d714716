//! CronJobs: kube-apiserver's `SetDefaults_CronJob` (and the job template's
//! Job and pod defaults) and validation.

use serde_json::{json, Map, Value};

use crate::status::Cause;
use crate::strategy::batch::job;
use crate::strategy::core::pod_spec::default_field;
use crate::strategy::workload::{non_negative, Workload};

pub static STRATEGY: Workload = Workload {
    template: &["spec", "jobTemplate", "spec", "template"],
    selector_required: false,
    selector_immutable: false,
    template_immutable: false,
    defaults,
    validate,
    validate_create: crate::strategy::workload::no_create_rules,
};

fn defaults(spec: &mut Map<String, Value>, _meta: &Value) {
    default_field(spec, "concurrencyPolicy", json!("Allow"));
    default_field(spec, "suspend", json!(false));
    default_field(spec, "successfulJobsHistoryLimit", json!(3));
    default_field(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_spec) = spec
        .get_mut("jobTemplate")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    {
        job::defaults_of_spec(job_spec);
    }
}

fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = non_negative(obj, &["successfulJobsHistoryLimit", "failedJobsHistoryLimit"]);
    if obj
        .pointer("/spec/schedule")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        causes.push(Cause::required("spec.schedule"));
    }
    causes.extend(job::restart_policy(
        obj,
        "/spec/jobTemplate/spec/template/spec/restartPolicy",
        "spec.jobTemplate.spec.template.spec.restartPolicy",
    ));
    causes
}
