//! Serving `/services/<kind>/<instance...>/clusters/<c>/...`: the HTTP side
//! of the views ([`crate::view`]) the hub's extensions add. Authentication, then the kind's own
//! authorization (before anything about the instance is looked up), then
//! discovery or the object service with the view's visibility.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::StatusCode;

use super::body::json_value;
use super::path::{self, Target};
use super::{authenticate, discovery_answer, query, serve_resource};
use crate::discovery;
use crate::hub::Hub;
use crate::status::ApiError;
use crate::storage::ObjectKey;
use crate::view::VirtualWorkspaces;

/// Whether `path` is under `/services/`.
pub fn addresses(path: &str) -> bool {
    path == "/services" || path.starts_with("/services/")
}

pub async fn serve(hub: Arc<Hub>, req: axum::extract::Request) -> Result<Response, ApiError> {
    let (mut parts, body) = req.into_parts();
    let raw_path = parts.uri.path().to_string();
    let not_found = || {
        ApiError::not_found_message(format!(
            "the server could not find the requested resource ({raw_path}): virtual workspaces are /services/<kind>/<instance>/clusters/<workspace|*>/..."
        ))
    };
    let segments: Vec<&str> = raw_path.split('/').filter(|s| !s.is_empty()).collect();
    // Who is asking comes first, as for every other path.
    let user = authenticate(&hub, &parts)?;
    if crate::auth::impersonation::requested(&parts.headers) {
        return Err(ApiError::forbidden(
            "impersonation is not supported in virtual workspaces: authenticate as the identity itself",
        ));
    }
    let kind = segments
        .get(1)
        .and_then(|k| hub.extensions.get::<VirtualWorkspaces>()?.kind(k))
        .ok_or_else(not_found)?;
    let n = kind.instance_segments();
    if segments.len() < 2 + n {
        return Err(not_found());
    }
    let instance: Vec<String> = segments[2..2 + n].iter().map(|s| s.to_string()).collect();
    if instance.iter().any(|s| s == "." || s == "..") {
        return Err(not_found());
    }
    let rest = format!("/{}", segments[2 + n..].join("/"));
    let parsed = path::parse(&rest).map_err(|_| not_found())?;
    let query = query::Query::parse(parts.uri.query());
    let watch = query
        .as_ref()
        .map_or_else(|_| query::Query::watch_of(parts.uri.query()), |q| q.watch);
    let resource = match &parsed.target {
        Target::Resource(rp) => Some(rp.clone()),
        _ => None,
    };
    let verb = match &resource {
        Some(rp) => super::request_info::resource_verb(&parts.method, rp.name.is_some(), watch),
        None => "get".to_string(),
    };
    kind.authorize(&hub, &user, &instance, &verb)?;
    match parsed.target {
        Target::Version => return Ok(json_value(StatusCode::OK, &discovery::version())),
        Target::Health(_) => return Ok((StatusCode::OK, "ok").into_response()),
        _ => {}
    }
    let view = kind.view(&hub, &instance)?;
    let accept = parts
        .headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let discovery = discovery_answer(&parsed.target, &view.resources, &accept);
    // Every request on resources names a workspace (or `*`), as in kcp;
    // discovery is also answered at the instance's root (it is the same
    // for every workspace), for clients that discover before they pick one.
    let Some(raw_cluster) = parsed.cluster.clone() else {
        return discovery.unwrap_or_else(|| Err(not_found()));
    };
    if let Some(answer) = discovery {
        return answer;
    }
    let Some(rp) = resource else {
        return Err(ApiError::not_found_message(
            "virtual workspaces serve discovery and resources only (no OpenAPI)",
        ));
    };
    let info = view
        .lookup(&rp.group, &rp.version, &rp.resource)
        .cloned()
        .ok_or_else(|| {
            ApiError::not_found_message(format!(
                "the server could not find the requested resource: {} is not served in this virtual workspace",
                rp.resource
            ))
        })?;
    if view.is_read_only(&info) && !matches!(verb.as_str(), "get" | "list" | "watch") {
        return Err(ApiError::forbidden(format!(
            "{} are read-only through this virtual workspace: {verb} them in their own workspace",
            info.resource
        )));
    }
    let visibility = view.visibility(&info);
    let cluster = if raw_cluster == "*" {
        None
    } else {
        // Unknown and invisible workspaces get the same answer.
        let hidden = || {
            ApiError::not_found_message(format!(
                "{} are not visible in workspace {raw_cluster:?} through this virtual workspace",
                info.resource
            ))
        };
        let lc = hub.workspaces.resolve(&raw_cluster).ok_or_else(hidden)?;
        if !visibility.cluster(&lc.name) {
            return Err(hidden());
        }
        if let Some(name) = &rp.name {
            let key = ObjectKey {
                cluster: lc.name.clone(),
                resource: info.storage_key(),
                namespace: rp.namespace.clone().unwrap_or_default(),
                name: name.clone(),
            };
            let hidden = !visibility.object(&key)
                || hub
                    .store
                    .get_committed(&key)
                    .is_some_and(|obj| !visibility.stored(&key, &obj));
            if hidden {
                return Err(ApiError::not_found(&info.group, &info.resource, name));
            }
        }
        Some(lc)
    };
    parts.headers.remove(http::header::AUTHORIZATION);
    serve_resource(hub, parts, body, rp, info, cluster, Some(visibility), user, query).await
}
