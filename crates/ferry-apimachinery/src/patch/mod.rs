//! The four patch types: JSON patch, merge patch, strategic merge patch, and
//! server-side apply with managedFields. Pure functions over JSON values.
//!
//! - [`json_patch`]: RFC 6902 (`application/json-patch+json`).
//! - [`merge_patch`]: RFC 7396 (`application/merge-patch+json`).
//! - [`strategic_merge_patch`]: Kubernetes' strategic merge patch
//!   (`application/strategic-merge-patch+json`) for built-in kinds.
//! - [`server_side_apply`]: server-side apply (`application/apply-patch+yaml`)
//!   with field ownership recorded in `metadata.managedFields`.
//! - [`record_update`]: keeps `metadata.managedFields` up to date for every
//!   other write (create, update, patch).
//!
//! Which lists are merged by key, merged as sets or replaced atomically is
//! decided by one table in `schema`, shared by strategic merge patch and
//! server-side apply.

mod apply;
mod fieldpath;
mod json;
mod managed_fields;
mod merge;
mod schema;
mod strategic;

pub use apply::{server_side_apply, ApplyConflict, ApplyError};
pub use json::json_patch;
pub use managed_fields::record_update;
pub use merge::merge_patch;
pub use schema::supports_strategic_merge;
pub use strategic::strategic_merge_patch;

/// Why a JSON, merge or strategic merge patch could not be applied.
///
/// `Decode` is a malformed request (kube-apiserver answers 400 Bad Request);
/// the other variants are well-formed patches that cannot be applied to the
/// object (kube-apiserver answers 422 Unprocessable Entity).
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The patch body is not valid JSON, or not the shape the patch type
    /// requires (for example a JSON patch that is not an array of operations).
    #[error("error decoding patch: {0}")]
    Decode(#[source] serde_json::Error),
    /// A JSON patch operation failed, including a failed `test` operation.
    /// The message is the one of the `json-patch` crate, for example
    /// `operation '/0' failed at path '/spec/replicas': value did not match`.
    #[error("{0}")]
    JsonPatch(#[from] json_patch::PatchError),
    /// A merge or strategic merge patch whose top level is not a JSON object.
    #[error("patch body must be a JSON object, got {0}")]
    NotAnObject(&'static str),
    /// A strategic merge patch that is valid JSON but cannot be applied: a
    /// list item without its merge key, a malformed `$patch`, `$retainKeys`,
    /// `$setElementOrder` or `$deleteFromPrimitiveList` directive.
    #[error("{0}")]
    InvalidStrategicPatch(String),
    /// A patch over the bounds on the work one patch may cause (answered
    /// 413 Request Entity Too Large).
    #[error("{0}")]
    TooLarge(String),
}

/// Membership in a list of JSON values in O(1): scalars are hashed by their
/// JSON text (equal scalars have equal text); objects and arrays, whose text
/// depends on key order, are compared one by one (sets of them are rare and
/// short).
pub(crate) struct ValueSet<'v> {
    scalars: std::collections::HashSet<String>,
    others: Vec<&'v serde_json::Value>,
}

impl<'v> ValueSet<'v> {
    pub(crate) fn new(items: impl IntoIterator<Item = &'v serde_json::Value>) -> Self {
        let mut set = ValueSet {
            scalars: Default::default(),
            others: Vec::new(),
        };
        for item in items {
            if item.is_object() || item.is_array() {
                set.others.push(item);
            } else {
                set.scalars.insert(item.to_string());
            }
        }
        set
    }

    pub(crate) fn contains(&self, item: &serde_json::Value) -> bool {
        if item.is_object() || item.is_array() {
            self.others.contains(&item)
        } else {
            self.scalars.contains(&item.to_string())
        }
    }

    /// Add `item`; false if it was there already.
    pub(crate) fn insert(&mut self, item: &'v serde_json::Value) -> bool {
        if self.contains(item) {
            return false;
        }
        if item.is_object() || item.is_array() {
            self.others.push(item);
        } else {
            self.scalars.insert(item.to_string());
        }
        true
    }
}

/// The JSON type name of a value, for error messages.
fn type_name(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}
