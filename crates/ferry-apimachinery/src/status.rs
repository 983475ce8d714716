//! The one place that builds `meta.k8s.io/v1 Status` error bodies.

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde_json::{json, Value};

/// One cause of an `Invalid` (422) error: which field, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Kubernetes cause reason, e.g. `FieldValueInvalid`, `FieldValueRequired`.
    pub reason: String,
    /// Field path, e.g. `metadata.name` or `spec.replicas`.
    pub field: String,
    pub message: String,
}

impl Cause {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause {
            reason: "FieldValueInvalid".into(),
            field: field.into(),
            message: message.into(),
        }
    }
    pub fn required(field: impl Into<String>) -> Self {
        Cause {
            reason: "FieldValueRequired".into(),
            field: field.into(),
            message: "Required value".into(),
        }
    }
    pub fn unsupported(field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause {
            reason: "FieldValueNotSupported".into(),
            field: field.into(),
            message: message.into(),
        }
    }
    pub fn type_invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause {
            reason: "FieldValueTypeInvalid".into(),
            field: field.into(),
            message: message.into(),
        }
    }
    pub fn forbidden(field: impl Into<String>, message: impl Into<String>) -> Self {
        Cause {
            reason: "FieldValueForbidden".into(),
            field: field.into(),
            message: message.into(),
        }
    }
    /// kube's `field.TooLong`: a string over `max` bytes.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        Cause {
            reason: "FieldValueTooLong".into(),
            field: field.into(),
            message: format!("Too long: may not be more than {max} bytes"),
        }
    }
    /// kube's `field.TooMany`: a list (or map) of `actual` items, over `max`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        Cause {
            reason: "FieldValueTooMany".into(),
            field: field.into(),
            message: format!("Too many: {actual}: must have at most {max} items"),
        }
    }
    /// `field: message`, the way kube-apiserver joins causes into the Status message.
    pub fn describe(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// An API error as the client will see it: HTTP code, reason, message, details.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Box<Value>>,
    /// Seconds for a `Retry-After` header (429).
    pub retry_after: Option<u32>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `group/resource` or `resource` for core, as kube-apiserver prints it in messages.
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

fn details(group: &str, resource: &str, name: &str) -> Value {
    let mut d = json!({ "name": name, "kind": resource });
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(401, "Unauthorized", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }
    /// 404 for an object: `deployments.apps "web" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let mut e = Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        );
        e.details = Some(Box::new(details(group, resource, name)));
        e
    }
    /// 404 for a path the hub does not serve (unknown resource, workspace, ...).
    pub fn not_found_message(message: impl Into<String>) -> Self {
        Self::new(404, "NotFound", message)
    }
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }
    /// 405 as kube-apiserver words it for a verb a resource or subresource
    /// does not serve (e.g. GET of `serviceaccounts/token`).
    pub fn verb_not_served() -> Self {
        Self::method_not_allowed("the server does not allow this method on the requested resource")
    }
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let mut e = Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        );
        e.details = Some(Box::new(details(group, resource, name)));
        e
    }
    /// 409 on a stale resourceVersion, worded as kube-apiserver words it.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let mut e = Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(group, resource)
            ),
        );
        e.details = Some(Box::new(details(group, resource, name)));
        e
    }
    /// 409 from server-side apply field-ownership conflicts.
    pub fn apply_conflict(
        group: &str,
        resource: &str,
        name: &str,
        message: String,
        causes: &[Cause],
    ) -> Self {
        let mut e = Self::new(409, "Conflict", message);
        let mut d = details(group, resource, name);
        d["causes"] = causes_json(causes);
        e.details = Some(Box::new(d));
        e
    }
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }
    /// 422 with causes: `Deployment.apps "web" is invalid: spec.replicas: ...`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let joined = match causes.len() {
            0 => String::new(),
            1 => causes[0].describe(),
            _ => format!(
                "[{}]",
                causes.iter().map(Cause::describe).collect::<Vec<_>>().join(", ")
            ),
        };
        let mut e = Self::new(
            422,
            "Invalid",
            format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
        );
        let mut d = json!({ "name": name, "kind": kind, "causes": causes_json(&causes) });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        e.details = Some(Box::new(d));
        e
    }
    /// 422 for a patch that cannot be applied (e.g. a failed JSON-patch `test`).
    pub fn unprocessable_patch(message: String) -> Self {
        Self::new(422, "Invalid", message)
    }
    pub fn too_many_requests(message: impl Into<String>, retry_after: u32) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.retry_after = Some(retry_after);
        e.details = Some(Box::new(json!({ "retryAfterSeconds": retry_after })));
        e
    }
    /// 504 for a read at a resourceVersion the hub has not reached after a
    /// short wait (kube-apiserver's `NewTooLargeResourceVersionError`).
    pub fn resource_version_too_large(asked: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {asked}, current: {current}"),
        );
        e.retry_after = Some(1);
        e.details = Some(Box::new(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        })));
        e
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }
    pub fn service_unavailable(message: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", message)
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = (**d).clone();
        }
        s
    }
}

fn causes_json(causes: &[Cause]) -> Value {
    Value::Array(
        causes
            .iter()
            .map(|c| json!({ "reason": c.reason, "message": c.message, "field": c.field }))
            .collect(),
    )
}

/// A `Status` reporting success, as returned by some deletes.
pub fn success_status(details: Option<Value>) -> Value {
    let mut s = json!({ "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success" });
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        let mut resp = (code, [(http::header::CONTENT_TYPE, "application/json")], body).into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(secs));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_the_resource_and_object() {
        let s = ApiError::not_found("apps", "deployments", "web").to_status();
        assert_eq!(s["message"], "deployments.apps \"web\" not found");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"]["group"], "apps");
    }

    #[test]
    fn invalid_joins_causes_with_field_paths() {
        let e = ApiError::invalid(
            "",
            "ConfigMap",
            "Bad_Name",
            vec![Cause::invalid(
                "metadata.name",
                "a lowercase RFC 1123 subdomain must consist of ...",
            )],
        );
        assert_eq!(e.code, 422);
        assert!(e
            .message
            .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: "));
        assert_eq!(e.to_status()["details"]["causes"][0]["field"], "metadata.name");
    }
}
