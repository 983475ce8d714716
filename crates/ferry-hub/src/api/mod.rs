//! The REST front door: parse the path, authenticate, resolve the workspace,
//! apply impersonation, authorize, then serve discovery, OpenAPI or a resource.

mod body;
mod kinds;
pub(crate) mod negotiate;
pub(crate) mod objects;
mod offload;
pub mod path;
pub(crate) mod query;
mod special;
mod watch;
pub(crate) mod write;

pub use write::CLUSTER_ANNOTATION;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::Router;
use http::StatusCode;
use serde_json::Value;

use crate::auth::authorize as authz;
use crate::auth::impersonation;
use crate::auth::{PeerCertificate, UserInfo};
use crate::discovery;
use crate::hub::Hub;
use crate::openapi;
use crate::openapi::cache::Document;
use crate::status::ApiError;
use crate::workspace::LogicalCluster;
use body::{json_value, MAX_BODY};
use path::Target;

/// The hub's HTTP API as an axum router.
pub fn router(hub: Arc<Hub>) -> Router {
    Router::new().fallback(handle).with_state(hub)
}

async fn handle(State(hub): State<Arc<Hub>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    match serve(hub, req).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(%method, %path, code = e.code, "{}", e.message);
            e.into_response()
        }
    }
}

/// Who is calling: a verified client certificate (put into the request's
/// extensions by the TLS accept loop) or a bearer token. See `auth`.
fn authenticate(hub: &Hub, parts: &http::request::Parts) -> Result<UserInfo, ApiError> {
    let peer = parts.extensions.get::<PeerCertificate>();
    Ok(hub.security.authenticate(hub, &parts.headers, peer)?)
}

/// Who the request runs as: the caller, or whom its `Impersonate-*` headers
/// name once the caller may impersonate them in `cluster` (see
/// `auth::impersonation`). The headers are dropped afterwards.
fn act_as(
    hub: &Hub,
    caller: UserInfo,
    parts: &mut http::request::Parts,
    cluster: Option<&LogicalCluster>,
) -> Result<UserInfo, ApiError> {
    let user = impersonation::impersonate(hub, caller, &parts.headers, cluster)?;
    impersonation::remove_headers(&mut parts.headers);
    Ok(user)
}

/// RBAC (and workspace binding) for the request; 403 naming user, verb,
/// resource, namespace and workspace when denied.
fn authorize(
    hub: &Hub,
    user: &UserInfo,
    parts: &http::request::Parts,
    resource: Option<&path::ResourcePath>,
    cluster: Option<&LogicalCluster>,
) -> Result<(), ApiError> {
    let attrs = authz::Attributes {
        request: authz::request_of(&parts.method, parts.uri.path(), parts.uri.query(), resource),
        workspace: cluster.cloned(),
    };
    match authz::authorize(hub, user, &attrs) {
        authz::Decision::Allow(_) => Ok(()),
        authz::Decision::Deny(reason) => Err(authz::forbidden(user, &attrs, &reason)),
    }
}

fn default_manager(headers: &http::HeaderMap) -> String {
    headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|ua| ua.split('/').next().unwrap_or(ua).to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

async fn serve(hub: Arc<Hub>, req: Request) -> Result<Response, ApiError> {
    let (mut parts, body) = req.into_parts();
    let parsed = match path::parse(parts.uri.path()) {
        Ok(p) => p,
        Err(not_found) => {
            // As in kube-apiserver, authentication, impersonation and
            // authorization come before routing: an unknown path is a
            // non-resource URL.
            let caller = authenticate(&hub, &parts)?;
            let (raw, _) = authz::split_workspace(parts.uri.path());
            let cluster = hub.resolve_cluster(raw).filter(|_| raw != Some("*"));
            let user = act_as(&hub, caller, &mut parts, cluster.as_ref())?;
            if let Some(lc) = &cluster {
                authorize(&hub, &user, &parts, None, Some(lc))?;
            } else if !user.is_superuser() {
                authorize(&hub, &user, &parts, None, None)?;
            }
            return Err(not_found);
        }
    };
    if let Target::Health(_) = parsed.target {
        return Ok((StatusCode::OK, "ok").into_response());
    }
    let caller = authenticate(&hub, &parts)?;
    let cluster = match parsed.cluster.as_deref() {
        Some("*") => None,
        raw => Some(hub.resolve_cluster(raw).ok_or_else(|| {
            ApiError::not_found_message(format!(
                "workspace {:?} not found: create it with a tenancy.kcp.io/v1alpha1 Workspace in its parent",
                raw.unwrap_or("root")
            ))
        })?),
    };
    let user = act_as(&hub, caller, &mut parts, cluster.as_ref())?;
    let resource = match &parsed.target {
        Target::Resource(rp) => Some(rp),
        _ => None,
    };
    authorize(&hub, &user, &parts, resource, cluster.as_ref())?;
    let resources = hub.registry.resources(cluster.as_ref().map(|c| c.name.as_str()));
    let accept = parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let aggregated = discovery::negotiate_aggregated(accept);
    let ok = |v: Value| Ok(json_value(StatusCode::OK, &v));
    match parsed.target {
        Target::Health(_) => unreachable!("answered above"),
        Target::Version => ok(discovery::version()),
        Target::CoreVersions => match aggregated {
            Some(v) => Ok(aggregated_response(
                discovery::aggregated_discovery_as(&resources, true, v),
                v,
            )),
            None => ok(discovery::core_versions()),
        },
        Target::Groups => match aggregated {
            Some(v) => Ok(aggregated_response(
                discovery::aggregated_discovery_as(&resources, false, v),
                v,
            )),
            None => ok(discovery::api_group_list(&resources)),
        },
        Target::Group(g) => discovery::api_group(&resources, &g)
            .map(|v| json_value(StatusCode::OK, &v))
            .ok_or_else(|| {
                ApiError::not_found_message(format!(
                    "the server could not find the requested resource: API group {g:?} is not served"
                ))
            }),
        Target::GroupVersion { group, version } => discovery::api_resource_list(&resources, &group, &version)
            .map(|v| json_value(StatusCode::OK, &v))
            .ok_or_else(|| {
                ApiError::not_found_message(format!(
                    "the server could not find the requested resource: {group}/{version} is not served"
                ))
            }),
        // kubectl asks for v2 as protobuf (see `openapi`'s module docs).
        Target::OpenApiV2 if openapi::accepts_v2_protobuf(accept) => {
            openapi_document(&hub, cluster.as_ref(), Document::V2Protobuf, openapi::V2_PROTOBUF).await
        }
        Target::OpenApiV2 if !accept.is_empty() && !accept.contains("json") && !accept.contains("*/*") => {
            Err(ApiError::not_acceptable(format!(
                "/openapi/v2 is served as application/json or {}",
                openapi::V2_PROTOBUF
            )))
        }
        Target::OpenApiV2 => openapi_document(&hub, cluster.as_ref(), Document::V2Json, JSON).await,
        Target::OpenApiV3Root => openapi_document(&hub, cluster.as_ref(), Document::V3Root, JSON).await,
        Target::OpenApiV3 { group, version } => {
            let not_found = ApiError::not_found_message(format!("no OpenAPI document for {group}/{version}"));
            openapi_document(&hub, cluster.as_ref(), Document::V3 { group, version }, JSON)
                .await
                .map_err(|e| if e.code == 404 { not_found } else { e })
        }
        Target::Resource(rp) => {
            let info = hub
                .registry
                .lookup(cluster.as_ref().map(|c| c.name.as_str()), &rp.group, &rp.version, &rp.resource)
                .ok_or_else(|| {
                    let gv = if rp.group.is_empty() { rp.version.clone() } else { format!("{}/{}", rp.group, rp.version) };
                    ApiError::not_found_message(format!(
                        "the server could not find the requested resource: {} is not served at {gv} in workspace {}",
                        rp.resource,
                        cluster.as_ref().map(|c| c.path.as_str()).unwrap_or("*")
                    ))
                })?;
            if rp.namespace.is_some() && !info.namespaced {
                return Err(ApiError::not_found_message(format!(
                    "{} is cluster-scoped: drop /namespaces/<namespace> from the path",
                    info.resource
                )));
            }
            if rp.name.is_some() && rp.namespace.is_none() && info.namespaced {
                return Err(ApiError::not_found_message(format!(
                    "{} is namespaced: address it as .../namespaces/<namespace>/{}/<name>",
                    info.resource, info.resource
                )));
            }
            let query = query::Query::parse(parts.uri.query())?;
            let body = read_body(body).await?;
            if special::is_review(&info) {
                return special::review(
                    &hub,
                    cluster.as_ref(),
                    &info,
                    rp.namespace.as_deref(),
                    &parts.method,
                    &parts.headers,
                    &user,
                    &body,
                );
            }
            if info.group == "certificates.k8s.io"
                && rp.subresource.as_deref() == Some("approval")
                && matches!(parts.method.as_str(), "PUT" | "PATCH")
            {
                if let (Some(lc), Some(name)) = (&cluster, &rp.name) {
                    special::check_csr_approval(&hub, lc, &user, name)?;
                }
            }
            let verb = authz::resource_verb(&parts.method, rp.name.is_some(), query.watch);
            let scope = objects::Scope {
                hub: hub.clone(),
                cluster,
                info,
                namespace: rp.namespace,
                name: rp.name,
                subresource: rp.subresource,
                query,
                format: negotiate::object_format(&parts.headers),
                default_manager: default_manager(&parts.headers),
                headers: parts.headers,
                user,
                verb,
            };
            let method = parts.method;
            if offload::computes(&method, scope.name.is_some(), scope.query.watch) {
                offload::run(async move { objects::serve(scope, &method, body).await }).await
            } else {
                objects::serve(scope, &method, body).await
            }
        }
    }
}

const JSON: &str = "application/json";

/// An OpenAPI document from the hub's cache (built there when missing).
async fn openapi_document(
    hub: &Hub,
    cluster: Option<&LogicalCluster>,
    document: Document,
    content_type: &'static str,
) -> Result<Response, ApiError> {
    let cluster = cluster.map(|c| c.name.as_str());
    match hub.openapi.get(&hub.registry, cluster, document).await {
        Ok(Some(body)) => Ok(([(http::header::CONTENT_TYPE, content_type)], body).into_response()),
        Ok(None) => Err(ApiError::not_found_message("no such OpenAPI document")),
        Err(e) => Err(ApiError::internal(format!(
            "building the OpenAPI document failed: {e}"
        ))),
    }
}

fn aggregated_response(v: Value, version: discovery::AggregatedVersion) -> Response {
    let mut r = json_value(StatusCode::OK, &v);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(version.content_type()),
    );
    r
}

async fn read_body(body: Body) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|e| {
        let msg = e.to_string();
        if msg.contains("length limit") {
            ApiError::too_large("the request body is larger than 3 MiB (kube-apiserver's limit)")
        } else {
            ApiError::bad_request(format!("reading the request body failed: {msg}"))
        }
    })
}

/// A request scope for the hub's own writes (controllers): the loopback
/// user, `manager` as field manager, JSON bodies (JSON merge patches for
/// `patch`).
fn internal_scope(
    hub: &Arc<Hub>,
    cluster: &str,
    info: crate::registry::ResourceInfo,
    namespace: Option<&str>,
    name: Option<&str>,
    verb: &str,
    manager: &str,
) -> Result<objects::Scope, ApiError> {
    let content_type = if verb == "patch" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let lc = hub
        .workspaces
        .by_name(cluster)
        .ok_or_else(|| ApiError::not_found_message(format!("workspace {cluster} not found")))?;
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    Ok(objects::Scope {
        hub: hub.clone(),
        cluster: Some(lc),
        info,
        namespace: namespace.map(String::from),
        name: name.map(String::from),
        subresource: None,
        query: query::Query::default(),
        format: negotiate::Format::Object,
        default_manager: manager.into(),
        headers,
        user: UserInfo::loopback(),
        verb: verb.into(),
    })
}

/// Create an object from inside the hub (controllers), with the same defaults
/// and validation as a client's create. AlreadyExists is returned as an error.
pub(crate) async fn create_internal(
    hub: &Arc<Hub>,
    cluster: &str,
    group: &str,
    version: &str,
    resource: &str,
    namespace: Option<&str>,
    value: Value,
) -> Result<Value, ApiError> {
    let info = hub
        .registry
        .lookup(Some(cluster), group, version, resource)
        .ok_or_else(|| ApiError::not_found_message(format!("{resource} is not served")))?;
    let scope = internal_scope(hub, cluster, info, namespace, None, "create", "ferry-hub")?;
    let body = bytes::Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
    let resp = objects::create(&scope, body).await?;
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::internal(e.to_string()))
}

/// The internal scope addressing the object at `key`, for `verb`.
fn key_scope(
    hub: &Arc<Hub>,
    info: crate::registry::ResourceInfo,
    key: &crate::storage::ObjectKey,
    verb: &str,
    manager: &str,
) -> Result<objects::Scope, ApiError> {
    let namespace = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
    internal_scope(hub, &key.cluster, info, namespace, Some(&key.name), verb, manager)
}

/// Delete the object at `key` (served as `info`) from inside the hub, as a
/// client's DELETE with the DeleteOptions `options` would: preconditions,
/// finalizers, propagation, namespace termination and after-write hooks alike.
pub(crate) async fn delete_internal(
    hub: &Arc<Hub>,
    info: crate::registry::ResourceInfo,
    key: &crate::storage::ObjectKey,
    options: &Value,
    manager: &str,
) -> Result<(), ApiError> {
    let scope = key_scope(hub, info, key, "delete", manager)?;
    let body = bytes::Bytes::from(serde_json::to_vec(options).unwrap_or_default());
    objects::delete(&scope, body).await.map(|_| ())
}

/// Apply a JSON merge patch to the object at `key` from inside the hub, as a
/// client's PATCH would (removing the last finalizer of an object being
/// deleted deletes it).
pub(crate) async fn merge_patch_internal(
    hub: &Arc<Hub>,
    info: crate::registry::ResourceInfo,
    key: &crate::storage::ObjectKey,
    patch: &Value,
    manager: &str,
) -> Result<(), ApiError> {
    let scope = key_scope(hub, info, key, "patch", manager)?;
    let body = bytes::Bytes::from(serde_json::to_vec(patch).unwrap_or_default());
    objects::patch(&scope, body).await.map(|_| ())
}
