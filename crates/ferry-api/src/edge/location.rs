//! `Location`: a set of SyncTargets selected by label.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

cluster_resource! {
    /// A set of instances (SyncTargets) that placement can choose as one target.
    pub struct Location {
        group: "edge.kubestellar.io",
        version: "v2alpha1",
        kind: "Location",
        plural: "locations",
        short_names: [],
        categories: [],
        status_subresource: true,
        printer_columns: [
            ("Resource", "string", ".spec.resource.resource"),
            ("Available", "string", ".status.availableInstances"),
            ("Instances", "string", ".status.instances"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: LocationSpec,
        status: LocationStatus,
    }
}

/// The desired state of a Location.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocationSpec {
    /// The resource of the instances. KubeStellar fixes it (by enum) to
    /// `edge.kubestellar.io/v2alpha1/synctargets`; Ferry accepts any value here and
    /// leaves the check to whoever resolves the Location.
    #[serde(default)]
    pub resource: GroupVersionResource,

    /// Human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,

    /// Labels that placement may use to pick an instance at this Location.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available_selector_labels: Vec<AvailableSelectorLabel>,

    /// Chooses the instances that make up this Location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub instance_selector: Option<LabelSelector>,
}

/// Identifies a resource by group, version and resource name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupVersionResource {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Resource name (lowercase plural).
    #[serde(default)]
    pub resource: String,
}

/// A label key with its possible values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AvailableSelectorLabel {
    /// Label key.
    pub key: String,
    /// Possible values (at least one).
    #[serde(default)]
    pub values: Vec<String>,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// The observed state of a Location.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocationStatus {
    /// Number of instances at this Location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u32>,
    /// Number of available instances at this Location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_instances: Option<u32>,
}
