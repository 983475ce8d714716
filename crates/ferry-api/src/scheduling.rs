//! `scheduling.kcp.io/v1alpha1`: kcp TMC's `Location` (a set of SyncTargets that
//! placement treats as one choice) and `Placement` (which Location the namespaces of a
//! workspace run at). Field names are kcp v0.11's, so kcp's YAML works as written.
//! Location's spec and status have the same shape as KubeStellar's
//! ([`crate::edge::Location`]) and reuse its types.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::edge::{AvailableSelectorLabel, GroupVersionResource, LocationSpec, LocationStatus};
use crate::workload::KcpCondition;

/// The API group.
pub const GROUP: &str = "scheduling.kcp.io";
/// The API version.
pub const VERSION: &str = "v1alpha1";

/// Annotation on a Location: its labels as one string, for the `Labels` column.
pub const LOCATION_LABELS_ANNOTATION: &str = "scheduling.kcp.io/labels";
/// Annotation on a Namespace naming the Placement it is bound to.
pub const PLACEMENT_ANNOTATION: &str = "scheduling.kcp.io/placement";

/// The only resource a Location's instances can be in kcp v0.11:
/// `workload.kcp.io/v1alpha1` `synctargets`.
pub fn sync_targets_resource() -> GroupVersionResource {
    GroupVersionResource {
        group: crate::workload::GROUP.to_string(),
        version: crate::workload::VERSION.to_string(),
        resource: "synctargets".to_string(),
    }
}

cluster_resource! {
    /// A set of SyncTargets (chosen by `instanceSelector`) that a Placement selects as
    /// one target.
    pub struct Location {
        group: "scheduling.kcp.io",
        version: "v1alpha1",
        kind: "Location",
        plural: "locations",
        short_names: [],
        categories: ["kcp"],
        status_subresource: true,
        printer_columns: [
            ("Resource", "string", ".spec.resource.resource"),
            ("Available", "string", ".status.availableInstances"),
            ("Instances", "string", ".status.instances"),
            ("Labels", "string", ".metadata.annotations['scheduling\\.kcp\\.io/labels']"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: LocationSpec,
        status: LocationStatus,
    }
}

cluster_resource! {
    /// Chooses one Location for the namespaces of a workspace that match
    /// `namespaceSelector`.
    pub struct Placement {
        group: "scheduling.kcp.io",
        version: "v1alpha1",
        kind: "Placement",
        plural: "placements",
        short_names: [],
        categories: ["kcp"],
        status_subresource: true,
        printer_columns: [
            ("Phase", "string", ".status.phase"),
            ("Location", "string", ".status.selectedLocation.locationName"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: PlacementSpec,
        status: PlacementStatus,
    }
}

/// The desired state of a Placement.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    /// Locations matching any of these selectors may be chosen (ORed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::label_selectors")]
    pub location_selectors: Vec<LabelSelector>,

    /// The resource of the Locations' instances. Defaults to
    /// `workload.kcp.io/v1alpha1` `synctargets` (the only one kcp accepts).
    #[serde(default = "sync_targets_resource")]
    pub location_resource: GroupVersionResource,

    /// The namespaces this Placement applies to; all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub namespace_selector: Option<LabelSelector>,

    /// The workspace (absolute path, e.g. `root:org:ws`) holding the Locations; when
    /// unset, the workspace of the APIBinding.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub location_workspace: String,
}

impl Default for PlacementSpec {
    fn default() -> Self {
        PlacementSpec {
            location_selectors: Vec::new(),
            location_resource: sync_targets_resource(),
            namespace_selector: None,
            location_workspace: String::new(),
        }
    }
}

/// The observed state of a Placement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    /// `Pending` until a Location is selected, then `Unbound`, and `Bound` once a
    /// namespace uses the Placement.
    #[serde(default)]
    pub phase: PlacementPhase,

    /// The Location the Placement chose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_location: Option<LocationReference>,

    /// kcp-style conditions: `Ready`, `Scheduled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KcpCondition>,
}

/// The phase of a Placement.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PlacementPhase {
    /// No Location selected yet.
    #[default]
    Pending,
    /// A Location is selected and at least one namespace is bound to the Placement.
    Bound,
    /// A Location is selected but no namespace is bound to the Placement.
    Unbound,
}

/// A Location in a workspace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocationReference {
    /// Absolute workspace path, e.g. `root:org:ws`.
    #[serde(default)]
    pub path: String,
    /// Name of the Location.
    #[serde(default)]
    pub location_name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placement_without_location_resource_targets_sync_targets() {
        let p: Placement = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"locationSelectors": [{"matchLabels": {"env": "test"}}]}
        }))
        .unwrap();
        assert_eq!(p.spec.location_resource, sync_targets_resource());
        assert_eq!(PlacementSpec::default().location_resource.resource, "synctargets");
        let status: PlacementStatus =
            serde_json::from_value(serde_json::json!({"phase": "Bound", "selectedLocation": {"path": "root:org", "locationName": "default"}}))
                .unwrap();
        assert_eq!(status.phase, PlacementPhase::Bound);
        assert_eq!(status.selected_location.unwrap().location_name, "default");
    }
}
