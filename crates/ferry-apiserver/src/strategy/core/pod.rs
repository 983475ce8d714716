//! Pods: the `ephemeralcontainers` subresource changes only
//! `spec.ephemeralContainers`; warnings about the pod spec (shared with the
//! workload kinds' pod templates).

use serde_json::{json, Value};

use crate::json;
use crate::request::Request;
use crate::status::{ApiError, Cause};
use crate::strategy::core::pod_spec::{
    default_field, default_pod_requests, default_pod_spec, object_at, pod_spec_update_forbidden, qos_class,
    validate_pod_spec,
};
use crate::strategy::Strategy;

pub struct PodStrategy;

/// Node labels kube-apiserver warns about in a pod's `nodeSelector`.
const DEPRECATED_NODE_LABELS: &[(&str, &str)] = &[
    ("beta.kubernetes.io/arch", "kubernetes.io/arch"),
    ("beta.kubernetes.io/os", "kubernetes.io/os"),
    (
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    ),
    (
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
    ),
];

/// Warnings about the pod spec at `path` (`spec`, `spec.template.spec`)
/// of `obj`, in kube-apiserver's words.
pub fn pod_spec_warnings(obj: &Value, path: &str) -> Vec<String> {
    let pointer = format!("/{}/nodeSelector", path.replace('.', "/"));
    let Some(selector) = obj.pointer(&pointer).and_then(Value::as_object) else {
        return Vec::new();
    };
    selector
        .keys()
        .filter_map(|k| {
            let (old, new) = DEPRECATED_NODE_LABELS.iter().find(|(old, _)| old == k)?;
            Some(format!(
                "{path}.nodeSelector[{old}]: deprecated since v1.14; use \"{new}\" instead"
            ))
        })
        .collect()
}

/// A Pod's spec defaults: the pod spec's, requests from limits, service links.
fn default_pod(obj: &mut Value) {
    if let Some(spec) = object_at(obj, &["spec"]) {
        default_pod_spec(spec);
        default_pod_requests(spec);
        default_field(spec, "enableServiceLinks", json!(true));
    }
}

impl Strategy for PodStrategy {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        default_pod(obj);
        // A new pod is Pending until a kubelet says otherwise (the hub has none).
        let qos = qos_class(obj.get("spec").unwrap_or(&Value::Null));
        let status = json!({"phase": "Pending", "qosClass": qos});
        json::set(obj, &["status"], status)?;
        Ok(())
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        default_pod(obj);
        Ok(())
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        let mut causes = validate_pod_spec(obj.get("spec"), "spec");
        // kube-apiserver's ValidatePodCreate: ephemeral containers come only
        // through their subresource, so a copy of a debugged pod is refused.
        if obj
            .pointer("/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty())
        {
            causes.push(Cause::forbidden(
                "spec.ephemeralContainers",
                "Forbidden: cannot be set on create",
            ));
        }
        causes
    }

    fn validate_update(&self, r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        if r.subresource.as_deref() == Some("status") {
            return Vec::new();
        }
        let mut causes = validate_pod_spec(obj.get("spec"), "spec");
        causes.extend(pod_spec_update_forbidden(old, obj));
        causes
    }

    fn admit(&self, r: &Request, old: Option<&Value>, obj: &Value) -> Result<(), ApiError> {
        match old {
            None => crate::strategy::scheduling::admit_pod(r, obj),
            Some(_) => Ok(()),
        }
    }

    fn warnings(&self, _r: &Request, obj: &Value) -> Vec<String> {
        pod_spec_warnings(obj, "spec")
    }

    fn merge_subresource(
        &self,
        subresource: &str,
        old: &Value,
        sent: &Value,
    ) -> Option<Result<Value, ApiError>> {
        if subresource != "ephemeralcontainers" {
            return None;
        }
        Some(crate::strategy::with_field_from(
            old,
            sent,
            &["spec", "ephemeralContainers"],
        ))
    }
}
