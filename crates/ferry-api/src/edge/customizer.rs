//! `Customizer` (`edge.kubestellar.io/v2alpha1`, namespaced): path/value
//! replacements made to a workload object on its way into each mailbox, as
//! KubeStellar's v0.x defined it. An object opts in with the annotation
//! [`CUSTOMIZER_ANNOTATION`](crate::well_known::CUSTOMIZER_ANNOTATION): its
//! value names a Customizer in the object's namespace (`namespace/name` for a
//! cluster-scoped object). A Customizer annotated
//! [`EXPAND_PARAMETERS_ANNOTATION`](crate::well_known::EXPAND_PARAMETERS_ANNOTATION)
//! `"true"` has its paths and values parameter-expanded per destination first.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// Modifications to make to the objects that reference this Customizer. Like
/// KubeStellar's, `replacements` sits at the top level (no `spec`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Customizer {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replacements: Vec<Replacement>,
}

/// One modification, done on the JSON form of the object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Replacement {
    /// Where: `$` then `.name`, `['name']` or `[index]` steps (`.0` also
    /// indexes a list), e.g. `$.spec.template.spec.containers[0].image`.
    pub path: String,
    /// The new value, as JSON text: `'"a string"'`, `'3'`, `'{"a": 1}'`.
    pub value: String,
}

impl Customizer {
    pub const KIND: &'static str = "Customizer";
    pub const GROUP: &'static str = "edge.kubestellar.io";
    pub const VERSION: &'static str = "v2alpha1";
    pub const PLURAL: &'static str = "customizers";

    /// The CRD (namespaced, no status subresource).
    pub fn crd() -> CustomResourceDefinition {
        crate::crd_builder::hand_written_crd(
            (Self::GROUP, Self::VERSION, Self::KIND, Self::PLURAL),
            "Namespaced",
            json!({
                "type": "object",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "replacements": {"type": "array", "items": {
                        "type": "object",
                        "required": ["path", "value"],
                        "properties": {
                            "path": {"type": "string"},
                            "value": {"type": "string"},
                        },
                    }},
                },
            }),
            json!([
                {"name": "Paths", "type": "string", "jsonPath": ".replacements[*].path"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ]),
        )
    }
}
