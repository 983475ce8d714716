//! The HTTP endpoints: `/metrics` (Prometheus text), `/healthz` (the process runs) and
//! `/readyz` (initial sync done and both sides reachable; 503 with the reason otherwise).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::engine::Engine;

fn router(engine: Arc<Engine>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(engine)
}

async fn metrics(State(engine): State<Arc<Engine>>) -> Response {
    engine.metrics.queue_depth(engine.queue.len());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        engine.metrics.render(),
    )
        .into_response()
}

async fn readyz(State(engine): State<Arc<Engine>>) -> Response {
    match engine.readiness() {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}")).into_response(),
    }
}

/// Binds `addr` and serves the endpoints in the background; returns the bound address
/// and the serving task.
pub async fn serve(
    engine: Arc<Engine>,
    addr: SocketAddr,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {addr} for metrics and health: {e}"))?;
    let bound = listener.local_addr()?;
    let app = router(engine);
    let task = crate::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("metrics/health server stopped: {e}");
        }
    });
    Ok((bound, task))
}

/// Serves `/healthz`, `/livez` and `/readyz` (all 200, "standby") for a
/// replica waiting for the leader election Lease, so probes keep it running.
pub async fn serve_standby(addr: SocketAddr) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("listening on {addr} for health: {e}"))?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|| async { "ok: standby (not holding the leader election Lease)" }),
        );
    let task = crate::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("health server stopped: {e}");
        }
    });
    Ok((bound, task))
}
