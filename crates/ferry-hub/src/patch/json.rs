//! RFC 6902 JSON patch.

use serde_json::Value;

use super::PatchError;

/// Applies an RFC 6902 JSON patch (`application/json-patch+json`) to `doc`
/// and returns the patched document.
///
/// All operations are supported, including `test`; the patch is applied
/// atomically, so a failing operation leaves nothing half-applied.
pub fn json_patch(doc: &Value, patch_body: &[u8]) -> Result<Value, PatchError> {
    let patch: json_patch::Patch = serde_json::from_slice(patch_body).map_err(PatchError::Decode)?;
    let mut patched = doc.clone();
    json_patch::patch(&mut patched, &patch)?;
    Ok(patched)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]}
        })
    }

    #[test]
    fn json_patch_replaces_adds_and_removes() {
        let body = br#"[
            {"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"},
            {"op": "add", "path": "/metadata/labels/tier", "value": "front"},
            {"op": "remove", "path": "/metadata/labels/app"}
        ]"#;
        let patched = json_patch(&pod(), body).unwrap();
        assert_eq!(patched["spec"]["containers"][0]["image"], "nginx:2");
        assert_eq!(patched["metadata"]["labels"], json!({"tier": "front"}));
    }

    #[test]
    fn json_patch_passing_test_applies_following_operations() {
        let body = br#"[
            {"op": "test", "path": "/metadata/labels/app", "value": "web"},
            {"op": "add", "path": "/spec/containers/-", "value": {"name": "sidecar"}}
        ]"#;
        let patched = json_patch(&pod(), body).unwrap();
        assert_eq!(patched["spec"]["containers"][1]["name"], "sidecar");
    }

    #[test]
    fn json_patch_test_failure_is_an_error() {
        let body = br#"[
            {"op": "test", "path": "/metadata/labels/app", "value": "db"},
            {"op": "remove", "path": "/metadata/labels"}
        ]"#;
        let err = json_patch(&pod(), body).unwrap_err();
        assert!(matches!(err, PatchError::JsonPatch(_)));
        assert_eq!(
            err.to_string(),
            "operation '/0' failed at path '/metadata/labels/app': value did not match"
        );
    }

    #[test]
    fn json_patch_on_missing_path_is_an_error() {
        let body = br#"[{"op": "remove", "path": "/spec/nothing"}]"#;
        let err = json_patch(&pod(), body).unwrap_err();
        assert!(matches!(err, PatchError::JsonPatch(_)));
    }

    #[test]
    fn malformed_json_patch_body_is_a_decode_error() {
        let err = json_patch(&pod(), br#"{"op": "add"}"#).unwrap_err();
        assert!(matches!(err, PatchError::Decode(_)));
        assert!(err.to_string().starts_with("error decoding patch: "), "{err}");

        let err = json_patch(&pod(), b"not json").unwrap_err();
        assert!(err.to_string().starts_with("error decoding patch: "), "{err}");
    }
}
