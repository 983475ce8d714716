//! What the workload kinds (Deployment, ReplicaSet, StatefulSet, DaemonSet,
//! ReplicationController, Job, CronJob) share: a pod template that gets the
//! pod spec's defaults, validation and warnings; a selector that must match
//! the template's labels and may not change; replicas that are not negative.
//! Each kind's file says only its own defaults ([`Workload::defaults`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::request::Request;
use crate::selector::LabelSelector;
use crate::status::{ApiError, Cause};
use crate::strategy::core::pod::pod_spec_warnings;
use crate::strategy::core::pod_spec::{default_pod_spec, object_at, validate_pod_spec};
use crate::strategy::Strategy;
use crate::validation::invalid_value;

/// A workload kind's strategy, described by where its template is and what
/// its own defaults are.
pub struct Workload {
    /// The template's path from the object (`spec.template`, or
    /// `spec.jobTemplate.spec.template` for CronJobs).
    pub template: &'static [&'static str],
    /// Whether `spec.selector` must be set (and match the template's labels).
    pub selector_required: bool,
    /// Whether `spec.selector` may not change after create.
    pub selector_immutable: bool,
    /// Whether the template may not change after create (Jobs).
    pub template_immutable: bool,
    /// The kind's own defaults of its `spec` (the template's pod spec is
    /// defaulted by the shared code), given the object's metadata.
    pub defaults: fn(spec: &mut Map<String, Value>, meta: &Value),
    /// The kind's own rules on a new or updated object.
    pub validate: fn(obj: &Value) -> Vec<Cause>,
    /// The kind's rules on a new object only (a Job's generated selector).
    pub validate_create: fn(obj: &Value) -> Vec<Cause>,
}

/// `validate_create` of kinds with no rules of their own on create.
pub fn no_create_rules(_obj: &Value) -> Vec<Cause> {
    Vec::new()
}

fn dotted(path: &[&str]) -> String {
    path.join(".")
}

impl Workload {
    fn default(&self, obj: &mut Value) -> Result<(), ApiError> {
        let meta = obj.get("metadata").cloned().unwrap_or_default();
        if let Some(spec) = object_at(obj, &["spec"]) {
            (self.defaults)(spec, &meta);
        }
        let mut pod_spec = self.template.to_vec();
        pod_spec.push("spec");
        if let Some(spec) = object_at(obj, &pod_spec) {
            default_pod_spec(spec);
        }
        Ok(())
    }

    fn template_path(&self) -> String {
        dotted(self.template)
    }

    fn template_value<'a>(&self, obj: &'a Value) -> Option<&'a Value> {
        self.template.iter().try_fold(obj, |cur, step| cur.get(*step))
    }
}

/// `spec.selector` against the template's labels: required, not empty, and
/// matching.
fn validate_selector(obj: &Value, template_path: &str, template: Option<&Value>) -> Vec<Cause> {
    let Some(selector) = obj.pointer("/spec/selector").filter(|s| !s.is_null()) else {
        return vec![Cause::required("spec.selector")];
    };
    let parsed = match LabelSelector::from_label_selector_json(selector) {
        Ok(s) => s,
        Err(e) => {
            return vec![Cause::invalid(
                "spec.selector",
                invalid_value(selector, &e.to_string()),
            )]
        }
    };
    if parsed.is_empty() {
        return vec![Cause::invalid(
            "spec.selector",
            invalid_value(selector, "empty selector is invalid for this kind"),
        )];
    }
    let labels_value = template.and_then(|t| t.pointer("/metadata/labels"));
    let labels: BTreeMap<String, String> = labels_value
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    if parsed.matches(&labels) {
        return Vec::new();
    }
    vec![Cause::invalid(
        format!("{template_path}.metadata.labels"),
        invalid_value(
            labels_value.unwrap_or(&Value::Object(Default::default())),
            "`selector` does not match template `labels`",
        ),
    )]
}

/// `field: Invalid value: <new>: field is immutable` when `pointer` changed.
pub(crate) fn immutable(old: &Value, new: &Value, pointer: &str, field: &str) -> Option<Cause> {
    let (o, n) = (old.pointer(pointer), new.pointer(pointer));
    (o != n).then(|| {
        Cause::invalid(
            field,
            invalid_value(n.unwrap_or(&Value::Null), "field is immutable"),
        )
    })
}

/// Replicas (and the other counts kinds have) may not be negative.
pub(crate) fn non_negative(obj: &Value, fields: &[&str]) -> Vec<Cause> {
    fields
        .iter()
        .filter_map(|f| {
            let v = obj.pointer(&format!("/spec/{}", f.replace('.', "/")))?;
            (v.as_i64()? < 0).then(|| {
                Cause::invalid(
                    format!("spec.{f}"),
                    invalid_value(v, "must be greater than or equal to 0"),
                )
            })
        })
        .collect()
}

impl Strategy for Workload {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        self.default(obj)
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        self.default(obj)
    }

    fn validate(&self, r: &Request, obj: &Value) -> Vec<Cause> {
        let template = self.template_value(obj);
        let path = self.template_path();
        let mut causes = Vec::new();
        if self.selector_required {
            causes.extend(validate_selector(obj, &path, template));
        }
        match template {
            None => causes.push(Cause::required(path.clone())),
            Some(t) => causes.extend(validate_pod_spec(t.get("spec"), &format!("{path}.spec"))),
        }
        causes.extend((self.validate)(obj));
        if r.verb == "create" {
            causes.extend((self.validate_create)(obj));
        }
        causes
    }

    fn validate_update(&self, r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        if r.subresource.as_deref() == Some("status") {
            // A status write keeps the stored spec; it is not judged again.
            return Vec::new();
        }
        let mut causes = self.validate(r, obj);
        if self.selector_immutable {
            causes.extend(immutable(old, obj, "/spec/selector", "spec.selector"));
        }
        if self.template_immutable {
            let pointer = format!("/{}", self.template.join("/"));
            causes.extend(immutable(old, obj, &pointer, &self.template_path()));
        }
        causes
    }

    fn warnings(&self, _r: &Request, obj: &Value) -> Vec<String> {
        pod_spec_warnings(obj, &format!("{}.spec", self.template_path()))
    }
}
