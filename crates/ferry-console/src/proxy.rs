//! `ferry console`'s forwarding of the page's API reads to a hub: the page
//! needs one origin for its files and the API, as it has when the hub serves
//! it. Only reads go through, each with the browser's own `Authorization`
//! header and nothing of the kubeconfig's credentials.

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::Router;
use ferry_apimachinery::status::ApiError;
use http::{header, Method};

/// Headers of the browser's request that reach the hub. Cookies, origin and
/// the like stay behind: the hub authenticates by bearer token only.
const FORWARDED: [header::HeaderName; 3] = [header::AUTHORIZATION, header::ACCEPT, header::ACCEPT_ENCODING];

/// Whether `path` is one of the API's (what the console reads), as opposed to
/// the hub's other endpoints, which `ferry console` does not pass on.
/// A virtual workspace's API (`/services/<kind>/<instance...>/clusters/<c>/apis/...`,
/// an export's bindings for the APIExport page) counts as the API.
pub fn is_api_path(path: &str) -> bool {
    let api = |p: &str| p == "/api" || p == "/apis" || p.starts_with("/api/") || p.starts_with("/apis/");
    let in_cluster = |p: &str| match p.strip_prefix("/clusters/") {
        Some(rest) => rest.find('/').is_some_and(|i| api(&rest[i..])),
        None => false,
    };
    match path.strip_prefix("/services/") {
        Some(rest) => rest.find("/clusters/").is_some_and(|i| in_cluster(&rest[i..])),
        None => in_cluster(path) || api(path),
    }
}

/// A router that forwards the console's API reads to the hub `upstream`
/// points at. `upstream` must carry no credentials of its own (the caller
/// strips them): every request is made with the browser's token or none.
pub fn proxy(upstream: kube::Client) -> Router {
    Router::new().fallback(move |req: Request| forward(upstream.clone(), req))
}

async fn forward(upstream: kube::Client, req: Request) -> Response {
    let path = req.uri().path();
    if !is_api_path(path) {
        return ApiError::not_found_message(format!(
            "ferry console serves the console at /console/ and the hub's API reads; {path} is neither"
        ))
        .into_response();
    }
    if req.method() != Method::GET {
        return ApiError::method_not_allowed(format!(
            "the console is read-only: ferry console forwards GET requests only, not {}",
            req.method()
        ))
        .into_response();
    }
    let target = req.uri().path_and_query().map(|p| p.as_str()).unwrap_or(path);
    let mut out = http::Request::get(target);
    for name in FORWARDED {
        if let Some(value) = req.headers().get(&name) {
            out = out.header(name, value);
        }
    }
    let Ok(out) = out.body(kube::client::Body::empty()) else {
        return ApiError::bad_request(format!("{target} is not a request path the hub can be asked for"))
            .into_response();
    };
    match upstream.send(out).await {
        Ok(response) => response.map(axum::body::Body::new),
        Err(e) => {
            tracing::warn!("forwarding {target} to the hub: {e}");
            ApiError::service_unavailable(format!(
                "the hub did not answer {target}: {e}; check that it runs and that the kubeconfig's server is right"
            ))
            .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_api_path;

    #[test]
    fn only_the_apis_paths_are_forwarded() {
        for p in [
            "/api/v1/namespaces",
            "/apis",
            "/clusters/root:org/apis/tenancy.kcp.io/v1alpha1/workspaces",
            "/clusters/root/api/v1/namespaces/default",
            "/services/apiexport/root:org/widgets/clusters/*/apis/apis.kcp.io/v1alpha1/apibindings",
        ] {
            assert!(is_api_path(p), "{p}");
        }
        for p in [
            "/",
            "/metrics",
            "/livez",
            "/clusters/root",
            "/clusters/root/metrics",
            "/apisx",
            "/console/",
            "/services/apiexport/root:org/widgets/clusters/*/metrics",
            "/services/apiexport",
        ] {
            assert!(!is_api_path(p), "{p}");
        }
    }
}
