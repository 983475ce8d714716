//! Requests that compute run off the async workers.
//!
//! Decoding and validating a body of up to 3 MiB, computing a patch,
//! rendering a Table or serialising a long list takes real CPU; on one of
//! the runtime's few worker threads it would stall every connection that
//! worker serves, `/readyz` included. Such requests run on tokio's
//! blocking pool instead (the OS shares the CPU between them and the
//! workers), at most [`LANES`] at a time; the rest wait for a lane without
//! holding a thread. Gets of one object and watches stay on the workers:
//! they are cheap or long-lived.

use std::future::Future;

use axum::response::{IntoResponse, Response};
use http::Method;
use tokio::sync::Semaphore;

use crate::status::ApiError;

/// Requests computing at once on the blocking pool. Enough to keep both
/// CPUs and the disk busy while others wait; far below the blocking pool's
/// 512 threads, which the storage layer and TLS never need.
const LANES: usize = 64;

static LANE: Semaphore = Semaphore::const_new(LANES);

/// Bodies up to this size decode and validate in well under a millisecond:
/// cheaper on a worker than the two thread hand-offs of the blocking pool
/// (which doubled a single client's create latency when every write went
/// there).
const SMALL_BODY: usize = 64 * 1024;

/// Whether a resource request may compute enough to belong off the workers:
/// lists (and deletecollection), patches (the object patched may be large
/// whatever the body), and any request with a large body. Gets of one
/// object, watches and small creates and updates stay on the workers.
pub(crate) fn computes(method: &Method, named: bool, watch: bool, body_len: usize) -> bool {
    match *method {
        Method::GET | Method::HEAD => !(named || watch),
        Method::PATCH => true,
        Method::DELETE if !named => true,
        _ => body_len > SMALL_BODY,
    }
}

/// Run `request` to completion on the blocking pool, errors encoded there
/// too (a refusal can list thousands of causes).
pub(crate) async fn run<F>(request: F) -> Result<Response, ApiError>
where
    F: Future<Output = Result<Response, ApiError>> + Send + 'static,
{
    let _lane = LANE
        .acquire()
        .await
        .map_err(|_| ApiError::service_unavailable("the hub is shutting down"))?;
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        runtime.block_on(request).unwrap_or_else(|e| {
            tracing::debug!(code = e.code, "{}", e.message);
            e.into_response()
        })
    })
    .await
    .map_err(|e| {
        tracing::error!("a request failed on the blocking pool: {e}");
        ApiError::internal(format!("the request failed on the server: {e}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_patches_and_large_bodies_compute_off_the_workers() {
        assert!(computes(&Method::GET, false, false, 0), "list");
        assert!(!computes(&Method::GET, true, false, 0), "get");
        assert!(!computes(&Method::GET, false, true, 0), "watch");
        assert!(computes(&Method::PATCH, true, false, 10), "patch");
        assert!(computes(&Method::DELETE, false, false, 0), "deletecollection");
        assert!(!computes(&Method::DELETE, true, false, 0), "delete");
        assert!(!computes(&Method::POST, false, false, 1024), "small create");
        assert!(
            computes(&Method::POST, false, false, 2 * 1024 * 1024),
            "large create"
        );
        assert!(
            computes(&Method::PUT, true, false, SMALL_BODY + 1),
            "large update"
        );
    }
}
