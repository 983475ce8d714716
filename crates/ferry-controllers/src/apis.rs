//! The status of kcp's API-export kinds, as kcp's controllers write it:
//! - an APIExport gets its `identityHash`, its virtual-workspace URL, a
//!   condition naming any listed APIResourceSchema that does not exist, and
//!   an APIExportEndpointSlice of its own name (owned by it);
//! - an APIExportEndpointSlice gets the export's virtual-workspace URL;
//! - an APIBinding goes Binding → Bound once its export and every schema in
//!   it exist and none of their resources clashes with a CRD or another
//!   binding in its workspace; it records the bound resources, the claims
//!   the export asks for and the ones applied, and the conditions `Ready`,
//!   `APIExportValid`, `InitialBindingCompleted`, `BindingUpToDate`,
//!   `PermissionClaimsValid` and `PermissionClaimsApplied`.
//!
//! A change to an export or a schema reaches every binding of that export,
//! so a schema of a new custom resource added to an export is served by
//! existing bindings (as in kcp). Nothing else widens a binding: a schema of a
//! resource the workspace serves built in binds as a no-op (the export never
//! reaches those objects), one that clashes with a CRD or another binding is a
//! `NamingConflicts`, and a claim is applied only exactly as the binding
//! accepted it.

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::follow::Follower;
use ferry_api::edge::espw;
use ferry_server::apis::{self, condition, merge_conditions, Claim, ExportKey};
use ferry_server::controller::{ControllerContext, CRDS};
use ferry_server::json;
use ferry_server::kinds::apis::{claims_of, export_key};
use ferry_server::storage::{ClusterScope, EventType, Expect, ObjectKey, WatchEvent};

const MANAGER: &str = "apis-controller";

pub struct ApiExports;

impl Follower for ApiExports {
    fn follows(&self, storage_key: &str) -> bool {
        matches!(
            storage_key,
            apis::SCHEMAS | apis::EXPORTS | apis::SLICES | apis::BINDINGS
        )
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for (key, _) in ctx.list(&ClusterScope::All, apis::EXPORTS, None, None).0 {
                reconcile_export(ctx, &key).await;
            }
            for (key, _) in ctx.list(&ClusterScope::All, apis::SLICES, None, None).0 {
                reconcile_slice(ctx, &key).await;
            }
            for (key, _) in ctx.list(&ClusterScope::All, apis::BINDINGS, None, None).0 {
                reconcile_binding(ctx, &key).await;
            }
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let key = &event.key;
            match key.resource.as_str() {
                apis::EXPORTS => {
                    if event.kind != EventType::Deleted {
                        reconcile_export(ctx, key).await;
                    }
                    export_changed(ctx, &key.cluster, &key.name).await;
                }
                apis::SCHEMAS => {
                    // Exports in the schema's workspace that list it.
                    let (exports, _) =
                        ctx.list(&ClusterScope::One(key.cluster.clone()), apis::EXPORTS, None, None);
                    for (export, obj) in exports {
                        let lists = obj
                            .value()
                            .pointer("/spec/latestResourceSchemas")
                            .and_then(Value::as_array)
                            .is_some_and(|s| s.iter().any(|n| n == &json!(key.name)));
                        if lists {
                            reconcile_export(ctx, &export).await;
                            export_changed(ctx, &export.cluster, &export.name).await;
                        }
                    }
                }
                apis::SLICES if event.kind != EventType::Deleted => reconcile_slice(ctx, key).await,
                apis::BINDINGS if event.kind != EventType::Deleted => reconcile_binding(ctx, key).await,
                _ => {}
            }
        })
    }
}

/// Everything that refers to the export `cluster`/`name`: endpoint slices
/// and bindings in any workspace.
async fn export_changed(ctx: &ControllerContext, cluster: &str, name: &str) {
    for (key, obj) in ctx.list(&ClusterScope::All, apis::SLICES, None, None).0 {
        if refers_to(ctx, &key.cluster, &obj.value(), "/spec/export", cluster, name) {
            reconcile_slice(ctx, &key).await;
        }
    }
    for (key, obj) in ctx.list(&ClusterScope::All, apis::BINDINGS, None, None).0 {
        if refers_to(
            ctx,
            &key.cluster,
            &obj.value(),
            "/spec/reference/export",
            cluster,
            name,
        ) {
            reconcile_binding(ctx, &key).await;
        }
    }
}

/// Whether the export reference at `pointer` in `obj` (stored in `from`)
/// names the export `cluster`/`name`.
fn refers_to(
    ctx: &ControllerContext,
    from: &str,
    obj: &Value,
    pointer: &str,
    cluster: &str,
    name: &str,
) -> bool {
    let path = json::str_at(obj, &format!("{pointer}/path"));
    json::str_at(obj, &format!("{pointer}/name")) == name
        && ctx
            .logical_cluster(from)
            .and_then(|lc| ctx.export_cluster(&lc, path))
            .is_some_and(|lc| lc.name == cluster)
}

/// Replace `obj`'s status with `status` when it differs, through the status
/// subresource as the hub's controller.
async fn write_status(
    ctx: &ControllerContext,
    key: &ObjectKey,
    resource: &str,
    mut obj: Value,
    status: Value,
) {
    if obj.get("status") == Some(&status) {
        return;
    }
    if let Err(e) = json::set(&mut obj, &["status"], status) {
        tracing::warn!(cluster = %key.cluster, name = %key.name, "{resource} status: {e}");
        return;
    }
    // A conflict: someone wrote it meanwhile, and that write's event brings it back here.
    crate::update_status(ctx, key, (apis::GROUP, apis::VERSION, resource), MANAGER, obj).await;
}

async fn reconcile_export(ctx: &ControllerContext, key: &ObjectKey) {
    let Some(stored) = ctx.get(key) else { return };
    let export = stored.value();
    if export.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let uid = json::str_at(&export, "/metadata/uid").to_string();
    let ek = ExportKey {
        cluster: key.cluster.clone(),
        name: key.name.clone(),
    };
    let missing: Vec<String> = export
        .pointer("/spec/latestResourceSchemas")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|s| ctx.get(&apis::key(&key.cluster, apis::SCHEMAS, s)).is_none())
        .map(String::from)
        .collect();
    let path = ctx
        .logical_cluster(&key.cluster)
        .map(|lc| lc.path)
        .unwrap_or_else(|| key.cluster.clone());
    let schemas = if missing.is_empty() {
        condition("APIResourceSchemasValid", true, "", "")
    } else {
        condition(
            "APIResourceSchemasValid",
            false,
            "APIResourceSchemaNotFound",
            &format!(
                "APIResourceSchema {} not found in workspace {path}: create it there or remove it from spec.latestResourceSchemas",
                missing.join(", ")
            ),
        )
    };
    let url = apis::virtual_workspace_url(&ctx.external_url(), &ek);
    let conditions = merge_conditions(
        export.pointer("/status/conditions"),
        vec![
            condition("IdentityValid", true, "", ""),
            condition("VirtualWorkspaceURLsReady", true, "", ""),
            schemas,
        ],
    );
    let status = json!({
        "identityHash": apis::identity_hash(&key.cluster, &key.name, &uid),
        "conditions": conditions,
        "virtualWorkspaces": [{"url": url}],
    });
    ensure_own_slice(ctx, key, &uid).await;
    write_status(ctx, key, "apiexports", export, status).await;
}

/// kcp gives every APIExport an endpoint slice of the same name, owned by it.
async fn ensure_own_slice(ctx: &ControllerContext, key: &ObjectKey, uid: &str) {
    if ctx
        .get(&apis::key(&key.cluster, apis::SLICES, &key.name))
        .is_some()
    {
        return;
    }
    let slice = json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExportEndpointSlice",
        "metadata": {"name": key.name, "ownerReferences": [{
            "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "name": key.name, "uid": uid,
        }]},
        "spec": {"export": {"path": ctx.logical_cluster(&key.cluster).map(|lc| lc.path).unwrap_or_default(), "name": key.name}},
    });
    match ctx
        .create(
            &key.cluster,
            (apis::GROUP, apis::VERSION, "apiexportendpointslices"),
            None,
            slice,
        )
        .await
    {
        Ok(_) => {}
        Err(e) if e.code == 409 => {}
        Err(e) => {
            tracing::warn!(cluster = %key.cluster, export = %key.name, "creating the export's endpoint slice failed: {e}")
        }
    }
}

async fn reconcile_slice(ctx: &ControllerContext, key: &ObjectKey) {
    let Some(stored) = ctx.get(key) else { return };
    let slice = stored.value();
    let name = json::str_at(&slice, "/spec/export/name").to_string();
    let path = json::str_at(&slice, "/spec/export/path").to_string();
    let export = ctx
        .logical_cluster(&key.cluster)
        .and_then(|lc| ctx.export_cluster(&lc, &path))
        .filter(|lc| ctx.get(&export_key(&lc.name, &name)).is_some());
    let status = match export {
        Some(lc) => {
            let ek = ExportKey {
                cluster: lc.name,
                name,
            };
            json!({
                "conditions": merge_conditions(slice.pointer("/status/conditions"), vec![
                    condition("APIExportValid", true, "", ""),
                    condition("EndpointURLsReady", true, "", ""),
                ]),
                "endpoints": [{"url": apis::virtual_workspace_url(&ctx.external_url(), &ek)}],
            })
        }
        None => json!({
            "conditions": merge_conditions(slice.pointer("/status/conditions"), vec![
                condition("APIExportValid", false, "APIExportNotFound",
                    &format!("APIExport {} not found", if path.is_empty() { name.clone() } else { format!("{path}:{name}") })),
            ]),
        }),
    };
    write_status(ctx, key, "apiexportendpointslices", slice, status).await;
}

async fn reconcile_binding(ctx: &ControllerContext, key: &ObjectKey) {
    let Some(stored) = ctx.get(key) else { return };
    let binding = stored.value();
    if binding.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    adopt_kubestellar_crds(ctx, key, &binding).await;
    let status = binding_status(ctx, key, &binding);
    write_status(ctx, key, "apibindings", binding, status).await;
}

/// Migration to KubeStellar's deployment shape: a workspace that an older
/// Ferry gave the KubeStellar API as CRDs (`ferry ensure wmw`, `ferry ensure
/// location`, the mailbox controller) and that now binds the ESPW's export
/// hands those resources to the binding. The CRDs go without their clean-up,
/// so their objects stay: the same group, version and resource, served
/// through the binding from then on. Only for the ESPW's export and the
/// resources it exports; a CRD its owner is deleting is left to finish.
async fn adopt_kubestellar_crds(ctx: &ControllerContext, key: &ObjectKey, binding: &Value) {
    if json::str_at(binding, "/spec/reference/export/name") != espw::EXPORT {
        return;
    }
    let path = json::str_at(binding, "/spec/reference/export/path");
    let (Some(espw_lc), Some(here)) = (
        ctx.resolve_workspace(espw::PATH),
        ctx.logical_cluster(&key.cluster),
    ) else {
        return;
    };
    if ctx.export_cluster(&here, path).map(|lc| lc.name) != Some(espw_lc.name) {
        return;
    }
    let (crds, _) = ctx.list(&ClusterScope::One(key.cluster.clone()), CRDS, None, None);
    let mut adopted = false;
    for (crd_key, crd) in crds {
        let crd = crd.value();
        let (group, plural) = (
            json::str_at(&crd, "/spec/group"),
            json::str_at(&crd, "/spec/names/plural"),
        );
        if !espw::exports(group, plural) || crd.pointer("/metadata/deletionTimestamp").is_some() {
            continue;
        }
        match ctx.purge(crd_key.clone(), Expect::Exists) {
            Ok(committed) => {
                if let Err(e) = committed.durable().await {
                    tracing::warn!(cluster = %key.cluster, crd = %crd_key.name, "handing a CRD to APIBinding {}: {e}", key.name);
                    continue;
                }
                adopted = true;
                tracing::info!(
                    cluster = %key.cluster,
                    crd = %crd_key.name,
                    binding = %key.name,
                    "the CRD's resource is now served through the APIBinding; its objects are kept"
                );
            }
            Err(e) => {
                tracing::warn!(cluster = %key.cluster, crd = %crd_key.name, "handing a CRD to APIBinding {}: {e}", key.name)
            }
        }
    }
    if adopted {
        ctx.refresh_served(&key.cluster);
    }
}

/// The status `binding` (stored at `key`) should have now.
fn binding_status(ctx: &ControllerContext, key: &ObjectKey, binding: &Value) -> Value {
    let old = binding.get("status").cloned().unwrap_or_else(|| json!({}));
    let was_bound = json::str_at(&old, "/phase") == "Bound";
    let name = json::str_at(binding, "/spec/reference/export/name").to_string();
    let path = json::str_at(binding, "/spec/reference/export/path").to_string();
    let shown = if path.is_empty() {
        name.clone()
    } else {
        format!("{path}:{name}")
    };
    let old_conditions = old.get("conditions");
    // Keep what was bound (and served) while something is wrong now, as kcp does.
    let keep = |mut conditions: Vec<Value>| {
        let mut s = old.clone();
        if !was_bound {
            s["phase"] = json!("Binding");
            conditions.push(condition(
                "InitialBindingCompleted",
                false,
                "WaitingForEstablished",
                "the export is not usable yet",
            ));
        }
        conditions.push(condition("Ready", false, "NotReady", "see the other conditions"));
        s["conditions"] = json!(merge_conditions(old_conditions, conditions));
        s
    };
    let export_lc = ctx
        .logical_cluster(&key.cluster)
        .and_then(|lc| ctx.export_cluster(&lc, &path));
    let export = export_lc.as_ref().and_then(|lc| {
        ctx.get(&export_key(&lc.name, &name))
            .map(|o| (lc.clone(), o.value()))
    });
    let Some((export_lc, export)) = export else {
        return keep(vec![condition(
            "APIExportValid",
            false,
            "APIExportNotFound",
            &format!("APIExport {shown} not found: create it, or fix spec.reference.export"),
        )]);
    };
    let export_uid = json::str_at(&export, "/metadata/uid");
    let identity = apis::identity_hash(&export_lc.name, &name, export_uid);
    // Every schema the export lists.
    let mut schemas = Vec::new();
    let mut missing = Vec::new();
    for schema_name in export
        .pointer("/spec/latestResourceSchemas")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        match ctx.get(&apis::key(&export_lc.name, apis::SCHEMAS, schema_name)) {
            Some(s) => schemas.push(s.value()),
            None => missing.push(schema_name.to_string()),
        }
    }
    let mut conditions = vec![condition("APIExportValid", true, "", "")];
    if !missing.is_empty() {
        conditions.push(condition(
            "BindingUpToDate",
            false,
            "APIResourceSchemaInvalid",
            &format!(
                "APIResourceSchema {} of APIExport {shown} not found",
                missing.join(", ")
            ),
        ));
        return keep(conditions);
    }
    // Names already taken here by a CRD or another binding.
    let served = ctx.served_resources(Some(&key.cluster));
    let binding_name = &key.name;
    let conflicts: Vec<String> = schemas
        .iter()
        .map(apis::schema_group_resource)
        .filter(|(g, r)| !ctx.is_builtin(g, r))
        .filter_map(|(g, r)| {
            let other = served
                .iter()
                .find(|s| s.group == g && s.resource == r && s.binding.as_ref() != Some(binding_name))?;
            Some(match &other.binding {
                Some(b) => format!("{r}.{g} is already served by APIBinding {b:?}"),
                None => format!("{r}.{g} is already defined by a CustomResourceDefinition"),
            })
        })
        .collect();
    if !conflicts.is_empty() {
        conditions.push(condition(
            "BindingUpToDate",
            false,
            "NamingConflicts",
            &conflicts.join("; "),
        ));
        return keep(conditions);
    }
    // A resource the workspace serves built in stays its own: the schema
    // binds as a no-op and is not a bound resource, so the export never
    // reaches the workspace's objects of it (only an accepted claim does).
    let bound: Vec<Value> = schemas
        .iter()
        .filter(|s| {
            let (group, resource) = apis::schema_group_resource(s);
            !ctx.is_builtin(&group, &resource)
        })
        .map(|s| {
            let (group, resource) = apis::schema_group_resource(s);
            let storage: Vec<Value> = s
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|v| v.get("storage") == Some(&json!(true)))
                .filter_map(|v| v.get("name").cloned())
                .collect();
            json!({
                "group": group, "resource": resource,
                "schema": {"name": json::str_at(s, "/metadata/name"), "UID": json::str_at(s, "/metadata/uid"), "identityHash": identity},
                "storageVersions": storage,
            })
        })
        .collect();
    // Permission claims: what the export asks, what the binding decided.
    let asked = claims_of(&export);
    let decided: Vec<(Claim, bool)> = binding
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| Some((Claim::from_value(c)?, c.get("state") == Some(&json!("Accepted")))))
        .collect();
    let unknown: Vec<String> = decided
        .iter()
        .filter(|(d, _)| !asked.iter().any(|a| a.same_resource(d)))
        .map(|(d, _)| claim_name(d))
        .collect();
    // Accepted, but the export asks for more (or other objects) now: not
    // applied until the consumer accepts the claim as it is.
    let changed: Vec<String> = decided
        .iter()
        .filter(|(d, accepted)| *accepted && !asked.contains(d) && asked.iter().any(|a| a.same_resource(d)))
        .map(|(d, _)| claim_name(d))
        .collect();
    let raw_asked: Vec<Value> = export
        .pointer("/spec/permissionClaims")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let applied: Vec<Value> = raw_asked
        .iter()
        .filter(|raw| {
            // The claim exactly as accepted (scope and identity included):
            // a claim the export widens later needs accepting again.
            Claim::from_value(raw).is_some_and(|a| decided.iter().any(|(d, accepted)| *accepted && a == *d))
        })
        .cloned()
        .collect();
    conditions.extend([
        condition("InitialBindingCompleted", true, "", ""),
        condition("BindingUpToDate", true, "", ""),
        condition_unless("PermissionClaimsApplied", &changed, "PermissionClaimsChanged", |names| {
            format!("APIExport {shown} changed its claims on {names} since they were accepted: they are not applied until spec.permissionClaims accepts them as the export asks now (status.exportPermissionClaims)")
        }),
        condition_unless("PermissionClaimsValid", &unknown, "InvalidPermissionClaims", |names| {
            format!("the export does not ask for {names}: remove them from spec.permissionClaims")
        }),
        condition("Ready", true, "", ""),
    ]);
    let mut status = json!({
        "apiExportClusterName": export_lc.name,
        "boundResources": bound,
        "phase": "Bound",
        "conditions": merge_conditions(old_conditions, conditions),
    });
    if !raw_asked.is_empty() {
        status["exportPermissionClaims"] = json!(raw_asked);
    }
    if !applied.is_empty() {
        status["appliedPermissionClaims"] = json!(applied);
    }
    status
}

/// `type_` True when nothing is `wrong`, else False with `reason` and the
/// message `say` makes of the names joined.
fn condition_unless(type_: &str, wrong: &[String], reason: &str, say: impl Fn(&str) -> String) -> Value {
    if wrong.is_empty() {
        condition(type_, true, "", "")
    } else {
        condition(type_, false, reason, &say(&wrong.join(", ")))
    }
}

fn claim_name(c: &Claim) -> String {
    if c.group.is_empty() {
        c.resource.clone()
    } else {
        format!("{}.{}", c.resource, c.group)
    }
}
