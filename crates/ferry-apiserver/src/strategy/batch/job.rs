//! Jobs: kube-apiserver's `SetDefaults_Job`, the generated selector
//! (`batch.kubernetes.io/controller-uid`) and validation (selector and
//! template immutable).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::selector::LabelSelector;

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
    validate_create: validate_generated_selector,
};

/// The labels kube-apiserver puts on a Job's pods (and selects them by).
const CONTROLLER_UID: &str = "batch.kubernetes.io/controller-uid";
const JOB_NAME: &str = "batch.kubernetes.io/job-name";
const LEGACY_CONTROLLER_UID: &str = "controller-uid";
const LEGACY_JOB_NAME: &str = "job-name";

/// kube-apiserver's `generateSelector`: unless `manualSelector` is true, the
/// template gets the generated labels it does not already have, and the
/// selector `batch.kubernetes.io/controller-uid: <uid>` unless it names that
/// key already. Labels or a selector the client sent are kept, so a Job sent
/// with another Job's generated ones is refused by [`validate_generated_selector`],
/// as kube-apiserver refuses it.
pub fn defaults(spec: &mut Map<String, Value>, meta: &Value) {
    defaults_of_spec(spec);
    let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
    let uid = meta.get("uid").and_then(Value::as_str);
    let (false, Some(uid)) = (manual, uid) else {
        return;
    };
    let name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
    if let Some(labels) = template_labels(spec) {
        for (k, v) in [
            (LEGACY_JOB_NAME, name),
            (JOB_NAME, name),
            (LEGACY_CONTROLLER_UID, uid),
            (CONTROLLER_UID, uid),
        ] {
            labels.entry(k).or_insert_with(|| json!(v));
        }
    }
    if spec.get("selector").is_none_or(Value::is_null) {
        spec.insert("selector".into(), json!({}));
    }
    if let Some(selector) = spec.get_mut("selector").and_then(Value::as_object_mut) {
        let match_labels = selector.entry("matchLabels").or_insert_with(|| json!({}));
        if match_labels.is_null() {
            *match_labels = json!({});
        }
        if let Some(m) = match_labels.as_object_mut() {
            m.entry(CONTROLLER_UID).or_insert_with(|| json!(uid));
        }
    }
}

/// A label map as Go prints a `map[string]string` in a validation message.
fn go_string_map(labels: &Value) -> String {
    let entries: BTreeMap<&str, &str> = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or_default()))
        .collect();
    let inner: Vec<String> = entries.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    format!("map[string]string{{{}}}", inner.join(", "))
}

/// The template's labels, made if missing.
fn template_labels(spec: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    let template = spec.entry("template").or_insert_with(|| json!({}));
    let meta = template
        .as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| json!({}));
    let labels = meta.as_object_mut()?.entry("labels").or_insert_with(|| json!({}));
    if labels.is_null() {
        *labels = json!({});
    }
    labels.as_object_mut()
}

/// kube-apiserver's `validateGeneratedSelector`, on create: unless
/// `manualSelector` is true, the template carries the generated labels with
/// this Job's uid and name, and the selector selects exactly them — so a Job
/// copied from another cluster with that cluster's generated selector is
/// refused, with kube's messages.
pub fn validate_generated_selector(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return causes;
    }
    let Some(selector) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return causes;
    };
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    for (key, expected) in [
        (LEGACY_CONTROLLER_UID, uid),
        (LEGACY_JOB_NAME, name),
        (CONTROLLER_UID, uid),
        (JOB_NAME, name),
    ] {
        let field = format!("spec.template.metadata.labels[{key}]");
        match labels.get(key).and_then(Value::as_str) {
            None => causes.push(Cause {
                reason: "FieldValueRequired".into(),
                field,
                message: format!("Required value: must be '{expected}'"),
            }),
            Some(actual) if actual != expected => causes.push(Cause::invalid(
                field,
                format!("Invalid value: {}: must be '{expected}'", go_string_map(&labels)),
            )),
            Some(_) => {}
        }
    }
    let expected: BTreeMap<String, String> = [
        (CONTROLLER_UID, uid),
        (JOB_NAME, name),
        (LEGACY_CONTROLLER_UID, uid),
        (LEGACY_JOB_NAME, name),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let selects = LabelSelector::from_label_selector_json(selector).is_ok_and(|s| s.matches(&expected));
    if !selects {
        causes.push(Cause::invalid(
            "spec.selector",
            format!("Invalid value: {selector}: `selector` not auto-generated"),
        ));
    }
    causes
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

    fn job(uid: &str, spec: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "pi", "uid": uid}, "spec": spec});
        let meta = obj["metadata"].clone();
        defaults(obj["spec"].as_object_mut().unwrap(), &meta);
        obj
    }

    #[test]
    fn a_fresh_job_passes_and_a_copy_of_another_clusters_job_is_refused_as_kube_refuses_it() {
        let fresh = job("u-1", json!({"template": {"spec": {"restartPolicy": "Never"}}}));
        assert_eq!(validate_generated_selector(&fresh), vec![]);

        // The same Job as another cluster stored it, created here under a new uid.
        let mut copied = fresh.clone();
        copied["metadata"]["uid"] = json!("u-2");
        let copied = job("u-2", copied["spec"].clone());
        let causes = validate_generated_selector(&copied);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.template.metadata.labels[controller-uid]",
                "spec.template.metadata.labels[batch.kubernetes.io/controller-uid]",
                "spec.selector"
            ]
        );
        assert!(causes[0].message.ends_with("must be 'u-2'"), "{causes:?}");
        assert!(
            causes[2].message.ends_with("`selector` not auto-generated"),
            "{causes:?}"
        );
    }

    #[test]
    fn a_selector_of_ones_own_needs_manual_selector() {
        let spec = json!({"selector": {"matchLabels": {"app": "pi"}},
            "template": {"metadata": {"labels": {"app": "pi"}}, "spec": {"restartPolicy": "Never"}}});
        let causes = validate_generated_selector(&job("u-1", spec.clone()));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.selector");

        let mut manual = spec;
        manual["manualSelector"] = json!(true);
        let obj = job("u-1", manual);
        assert_eq!(obj["spec"]["selector"], json!({"matchLabels": {"app": "pi"}}));
        assert_eq!(validate_generated_selector(&obj), vec![]);
    }
}
