//! RFC 6902 JSON patch.

use serde_json::Value;

use super::PatchError;

/// Applies an RFC 6902 JSON patch (`application/json-patch+json`) to `doc`
/// and returns the patched document.
///
/// All operations are supported, including `test`; the patch is applied
/// atomically, so a failing operation leaves nothing half-applied.
///
/// The work is bounded as in kube-apiserver: at most
/// [`MAX_JSON_PATCH_OPERATIONS`] operations, and `copy` operations may
/// duplicate at most [`MAX_JSON_PATCH_COPY_BYTES`] in all (each copy could
/// otherwise double the document).
pub fn json_patch(doc: &Value, patch_body: &[u8]) -> Result<Value, PatchError> {
    let patch: json_patch::Patch = serde_json::from_slice(patch_body).map_err(PatchError::Decode)?;
    if patch.0.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            patch.0.len()
        )));
    }
    // Applied to a copy one operation at a time (nothing half-applied is
    // ever returned), measuring what each copy duplicates first.
    let mut patched = doc.clone();
    let mut copied = 0usize;
    for (i, op) in patch.0.iter().enumerate() {
        if let json_patch::PatchOperation::Copy(copy) = op {
            if let Some(from) = patched.pointer(copy.from.as_str()) {
                copied += serde_json::to_vec(from).map(|b| b.len()).unwrap_or(0);
                if copied > MAX_JSON_PATCH_COPY_BYTES {
                    return Err(PatchError::TooLarge(format!(
                        "operation '/{i}' (copy from {:?}) would make the patch copy more than \
                         {MAX_JSON_PATCH_COPY_BYTES} bytes in all; send the values instead of copying them",
                        copy.from.as_str()
                    )));
                }
            }
        }
        // kube-apiserver's JSON patch (evanphx/json-patch v4) replaces a
        // missing member of an existing object as if it were there: kcp's
        // syncer heartbeat relies on it (`replace
        // /status/lastSyncerHeartbeatTime` before the first one is set).
        let as_add;
        let op = match op {
            json_patch::PatchOperation::Replace(r) if missing_member(&patched, r.path.as_str()) => {
                as_add = json_patch::PatchOperation::Add(json_patch::AddOperation {
                    path: r.path.clone(),
                    value: r.value.clone(),
                });
                &as_add
            }
            _ => op,
        };
        json_patch::patch_unsafe(&mut patched, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            e
        })?;
    }
    Ok(patched)
}

/// Whether `pointer` names a member absent from an object that exists.
fn missing_member(doc: &Value, pointer: &str) -> bool {
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return false;
    };
    let key = key.replace("~1", "/").replace("~0", "~");
    doc.pointer(parent)
        .and_then(Value::as_object)
        .is_some_and(|m| !m.contains_key(&key))
}

/// kube-apiserver's cap on the operations of one JSON patch.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
/// kube-apiserver's cap on what the `copy` operations of one JSON patch may
/// duplicate (`--json-patch-max-copy-bytes`, the request body limit).
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

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
    fn replacing_a_missing_member_of_an_object_adds_it_as_kube_apiserver_does() {
        let doc = json!({"metadata": {"uid": "u1"}, "status": {}});
        let patch = br#"[{"op": "test", "path": "/metadata/uid", "value": "u1"},
                         {"op": "replace", "path": "/status/lastSyncerHeartbeatTime", "value": "2026-01-01T00:00:00Z"}]"#;
        let out = json_patch(&doc, patch).unwrap();
        assert_eq!(out["status"]["lastSyncerHeartbeatTime"], "2026-01-01T00:00:00Z");
        // A missing parent, or an index past a list's end, still fails.
        assert!(json_patch(
            &json!({}),
            br#"[{"op": "replace", "path": "/status/x", "value": 1}]"#
        )
        .is_err());
        assert!(json_patch(
            &json!({"l": []}),
            br#"[{"op": "replace", "path": "/l/0", "value": 1}]"#
        )
        .is_err());
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
    fn json_patch_work_is_bounded() {
        let ops: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
            .map(|_| json!({"op": "test", "path": "/kind", "value": "Pod"}))
            .collect();
        let err = json_patch(&pod(), &serde_json::to_vec(&ops).unwrap()).unwrap_err();
        assert!(matches!(err, PatchError::TooLarge(_)), "{err}");
        assert!(err
            .to_string()
            .contains("maximum operations in a JSON patch is 10000, got 10001"));

        // Each copy doubles /a: 30 of them would make 2^30 copies of it.
        let doc = json!({"a": ["x".repeat(1000)]});
        let ops: Vec<Value> = (0..30)
            .flat_map(|_| {
                [
                    json!({"op": "copy", "from": "/a", "path": "/b"}),
                    json!({"op": "add", "path": "/a/-", "value": null}),
                    json!({"op": "copy", "from": "/a", "path": "/a/-"}),
                ]
            })
            .collect();
        let err = json_patch(&doc, &serde_json::to_vec(&ops).unwrap()).unwrap_err();
        assert!(matches!(err, PatchError::TooLarge(_)), "{err}");
    }

    #[test]
    fn failing_operation_is_named_by_its_index_in_the_patch() {
        let body = br#"[
            {"op": "add", "path": "/metadata/labels/tier", "value": "front"},
            {"op": "remove", "path": "/spec/nothing"}
        ]"#;
        let err = json_patch(&pod(), body).unwrap_err();
        assert!(err.to_string().starts_with("operation '/1' failed"), "{err}");
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
