//! `apiresource.kcp.io/v1alpha1`: kcp's `APIResourceImport`, the schema of one resource
//! as a syncer found it on its cluster (`spec.location` names the SyncTarget). The hub
//! compares it with the schemas of the APIExports the SyncTarget supports to decide
//! whether each synced resource is `Accepted` or `Incompatible`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::workload::KcpCondition;

/// The API group.
pub const GROUP: &str = "apiresource.kcp.io";
/// The API version.
pub const VERSION: &str = "v1alpha1";

cluster_resource! {
    /// An API resource imported from a cluster: its names, scope and schema.
    pub struct ApiResourceImport {
        group: "apiresource.kcp.io",
        version: "v1alpha1",
        kind: "APIResourceImport",
        plural: "apiresourceimports",
        short_names: [],
        categories: ["kcp"],
        status_subresource: true,
        printer_columns: [
            ("Location", "string", ".spec.location"),
            ("Schema update strategy", "string", ".spec.schemaUpdateStrategy"),
            ("API Resource", "string", ".spec.plural"),
            ("Compatible", "string", ".status.conditions[?(@.type==\"Compatible\")].status"),
            ("Available", "string", ".status.conditions[?(@.type==\"Available\")].status"),
        ],
        spec: ApiResourceImportSpec,
        status: ApiResourceImportStatus,
    }
}

/// The desired state of an APIResourceImport (kcp's `APIResourceImportSpec`, with the
/// inlined `CommonAPIResourceSpec` and CRD names).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceImportSpec {
    /// The SyncTarget (by name, in the same workspace) the resource was imported from.
    #[serde(default)]
    pub location: String,

    /// `UpdateNever`, `UpdateUnpublished` (the default) or `UpdatePublished`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub schema_update_strategy: String,

    /// Group (empty or `core` for the core group) and version of the resource.
    #[serde(default)]
    pub group_version: GroupVersion,

    /// `Cluster` or `Namespaced`.
    #[serde(default)]
    pub scope: String,

    /// Plural resource name.
    #[serde(default)]
    pub plural: String,

    /// Singular resource name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub singular: String,

    /// Short names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub short_names: Vec<String>,

    /// Kind.
    #[serde(default)]
    pub kind: String,

    /// List kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub list_kind: String,

    /// Categories.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,

    /// The resource's OpenAPI v3 schema, as its CRD (or built-in OpenAPI) states it.
    #[serde(rename = "openAPIV3Schema", default)]
    #[schemars(schema_with = "crate::schema::preserved_object")]
    pub open_api_v3_schema: serde_json::Value,

    /// Subresources (`status`, `scale`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_resources: Vec<SubResource>,

    /// Printer columns, as the cluster serves them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::preserved_objects")]
    pub column_definitions: Vec<serde_json::Value>,
}

/// An API group and version. The core group may be written `core` or left empty.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct GroupVersion {
    /// API group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
}

impl GroupVersion {
    /// The API group, with `core` meaning the core group (`""`).
    pub fn api_group(&self) -> &str {
        if self.group == "core" {
            ""
        } else {
            &self.group
        }
    }
}

/// A subresource of an imported resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SubResource {
    /// `status` or `scale`.
    #[serde(default)]
    pub name: String,
}

/// The observed state of an APIResourceImport.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiResourceImportStatus {
    /// `Compatible` and `Available`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KcpCondition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_reads_kcp_field_names() {
        let i: ApiResourceImport = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "deployments.east.v1.apps"},
            "spec": {
                "location": "east", "schemaUpdateStrategy": "UpdateUnpublished",
                "groupVersion": {"group": "core", "version": "v1"}, "scope": "Namespaced",
                "plural": "services", "kind": "Service",
                "openAPIV3Schema": {"type": "object"}, "subResources": [{"name": "status"}]
            }
        }))
        .unwrap();
        assert_eq!(i.spec.group_version.api_group(), "");
        assert_eq!(i.spec.open_api_v3_schema["type"], "object");
        assert_eq!(i.spec.sub_resources[0].name, "status");
        let back = serde_json::to_value(&i).unwrap();
        assert!(back["spec"].get("openAPIV3Schema").is_some());
    }
}
