//! kcp's `imported-apis` APIExport: when a syncer imports resources its
//! SyncTarget's exports do not have (`--resources routes.route.openshift.io`),
//! the hub publishes them from the SyncTarget's workspace as APIResourceSchemas
//! made from the imports, listed by the export `imported-apis`, so a
//! workspace can bind them and the SyncTarget can support them.
//!
//! Pure: imports in, the schemas the export should list out.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::json;

/// The export's name (kcp's, reserved: not for `--apiexports`).
pub const EXPORT: &str = "imported-apis";

/// One import, as far as the export is concerned.
#[derive(Debug, Clone)]
pub struct Import {
    /// The SyncTarget it came from.
    pub location: String,
    pub spec: Value,
}

impl Import {
    fn group(&self) -> &str {
        match json::str_at(&self.spec, "/groupVersion/group") {
            "core" => "",
            g => g,
        }
    }
    fn version(&self) -> &str {
        json::str_at(&self.spec, "/groupVersion/version")
    }
    fn plural(&self) -> &str {
        json::str_at(&self.spec, "/plural")
    }
}

/// The APIResourceSchemas (by name) `imported-apis` should list: one per
/// imported `(group, resource)` that `supported(location)` does not already
/// cover, with one version per imported version. Where several targets
/// import the same version, the first target by name wins.
pub fn desired_schemas(
    imports: &[Import],
    supported: impl Fn(&str, &str, &str) -> bool,
) -> BTreeMap<String, Value> {
    let mut imports: Vec<&Import> = imports
        .iter()
        .filter(|i| !i.plural().is_empty() && !i.version().is_empty())
        .filter(|i| !supported(&i.location, i.group(), i.plural()))
        .collect();
    imports.sort_by(|a, b| a.location.cmp(&b.location));
    // (group, resource) → version → import
    let mut by_resource: BTreeMap<(String, String), BTreeMap<String, &Import>> = BTreeMap::new();
    for i in imports {
        by_resource
            .entry((i.group().to_string(), i.plural().to_string()))
            .or_default()
            .entry(i.version().to_string())
            .or_insert(i);
    }
    let mut out = BTreeMap::new();
    for ((group, resource), versions) in by_resource {
        let storage = if versions.contains_key("v1") {
            "v1".to_string()
        } else {
            versions.keys().next().cloned().unwrap_or_default()
        };
        let first = versions.values().next().copied();
        let Some(first) = first else { continue };
        let s = |p: &str| json::str_at(&first.spec, p).to_string();
        let mut names = json!({"plural": resource, "kind": s("/kind")});
        for (field, value) in [("singular", s("/singular")), ("listKind", s("/listKind"))] {
            if !value.is_empty() {
                names[field] = json!(value);
            }
        }
        for field in ["shortNames", "categories"] {
            if let Some(v) = first
                .spec
                .get(field)
                .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
            {
                names[field] = v.clone();
            }
        }
        let scope = match s("/scope").as_str() {
            "Cluster" => "Cluster",
            _ => "Namespaced",
        };
        let versions: Vec<Value> = versions
            .iter()
            .map(|(version, i)| {
                let subs: Vec<&str> = i
                    .spec
                    .get("subResources")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|sr| json::str_at(sr, "/name"))
                    .collect();
                let mut subresources = json!({});
                if subs.contains(&"status") {
                    subresources["status"] = json!({});
                }
                if subs.contains(&"scale") {
                    subresources["scale"] =
                        json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"});
                }
                json!({
                    "name": version,
                    "served": true,
                    "storage": *version == storage,
                    "schema": i.spec.get("openAPIV3Schema").cloned().unwrap_or_else(|| json!({"type": "object"})),
                    "subresources": subresources,
                })
            })
            .collect();
        let spec = json!({"group": group, "names": names, "scope": scope, "versions": versions});
        let digest = Sha256::digest(spec.to_string().as_bytes());
        let hash: String = digest.iter().take(5).map(|b| format!("{b:02x}")).collect();
        let group_name = if group.is_empty() { "core" } else { group.as_str() };
        let name = format!("i{hash}.{resource}.{group_name}");
        out.insert(
            name.clone(),
            json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
                   "metadata": {"name": name}, "spec": spec}),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routes(location: &str, version: &str, host_type: &str) -> Import {
        Import {
            location: location.into(),
            spec: json!({
                "location": location, "groupVersion": {"group": "route.openshift.io", "version": version},
                "scope": "Namespaced", "plural": "routes", "singular": "route", "kind": "Route", "listKind": "RouteList",
                "openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"host": {"type": host_type}}}}},
                "subResources": [{"name": "status"}]
            }),
        }
    }

    #[test]
    fn an_import_no_export_covers_becomes_a_schema_named_by_its_content() {
        let out = desired_schemas(&[routes("east", "v1", "string")], |_, _, _| false);
        assert_eq!(out.len(), 1);
        let (name, schema) = out.iter().next().unwrap();
        assert!(
            name.ends_with(".routes.route.openshift.io") && name.starts_with('i'),
            "{name}"
        );
        assert_eq!(schema["spec"]["versions"][0]["storage"], true);
        assert_eq!(
            schema["spec"]["versions"][0]["subresources"],
            json!({"status": {}})
        );
        assert_eq!(schema["spec"]["names"]["listKind"], "RouteList");
        // A different schema, a different name (schemas are immutable).
        let other = desired_schemas(&[routes("east", "v1", "integer")], |_, _, _| false);
        assert_ne!(other.keys().next(), Some(name));
    }

    #[test]
    fn covered_resources_are_left_out_and_the_first_target_wins_per_version() {
        let out = desired_schemas(&[routes("east", "v1", "string")], |_, g, r| {
            g == "route.openshift.io" && r == "routes"
        });
        assert!(out.is_empty());
        let out = desired_schemas(
            &[
                routes("west", "v1", "integer"),
                routes("east", "v1", "string"),
                routes("west", "v1beta1", "string"),
            ],
            |_, _, _| false,
        );
        let schema = out.values().next().unwrap();
        let versions = schema["spec"]["versions"].as_array().unwrap();
        assert_eq!(versions.len(), 2);
        assert_eq!(versions[0]["name"], "v1");
        assert_eq!(versions[0]["storage"], true);
        assert_eq!(versions[1]["storage"], false);
        assert_eq!(
            versions[0]["schema"]["properties"]["spec"]["properties"]["host"]["type"],
            "string"
        );
    }
}
