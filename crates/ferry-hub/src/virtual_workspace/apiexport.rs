//! The APIExport virtual workspace,
//! `/services/apiexport/<export-cluster>/<export-name>/clusters/<c|*>/...`:
//! the export's provider sees every workspace bound to the export at once.
//!
//! - **Who:** as in kcp, the request's verb on `apiexports/content` of that
//!   export, in the export's workspace (its owner has it; grant it to an
//!   agent with a Role there). `<export-cluster>` is the logical cluster's
//!   name or its path.
//! - **What:** the resources of the export's schemas (the latest ones it
//!   lists), and the resources its permission claims name (built-in ones).
//! - **Which:** an exported resource in workspaces whose Bound APIBinding of
//!   this export binds it; a claimed resource in workspaces whose binding
//!   accepted the claim, narrowed to the objects the claim selects.

use std::sync::Arc;

use serde_json::Value;

use super::{View, VirtualWorkspace};
use crate::apis::{self, ExportKey};
use crate::auth::authorize::{self, Attributes};
use crate::auth::rbac::Request as RbacRequest;
use crate::auth::UserInfo;
use crate::hub::Hub;
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::storage::{ObjectKey, ScopeFilter};
use crate::strategy::apis::{claims_of, export_key};

pub struct ApiExportVirtualWorkspace;

impl VirtualWorkspace for ApiExportVirtualWorkspace {
    fn name(&self) -> &'static str {
        "apiexport"
    }

    fn instance_segments(&self) -> usize {
        2
    }

    fn authorize(&self, hub: &Hub, user: &UserInfo, instance: &[String], verb: &str) -> Result<(), ApiError> {
        let (cluster, name) = (&instance[0], &instance[1]);
        let denied = || {
            ApiError::forbidden(format!(
                "User {:?} cannot {verb} the content of APIExport {name:?} in workspace {cluster:?}: it needs {verb:?} on apiexports/content {name:?} (group apis.kcp.io) there",
                user.name
            ))
        };
        let Some(lc) = hub.workspaces.resolve(cluster) else {
            return Err(denied());
        };
        let attrs = Attributes {
            request: RbacRequest::Resource {
                verb: verb.into(),
                group: apis::GROUP.into(),
                resource: "apiexports".into(),
                subresource: "content".into(),
                namespace: String::new(),
                name: name.clone(),
            },
            workspace: Some(lc),
        };
        if authorize::authorize(hub, user, &attrs).allowed() {
            Ok(())
        } else {
            Err(denied())
        }
    }

    fn view(&self, hub: &Arc<Hub>, instance: &[String]) -> Result<View, ApiError> {
        let (cluster, name) = (&instance[0], &instance[1]);
        let not_found =
            || ApiError::not_found_message(format!("APIExport {name:?} not found in workspace {cluster:?}"));
        let lc = hub.workspaces.resolve(cluster).ok_or_else(not_found)?;
        let export = hub
            .store
            .get(&export_key(&lc.name, name))
            .ok_or_else(not_found)?
            .value();
        let key = ExportKey {
            cluster: lc.name.clone(),
            name: name.clone(),
        };
        let mut resources: Vec<ResourceInfo> = Vec::new();
        for schema_name in export
            .pointer("/spec/latestResourceSchemas")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            let schema_key = ObjectKey {
                cluster: lc.name.clone(),
                resource: apis::SCHEMAS.into(),
                namespace: String::new(),
                name: schema_name.into(),
            };
            let Some(schema) = hub.store.get(&schema_key) else {
                continue;
            };
            let schema = schema.value();
            let (group, resource) = apis::schema_group_resource(&schema);
            if hub.registry.is_builtin(&group, &resource) {
                resources.extend(builtin(hub, &group, &resource));
            } else if let Ok(rs) = apis::resources_from_schema(&schema, name) {
                resources.extend(rs);
            }
        }
        let exported: Vec<(String, String)> = resources
            .iter()
            .map(|r| (r.group.clone(), r.resource.clone()))
            .collect();
        for claim in claims_of(&export) {
            if !exported.contains(&(claim.group.clone(), claim.resource.clone())) {
                // Claims on another export's resources (identityHash) are not served yet.
                resources.extend(builtin(hub, &claim.group, &claim.resource));
            }
        }
        let hub = hub.clone();
        Ok(View::new(resources, move |info| {
            let exported = exported.contains(&(info.group.clone(), info.resource.clone()));
            Arc::new(Visible {
                hub: hub.clone(),
                export: key.clone(),
                group: info.group.clone(),
                resource: info.resource.clone(),
                exported,
            }) as Arc<dyn ScopeFilter>
        }))
    }
}

/// Every served version of the built-in `group`/`resource`.
fn builtin(hub: &Hub, group: &str, resource: &str) -> Vec<ResourceInfo> {
    hub.registry
        .resources(None)
        .into_iter()
        .filter(|r| r.group == group && r.resource == resource && !r.from_crd)
        .collect()
}

/// What of one resource the export's provider sees.
struct Visible {
    hub: Arc<Hub>,
    export: ExportKey,
    group: String,
    resource: String,
    /// An exported resource (else: a claimed one).
    exported: bool,
}

impl ScopeFilter for Visible {
    fn cluster(&self, cluster: &str) -> bool {
        if self.exported {
            self.hub
                .bindings
                .binds(&self.export, cluster, &self.group, &self.resource)
        } else {
            self.hub
                .bindings
                .claimed(&self.export, cluster, &self.group, &self.resource)
        }
    }

    fn object(&self, key: &ObjectKey) -> bool {
        self.exported
            || self
                .hub
                .bindings
                .claim_covers(&self.export, key, &self.group, &self.resource)
    }
}
