//! ReplicationControllers: defaults (kube-apiserver's `SetDefaults_ReplicationController`) and validation.
//! Today: `spec.replicas` defaults to 1; the pod template gets the pod
//! spec's warnings.

use serde_json::Value;

use crate::service::Request;
use crate::status::ApiError;
use crate::strategy::apps::default_replicas;
use crate::strategy::core::pod::pod_spec_warnings;
use crate::strategy::Strategy;

pub struct ReplicationControllerStrategy;

impl Strategy for ReplicationControllerStrategy {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        default_replicas(obj)
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        default_replicas(obj)
    }

    fn warnings(&self, _r: &Request, obj: &Value) -> Vec<String> {
        pod_spec_warnings(obj, "spec.template.spec")
    }
}
