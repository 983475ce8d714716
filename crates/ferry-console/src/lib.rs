//! Ferry's web console: a read-only view of workspaces, clusters, placements
//! and APIExports for people, served by the hub at `/console/` and by
//! `ferry console` in front of any hub.
//!
//! The console is static pages only. The browser signs in with a bearer token
//! (the one kubectl uses), keeps it in `sessionStorage` and sends it on every
//! request to the hub's own API, so RBAC and workspace membership decide what a
//! user sees exactly as they do for kubectl: nothing here reads on a user's
//! behalf. Pages follow the API's watch streams instead of polling.

mod assets;
mod proxy;

pub use assets::{asset, security_headers, Asset, ASSETS, CONTENT_SECURITY_POLICY};
pub use proxy::{is_api_path, proxy};

use axum::extract::Path;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use http::StatusCode;

/// Where the console is mounted.
pub const PREFIX: &str = "/console";

/// The console's pages at `/console/`: `GET /console` redirects there and
/// every file answers with the console's security headers. Unknown files are
/// 404 with the same headers.
pub fn router() -> Router {
    Router::new()
        .route(PREFIX, get(|| async { Redirect::permanent("/console/") }))
        .route("/console/", get(|| async { serve("index.html") }))
        .route(
            "/console/{file}",
            get(|Path(file): Path<String>| async move { serve(&file) }),
        )
}

/// The response for console file `name`.
fn serve(name: &str) -> Response {
    let mut response = match asset(name) {
        Some(a) => ([(http::header::CONTENT_TYPE, a.content_type)], a.body).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            [(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("the console has no file {name:?}; open /console/"),
        )
            .into_response(),
    };
    security_headers(response.headers_mut());
    response
}
