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

/// Whether a resource request may compute enough to belong off the workers:
/// everything but a get of one object and a watch.
pub(crate) fn computes(method: &Method, named: bool, watch: bool) -> bool {
    !(method == Method::GET && (named || watch))
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
