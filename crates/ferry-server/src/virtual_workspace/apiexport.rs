//! The APIExport virtual workspace,
//! `/services/apiexport/<export-cluster>/<export-name>/clusters/<c|*>/...`:
//! the export's provider sees every workspace bound to the export at once.
//!
//! - **Who:** as in kcp, the request's verb on `apiexports/content` of that
//!   export, in the export's workspace (its owner has it; grant it to an
//!   agent with a Role there). `<export-cluster>` is the logical cluster's
//!   name or its path.
//! - **What:** the resources of the export's schemas (the latest ones it
//!   lists) other than built-in ones (a consumer's own Secrets or Deployments
//!   are never the export's), and the resources its permission claims name:
//!   built-in ones, and
//!   those of another export named by its `identityHash` (served with that
//!   export's schema, as kcp does; an exported resource shadows a claim on the
//!   same name).
//! - **Which:** an exported resource in workspaces whose Bound APIBinding of
//!   this export binds it; a claimed resource in workspaces whose binding
//!   accepted the claim, narrowed to the objects the claim selects. A claim
//!   with an identity shows a workspace only where the resource is bound from
//!   the export with that identity: a claim naming another identity (a look-alike
//!   export's) sees nothing of it.
//! - **Its consumers:** as in kcp, the view always serves `apibindings`
//!   (unless a claim names them), read-only: in each workspace bound to the
//!   export, the Bound APIBindings of this export, with their status and
//!   the workspace's logical-cluster name (`kcp.io/cluster`), never its path.
//!   That is all an owner learns of its consumers; a workspace that binds
//!   no export of the owner's stays unknown to it (404, as an unknown one).

use std::sync::Arc;

use serde_json::Value;

use super::{KeptViews, View, VirtualWorkspace};
use crate::apis::{self, ExportKey};
use crate::auth::authorize::{self, Attributes};
use crate::auth::rbac::Request as RbacRequest;
use crate::auth::UserInfo;
use crate::hub::Hub;
use crate::kinds::apis::{claims_of, export_key};
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::storage::{ClusterScope, ObjectKey, ScopeFilter, StoredObject};

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
        let export = hub.store.get(&export_key(&lc.name, name)).ok_or_else(not_found)?;
        let key = ExportKey {
            cluster: lc.name.clone(),
            name: name.clone(),
        };
        let make = || {
            let served = Served::of(hub, &key, &export);
            let keep = served.cacheable;
            (served, keep)
        };
        let served = match hub.extensions.get::<Arc<ExportViews>>() {
            Some(views) => views.get_or_make(&key, |kept| kept.current(hub, &export), make),
            None => Arc::new(make().0),
        };
        let own_bindings = served.own_bindings;
        let bindings_gr = (apis::GROUP.to_string(), BINDINGS.to_string());
        let hub = hub.clone();
        let resources = served.resources.clone();
        let view = View::new(resources, move |info| {
            let gr = (info.group.clone(), info.resource.clone());
            if own_bindings && gr == bindings_gr {
                return Arc::new(BindingsOfExport {
                    hub: hub.clone(),
                    export: key.clone(),
                }) as Arc<dyn ScopeFilter>;
            }
            let exported = served.exported.contains(&gr);
            let (identity, foreign) = served
                .claimed
                .iter()
                .find(|(c, _, _)| *c == gr)
                .map(|(_, i, f)| (i.clone(), *f))
                .unwrap_or_default();
            Arc::new(Visible {
                hub: hub.clone(),
                export: key.clone(),
                group: info.group.clone(),
                resource: info.resource.clone(),
                exported,
                identity,
                foreign,
            }) as Arc<dyn ScopeFilter>
        });
        Ok(if own_bindings {
            view.read_only(apis::GROUP, BINDINGS)
        } else {
            view
        })
    }
}

/// What a view of one export serves, kept per export of a hub while the export
/// and the schemas it lists stay as they were read. Working it out parses the
/// export and each schema and turns each schema into a CRD's resources: done
/// for every request through the view, that was a tenth of a kcp hub's time
/// under an api-syncagent's initial sync.
pub type ExportViews = KeptViews<ExportKey, Served>;

/// What a view of an export serves, and what it was worked out from.
pub struct Served {
    /// The export's resourceVersion, and each schema it lists by storage key
    /// with the resourceVersion read (`None`: not there).
    export_rv: u64,
    schemas: Vec<(ObjectKey, Option<u64>)>,
    /// Built of nothing but the export, its schemas and the built-in
    /// resources. A claim on another export's resource depends on every
    /// export with that identity, so such a view is worked out each time.
    cacheable: bool,
    resources: Vec<ResourceInfo>,
    /// `(group, resource)` of each exported resource.
    exported: Vec<(String, String)>,
    /// Claimed resources, the identity the claim names, and whether they are
    /// another export's (a built-in one is served whatever the claim's
    /// identity, as in kcp).
    claimed: Vec<((String, String), String, bool)>,
    /// The view serves the export's own APIBindings (no claim names them).
    own_bindings: bool,
}

impl Served {
    fn of(hub: &Hub, key: &ExportKey, stored: &StoredObject) -> Served {
        let export = stored.value();
        let mut resources: Vec<ResourceInfo> = Vec::new();
        let mut schemas = Vec::new();
        for schema_name in apis::latest_schema_names(&export) {
            let schema_key = apis::key(&key.cluster, apis::SCHEMAS, schema_name);
            let schema = hub.store.get(&schema_key);
            schemas.push((schema_key, schema.as_ref().map(|s| s.rv)));
            let Some(schema) = schema.map(|s| s.value()) else {
                continue;
            };
            let (group, resource) = apis::schema_group_resource(&schema);
            // A built-in resource is every consumer's own: only a claim reaches it.
            if hub.registry.is_builtin(&group, &resource) {
                continue;
            }
            if let Ok(rs) = apis::resources_from_schema(&schema, &key.name) {
                resources.extend(rs);
            }
        }
        let exported: Vec<(String, String)> = resources
            .iter()
            .map(|r| (r.group.clone(), r.resource.clone()))
            .collect();
        let mut claimed: Vec<((String, String), String, bool)> = Vec::new();
        let mut cacheable = true;
        for claim in claims_of(&export) {
            let gr = (claim.group.clone(), claim.resource.clone());
            if exported.contains(&gr) || claimed.iter().any(|(c, _, _)| *c == gr) {
                continue;
            }
            let is_builtin = hub.registry.is_builtin(&claim.group, &claim.resource);
            let served = if is_builtin {
                builtin(hub, &claim.group, &claim.resource)
            } else {
                cacheable = false;
                foreign(hub, &claim.identity_hash, &claim.group, &claim.resource)
            };
            if !served.is_empty() {
                resources.extend(served);
                claimed.push((gr, claim.identity_hash.clone(), !is_builtin));
            }
        }
        let bindings_gr = (apis::GROUP.to_string(), BINDINGS.to_string());
        let own_bindings = !claimed.iter().any(|(c, _, _)| *c == bindings_gr);
        if own_bindings {
            resources.extend(builtin(hub, apis::GROUP, BINDINGS));
        }
        Served {
            export_rv: stored.rv,
            schemas,
            cacheable,
            resources,
            exported,
            claimed,
            own_bindings,
        }
    }

    /// Whether the export (stored as `export`) and its schemas are as this was
    /// worked out from.
    fn current(&self, hub: &Hub, export: &StoredObject) -> bool {
        self.export_rv == export.rv
            && self
                .schemas
                .iter()
                .all(|(key, rv)| hub.store.get(key).map(|s| s.rv) == *rv)
    }
}

/// The APIBindings resource (`apis.kcp.io`).
const BINDINGS: &str = "apibindings";

/// The export's own consumers: its Bound APIBindings, in the workspaces
/// bound to it.
struct BindingsOfExport {
    hub: Arc<Hub>,
    export: ExportKey,
}

impl ScopeFilter for BindingsOfExport {
    /// Read from the stored bindings when the index does not know yet: it
    /// learns of a binding just after the write that makes it Bound, which a
    /// running watch must not miss.
    fn cluster(&self, cluster: &str) -> bool {
        if crate::apis::bindings(&self.hub).is_bound(&self.export, cluster) {
            return true;
        }
        let scope = ClusterScope::One(cluster.to_string());
        let (bindings, _) = self.hub.store.list(&scope, apis::BINDINGS, None, None);
        bindings
            .iter()
            .any(|(_, b)| binds_export(&b.value(), &self.export))
    }

    /// Only the bindings of this export: the workspace's bindings of other
    /// exports are its own business.
    fn stored(&self, _key: &ObjectKey, obj: &StoredObject) -> bool {
        binds_export(&obj.value(), &self.export)
    }
}

/// Whether `binding` is a Bound APIBinding of `export`.
fn binds_export(binding: &Value, export: &ExportKey) -> bool {
    let at = |p: &str| binding.pointer(p).and_then(Value::as_str);
    at("/status/phase") == Some("Bound")
        && at("/status/apiExportClusterName") == Some(export.cluster.as_str())
        && at("/spec/reference/export/name") == Some(export.name.as_str())
}

/// Every served version of the built-in `group`/`resource`.
fn builtin(hub: &Hub, group: &str, resource: &str) -> Vec<ResourceInfo> {
    hub.registry.builtin_versions(group, resource)
}

/// Every served version of `group`/`resource` as the export with identity
/// `identity` defines it (the first such export by workspace and name that
/// lists a schema of it), or nothing when no export with that identity does.
fn foreign(hub: &Hub, identity: &str, group: &str, resource: &str) -> Vec<ResourceInfo> {
    if identity.is_empty() {
        return Vec::new();
    }
    let (exports, _) = hub.store.list(&ClusterScope::All, apis::EXPORTS, None, None);
    let mut exports: Vec<(ObjectKey, Value)> = exports
        .into_iter()
        .map(|(k, o)| (k, o.value()))
        .filter(|(_, e)| e.pointer("/status/identityHash").and_then(Value::as_str) == Some(identity))
        .collect();
    exports.sort_by(|a, b| (&a.0.cluster, &a.0.name).cmp(&(&b.0.cluster, &b.0.name)));
    for (key, export) in exports {
        for schema in apis::listed_schemas(&hub.store, &key.cluster, &export) {
            if apis::schema_group_resource(&schema) != (group.to_string(), resource.to_string()) {
                continue;
            }
            if let Ok(rs) = apis::resources_from_schema(&schema, &key.name) {
                return rs;
            }
        }
    }
    Vec::new()
}

/// What of one resource the export's provider sees.
struct Visible {
    hub: Arc<Hub>,
    export: ExportKey,
    group: String,
    resource: String,
    /// An exported resource (else: a claimed one).
    exported: bool,
    /// For a claimed resource: the identity the claim names.
    identity: String,
    /// A claimed resource of another export (else: a built-in one).
    foreign: bool,
}

impl ScopeFilter for Visible {
    fn cluster(&self, cluster: &str) -> bool {
        let bindings = crate::apis::bindings(&self.hub);
        if self.exported {
            return bindings.binds(&self.export, cluster, &self.group, &self.resource);
        }
        bindings.claimed(&self.export, cluster, &self.group, &self.resource, &self.identity)
            && (!self.foreign
                || bindings
                    .bound_identity(cluster, &self.group, &self.resource)
                    .is_some_and(|i| i == self.identity))
    }

    fn object(&self, key: &ObjectKey) -> bool {
        self.exported
            || crate::apis::bindings(&self.hub).claim_covers(
                &self.export,
                key,
                &self.group,
                &self.resource,
                &self.identity,
            )
    }

    /// A create through the view lands only where the accepted claim reaches
    /// (reads, updates and deletes of a named object are checked on the way
    /// in): a claim on one namespace does not let the export write in another.
    fn admit_write(&self, key: &ObjectKey, _old: Option<&Value>, _new: &Value) -> Result<(), ApiError> {
        if self.object(key) {
            return Ok(());
        }
        let at = if key.namespace.is_empty() {
            String::new()
        } else {
            format!(" in namespace {:?}", key.namespace)
        };
        Err(ApiError::forbidden(format!(
            "{} {:?} is forbidden: the permission claim of APIExport {:?} that this workspace accepted does not cover it{at}",
            authorize::qualified(&self.group, &self.resource),
            key.name,
            self.export.name,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_bound_bindings_of_the_export_itself_are_its_consumers() {
        let export = ExportKey {
            cluster: "2x8w2ihb6bt8p3f6".into(),
            name: "widgets".into(),
        };
        let binding = |cluster: &str, name: &str, phase: &str| {
            json!({"spec": {"reference": {"export": {"path": "root:provider", "name": name}}},
                   "status": {"phase": phase, "apiExportClusterName": cluster}})
        };
        assert!(binds_export(
            &binding("2x8w2ihb6bt8p3f6", "widgets", "Bound"),
            &export
        ));
        assert!(!binds_export(
            &binding("2x8w2ihb6bt8p3f6", "widgets", "Binding"),
            &export
        ));
        assert!(!binds_export(
            &binding("2x8w2ihb6bt8p3f6", "gadgets", "Bound"),
            &export
        ));
        assert!(!binds_export(
            &binding("3k1zq0c9x7v2m4n8", "widgets", "Bound"),
            &export
        ));
        assert!(!binds_export(&json!({}), &export));
    }
}
