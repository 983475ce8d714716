//! `EdgePlacement`: binds workload objects to Locations.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::UpsyncSet;

cluster_resource! {
    /// Binds a set of Locations with objects to downsync (and to return reported state
    /// from) and objects to upsync. Overlapping EdgePlacements are additive.
    pub struct EdgePlacement {
        group: "edge.kubestellar.io",
        version: "v2alpha1",
        kind: "EdgePlacement",
        plural: "edgeplacements",
        short_names: ["epl"],
        categories: [],
        status_subresource: false,
        printer_columns: [
            ("Locations", "integer", ".status.matchingLocationCount"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: EdgePlacementSpec,
        status: EdgePlacementStatus,
    }
}

/// Which Locations, which objects down and which objects up. An object matching both
/// downsync and upsync is upsynced.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgePlacementSpec {
    /// A Location is selected iff it matches any of these selectors.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::label_selectors")]
    pub location_selectors: Vec<LabelSelector>,

    /// An object is downsynced iff it matches at least one member.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub downsync: Vec<DownsyncObjectTest>,

    /// The placement targets exactly one Location and the reported state of each
    /// downsynced object is returned into the workload object.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub want_singleton_reported_state: bool,

    /// An object is upsynced iff it matches at least one member.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upsync: Vec<UpsyncSet>,
}

/// Criteria an object must all satisfy. In every list `*` matches everything and an
/// empty list is a special case that also matches everything.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DownsyncObjectTest {
    /// API group; empty string for the core group; absent (`null`) matches every group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,

    /// Lowercase plural resource names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,

    /// Namespace names; `*` is the only way to match cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,

    /// Selectors over the labels of the object's Namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::label_selectors")]
    pub namespace_selectors: Vec<LabelSelector>,

    /// Object names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub object_names: Vec<String>,

    /// Selectors over the object's labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::label_selectors")]
    pub label_selectors: Vec<LabelSelector>,
}

/// The observed state of an EdgePlacement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgePlacementStatus {
    /// The spec generation this status describes; 0 means none yet.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spec_generation: i32,

    /// Number of Locations matching `locationSelectors`.
    #[serde(default)]
    pub matching_location_count: i32,
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}
