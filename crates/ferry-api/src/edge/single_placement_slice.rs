//! `SinglePlacementSlice`: where an EdgePlacement resolved to, as KubeStellar's
//! where-resolver records it (same name as the EdgePlacement, in its workspace).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The destinations of one EdgePlacement. Unlike the other kinds it has no
/// `spec`/`status`: `destinations` sits at the top level, as in KubeStellar.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SinglePlacementSlice {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// One per SyncTarget the placement selects (through a Location).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<SinglePlacement>,
}

/// One destination: a SyncTarget, and the Location it was selected through.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "camelCase")]
pub struct SinglePlacement {
    /// The logical cluster (inventory workspace) of the Location and SyncTarget.
    pub cluster: String,
    /// The Location's name.
    pub location_name: String,
    /// The SyncTarget's name.
    pub sync_target_name: String,
    /// The SyncTarget's uid.
    #[serde(rename = "syncTargetUID")]
    pub sync_target_uid: String,
}

impl SinglePlacementSlice {
    pub const KIND: &'static str = "SinglePlacementSlice";
    pub const GROUP: &'static str = "edge.kubestellar.io";
    pub const VERSION: &'static str = "v2alpha1";
    pub const PLURAL: &'static str = "singleplacementslices";

    /// The CRD (cluster-scoped, no status subresource).
    pub fn crd() -> CustomResourceDefinition {
        let destination = json!({
            "type": "object",
            "required": ["cluster", "locationName", "syncTargetName", "syncTargetUID"],
            "properties": {
                "cluster": {"type": "string"},
                "locationName": {"type": "string"},
                "syncTargetName": {"type": "string"},
                "syncTargetUID": {"type": "string"},
            },
        });
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {
                "name": "singleplacementslices.edge.kubestellar.io",
                "labels": {crate::well_known::KUBE_BIND_EXPORTED_LABEL: "true"},
            },
            "spec": {
                "group": Self::GROUP,
                "names": {
                    "kind": Self::KIND, "listKind": "SinglePlacementSliceList",
                    "plural": Self::PLURAL, "singular": "singleplacementslice",
                },
                "scope": "Cluster",
                "versions": [{
                    "name": Self::VERSION, "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "destinations": {"type": "array", "items": destination},
                        },
                    }},
                    "additionalPrinterColumns": [
                        {"name": "Destinations", "type": "string", "jsonPath": ".destinations[*].syncTargetName"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }],
            },
        }))
        .expect("the SinglePlacementSlice CRD is a valid CRD")
    }
}
