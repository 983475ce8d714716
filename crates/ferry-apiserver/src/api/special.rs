//! Create-like subresources (`POST .../<name>/<subresource>`; the service
//! does the work) and the
//! create-only review resources: TokenRequest (`serviceaccounts/<name>/token`),
//! TokenReview, SelfSubjectReview, SelfSubjectAccessReview,
//! SelfSubjectRulesReview, SubjectAccessReview and LocalSubjectAccessReview.
//! None of them is stored; each answers with the request plus a status.

use std::sync::Arc;

use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Value};

use super::body::{content_type, json_value, parse_object};
use super::objects::{unknown_subresource, Scope};
use crate::auth::authorize::{self, Attributes};
use crate::auth::rbac::{PolicyRule, Request};
use crate::auth::service_account::API_AUDIENCE;
use crate::auth::UserInfo;
use crate::hub::Hub;
use crate::json;
use crate::registry::ResourceInfo;
use crate::status::{ApiError, Cause};
use crate::workspace::LogicalCluster;

pub async fn create_subresource(s: &Scope, sub: &str, body: Bytes) -> Result<Response, ApiError> {
    match (s.info.group.as_str(), s.info.resource.as_str(), sub) {
        ("", "serviceaccounts", "token") => {
            let request = body_or_empty(&body, &s.headers)?;
            let issued = crate::service::token::token_request(s, &request)?;
            Ok(json_value(StatusCode::CREATED, &issued))
        }
        _ => Err(unknown_subresource(s, sub)),
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn string_list(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn body_or_empty(body: &Bytes, headers: &http::HeaderMap) -> Result<Value, ApiError> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(json!({}));
    }
    parse_object(body, &content_type(headers))
}

/// Whether `info` is one of the create-only review resources.
pub fn is_review(info: &ResourceInfo) -> bool {
    matches!(
        (info.group.as_str(), info.resource.as_str()),
        ("authentication.k8s.io", "tokenreviews" | "selfsubjectreviews")
            | (
                "authorization.k8s.io",
                "selfsubjectaccessreviews"
                    | "selfsubjectrulesreviews"
                    | "subjectaccessreviews"
                    | "localsubjectaccessreviews"
            )
    )
}

/// Serve a review resource (only `create` exists).
#[allow(clippy::too_many_arguments)]
pub fn review(
    hub: &Arc<Hub>,
    cluster: Option<&LogicalCluster>,
    info: &ResourceInfo,
    namespace: Option<&str>,
    method: &http::Method,
    headers: &http::HeaderMap,
    user: &UserInfo,
    body: &Bytes,
) -> Result<Response, ApiError> {
    if method != http::Method::POST {
        return Err(ApiError::method_not_allowed(format!(
            "{} only supports create (POST)",
            info.resource
        )));
    }
    let cluster = cluster.ok_or_else(|| {
        ApiError::method_not_allowed(format!(
            "{} cannot be created at /clusters/*; name one workspace",
            info.resource
        ))
    })?;
    let mut obj = body_or_empty(body, headers)?;
    crate::decode::check_metadata(&obj, &info.kind, &info.version)?;
    json::object_mut(&mut obj, &["metadata"])?;
    json::set(&mut obj, &["apiVersion"], json!(info.api_version()))?;
    json::set(&mut obj, &["kind"], json!(info.kind))?;
    let status = match info.resource.as_str() {
        "tokenreviews" => token_review(hub, cluster, &obj),
        "selfsubjectreviews" => json!({"userInfo": user.to_json()}),
        "selfsubjectaccessreviews" => access_review(hub, cluster, info, user, &mut obj, None)?,
        "subjectaccessreviews" => {
            let subject = subject_of(&obj);
            access_review(hub, cluster, info, &subject, &mut obj, None)?
        }
        "localsubjectaccessreviews" => {
            let subject = subject_of(&obj);
            access_review(hub, cluster, info, &subject, &mut obj, namespace)?
        }
        "selfsubjectrulesreviews" => rules_review(hub, cluster, user, &obj),
        _ => {
            return Err(ApiError::not_found_message(format!(
                "{} is not served",
                info.resource
            )))
        }
    };
    json::set(&mut obj, &["status"], status)?;
    Ok(json_value(StatusCode::CREATED, &obj))
}

/// TokenReview: who a token belongs to. Tokens bound to another workspace
/// are reported as not authenticated, so a credential never vouches for
/// anyone outside its workspace.
fn token_review(hub: &Arc<Hub>, cluster: &LogicalCluster, obj: &Value) -> Value {
    let token = str_at(obj, "/spec/token");
    let requested = string_list(obj, "/spec/audiences");
    let wanted = if requested.is_empty() {
        vec![API_AUDIENCE.to_string()]
    } else {
        requested
    };
    let refused = |error: String| json!({"authenticated": false, "user": {}, "error": error});
    if token.is_empty() {
        return refused("spec.token is empty".into());
    }
    match hub.security.authenticate_token(hub, token, Some(&wanted)) {
        Ok(user) => match &user.cluster {
            Some(home) if *home != cluster.name => {
                refused("the token belongs to a ServiceAccount of another workspace".into())
            }
            _ => json!({"authenticated": true, "user": user.to_json(), "audiences": wanted}),
        },
        Err(e) => refused(e.to_string().trim_start_matches("Unauthorized: ").to_string()),
    }
}

/// The user a (Local)SubjectAccessReview asks about, exactly as given.
fn subject_of(obj: &Value) -> UserInfo {
    let extra = obj
        .pointer("/spec/extra")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let vals = v
                        .as_array()
                        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
                        .unwrap_or_default();
                    (k.clone(), vals)
                })
                .collect()
        })
        .unwrap_or_default();
    UserInfo {
        name: str_at(obj, "/spec/user").to_string(),
        uid: str_at(obj, "/spec/uid").to_string(),
        groups: string_list(obj, "/spec/groups"),
        extra,
        cluster: None,
    }
}

fn access_review(
    hub: &Arc<Hub>,
    cluster: &LogicalCluster,
    info: &ResourceInfo,
    user: &UserInfo,
    obj: &mut Value,
    local_namespace: Option<&str>,
) -> Result<Value, ApiError> {
    let invalid = |field: &str, message: &str| {
        ApiError::invalid(
            &info.group,
            &info.kind,
            "",
            vec![Cause::invalid(field, message.to_string())],
        )
    };
    if let Some(ns) = local_namespace {
        match obj
            .pointer("/spec/resourceAttributes/namespace")
            .and_then(Value::as_str)
        {
            None | Some("") if obj.pointer("/spec/resourceAttributes").is_some() => {
                json::set(obj, &["spec", "resourceAttributes", "namespace"], json!(ns))?;
            }
            Some(other) if other != ns => {
                return Err(invalid(
                    "spec.resourceAttributes.namespace",
                    "must match metadata.namespace",
                ))
            }
            _ => {}
        }
        json::set(obj, &["metadata", "namespace"], json!(ns))?;
    }
    let resource = obj.pointer("/spec/resourceAttributes").filter(|v| v.is_object());
    let non_resource = obj
        .pointer("/spec/nonResourceAttributes")
        .filter(|v| v.is_object());
    let request = match (resource, non_resource) {
        (Some(r), None) => Request::Resource {
            verb: str_at(r, "/verb").to_string(),
            group: str_at(r, "/group").to_string(),
            resource: str_at(r, "/resource").to_string(),
            subresource: str_at(r, "/subresource").to_string(),
            namespace: str_at(r, "/namespace").to_string(),
            name: str_at(r, "/name").to_string(),
        },
        (None, Some(n)) => Request::NonResource {
            verb: str_at(n, "/verb").to_string(),
            path: str_at(n, "/path").to_string(),
        },
        _ => {
            return Err(invalid(
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ))
        }
    };
    if local_namespace.is_some() && non_resource.is_some() {
        return Err(invalid(
            "spec.nonResourceAttributes",
            "disallowed on this kind of request",
        ));
    }
    if user.name.is_empty() && user.groups.is_empty() {
        return Err(invalid(
            "spec.user",
            "at least one of user or group must be specified",
        ));
    }
    let attrs = Attributes {
        request,
        workspace: Some(cluster.clone()),
    };
    Ok(match authorize::authorize(hub, user, &attrs) {
        authorize::Decision::Allow(reason) => json!({"allowed": true, "reason": reason}),
        authorize::Decision::Deny(reason) if reason.is_empty() => json!({"allowed": false}),
        authorize::Decision::Deny(reason) => json!({"allowed": false, "reason": reason}),
    })
}

fn rules_json(rules: &[PolicyRule], non_resource: bool) -> Value {
    Value::Array(
        rules
            .iter()
            .map(|r| {
                if non_resource {
                    json!({"verbs": r.verbs, "nonResourceURLs": r.non_resource_urls})
                } else {
                    let mut v = serde_json::Map::new();
                    v.insert("verbs".into(), json!(r.verbs));
                    v.insert("apiGroups".into(), json!(r.api_groups));
                    v.insert("resources".into(), json!(r.resources));
                    if !r.resource_names.is_empty() {
                        v.insert("resourceNames".into(), json!(r.resource_names));
                    }
                    Value::Object(v)
                }
            })
            .collect(),
    )
}

/// SelfSubjectRulesReview: what the caller may do in `spec.namespace`.
fn rules_review(hub: &Arc<Hub>, cluster: &LogicalCluster, user: &UserInfo, obj: &Value) -> Value {
    if user.is_superuser() {
        return json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
    }
    let namespace = str_at(obj, "/spec/namespace");
    let rbac = hub.security.rbac.get(&hub.store, &cluster.name);
    let (resource, non_resource) = rbac.rules_for(user, namespace);
    json!({
        "resourceRules": rules_json(&resource, false),
        "nonResourceRules": rules_json(&non_resource, true),
        "incomplete": false,
    })
}
