//! Ferry syncer engine.
//!
//! One engine, several profiles: [`profile`] describes the seam (selection, mapping,
//! marks, configuration source) between the core loop and what makes a KubeStellar, kcp
//! TMC or api-syncagent syncer different; [`profiles`] holds the implementations.
//!
//! The pure parts, unit-tested without any server:
//! - [`selection`]: which objects go down and up (the KubeStellar profile's merge of all
//!   SyncerConfigs), and which resource types to watch on each side once discovery is
//!   known.
//! - [`transform`]: how a copy is made (server fields stripped, mapped, marked), when it
//!   needs an update, and how status returns upstream.
//!
//! The running parts:
//! - [`engine`]: the core loop: a flow (two watches) per resource type and direction, a
//!   keyed work queue with per-key backoff, `--workers` reconcilers.
//! - [`profiles::kubestellar`]: SyncerConfigs watched and merged live; conditions and
//!   heartbeats written back onto them.
//! - [`metrics`] and [`health`]: `/metrics`, `/healthz`, `/readyz`.
//!
//! [`start`] runs a syncer in-process (tests, `ferry quickstart`); [`run`] runs one until
//! a shutdown signal (`ferry syncer`).

pub mod engine;
pub mod health;
pub mod leader;
pub mod metrics;
pub mod options;
pub mod profile;
pub mod profiles;
pub mod ratelimit;
pub mod selection;
pub mod side;
pub mod transform;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use engine::{Engine, Timing};
use side::{Side, SideClient};

pub use options::SyncerOptions;

/// `tokio::spawn` in the current span: each task of a syncer logs under its
/// `syncer{sync_target=...}` span (see [`start`]), so a line says which syncer it is
/// about even in a process that runs several (the quickstarts, tests).
pub(crate) fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(tracing::Instrument::in_current_span(future))
}

/// A syncer running in this process. Dropping it does not stop it; call [`stop`](Self::stop).
pub struct RunningSyncer {
    engine: Arc<Engine>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    metrics_address: Option<SocketAddr>,
    health_address: Option<SocketAddr>,
}

impl RunningSyncer {
    /// Where `/metrics` is served, once bound.
    pub fn metrics_address(&self) -> Option<SocketAddr> {
        self.metrics_address
    }

    /// Where `/healthz` and `/readyz` are served, once bound.
    pub fn health_address(&self) -> Option<SocketAddr> {
        self.health_address.or(self.metrics_address)
    }

    /// Whether `/readyz` would answer 200.
    pub fn is_ready(&self) -> bool {
        self.engine.readiness().is_ok()
    }

    /// The metrics in Prometheus text format.
    pub fn metrics_text(&self) -> String {
        self.engine.metrics.render()
    }

    /// Objects reconciled and waiting.
    pub fn queue_len(&self) -> usize {
        self.engine.queue.len()
    }

    /// The client-side limit on requests to `side` now: `(qps, burst)`; qps `0` means
    /// none (see [`ratelimit`]).
    pub fn request_limit(&self, side: Side) -> (f32, u32) {
        self.engine.side(side).limiter.limit()
    }

    /// How `side`'s server paces clients, once it has answered a probe.
    pub fn server_pacing(&self, side: Side) -> Option<ratelimit::ServerPacing> {
        self.engine.side(side).server_pacing()
    }

    /// Stops every task and watch.
    pub async fn stop(self) {
        self.engine.shut_down();
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Starts a syncer: connects to both sides, serves metrics and health, and begins
/// syncing in the background. Fails only on unusable options (bad client settings, an
/// address that cannot be bound); unreachable servers are retried forever. Everything
/// it logs is in the span `syncer{sync_target=<name>}`.
pub async fn start(opts: SyncerOptions) -> anyhow::Result<RunningSyncer> {
    let span = tracing::info_span!("syncer", sync_target = %opts.sync_target_name);
    tracing::Instrument::instrument(start_syncing(opts), span).await
}

async fn start_syncing(mut opts: SyncerOptions) -> anyhow::Result<RunningSyncer> {
    anyhow::ensure!(
        !opts.sync_target_name.is_empty(),
        "--sync-target-name must not be empty"
    );
    // kcp TMC: the SyncTarget says where to read and write (waits for it).
    let mut upsyncer = None;
    if let Some(tmc) = opts.tmc.clone() {
        let connection = profiles::tmc::connect(opts.upstream.clone(), &opts.sync_target_name, tmc).await?;
        opts.upstream = connection.syncer;
        upsyncer = Some(connection.upsyncer);
        opts.profile = Some(connection.tmc.profile());
    }
    let pacing = ratelimit::Pacing::from_flags(opts.qps, opts.burst);
    let mut up = SideClient::new(Side::Upstream, opts.upstream.clone(), pacing)?;
    if let Some(upsyncer) = upsyncer {
        up = up.with_upsync(upsyncer)?;
    }
    let down = SideClient::new(Side::Downstream, opts.downstream.clone(), pacing)?;
    let timing = Timing {
        discovery_refresh: opts.discovery_refresh,
        probe_period: opts.probe_period,
        max_watch_backoff: opts.max_backoff.min(std::time::Duration::from_secs(5)),
    };
    let profile = opts.profile.clone().unwrap_or_else(|| {
        profiles::kubestellar::KubeStellar::profile(&opts.sync_target_name, opts.heartbeat_period)
    });
    let engine = Engine::new(
        opts.sync_target_name.clone(),
        profile,
        opts.return_status,
        opts.version.clone(),
        timing,
        up,
        down,
        opts.min_backoff,
        opts.max_backoff,
    );
    tracing::info!(
        sync_target = %opts.sync_target_name,
        profile = engine.profile.name,
        uid = opts.sync_target_uid.as_deref().unwrap_or(""),
        upstream = %opts.upstream.cluster_url,
        downstream = %opts.downstream.cluster_url,
        workers = opts.workers,
        "starting syncer"
    );

    let mut tasks = vec![];
    let mut metrics_address = None;
    let mut health_address = None;
    if let Some(addr) = opts.metrics_address {
        let (bound, task) = health::serve(engine.clone(), addr).await?;
        tracing::info!("serving /metrics, /healthz and /readyz on http://{bound}");
        metrics_address = Some(bound);
        tasks.push(task);
    }
    if let Some(addr) = opts.health_address.filter(|a| Some(*a) != opts.metrics_address) {
        let (bound, task) = health::serve(engine.clone(), addr).await?;
        tracing::info!("serving /healthz and /readyz on http://{bound}");
        health_address = Some(bound);
        tasks.push(task);
    }

    tasks.push(crate::spawn(engine.clone().probe_loop(Side::Upstream)));
    tasks.push(crate::spawn(engine.clone().probe_loop(Side::Downstream)));
    tasks.extend(engine.profile.config.clone().start(&engine));
    tasks.push(crate::spawn(engine.clone().resolve_loop()));
    tasks.push(crate::spawn(engine.clone().watch_initial_sync()));
    tasks.push(crate::spawn(engine::orphans::run(engine.clone())));
    if let Some(period) = opts.resync_period {
        let engine = engine.clone();
        tasks.push(crate::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                engine.reconcile_everything();
            }
        }));
    }
    for _ in 0..opts.workers.max(1) * engine.profile.objects_per_worker.max(1) {
        tasks.push(crate::spawn(engine.clone().work()));
    }
    Ok(RunningSyncer {
        engine,
        tasks,
        metrics_address,
        health_address,
    })
}

/// Runs a syncer until `shutdown` completes. With
/// [`SyncerOptions::leader_election`], it syncs only while it holds the Lease
/// in the downstream cluster (serving `/healthz` and `/readyz` as a standby
/// meanwhile), and returns [`leader::LostLease`] once it has lost it and
/// stopped syncing: the process should then exit, to come back as a standby.
pub async fn run(mut opts: SyncerOptions, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let Some(election) = opts.leader_election.take() else {
        let syncer = start(opts).await?;
        shutdown.await;
        tracing::info!("shutting down");
        syncer.stop().await;
        return Ok(());
    };
    election.validate()?;
    let client = kube::Client::try_from(opts.downstream.clone())
        .map_err(|e| anyhow::anyhow!("downstream client for leader election: {e}"))?;
    let elector = leader::LeaderElector::new(client, election);
    let standby_address = opts.health_address.or(opts.metrics_address);
    let standby = match standby_address {
        Some(addr) => {
            let (bound, task) = health::serve_standby(addr).await?;
            tracing::info!("standing by: serving /healthz and /readyz on http://{bound}");
            Some(task)
        }
        None => None,
    };
    leader::run_elected(
        elector,
        shutdown,
        || async move {
            if let Some(task) = standby {
                task.abort();
                let _ = task.await;
            }
            start(opts).await
        },
        |syncer: RunningSyncer| async move {
            tracing::info!("stopping the syncer");
            syncer.stop().await;
        },
    )
    .await
}
