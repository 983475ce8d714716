//! RFC 7396 JSON merge patch.

use serde_json::Value;

use super::{type_name, PatchError};

/// Applies an RFC 7396 merge patch (`application/merge-patch+json`) to `doc`
/// and returns the patched document.
///
/// Objects merge recursively, `null` deletes a key and every other value,
/// lists included, replaces what was there. The patch must be a JSON object,
/// since the result has to remain a Kubernetes object.
pub fn merge_patch(doc: &Value, patch_body: &[u8]) -> Result<Value, PatchError> {
    let patch: Value = serde_json::from_slice(patch_body).map_err(PatchError::Decode)?;
    merge_value(doc, &patch)
}

/// [`merge_patch`] over an already decoded patch.
pub(super) fn merge_value(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError::NotAnObject(type_name(patch)));
    }
    let mut patched = if doc.is_object() {
        doc.clone()
    } else {
        Value::Object(Default::default())
    };
    merge_into(&mut patched, patch);
    Ok(patched)
}

/// RFC 7396 `MergePatch`, keeping the order of the target's keys (removal
/// shifts rather than swaps).
fn merge_into(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let Value::Object(target) = target else {
        return;
    };
    for (key, value) in patch {
        if value.is_null() {
            target.shift_remove(key);
        } else {
            merge_into(target.entry(key.as_str()).or_insert(Value::Null), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn merge_patch_merges_objects_and_null_deletes() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"replicas": 1}});
        let body = br#"{"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"replicas": 3}}"#;
        let patched = merge_patch(&doc, body).unwrap();
        assert_eq!(
            patched,
            json!({"metadata": {"labels": {"b": "2", "c": "3"}}, "spec": {"replicas": 3}})
        );
    }

    #[test]
    fn merge_patch_keeps_key_order() {
        let doc = json!({"a": 1, "b": 2, "c": 3});
        let patched = merge_patch(&doc, br#"{"a": null, "d": 4}"#).unwrap();
        let keys: Vec<&String> = patched.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["b", "c", "d"]);
    }

    #[test]
    fn merge_patch_replaces_lists_wholesale() {
        let doc = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let patched = merge_patch(&doc, br#"{"spec": {"containers": [{"name": "c"}]}}"#).unwrap();
        assert_eq!(patched, json!({"spec": {"containers": [{"name": "c"}]}}));
    }

    #[test]
    fn merge_patch_that_is_not_an_object_is_rejected() {
        let err = merge_patch(&json!({}), b"[1]").unwrap_err();
        assert!(matches!(err, PatchError::NotAnObject("array")));
    }

    #[test]
    fn malformed_merge_patch_body_is_a_decode_error() {
        let err = merge_patch(&json!({}), b"{").unwrap_err();
        assert!(err.to_string().starts_with("error decoding patch: "), "{err}");
    }
}
