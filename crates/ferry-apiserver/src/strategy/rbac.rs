//! RBAC objects (Roles, ClusterRoles and their bindings): validated as
//! kube-apiserver does ([`crate::auth::rbac::validate`], including the
//! immutable `roleRef`), and admitted only when the writer holds what it
//! grants ([`crate::auth::escalation`]).

use serde_json::Value;

use crate::auth::{escalation, rbac};
use crate::hub::Hub;
use crate::request::Request;
use crate::status::{ApiError, Cause};
use crate::strategy::Strategy;

pub struct RbacStrategy;

impl Strategy for RbacStrategy {
    fn validate(&self, r: &Request, obj: &Value) -> Vec<Cause> {
        rbac::validate(&r.info.resource, obj, None)
    }

    fn validate_update(&self, r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        rbac::validate(&r.info.resource, obj, Some(old))
    }

    fn admit(&self, r: &Request, old: Option<&Value>, obj: &Value) -> Result<(), ApiError> {
        escalation::check_rbac_write(&r.hub, &r.user, &r.attributes(), old, obj)
    }

    /// Authorization answers from the new RBAC objects at once.
    fn after_commit(&self, hub: &Hub, cluster: &str) {
        hub.security.rbac.invalidate(cluster);
    }
}
