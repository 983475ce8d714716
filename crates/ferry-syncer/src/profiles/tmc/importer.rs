//! kcp TMC's API importer: the physical cluster's schemas, published upstream as
//! `apiresource.kcp.io/v1alpha1` APIResourceImports of the SyncTarget, so the hub can
//! judge which exported resources the cluster can hold (`syncedResources` states).
//!
//! Every `--api-import-poll-interval`, for each resource of `--resources` and of the
//! SyncTarget's `status.syncedResources` (but the namespaces, configmaps and secrets
//! every syncer syncs), and each version the cluster serves: the schema from the
//! cluster's CustomResourceDefinition, or for a built-in type from its OpenAPI v3
//! document (references resolved, descriptions dropped; what nests too deeply is
//! written as an object that keeps unknown fields). An import is created, or updated
//! when the schema changed; it is owned by the SyncTarget.

use std::collections::BTreeSet;
use std::sync::Arc;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Map, Value};

use super::Tmc;
use crate::engine::Engine;

/// How deep references are followed before a schema is cut short.
const MAX_DEPTH: usize = 24;

fn imports() -> ApiResource {
    ApiResource {
        group: "apiresource.kcp.io".into(),
        version: "v1alpha1".into(),
        api_version: "apiresource.kcp.io/v1alpha1".into(),
        kind: "APIResourceImport".into(),
        plural: "apiresourceimports".into(),
    }
}

/// `routes.route.openshift.io` → (`route.openshift.io`, `routes`); `services` → (``, `services`).
pub fn parse_resource(text: &str) -> (String, String) {
    match text.split_once('.') {
        Some((resource, group)) => (group.to_string(), resource.to_string()),
        None => (String::new(), text.to_string()),
    }
}

/// Imports the cluster's schemas every `period`, until aborted. A failure is a
/// warning when it starts (or, for schemas that cannot be read, when which ones
/// changes), not on every pass.
pub async fn run(engine: Arc<Engine>, tmc: Arc<Tmc>, period: std::time::Duration) {
    let name = tmc.target.name.clone();
    // Passes failed in a row.
    let mut failing = 0u32;
    // The schemas that could not be read, as last said.
    let mut unreadable_said: Vec<String> = vec![];
    loop {
        match import_once(&engine, &tmc).await {
            Ok(unreadable) => {
                if failing > 0 {
                    tracing::info!(sync_target = %name, "importing the cluster's schemas for SyncTarget {name} works again after {failing} failed attempt(s)");
                    failing = 0;
                }
                let names: Vec<String> = unreadable.iter().map(|(what, _)| what.clone()).collect();
                if !unreadable.is_empty() && names != unreadable_said {
                    let each: Vec<String> = unreadable
                        .iter()
                        .map(|(what, e)| format!("{what} ({e})"))
                        .collect();
                    tracing::warn!(sync_target = %name, "SyncTarget {name}: the cluster's schema of {} could not be read; imported once it can be", each.join(", "));
                }
                unreadable_said = names;
                set_ready(&tmc, None).await;
            }
            Err(e) => {
                failing += 1;
                if failing == 1 {
                    tracing::warn!(sync_target = %name, "importing the cluster's schemas for SyncTarget {name} failed: {e}; trying again every {period:?}");
                } else {
                    tracing::debug!(sync_target = %name, failing, "importing the cluster's schemas failed: {e}");
                }
                set_ready(&tmc, Some(e.to_string())).await;
            }
        }
        tokio::time::sleep(period).await;
    }
}

async fn set_ready(tmc: &Tmc, error: Option<String>) {
    let condition = match error {
        None => json!({ "type": "APIImporterReady", "status": "True" }),
        Some(message) => json!({ "type": "APIImporterReady", "status": "False", "severity": "Error",
                                 "reason": "ErrorImporting", "message": message }),
    };
    if let Err(e) = super::config::set_condition(tmc, condition).await {
        tracing::debug!("writing the APIImporterReady condition failed: {e}");
    }
}

/// The resources to import: `--resources` and the SyncTarget's synced resources.
async fn wanted(tmc: &Tmc) -> Result<BTreeSet<(String, String)>, kube::Error> {
    let mut wanted: BTreeSet<(String, String)> =
        tmc.options.resources.iter().map(|r| parse_resource(r)).collect();
    let api: Api<DynamicObject> = Api::all_with(tmc.workspace.clone(), &super::config::sync_targets());
    let st = serde_json::to_value(api.get(&tmc.target.name).await?).unwrap_or_default();
    for entry in st["status"]["syncedResources"].as_array().into_iter().flatten() {
        if let Some(resource) = entry["resource"].as_str() {
            let group = entry["group"].as_str().unwrap_or_default();
            wanted.insert((group.to_string(), resource.to_string()));
        }
    }
    for always in super::always_synced() {
        wanted.remove(&(always.group, always.resource));
    }
    Ok(wanted)
}

/// One pass: imports every wanted schema the cluster serves. Returns the schemas that
/// could not be read (`resource.group/version`, and why); the others are imported.
async fn import_once(engine: &Engine, tmc: &Tmc) -> anyhow::Result<Vec<(String, String)>> {
    let wanted = wanted(tmc).await?;
    let mut unreadable = vec![];
    if wanted.is_empty() {
        return Ok(unreadable);
    }
    let discovered = engine.down.discover().await?;
    let api: Api<DynamicObject> = Api::all_with(tmc.workspace.clone(), &imports());
    for (group, resource) in wanted {
        let served: Vec<_> = discovered
            .iter()
            .filter(|d| d.group == group && d.resource == resource)
            .collect();
        if served.is_empty() {
            tracing::debug!(%group, %resource, "not served by the cluster; nothing to import");
        }
        for d in served {
            let schema = match schema_of(engine, &group, &d.version, &resource, &d.kind).await {
                Ok(schema) => schema,
                Err(e) => {
                    let group_resource = if group.is_empty() {
                        resource.clone()
                    } else {
                        format!("{resource}.{group}")
                    };
                    unreadable.push((format!("{group_resource}/{}", d.version), e.to_string()));
                    continue;
                }
            };
            let group_name = if group.is_empty() { "core" } else { group.as_str() };
            let name = format!("{resource}.{}.{}.{group_name}", tmc.target.name, d.version);
            let spec = json!({
                "location": tmc.target.name,
                "schemaUpdateStrategy": "UpdateUnpublished",
                "groupVersion": { "group": group, "version": d.version },
                "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
                "plural": resource,
                "singular": d.kind.to_lowercase(),
                "kind": d.kind,
                "listKind": format!("{}List", d.kind),
                "openAPIV3Schema": schema,
            });
            upsert(&api, tmc, &name, spec).await?;
        }
    }
    Ok(unreadable)
}

async fn upsert(api: &Api<DynamicObject>, tmc: &Tmc, name: &str, spec: Value) -> Result<(), kube::Error> {
    match api.get(name).await {
        Ok(existing) => {
            let mut existing = serde_json::to_value(existing).unwrap_or_default();
            if existing["spec"] == spec {
                return Ok(());
            }
            existing["spec"] = spec;
            let body: DynamicObject = serde_json::from_value(existing).map_err(kube::Error::SerdeError)?;
            api.replace(name, &PostParams::default(), &body).await?;
            tracing::info!(import = name, "updated the schema import");
        }
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let body = json!({
                "apiVersion": "apiresource.kcp.io/v1alpha1", "kind": "APIResourceImport",
                "metadata": { "name": name, "ownerReferences": [{
                    "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
                    "name": tmc.target.name, "uid": tmc.target.uid,
                }] },
                "spec": spec,
            });
            let body: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
            api.create(&PostParams::default(), &body).await?;
            tracing::info!(import = name, "imported the cluster's schema");
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

/// The cluster's schema of `group/version/resource` (kind `kind`).
async fn schema_of(
    engine: &Engine,
    group: &str,
    version: &str,
    resource: &str,
    kind: &str,
) -> anyhow::Result<Value> {
    let client = engine.down.client.clone();
    if !group.is_empty() {
        let crds: Api<DynamicObject> = Api::all_with(
            client.clone(),
            &ApiResource {
                group: "apiextensions.k8s.io".into(),
                version: "v1".into(),
                api_version: "apiextensions.k8s.io/v1".into(),
                kind: "CustomResourceDefinition".into(),
                plural: "customresourcedefinitions".into(),
            },
        );
        match crds.get(&format!("{resource}.{group}")).await {
            Ok(crd) => {
                let crd = serde_json::to_value(crd).unwrap_or_default();
                let schema = crd["spec"]["versions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|v| v["name"] == version)
                    .map(|v| v["schema"]["openAPIV3Schema"].clone())
                    .filter(|s| !s.is_null());
                if let Some(schema) = schema {
                    return Ok(schema);
                }
            }
            Err(kube::Error::Api(status)) if matches!(status.code, 404 | 403) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let path = if group.is_empty() {
        format!("/openapi/v3/api/{version}")
    } else {
        format!("/openapi/v3/apis/{group}/{version}")
    };
    let request = http::Request::get(path.as_str()).body(Vec::new())?;
    let document: Value = client.request(request).await?;
    let schemas = document["components"]["schemas"]
        .as_object()
        .ok_or_else(|| anyhow::anyhow!("{path} has no components.schemas"))?;
    let (_, schema) = schemas
        .iter()
        .find(|(_, s)| declares_kind(s, group, version, kind))
        .ok_or_else(|| anyhow::anyhow!("{path} describes no {kind}"))?;
    Ok(inline(schema, schemas, 0))
}

fn declares_kind(schema: &Value, group: &str, version: &str, kind: &str) -> bool {
    let matches = |gvk: &Value| gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind;
    match &schema["x-kubernetes-group-version-kind"] {
        Value::Array(list) => list.iter().any(matches),
        gvk @ Value::Object(_) => matches(gvk),
        _ => false,
    }
}

/// `schema` with references to `schemas` resolved and only what a structural schema
/// needs kept (types, properties, items, additional properties, the
/// `x-kubernetes-*` markers).
pub fn inline(schema: &Value, schemas: &Map<String, Value>, depth: usize) -> Value {
    let open = || json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true });
    if depth > MAX_DEPTH {
        return open();
    }
    let Some(obj) = schema.as_object() else {
        return open();
    };
    let reference = obj.get("$ref").or_else(|| {
        obj.get("allOf")
            .and_then(Value::as_array)
            .filter(|all| all.len() == 1)
            .and_then(|all| all[0].get("$ref"))
    });
    if let Some(name) = reference
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
    {
        return match schemas.get(name) {
            Some(target) => inline(target, schemas, depth + 1),
            None => open(),
        };
    }
    let mut out = Map::new();
    for (key, value) in obj {
        match key.as_str() {
            "type" | "format" | "enum" | "nullable" => {
                out.insert(key.clone(), value.clone());
            }
            k if k.starts_with("x-kubernetes-") && k != "x-kubernetes-group-version-kind" => {
                out.insert(key.clone(), value.clone());
            }
            "properties" => {
                let props: Map<String, Value> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, prop)| (name.clone(), inline(prop, schemas, depth + 1)))
                    .collect();
                out.insert(key.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" if value.is_object() => {
                out.insert(key.clone(), inline(value, schemas, depth + 1));
            }
            "additionalProperties" => {
                out.insert(key.clone(), value.clone());
            }
            _ => {}
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_name_their_group_after_the_first_dot() {
        assert_eq!(
            parse_resource("routes.route.openshift.io"),
            ("route.openshift.io".into(), "routes".into())
        );
        assert_eq!(parse_resource("services"), (String::new(), "services".into()));
    }

    #[test]
    fn references_are_inlined_and_descriptions_dropped() {
        let schemas: Map<String, Value> = serde_json::from_value(json!({
            "io.k8s.api.apps.v1.DeploymentSpec": { "type": "object", "description": "spec",
                "properties": { "replicas": { "type": "integer", "format": "int32", "description": "n" } } },
            "io.k8s.api.apps.v1.Deployment": { "type": "object",
                "x-kubernetes-group-version-kind": [{ "group": "apps", "version": "v1", "kind": "Deployment" }],
                "properties": { "spec": { "allOf": [{ "$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec" }], "default": {} },
                                "loop": { "$ref": "#/components/schemas/io.k8s.api.apps.v1.Deployment" },
                                "missing": { "$ref": "#/components/schemas/nowhere" } } }
        }))
        .unwrap();
        let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
        assert!(declares_kind(deployment, "apps", "v1", "Deployment"));
        assert!(!declares_kind(deployment, "apps", "v1", "StatefulSet"));
        let inlined = inline(deployment, &schemas, 0);
        assert_eq!(
            inlined["properties"]["spec"],
            json!({ "type": "object", "properties": { "replicas": { "type": "integer", "format": "int32" } } })
        );
        assert!(inlined.get("x-kubernetes-group-version-kind").is_none());
        assert_eq!(
            inlined["properties"]["missing"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        // A cycle ends in an open object.
        let mut node = &inlined;
        for _ in 0..100 {
            match node["properties"].get("loop") {
                Some(next) => node = next,
                None => break,
            }
        }
        assert_eq!(node["x-kubernetes-preserve-unknown-fields"], true);
    }
}
