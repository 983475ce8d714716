//! OpenAPI v3 schemas for the Kubernetes types these APIs embed.
//!
//! Fields typed with `k8s-openapi` types (`LabelSelector`, `Time`, `Condition`, `Quantity`)
//! point at these functions with `#[schemars(schema_with = "...")]`, so this crate does not
//! need k8s-openapi's optional `schemars` feature (which would rebuild k8s-openapi for
//! the whole workspace). Every schema here is structural: each node has a `type`, or is
//! explicitly `x-kubernetes-int-or-string`.

use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::{json, Value};

fn label_selector_value() -> Value {
    json!({
        "description": "A label query over a set of resources. matchLabels and matchExpressions are ANDed; an empty selector matches everything.",
        "type": "object",
        "properties": {
            "matchLabels": {
                "type": "object",
                "additionalProperties": { "type": "string" }
            },
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["key", "operator"],
                    "properties": {
                        "key": { "type": "string" },
                        "operator": { "type": "string" },
                        "values": { "type": "array", "items": { "type": "string" } }
                    }
                }
            }
        },
        "x-kubernetes-map-type": "atomic"
    })
}

fn metav1_condition_value() -> Value {
    json!({
        "description": "A standard Kubernetes condition (metav1.Condition).",
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": { "type": "string", "maxLength": 316 },
            "status": { "type": "string", "enum": ["True", "False", "Unknown"] },
            "observedGeneration": { "type": "integer", "format": "int64" },
            "lastTransitionTime": { "type": "string", "format": "date-time" },
            "reason": { "type": "string", "maxLength": 1024 },
            "message": { "type": "string", "maxLength": 32768 }
        }
    })
}

fn quantity_value() -> Value {
    json!({
        "anyOf": [{ "type": "integer" }, { "type": "string" }],
        "x-kubernetes-int-or-string": true
    })
}

fn to_schema(value: Value) -> Schema {
    Schema::try_from(value).expect("static schema is a JSON object")
}

/// `metav1.LabelSelector` (also used for `Option<LabelSelector>`).
pub fn label_selector(_: &mut SchemaGenerator) -> Schema {
    to_schema(label_selector_value())
}

/// A list of `metav1.LabelSelector`.
pub fn label_selectors(_: &mut SchemaGenerator) -> Schema {
    to_schema(json!({ "type": "array", "items": label_selector_value() }))
}

/// `metav1.Time` (also used for `Option<Time>`): an RFC 3339 timestamp.
pub fn time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}

/// A list of standard `metav1.Condition`s, keyed by `type`.
pub fn metav1_conditions(_: &mut SchemaGenerator) -> Schema {
    to_schema(json!({
        "type": "array",
        "items": metav1_condition_value(),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"]
    }))
}

/// `corev1.ResourceList` (also used for `Option<ResourceList>`): resource name → quantity.
pub fn resource_list(_: &mut SchemaGenerator) -> Schema {
    to_schema(json!({ "type": "object", "additionalProperties": quantity_value() }))
}

/// An object whose fields are not described (`x-kubernetes-preserve-unknown-fields`),
/// such as an embedded OpenAPI schema.
pub fn preserved_object(_: &mut SchemaGenerator) -> Schema {
    to_schema(json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true }))
}

/// A list of undescribed objects.
pub fn preserved_objects(_: &mut SchemaGenerator) -> Schema {
    to_schema(json!({
        "type": "array",
        "items": { "type": "object", "x-kubernetes-preserve-unknown-fields": true }
    }))
}
