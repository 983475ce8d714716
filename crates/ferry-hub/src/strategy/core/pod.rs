//! Pods: the `ephemeralcontainers` subresource changes only
//! `spec.ephemeralContainers`; warnings about the pod spec (shared with the
//! workload kinds' pod templates).

use serde_json::{json, Value};

use crate::json;
use crate::service::Request;
use crate::status::ApiError;
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

impl Strategy for PodStrategy {
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
        let mut merged = old.clone();
        let containers = sent
            .pointer("/spec/ephemeralContainers")
            .cloned()
            .unwrap_or(json!([]));
        Some(
            json::set(&mut merged, &["spec", "ephemeralContainers"], containers)
                .map(|_| merged)
                .map_err(ApiError::from),
        )
    }
}
