//! The API importer: what the downstream cluster's schemas are, told upstream.
//!
//! For every resource the SyncTarget lists in `status.syncedResources` and every
//! `--resources` entry, each version the cluster serves is written upstream (in the
//! SyncTarget's workspace) as an `apiresource.kcp.io/v1alpha1` APIResourceImport with
//! `spec.location` = the SyncTarget, owned by it. The hub compares each import with the
//! export's schema and sets the resource's state (`Accepted` or `Incompatible`); until
//! an import exists it stays `Pending` and the syncer does not sync it.
//!
//! The schema comes from the cluster's CustomResourceDefinition when there is one,
//! else from its OpenAPI v3 document for the group-version (`/openapi/v3/apis/<g>/<v>`,
//! `/openapi/v3/api/v1`), with every `$ref` inlined so the hub can compare it field by
//! field. Runs every `--api-import-poll-interval` (kcp: 1m), and every few seconds
//! while some listed resource has no import yet.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Map, Value};

use super::Tmc;
use crate::engine::Engine;

/// Deeper than any real schema; recursive types (JSONSchemaProps) stop here.
const MAX_DEPTH: usize = 32;

/// How soon to look again while a listed resource has no import.
const RETRY: Duration = Duration::from_secs(5);

fn imports() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiresource.kcp.io", "v1alpha1", "APIResourceImport"),
        "apiresourceimports",
    )
}

fn sync_targets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("workload.kcp.io", "v1alpha1", "SyncTarget"),
        "synctargets",
    )
}

/// `routes.route.openshift.io` → (`route.openshift.io`, `routes`); `configmaps` → (``, `configmaps`).
pub fn split_resource(text: &str) -> (String, String) {
    match text.split_once('.') {
        Some((resource, group)) => (group.to_string(), resource.to_string()),
        None => (String::new(), text.to_string()),
    }
}

/// kcp's import name: `<plural>.<location>.<version>.<group, or core>`.
pub fn import_name(resource: &str, location: &str, version: &str, group: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("{resource}.{location}.{version}.{group}")
}

/// Runs the importer until aborted.
pub async fn run(tmc: Arc<Tmc>, engine: Arc<Engine>) {
    loop {
        let next = match import_once(&tmc, &engine.down.client).await {
            Ok(true) => tmc.options.api_import_poll,
            Ok(false) => RETRY.min(tmc.options.api_import_poll),
            Err(e) => {
                tracing::warn!(sync_target = %tmc.target.name, "importing the cluster's schemas failed: {e:#}");
                RETRY.min(tmc.options.api_import_poll)
            }
        };
        tokio::time::sleep(next).await;
    }
}

/// One pass; `true` when every wanted resource has its imports.
async fn import_once(tmc: &Tmc, downstream: &kube::Client) -> anyhow::Result<bool> {
    let target = Api::<DynamicObject>::all_with(tmc.workspace.clone(), &sync_targets())
        .get(&tmc.target.name)
        .await?;
    let mut wanted: BTreeSet<(String, String, Vec<String>)> = BTreeSet::new();
    for entry in target
        .data
        .pointer("/status/syncedResources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| {
            entry
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let versions = entry
            .get("versions")
            .and_then(Value::as_array)
            .map(|v| v.iter().filter_map(Value::as_str).map(String::from).collect())
            .unwrap_or_default();
        wanted.insert((s("group"), s("resource"), versions));
    }
    for text in &tmc.options.resources {
        let (group, resource) = split_resource(text);
        wanted.insert((group, resource, Vec::new()));
    }
    let api = Api::<DynamicObject>::all_with(tmc.workspace.clone(), &imports());
    let mut complete = true;
    for (group, resource, versions) in wanted {
        let found = downstream_versions(downstream, &group, &resource, &versions).await?;
        if found.is_empty() {
            tracing::debug!(
                group,
                resource,
                "the cluster does not serve it; nothing to import"
            );
            complete = false;
            continue;
        }
        for import in found {
            let name = import_name(&resource, &tmc.target.name, &import.version, &group);
            let spec = json!({
                "location": tmc.target.name,
                "schemaUpdateStrategy": "UpdateUnpublished",
                "groupVersion": {"group": group, "version": import.version},
                "scope": if import.namespaced { "Namespaced" } else { "Cluster" },
                "plural": resource,
                "singular": import.singular,
                "shortNames": import.short_names,
                "kind": import.kind,
                "listKind": format!("{}List", import.kind),
                "openAPIV3Schema": import.schema,
                "subResources": import.subresources,
            });
            upsert(&api, &name, spec, &target).await?;
        }
    }
    Ok(complete)
}

async fn upsert(
    api: &Api<DynamicObject>,
    name: &str,
    spec: Value,
    target: &DynamicObject,
) -> anyhow::Result<()> {
    match api.get_opt(name).await? {
        Some(existing) if existing.data.get("spec") == Some(&spec) => Ok(()),
        Some(mut existing) => {
            existing.data["spec"] = spec;
            api.replace(name, &PostParams::default(), &existing).await?;
            tracing::info!(import = name, "updated the APIResourceImport");
            Ok(())
        }
        None => {
            let owner = json!([{
                "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
                "name": target.metadata.name, "uid": target.metadata.uid,
            }]);
            let obj: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "apiresource.kcp.io/v1alpha1", "kind": "APIResourceImport",
                "metadata": {"name": name, "ownerReferences": owner},
                "spec": spec,
            }))?;
            api.create(&PostParams::default(), &obj).await?;
            tracing::info!(import = name, "created the APIResourceImport");
            Ok(())
        }
    }
}

/// One version of a resource as the cluster serves it.
struct Served {
    version: String,
    kind: String,
    singular: String,
    short_names: Vec<String>,
    namespaced: bool,
    schema: Value,
    subresources: Vec<Value>,
}

/// The versions of `group/resource` the cluster serves (those in `versions`, or all
/// when empty), with their schemas.
async fn downstream_versions(
    client: &kube::Client,
    group: &str,
    resource: &str,
    versions: &[String],
) -> anyhow::Result<Vec<Served>> {
    let served: Vec<String> = if group.is_empty() {
        vec!["v1".to_string()]
    } else {
        match get_json(client, &format!("/apis/{group}")).await? {
            Some(g) => g["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v["version"].as_str().map(String::from))
                .collect(),
            None => return Ok(Vec::new()),
        }
    };
    let crd = if group.is_empty() {
        None
    } else {
        get_json(
            client,
            &format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{resource}.{group}"),
        )
        .await
        .ok()
        .flatten()
    };
    let mut out = Vec::new();
    for version in served
        .iter()
        .filter(|v| versions.is_empty() || versions.contains(v))
    {
        let gv_path = if group.is_empty() {
            "/api/v1".to_string()
        } else {
            format!("/apis/{group}/{version}")
        };
        let Some(list) = get_json(client, &gv_path).await? else {
            continue;
        };
        let resources = list["resources"].as_array().cloned().unwrap_or_default();
        let Some(entry) = resources.iter().find(|r| r["name"] == resource) else {
            continue;
        };
        let kind = entry["kind"].as_str().unwrap_or_default().to_string();
        let subresources: Vec<Value> = resources
            .iter()
            .filter_map(|r| {
                r["name"]
                    .as_str()?
                    .strip_prefix(&format!("{resource}/"))
                    .map(String::from)
            })
            .filter(|s| s == "status" || s == "scale")
            .map(|s| json!({"name": s}))
            .collect();
        let schema = match crd.as_ref().and_then(|c| crd_schema(c, version)) {
            Some(schema) => schema,
            None => match openapi_schema(client, &gv_path, group, version, &kind).await? {
                Some(schema) => schema,
                None => {
                    tracing::debug!(group, version, kind, "no schema downstream");
                    continue;
                }
            },
        };
        out.push(Served {
            version: version.clone(),
            singular: entry["singularName"]
                .as_str()
                .filter(|s| !s.is_empty())
                .map(String::from)
                .unwrap_or_else(|| kind.to_lowercase()),
            short_names: entry["shortNames"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect(),
            namespaced: entry["namespaced"].as_bool().unwrap_or(true),
            kind,
            schema,
            subresources,
        });
    }
    Ok(out)
}

async fn get_json(client: &kube::Client, path: &str) -> anyhow::Result<Option<Value>> {
    let request = http::Request::get(path).body(Vec::new())?;
    match client.request::<Value>(request).await {
        Ok(v) => Ok(Some(v)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn crd_schema(crd: &Value, version: &str) -> Option<Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == version)?
        .pointer("/schema/openAPIV3Schema")
        .cloned()
}

/// The OpenAPI v3 schema of `kind`, every `$ref` inlined.
async fn openapi_schema(
    client: &kube::Client,
    gv_path: &str,
    group: &str,
    version: &str,
    kind: &str,
) -> anyhow::Result<Option<Value>> {
    let Some(doc) = get_json(client, &format!("/openapi/v3{gv_path}")).await? else {
        return Ok(None);
    };
    let Some(components) = doc.pointer("/components/schemas").and_then(Value::as_object) else {
        return Ok(None);
    };
    let root = components.values().find(|s| {
        s["x-kubernetes-group-version-kind"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|gvk| gvk["group"] == group && gvk["version"] == version && gvk["kind"] == kind)
    });
    Ok(root.map(|s| inline(s, components, 0)))
}

/// `schema` with every `#/components/schemas/X` reference replaced by X (itself
/// inlined), and the `allOf: [{$ref}]` wrappers Kubernetes writes flattened.
pub fn inline(schema: &Value, components: &Map<String, Value>, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    }
    match schema {
        Value::Object(map) => {
            if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                let name = target.rsplit('/').next().unwrap_or_default();
                let mut resolved = components
                    .get(name)
                    .map(|s| inline(s, components, depth + 1))
                    .unwrap_or_else(|| json!({}));
                for (k, v) in map.iter().filter(|(k, _)| *k != "$ref") {
                    resolved[k] = inline(v, components, depth + 1);
                }
                return resolved;
            }
            if let Some(Value::Array(all)) = map.get("allOf") {
                if all.len() == 1 {
                    let mut resolved = inline(&all[0], components, depth + 1);
                    for (k, v) in map.iter().filter(|(k, _)| *k != "allOf") {
                        resolved[k] = inline(v, components, depth + 1);
                    }
                    return resolved;
                }
            }
            Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), inline(v, components, depth + 1)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| inline(v, components, depth + 1)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kcp() {
        assert_eq!(
            import_name("deployments", "east", "v1", "apps"),
            "deployments.east.v1.apps"
        );
        assert_eq!(import_name("services", "east", "v1", ""), "services.east.v1.core");
        assert_eq!(
            split_resource("routes.route.openshift.io"),
            ("route.openshift.io".into(), "routes".into())
        );
        assert_eq!(split_resource("configmaps"), ("".into(), "configmaps".into()));
    }

    #[test]
    fn references_are_inlined_and_recursion_stops() {
        let components: Map<String, Value> = serde_json::from_value(json!({
            "Spec": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
            "Loop": {"type": "object", "properties": {"next": {"$ref": "#/components/schemas/Loop"}}},
        }))
        .unwrap();
        let root = json!({"type": "object", "properties": {
            "spec": {"allOf": [{"$ref": "#/components/schemas/Spec"}], "description": "the spec"},
            "loop": {"$ref": "#/components/schemas/Loop"},
        }});
        let out = inline(&root, &components, 0);
        assert_eq!(
            out["properties"]["spec"]["properties"]["replicas"]["type"],
            "integer"
        );
        assert_eq!(out["properties"]["spec"]["description"], "the spec");
        assert!(!out.to_string().contains("$ref"));
    }
}
