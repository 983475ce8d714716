//! Request bodies and response encoding.

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use serde_json::Value;

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
    crate::decode::object_from_bytes(body, content_type.contains("yaml"))
}

pub fn json_response(code: StatusCode, body: Vec<u8>) -> Response {
    (code, [(http::header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub fn json_value(code: StatusCode, value: &Value) -> Response {
    json_response(code, serde_json::to_vec(value).unwrap_or_default())
}
