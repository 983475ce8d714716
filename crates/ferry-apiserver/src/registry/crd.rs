//! Turning a CustomResourceDefinition into the resources it serves.

use std::sync::Arc;

use serde_json::Value;

use super::{ResourceInfo, ScalePaths, ALL_VERBS};
use crate::table::PrinterColumn;

/// A CRD that cannot be served, and why.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CrdError(pub String);

fn str_at<'a>(v: &'a Value, path: &str) -> Option<&'a str> {
    v.pointer(path).and_then(Value::as_str)
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Every served version of `crd` as a [`ResourceInfo`].
pub fn resources_from_crd(crd: &Value) -> Result<Vec<ResourceInfo>, CrdError> {
    let name = str_at(crd, "/metadata/name").unwrap_or("<unnamed>");
    let missing = |field: &str| CrdError(format!("CustomResourceDefinition {name}: {field} is required"));
    let group = str_at(crd, "/spec/group").ok_or_else(|| missing("spec.group"))?;
    let plural = str_at(crd, "/spec/names/plural").ok_or_else(|| missing("spec.names.plural"))?;
    let kind = str_at(crd, "/spec/names/kind").ok_or_else(|| missing("spec.names.kind"))?;
    let singular = str_at(crd, "/spec/names/singular")
        .map(String::from)
        .unwrap_or_else(|| kind.to_ascii_lowercase());
    let list_kind = str_at(crd, "/spec/names/listKind")
        .map(String::from)
        .unwrap_or_else(|| format!("{kind}List"));
    let namespaced = str_at(crd, "/spec/scope") != Some("Cluster");
    let terminating = crd.pointer("/metadata/deletionTimestamp").is_some();
    let short_names = strings(crd.pointer("/spec/names/shortNames"));
    let categories = strings(crd.pointer("/spec/names/categories"));
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .ok_or_else(|| missing("spec.versions"))?;
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("spec.versions[].name"))?;
        let status_subresource = v.pointer("/subresources/status").is_some();
        let scale_subresource = v.pointer("/subresources/scale").map(|s| ScalePaths {
            spec_replicas: str_at(s, "/specReplicasPath").unwrap_or(".spec.replicas").into(),
            status_replicas: str_at(s, "/statusReplicasPath")
                .unwrap_or(".status.replicas")
                .into(),
            label_selector: str_at(s, "/labelSelectorPath").map(String::from),
        });
        let printer_columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| cols.iter().filter_map(printer_column).collect())
            .unwrap_or_default();
        out.push(ResourceInfo {
            group: group.into(),
            version: version.into(),
            resource: plural.into(),
            singular: singular.clone(),
            kind: kind.into(),
            list_kind: list_kind.clone(),
            namespaced,
            short_names: short_names.clone(),
            categories: categories.clone(),
            verbs: ALL_VERBS.iter().map(|s| s.to_string()).collect(),
            status_subresource,
            scale_subresource,
            extra_subresources: Vec::new(),
            printer_columns,
            schema: v.pointer("/schema/openAPIV3Schema").cloned().map(Arc::new),
            selectable_fields: v
                .get("selectableFields")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|f| f.get("jsonPath")?.as_str())
                .map(|p| p.trim_start_matches('.').to_string())
                .collect(),
            storage_version: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
            from_crd: true,
            binding: None,
            terminating,
            yields_plural: false,
        });
    }
    Ok(out)
}

fn printer_column(c: &Value) -> Option<PrinterColumn> {
    Some(PrinterColumn {
        name: c.get("name")?.as_str()?.into(),
        type_: c.get("type").and_then(Value::as_str).unwrap_or("string").into(),
        format: c.get("format").and_then(Value::as_str).unwrap_or_default().into(),
        description: c
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .into(),
        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0) as i32,
        json_path: c.get("jsonPath")?.as_str()?.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn served_versions_become_resources_with_subresources_and_columns() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v0", "served": false, "storage": false}
                ]
            }
        });
        let rs = resources_from_crd(&crd).unwrap();
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].singular, "widget");
        assert!(rs[0].status_subresource && rs[0].namespaced && rs[0].storage_version);
        assert_eq!(rs[0].printer_columns[0].json_path, ".spec.size");
    }
}
