//! Namespaces: the `kubernetes.io/metadata.name` label, the `kubernetes`
//! finalizer (held until namespace termination has emptied the namespace)
//! and the `Active` phase.

use serde_json::{json, Value};

use crate::json;
use crate::propagation::PropagationPolicy;
use crate::registry::ResourceInfo;
use crate::request::Request;
use crate::status::ApiError;
use crate::strategy::Strategy;

/// The finalizer that holds a namespace until its contents are gone.
pub const KUBERNETES_FINALIZER: &str = "kubernetes";

pub struct NamespaceStrategy;

fn name_label(obj: &mut Value) -> Result<(), ApiError> {
    let name = json::str_at(obj, "/metadata/name").to_string();
    json::set(
        obj,
        &["metadata", "labels", "kubernetes.io/metadata.name"],
        Value::String(name),
    )?;
    Ok(())
}

impl Strategy for NamespaceStrategy {
    /// Namespaces go through namespace termination whatever the propagation
    /// policy; their dependents elsewhere are collected once they are gone.
    fn finalizers_on_delete(
        &self,
        _info: &ResourceInfo,
        current: &[String],
        _deleting: bool,
        _propagation: Option<PropagationPolicy>,
    ) -> Vec<String> {
        current.to_vec()
    }

    fn always_graceful(&self) -> bool {
        true
    }

    fn prepare_for_delete(&self, obj: &mut Value) -> Result<(), ApiError> {
        json::set(obj, &["status", "phase"], json!("Terminating"))?;
        Ok(())
    }

    fn held_after_finalizers(&self, obj: &Value) -> bool {
        held_by_spec(obj)
    }

    /// `namespaces/<name>/finalize` changes only `spec.finalizers`.
    fn merge_subresource(
        &self,
        subresource: &str,
        old: &Value,
        sent: &Value,
    ) -> Option<Result<Value, ApiError>> {
        if subresource != "finalize" {
            return None;
        }
        Some(crate::strategy::with_field_from(
            old,
            sent,
            &["spec", "finalizers"],
        ))
    }

    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        name_label(obj)?;
        if obj.pointer("/spec/finalizers").is_none() {
            json::set(obj, &["spec", "finalizers"], json!([KUBERNETES_FINALIZER]))?;
        }
        json::set(obj, &["status"], json!({"phase": "Active"}))?;
        Ok(())
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        name_label(obj)
    }
}

/// Whether a namespace being deleted is still held by `spec.finalizers`.
pub fn held_by_spec(ns: &Value) -> bool {
    ns.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}
