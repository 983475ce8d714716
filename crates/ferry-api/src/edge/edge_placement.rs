//! `EdgePlacement`: binds workload objects to Locations.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
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
        status_subresource: true,
        printer_columns: [
            ("Matching Locations", "integer", ".status.matchingLocationCount"),
            ("Executing", "integer", ".status.executingCount"),
            ("Ready", "string", ".status.conditions[?(@.type==\"Ready\")].status"),
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

    /// The older form (KubeStellar's `edge.kcp.io/v1alpha1`): every namespaced object in
    /// the namespaces this selects. Accepted alongside `downsync` and read as one more
    /// downsync member that matches namespaced objects only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub namespace_selector: Option<LabelSelector>,

    /// The older form: cluster-scoped objects by group, resources and names. Each member
    /// is read as one more downsync member that matches cluster-scoped objects only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_namespaced_objects: Vec<NonNamespacedObjects>,
}

/// Cluster-scoped objects of one API group (the older EdgePlacement form).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NonNamespacedObjects {
    /// API group; empty for the core group.
    #[serde(default)]
    pub api_group: String,
    /// Lowercase plural resource names, or `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Object names, or `*`; empty matches every name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
}

/// Which objects a downsync member may match, by scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownsyncScope {
    /// Namespaced and cluster-scoped objects (every `downsync` member).
    Any,
    /// Namespaced objects only (the older `namespaceSelector`).
    Namespaced,
    /// Cluster-scoped objects only (the older `nonNamespacedObjects`).
    ClusterScoped,
}

impl EdgePlacementSpec {
    /// Every downsync member, the older fields converted: `(field path, test, scope)`.
    /// The path names the field the member came from, for error messages
    /// (`spec.downsync[1]`, `spec.namespaceSelector`, `spec.nonNamespacedObjects[0]`).
    pub fn effective_downsync(&self) -> Vec<(String, DownsyncObjectTest, DownsyncScope)> {
        let mut out: Vec<_> = self
            .downsync
            .iter()
            .enumerate()
            .map(|(i, t)| (format!("spec.downsync[{i}]"), t.clone(), DownsyncScope::Any))
            .collect();
        if let Some(selector) = &self.namespace_selector {
            out.push((
                "spec.namespaceSelector".into(),
                DownsyncObjectTest {
                    api_group: None,
                    resources: vec!["*".into()],
                    namespace_selectors: vec![selector.clone()],
                    ..Default::default()
                },
                DownsyncScope::Namespaced,
            ));
        }
        for (i, o) in self.non_namespaced_objects.iter().enumerate() {
            out.push((
                format!("spec.nonNamespacedObjects[{i}]"),
                DownsyncObjectTest {
                    api_group: Some(o.api_group.clone()),
                    resources: o.resources.clone(),
                    object_names: o.resource_names.clone(),
                    ..Default::default()
                },
                DownsyncScope::ClusterScoped,
            ));
        }
        out
    }
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

    /// Names of StatusCollectors (KubeStellar's, `control.kubestellar.io`, in
    /// this workspace) that combine the status returned from every cluster
    /// into each matching object's CombinedStatus.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status_collectors: Vec<String>,
}

/// The observed state of an EdgePlacement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgePlacementStatus {
    /// The spec generation this status describes; 0 means none yet.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub spec_generation: i32,

    /// Number of Locations matching `locationSelectors`.
    #[serde(default)]
    pub matching_location_count: i32,

    /// Ferry: how many mailbox copies this placement's objects have in all (one per
    /// object and destination).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub executing_count: i32,

    /// Ferry: how many of those copies their clusters refused (each destination's
    /// syncer reports them; the objects' PlacementSummaries carry each message).
    /// While any is refused, `Ready` is False with reason `CopiesRefused`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub refused_count: i32,

    /// Ferry: `Ready` (everything placed), `Conflict` (another placement wants a
    /// different object under the same name in a mailbox), `InvalidSpec` (a selector
    /// or resource that cannot be used; the condition names the field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::metav1_conditions")]
    pub conditions: Vec<Condition>,
}

fn is_zero(value: &i32) -> bool {
    *value == 0
}
