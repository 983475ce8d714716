//! The REST front door: parse the path, authenticate, resolve the workspace,
//! apply impersonation, authorize, then serve discovery, OpenAPI or a resource.

pub mod body;
mod component_status;
pub mod metrics;
pub(crate) mod negotiate;
pub(crate) mod objects;
mod offload;
pub mod path;
pub(crate) mod query;
pub mod request_info;
mod special;
mod virtual_workspace;
mod watch;

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
use crate::service;
use crate::status::ApiError;
use crate::workspace::LogicalCluster;
use body::{json_value, MAX_BODY};
use path::Target;

/// The `tracing` target of the hub's request log: each request at debug
/// (method, path, status, duration), failed ones (400 and up) at info with the
/// answer's message. `ferry -v 2` shows the failures, `-v 3` every request.
pub const REQUEST_LOG: &str = "ferry_hub::requests";

/// The hub's HTTP API as an axum router, with its own [`metrics::HubMetrics`].
pub fn router(hub: Arc<Hub>) -> Router {
    router_with(hub, Arc::new(metrics::HubMetrics::new()))
}

/// The hub's HTTP API counting its requests in `metrics` (shared with what
/// answers before it: the in-flight cap's 429s).
pub fn router_with(hub: Arc<Hub>, metrics: Arc<metrics::HubMetrics>) -> Router {
    Router::new()
        .fallback(handle)
        .with_state(hub)
        .layer(axum::Extension(metrics))
}

async fn handle(
    State(hub): State<Arc<Hub>>,
    axum::Extension(metrics): axum::Extension<Arc<metrics::HubMetrics>>,
    req: Request,
) -> Response {
    let started = std::time::Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let shape = metrics::shape_of(&hub, &req);
    let in_flight = metrics.in_flight(&shape);
    let response = answer(hub, &method, &path, started, req).await;
    drop(in_flight);
    let code = response.status().as_u16();
    metrics.answered(shape, code, started.elapsed(), response)
}

/// Serves `req` and logs the answer.
async fn answer(
    hub: Arc<Hub>,
    method: &http::Method,
    path: &str,
    started: std::time::Instant,
    req: Request,
) -> Response {
    match catch_panic(method, path, serve(hub, req)).await {
        Ok(r) => {
            let code = r.status().as_u16();
            if code >= 400 {
                tracing::info!(target: REQUEST_LOG, %method, %path, code, took = ?started.elapsed(), "{method} {path} {code}");
            } else {
                tracing::debug!(target: REQUEST_LOG, %method, %path, code, took = ?started.elapsed(), "{method} {path} {code}");
            }
            r
        }
        Err(e) => {
            let code = e.code;
            tracing::info!(target: REQUEST_LOG, %method, %path, code, took = ?started.elapsed(), "{method} {path} {code}: {}", e.message);
            e.into_response()
        }
    }
}

/// The answer of `/<check>` (livez, readyz, healthz) from the results of its
/// checks, as kube-apiserver words it: `ok`, or with `?verbose` one line per
/// check (`[+]ping ok`, `[-]storage failed: <why>`) and `<check> check passed`.
/// A failing check fails the whole, with 503.
fn health_report(check: &str, checks: &[(&str, Result<(), String>)], verbose: bool) -> (StatusCode, String) {
    let failed = checks.iter().any(|(_, r)| r.is_err());
    let code = if failed {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    if !verbose && !failed {
        return (code, "ok".into());
    }
    let mut text = String::new();
    for (name, result) in checks {
        match result {
            Ok(()) => text.push_str(&format!("[+]{name} ok\n")),
            Err(why) => text.push_str(&format!("[-]{name} failed: {why}\n")),
        }
    }
    let outcome = if failed { "failed" } else { "passed" };
    text.push_str(&format!("{check} check {outcome}\n"));
    (code, text)
}

/// Run a request's handler; a panic becomes a 500 `Status` and an error log
/// naming the request, instead of a dropped connection.
async fn catch_panic<F>(method: &http::Method, path: &str, handler: F) -> Result<Response, ApiError>
where
    F: std::future::Future<Output = Result<Response, ApiError>>,
{
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(handler).catch_unwind().await {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::error!(%method, %path, "request handler panicked: {what}");
            Err(ApiError::internal(format!(
                "an internal error occurred while serving {method} {path}; the hub's log has the details"
            )))
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
    watch: bool,
) -> Result<(), ApiError> {
    let attrs = authz::Attributes {
        request: request_info::request_of(&parts.method, parts.uri.path(), watch, resource),
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
    if virtual_workspace::addresses(req.uri().path()) {
        return virtual_workspace::serve(hub, req).await;
    }
    let (mut parts, body) = req.into_parts();
    let parsed = match path::parse(parts.uri.path()) {
        Ok(p) => p,
        Err(not_found) => {
            // As in kube-apiserver, authentication, impersonation and
            // authorization come before routing: an unknown path is a
            // non-resource URL.
            let caller = authenticate(&hub, &parts)?;
            let raw = request_info::split_workspace(parts.uri.path())
                .0
                .map(str::to_string);
            let raw = raw.as_deref();
            let cluster = hub.resolve_cluster(raw).filter(|_| raw != Some("*"));
            authz::enter_workspace(&hub, &caller, raw, cluster.as_ref())?;
            let user = act_as(&hub, caller, &mut parts, cluster.as_ref())?;
            authz::enter_workspace(&hub, &user, raw, cluster.as_ref())?;
            if let Some(lc) = &cluster {
                authorize(&hub, &user, &parts, None, Some(lc), false)?;
            } else if !user.is_superuser() {
                authorize(&hub, &user, &parts, None, None, false)?;
            }
            return Err(not_found);
        }
    };
    if let Target::Health(check) = &parsed.target {
        // Liveness is the process's; readiness and health include storage
        // (etcd reachable), as kube-apiserver's etcd check.
        let mut checks = vec![("ping", Ok(()))];
        if check != "livez" {
            checks.push(("storage", hub.store.ready().await.map_err(|why| why.to_string())));
        }
        let verbose = query::Query::flag(parts.uri.query(), "verbose");
        let (code, text) = health_report(check, &checks, verbose);
        return Ok((code, text).into_response());
    }
    let caller = authenticate(&hub, &parts)?;
    if let Target::Version = parsed.target {
        // What any authenticated caller may read (kube's system:public-info-viewer);
        // it is the same in every workspace, so it tells nothing about one.
        return Ok(json_value(StatusCode::OK, &discovery::version()));
    }
    let raw = parsed.cluster.as_deref();
    let resolved = hub.resolve_cluster(raw).filter(|_| raw != Some("*"));
    // Members only, and the same 403 whether the workspace exists or not.
    authz::enter_workspace(&hub, &caller, raw, resolved.as_ref())?;
    let cluster = match raw {
        Some("*") => None,
        _ => Some(resolved.ok_or_else(|| {
            let mut message = format!("workspace {:?} not found", raw.unwrap_or("root"));
            if let Some(objects) = hub.logical_cluster_objects() {
                message = format!("{message}: {}", objects.how_to_create);
            }
            ApiError::not_found_message(message)
        })?),
    };
    let user = act_as(&hub, caller, &mut parts, cluster.as_ref())?;
    authz::enter_workspace(&hub, &user, raw, cluster.as_ref())?;
    let resource = match &parsed.target {
        Target::Resource(rp) => Some(rp),
        _ => None,
    };
    // The query is parsed once, and what is authorized (a watch or a list)
    // is what is served; a malformed query is answered after authorization.
    let query = query::Query::parse(parts.uri.query());
    let watch = query
        .as_ref()
        .map_or_else(|_| query::Query::watch_of(parts.uri.query()), |q| q.watch);
    authorize(&hub, &user, &parts, resource, cluster.as_ref(), watch)?;
    // Only discovery and the root list what is served: a request for objects looks
    // its one resource up instead of copying every one served (a copy per request).
    let lists_resources = matches!(
        parsed.target,
        Target::Root | Target::CoreVersions | Target::Groups | Target::Group(_) | Target::GroupVersion { .. }
    );
    let resources = if lists_resources {
        hub.registry.resources(cluster.as_ref().map(|c| c.name.as_str()))
    } else {
        Vec::new()
    };
    let accept = parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Some(answer) = discovery_answer(&parsed.target, &resources, accept) {
        return answer;
    }
    match parsed.target {
        Target::Health(_) | Target::Version => unreachable!("answered above"),
        Target::Root if parts.method == http::Method::GET => {
            let served = resources.iter().map(|r| (r.group.as_str(), r.version.as_str()));
            Ok(json_value(
                StatusCode::OK,
                &metrics::root_paths(served, parsed.cluster.is_none()),
            ))
        }
        Target::Metrics if parts.method == http::Method::GET => {
            let metrics = metrics::of_request(&parts)
                .ok_or_else(|| ApiError::internal("the hub's metrics are not installed on this router"))?;
            Ok((
                [(
                    http::header::CONTENT_TYPE,
                    "text/plain; version=0.0.4; charset=utf-8",
                )],
                metrics.render(&hub),
            )
                .into_response())
        }
        Target::Root | Target::Metrics => Err(ApiError::verb_not_served()),
        Target::CoreVersions | Target::Groups | Target::Group(_) | Target::GroupVersion { .. } => {
            Err(ApiError::internal("discovery was not answered"))
        }
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
            serve_resource(hub, parts, body, rp, info, cluster, None, user, query).await
        }
    }
}

/// A request on a resource (`info`, addressed as `rp`) in `cluster`
/// (`None`: every workspace `visibility` admits, or the wildcard), once
/// the caller is authorized.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve_resource(
    hub: Arc<Hub>,
    parts: http::request::Parts,
    body: Body,
    rp: path::ResourcePath,
    info: crate::registry::ResourceInfo,
    cluster: Option<LogicalCluster>,
    visibility: Option<Arc<dyn crate::storage::ScopeFilter>>,
    user: UserInfo,
    query: Result<query::Query, ApiError>,
) -> Result<Response, ApiError> {
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
    let query = query?;
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
    let verb = request_info::resource_verb(&parts.method, rp.name.is_some(), query.watch);
    // A resource that does not serve a verb answers 405, as
    // kube-apiserver does (LogicalClusters are read-only).
    if crate::registry::ALL_VERBS.contains(&verb.as_str()) && !info.verbs.contains(&verb) {
        return Err(ApiError::verb_not_served());
    }
    let options = service::WriteOptions {
        dry_run: query.dry_run,
        force: query.force,
        field_manager: query
            .field_manager
            .clone()
            .unwrap_or_else(|| default_manager(&parts.headers)),
        field_validation: query.field_validation,
        // Creates, updates and server-side applies: a JSON body's repeated
        // fields (other patches merge onto the stored object, where repeating
        // is the client's business). A YAML body that is not JSON has none
        // here; the YAML parser refuses a repeated key.
        duplicate_fields: if matches!(parts.method, http::Method::POST | http::Method::PUT)
            || (parts.method == http::Method::PATCH && is_apply(&parts.headers))
        {
            crate::decode::duplicate_fields(&body)
        } else {
            Vec::new()
        },
    };
    let scope = objects::Scope {
        request: service::Request {
            hub: hub.clone(),
            cluster,
            visibility,
            info,
            namespace: rp.namespace,
            name: rp.name,
            subresource: rp.subresource,
            user,
            verb,
            options,
            warnings: Default::default(),
        },
        query,
        format: negotiate::object_format(&parts.headers),
        headers: parts.headers,
    };
    if component_status::serves(&scope.info) {
        return component_status::serve(&scope, &parts.method);
    }
    let method = parts.method;
    if offload::computes(&method, scope.name.is_some(), scope.query.watch, body.len()) {
        offload::run(async move { objects::serve(scope, &method, body).await }).await
    } else {
        objects::serve(scope, &method, body).await
    }
}

/// The discovery document `target` asks for, from `resources` (`None`: not
/// a discovery request).
pub(crate) fn discovery_answer(
    target: &Target,
    resources: &[crate::registry::ResourceInfo],
    accept: &str,
) -> Option<Result<Response, ApiError>> {
    let aggregated = discovery::negotiate_aggregated(accept);
    let ok = |v: Value| Some(Ok(json_value(StatusCode::OK, &v)));
    match target {
        Target::CoreVersions => match aggregated {
            Some(v) => Some(Ok(aggregated_response(
                discovery::aggregated_discovery_as(resources, true, v),
                v,
            ))),
            None => ok(discovery::core_versions()),
        },
        Target::Groups => match aggregated {
            Some(v) => Some(Ok(aggregated_response(
                discovery::aggregated_discovery_as(resources, false, v),
                v,
            ))),
            None => ok(discovery::api_group_list(resources)),
        },
        Target::Group(g) => Some(
            discovery::api_group(resources, g)
                .map(|v| json_value(StatusCode::OK, &v))
                .ok_or_else(|| {
                    ApiError::not_found_message(format!(
                        "the server could not find the requested resource: API group {g:?} is not served"
                    ))
                }),
        ),
        Target::GroupVersion { group, version } => Some(
            discovery::api_resource_list(resources, group, version)
                .map(|v| json_value(StatusCode::OK, &v))
                .ok_or_else(|| {
                    ApiError::not_found_message(format!(
                        "the server could not find the requested resource: {group}/{version} is not served"
                    ))
                }),
        ),
        _ => None,
    }
}

const JSON: &str = "application/json";

/// Whether the body is a server-side apply (`application/apply-patch+yaml`).
fn is_apply(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.trim_start().starts_with("application/apply-patch"))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_handler_answers_500_with_a_status() {
        let method = http::Method::PATCH;
        let handler = async {
            let v = serde_json::json!("oops");
            let mut v = v;
            v["metadata"] = serde_json::json!({}); // panics: index assignment on a string
            Ok(StatusCode::OK.into_response())
        };
        let e = catch_panic(&method, "/api/v1/namespaces/default/configmaps/x", handler)
            .await
            .unwrap_err();
        assert_eq!(e.code, 500);
        assert!(e
            .message
            .contains("PATCH /api/v1/namespaces/default/configmaps/x"));
    }
}
