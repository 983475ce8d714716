//! The `apps` group: workload controllers.

pub mod deployment;
pub mod replicaset;
pub mod statefulset;

use serde_json::{json, Value};

use crate::json;
use crate::status::ApiError;

/// `spec.replicas` defaults to 1 (Deployments, ReplicaSets, StatefulSets,
/// ReplicationControllers).
pub(crate) fn default_replicas(obj: &mut Value) -> Result<(), ApiError> {
    if obj.get("spec").is_some_and(Value::is_object) && obj.pointer("/spec/replicas").is_none() {
        json::set(obj, &["spec", "replicas"], json!(1))?;
    }
    Ok(())
}
