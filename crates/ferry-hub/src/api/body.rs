//! Request bodies and response encoding.

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::Value;

use crate::registry::ResourceInfo;
use crate::status::ApiError;

/// Largest request body the hub accepts (kube-apiserver's limit is 3 MiB).
pub const MAX_BODY: usize = 3 * 1024 * 1024;

pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|s| s.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Parse a JSON or YAML body into an object.
pub fn parse_object(body: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type == crate::protobuf::CONTENT_TYPE {
        // kubectl's typed commands (create configmap, create token, auth can-i, ...).
        use crate::protobuf::ProtobufError;
        return crate::protobuf::decode(body).map_err(|e| match e {
            ProtobufError::UnsupportedKind { .. } | ProtobufError::UnsupportedPayload { .. } => {
                ApiError::unsupported_media_type(e.to_string())
            }
            other => ApiError::bad_request(other.to_string()),
        });
    }
    if content_type.contains("cbor") {
        // client-go falls back to JSON after a 415 for CBOR.
        return Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unsupported format ({content_type}); send application/json or application/yaml"
        )));
    }
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::bad_request(
            "the request body is empty; send the object as JSON or YAML",
        ));
    }
    let value: Value = if content_type.contains("yaml") {
        let text = std::str::from_utf8(body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not UTF-8: {e}")))?;
        serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON: {e}")))?
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON or YAML object",
        ));
    }
    Ok(value)
}

/// Check (and fill in, when absent) `apiVersion` and `kind` against the URL.
pub fn check_type(
    obj: &mut Value,
    info: &ResourceInfo,
    kind: &str,
    api_version: &str,
) -> Result<(), ApiError> {
    let map = obj.as_object_mut().expect("checked by parse_object");
    match map.get("apiVersion").and_then(Value::as_str) {
        None => {
            map.insert("apiVersion".into(), Value::String(api_version.into()));
        }
        Some(v) if v == api_version => {}
        Some(v) => {
            // Any served version of the same group is accepted; stored as requested.
            let group_of = |av: &str| {
                av.rsplit_once('/')
                    .map(|(g, _)| g.to_string())
                    .unwrap_or_default()
            };
            if group_of(v) != info.group {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({v}) does not match the expected API version ({api_version})"
                )));
            }
            map.insert("apiVersion".into(), Value::String(api_version.into()));
        }
    }
    match map.get("kind").and_then(Value::as_str) {
        None => {
            map.insert("kind".into(), Value::String(kind.into()));
        }
        Some(k) if k == kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({kind}) for {}",
                info.resource
            )))
        }
    }
    if !map.get("metadata").is_none_or(Value::is_object) {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    if map.get("metadata").is_none() {
        map.insert("metadata".into(), Value::Object(Default::default()));
    }
    Ok(())
}

pub fn json_response(code: StatusCode, body: Vec<u8>) -> Response {
    (code, [(http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub fn json_value(code: StatusCode, value: &Value) -> Response {
    json_response(code, serde_json::to_vec(value).unwrap_or_default())
}
