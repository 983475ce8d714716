//! kcp's `apis.kcp.io` kinds: APIResourceSchema (immutable), APIExport,
//! APIExportEndpointSlice and APIBinding (whose creator needs `bind` on the
//! export). Their status belongs to `controllers::apis`.

use serde_json::Value;

use crate::apis::{self, Claim};
use crate::auth::authorize::{self, Attributes};
use crate::auth::rbac::Request as RbacRequest;
use crate::hub::Hub;
use crate::json;
use crate::request::Request;
use crate::status::{ApiError, Cause};
use crate::strategy::Strategy;
use crate::workspace::{LogicalCluster, ROOT};

/// A logical-cluster path as kcp validates it (`root:org:team`).
pub(crate) fn valid_path(p: &str) -> bool {
    !p.is_empty()
        && p.split(':').all(|seg| {
            !seg.is_empty()
                && seg.len() <= 63
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !seg.starts_with('-')
                && !seg.ends_with('-')
        })
}

/// `<prefix>.<plural>.<group>` (`core` for the core group), as kcp names schemas.
fn schema_name_causes(field: &str, name: &str, plural: &str, group: &str) -> Vec<Cause> {
    let group = if group.is_empty() { "core" } else { group };
    let suffix = format!(".{plural}.{group}");
    match name.strip_suffix(&suffix) {
        Some(prefix) if !prefix.is_empty() && !prefix.contains('.') => Vec::new(),
        _ => vec![Cause::invalid(
            field,
            format!("must be <prefix>.{plural}.{group}, e.g. v1{suffix}, so the name says what the schema defines"),
        )],
    }
}

pub struct SchemaStrategy;

impl Strategy for SchemaStrategy {
    fn validate(&self, r: &Request, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        let s = |p: &str| json::str_at(obj, p);
        let group = s("/spec/group");
        let plural = s("/spec/names/plural");
        if let Some(why) = apis::reserved_resource(group, plural, r.hub().registry.is_builtin_group(group)) {
            causes.push(Cause::forbidden("spec.group", why));
        }
        for (path, field) in [
            ("/spec/names/plural", "spec.names.plural"),
            ("/spec/names/kind", "spec.names.kind"),
        ] {
            if s(path).is_empty() {
                causes.push(Cause::required(field));
            }
        }
        match s("/spec/scope") {
            "Cluster" | "Namespaced" => {}
            "" => causes.push(Cause::required("spec.scope")),
            other => causes.push(Cause::unsupported(
                "spec.scope",
                format!("unsupported value {other:?}: supported values: \"Cluster\", \"Namespaced\""),
            )),
        }
        if !plural.is_empty() {
            causes.extend(schema_name_causes(
                "metadata.name",
                s("/metadata/name"),
                plural,
                group,
            ));
        }
        let versions = obj
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if versions.is_empty() {
            causes.push(Cause::required("spec.versions"));
        }
        let mut names = Vec::new();
        let mut storage = 0;
        for (i, v) in versions.iter().enumerate() {
            let name = v.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                causes.push(Cause::required(format!("spec.versions[{i}].name")));
            } else if names.contains(&name) {
                causes.push(Cause::invalid(
                    format!("spec.versions[{i}].name"),
                    format!("version {name:?} is listed twice"),
                ));
            }
            names.push(name);
            if v.get("storage").and_then(Value::as_bool) == Some(true) {
                storage += 1;
            }
            if !v.get("schema").is_some_and(Value::is_object) {
                causes.push(Cause::required(format!("spec.versions[{i}].schema")));
            }
        }
        if !versions.is_empty() && storage != 1 {
            causes.push(Cause::invalid(
                "spec.versions",
                format!("exactly one version must be the storage version (storage: true), found {storage}"),
            ));
        }
        causes
    }

    fn validate_update(&self, r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        let mut causes = self.validate(r, obj);
        if old.get("spec") != obj.get("spec") {
            causes.push(Cause::invalid(
                "spec",
                "field is immutable: an APIResourceSchema never changes; create one under a new name and list it in the APIExport",
            ));
        }
        causes
    }
}

fn claim_causes(field: &str, claims: Option<&Value>, decisions: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    for (i, c) in claims.and_then(Value::as_array).into_iter().flatten().enumerate() {
        let at = format!("{field}[{i}]");
        if c.get("resource")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            causes.push(Cause::required(format!("{at}.resource")));
        }
        let all = c.get("all").and_then(Value::as_bool).unwrap_or(false);
        let selectors = c
            .get("resourceSelector")
            .and_then(Value::as_array)
            .is_some_and(|s| !s.is_empty());
        if all == selectors {
            causes.push(Cause::invalid(
                &at,
                "set exactly one of \"all: true\" or a non-empty \"resourceSelector\"",
            ));
        }
        if decisions {
            match c.get("state").and_then(Value::as_str) {
                Some("Accepted" | "Rejected") => {}
                None => causes.push(Cause::required(format!("{at}.state"))),
                Some(other) => causes.push(Cause::unsupported(
                    format!("{at}.state"),
                    format!("unsupported value {other:?}: supported values: \"Accepted\", \"Rejected\""),
                )),
            }
        }
    }
    causes
}

pub struct ExportStrategy;

impl Strategy for ExportStrategy {
    fn validate(&self, r: &Request, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        for (i, s) in obj
            .pointer("/spec/latestResourceSchemas")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = s.as_str().unwrap_or_default();
            if name.split('.').count() < 3 {
                causes.push(Cause::invalid(
                    format!("spec.latestResourceSchemas[{i}]"),
                    "must name an APIResourceSchema: <prefix>.<plural>.<group>",
                ));
            }
        }
        causes.extend(claim_causes(
            "spec.permissionClaims",
            obj.pointer("/spec/permissionClaims"),
            false,
        ));
        causes.extend(identity_causes(r, obj.pointer("/spec/permissionClaims")));
        causes
    }

    /// A schema of a reserved resource ([`apis::reserved_resource`]) cannot
    /// be listed: its name says what it defines, so this holds for one stored
    /// before the rule existed too. One listed already is not judged again,
    /// so such an export keeps its status written and can still be fixed.
    fn admit(&self, r: &Request, old: Option<&Value>, obj: &Value) -> Result<(), ApiError> {
        let listed = |o: Option<&Value>| -> Vec<String> {
            o.and_then(|o| o.pointer("/spec/latestResourceSchemas"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|n| n.as_str().unwrap_or_default().to_string())
                .collect()
        };
        let before = listed(old);
        let causes: Vec<Cause> = listed(Some(obj))
            .iter()
            .enumerate()
            .filter(|(_, name)| !before.contains(name))
            .filter_map(|(i, name)| {
                let (group, resource) = apis::schema_name_group_resource(name)?;
                let builtin = r.hub().registry.is_builtin_group(&group);
                let why = apis::reserved_resource(&group, &resource, builtin)?;
                Some(Cause::forbidden(format!("spec.latestResourceSchemas[{i}]"), why))
            })
            .collect();
        if causes.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid(
                apis::GROUP,
                "APIExport",
                json::str_at(obj, "/metadata/name"),
                causes,
            ))
        }
    }
}

/// As kcp's APIExport admission: a claim on a resource that is not built
/// in (or kcp's own `apis.kcp.io`) names the identity of the export serving
/// it, else the claim could be served by any look-alike export.
fn identity_causes(r: &Request, claims: Option<&Value>) -> Vec<Cause> {
    let text = |c: &Value, field: &str| {
        c.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    claims
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| {
            let (group, resource) = (text(c, "group"), text(c, "resource"));
            text(c, "identityHash").is_empty()
                && !resource.is_empty()
                && group != "apis.kcp.io"
                && !r.hub().registry.is_builtin(&group, &resource)
        })
        .map(|(i, c)| {
            Cause::invalid(
                format!("spec.permissionClaims[{i}].identityHash"),
                format!(
                    "identityHash is required for API types that are not built-in ({}.{}): set it to the status.identityHash of the APIExport that serves them",
                    text(c, "resource"),
                    text(c, "group")
                ),
            )
        })
        .collect()
}

fn reference_causes(field: &str, reference: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = reference
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    if name.is_empty() {
        causes.push(Cause::required(format!("{field}.name")));
    }
    if let Some(path) = reference.and_then(|r| r.get("path")).and_then(Value::as_str) {
        if !path.is_empty() && !valid_path(path) {
            causes.push(Cause::invalid(
                format!("{field}.path"),
                format!("{path:?} is not a workspace path: lowercase segments separated by ':' (e.g. root:provider)"),
            ));
        }
    }
    causes
}

pub struct SliceStrategy;

impl Strategy for SliceStrategy {
    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        reference_causes("spec.export", obj.pointer("/spec/export"))
    }

    fn validate_update(&self, r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        let mut causes = self.validate(r, obj);
        if old.pointer("/spec/export") != obj.pointer("/spec/export") {
            causes.push(Cause::invalid(
                "spec.export",
                "field is immutable: create another endpoint slice",
            ));
        }
        causes
    }
}

pub struct BindingStrategy;

impl Strategy for BindingStrategy {
    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        let mut causes = reference_causes("spec.reference.export", obj.pointer("/spec/reference/export"));
        causes.extend(claim_causes(
            "spec.permissionClaims",
            obj.pointer("/spec/permissionClaims"),
            true,
        ));
        causes
    }

    fn validate_update(&self, r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        let mut causes = self.validate(r, obj);
        if old.pointer("/spec/reference") != obj.pointer("/spec/reference") {
            causes.push(Cause::invalid(
                "spec.reference",
                "APIExport reference must not be changed: delete the binding and create another",
            ));
        }
        causes
    }

    fn admit(&self, r: &Request, old: Option<&Value>, obj: &Value) -> Result<(), ApiError> {
        if old.is_some() || r.subresource.is_some() {
            return Ok(()); // the reference is immutable: checked once, at create
        }
        let cluster = r.cluster()?;
        let name = json::str_at(obj, "/spec/reference/export/name");
        let path = json::str_at(obj, "/spec/reference/export/path");
        let shown = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}:{name}")
        };
        let forbidden = || {
            ApiError::forbidden(format!(
                "apibindings.apis.kcp.io {:?} is forbidden: unable to create APIBinding: no permission to bind to export {shown}: User {:?} needs \"bind\" on apiexports {name:?} in the export's workspace",
                json::str_at(obj, "/metadata/name"),
                r.user.name
            ))
        };
        // As kcp: the export's own workspace and root may be named before the
        // export exists; any other workspace must hold it.
        let export_cluster = match export_cluster(r.hub(), cluster, path) {
            Some(lc) => lc,
            None => return Err(forbidden()),
        };
        let exists = r
            .hub()
            .store
            .get(&export_key(&export_cluster.name, name))
            .is_some();
        let may = |verb: &str| {
            let attrs = Attributes {
                request: RbacRequest::Resource {
                    verb: verb.into(),
                    group: apis::GROUP.into(),
                    resource: "apiexports".into(),
                    subresource: String::new(),
                    namespace: String::new(),
                    name: name.into(),
                },
                workspace: Some(export_cluster.clone()),
            };
            authorize::authorize(r.hub(), &r.user, &attrs).allowed()
        };
        if !exists && !path.is_empty() && path != ROOT && export_cluster.name != cluster.name {
            // Only a caller who may read the export there learns it is missing
            // (they could GET it anyway); anyone else gets the same 403 as for an
            // export they may not bind, so nothing leaks.
            return Err(if may("get") {
                export_not_found(json::str_at(obj, "/metadata/name"), name, path)
            } else {
                forbidden()
            });
        }
        if may("bind") {
            Ok(())
        } else {
            Err(forbidden())
        }
    }

    fn after_commit(&self, hub: &Hub, cluster: &str) {
        hub.refresh_crds(cluster);
    }
}

/// 404 for a binding to an export that does not exist, naming where it was
/// looked for and what to do.
fn export_not_found(binding: &str, export: &str, path: &str) -> ApiError {
    let mut e = ApiError::not_found(apis::GROUP, "apiexports", export);
    let hint = if export == crate::synctarget::imported::EXPORT {
        "the hub creates it once a SyncTarget's syncer there has imported a resource no supported export serves (`kubectl ferry workload sync --resources ...`): wait until that syncer runs and the SyncTarget is Ready, then bind again"
    } else {
        "create the APIExport there first, or correct the reference's path and name"
    };
    e.message = format!(
        "unable to create APIBinding {binding:?}: apiexports.apis.kcp.io {export:?} not found in workspace {path:?}: {hint}"
    );
    e
}

/// The workspace an export reference names, from the binding's workspace.
pub fn export_cluster(hub: &Hub, binding_cluster: &LogicalCluster, path: &str) -> Option<LogicalCluster> {
    if path.is_empty() {
        Some(binding_cluster.clone())
    } else {
        hub.workspaces.resolve(path)
    }
}

pub fn export_key(cluster: &str, name: &str) -> crate::storage::ObjectKey {
    apis::key(cluster, apis::EXPORTS, name)
}

/// The claims of an export (what a binding decides on).
pub fn claims_of(export: &Value) -> Vec<Claim> {
    export
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Claim::from_value)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_paths_are_lowercase_colon_separated_segments() {
        assert!(valid_path("root"));
        assert!(valid_path("root:provider-1"));
        assert!(!valid_path("root::x"));
        assert!(!valid_path("Root"));
        assert!(!valid_path("root:-x"));
        assert!(!valid_path("../etc"));
    }

    #[test]
    fn schema_names_say_what_they_define() {
        assert!(schema_name_causes("n", "v1.widgets.example.io", "widgets", "example.io").is_empty());
        assert!(schema_name_causes("n", "today.configmaps.core", "configmaps", "").is_empty());
        assert_eq!(
            schema_name_causes("n", "widgets.example.io", "widgets", "example.io").len(),
            1
        );
        assert_eq!(
            schema_name_causes("n", "v1.gadgets.example.io", "widgets", "example.io").len(),
            1
        );
    }

    #[test]
    fn claims_need_all_or_selectors_and_bindings_a_decision() {
        let c = serde_json::json!([{"resource": "secrets", "all": true, "state": "Maybe"}, {"group": "", "resource": ""}]);
        let export = claim_causes("spec.permissionClaims", Some(&c), false);
        assert_eq!(export.len(), 2, "{export:?}"); // resource required; neither all nor selectors
        let binding = claim_causes("spec.permissionClaims", Some(&c), true);
        assert_eq!(binding.len(), 4, "{binding:?}"); // plus the two states
    }
}
