//! Validation of names and of custom resources against their CRD schema.
//!
//! - [`names`]: object names, label keys/values, annotation keys, `metadata`.
//! - [`schema`]: structural-schema validation, pruning and defaulting of custom resources.
//! - [`crd`]: basic checks of a `CustomResourceDefinition` itself.
//! - [`pattern`]: CRD `pattern`s as Go-compatible regular expressions.
//! - [`cel`]: `x-kubernetes-validations` (CEL) rules.
//!
//! Everything here is pure and reports problems as [`crate::status::Cause`]s
//! worded as kube-apiserver words them.

pub mod cel;
pub mod crd;
pub mod names;
pub mod pattern;
pub mod schema;

use crate::status::Cause;
use serde_json::Value;

pub use crd::validate_crd;
pub use names::{validate_metadata, validate_object_name, NameRule};
pub use schema::{validate_and_prune, validate_and_prune_reporting};

/// Kubernetes' `field.Invalid` body: `Invalid value: "x": detail`. Strings are
/// quoted, numbers and booleans bare, `null` as `"null"`, the rest as JSON.
pub fn invalid_value(value: &Value, detail: &str) -> String {
    format!("Invalid value: {}: {detail}", render_value(value))
}

/// A value as Kubernetes prints it inside a field error.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::Null => "\"null\"".to_string(),
        Value::String(s) => Value::String(s.clone()).to_string(),
        other => other.to_string(),
    }
}

/// Kubernetes' `field.NotSupported`: `Unsupported value: "x": supported
/// values: "a", "b"`.
pub fn not_supported(field: &str, value: &Value, supported: &[&str]) -> Cause {
    let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    Cause::unsupported(
        field,
        format!(
            "Unsupported value: {}: supported values: {}",
            render_value(value),
            supported.join(", ")
        ),
    )
}

/// Kubernetes' `field.Required` with a detail: `Required value: detail`.
pub fn required_because(field: &str, detail: &str) -> Cause {
    Cause {
        message: format!("Required value: {detail}"),
        ..Cause::required(field)
    }
}

/// Kubernetes' `field.Duplicate`: `Duplicate value: "x"`.
pub fn duplicate(field: &str, value: &Value) -> Cause {
    Cause {
        reason: "FieldValueDuplicate".into(),
        field: field.into(),
        message: format!("Duplicate value: {}", render_value(value)),
    }
}
