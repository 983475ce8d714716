//! `ferry syncer`: keep a workload cluster in sync with its upstream workspace.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

#[derive(clap::Args)]
pub struct SyncerArgs {
    /// Kubeconfig of the upstream workspace (its server URL may end in /clusters/<path>).
    #[arg(long)]
    pub from_kubeconfig: PathBuf,
    /// Context in --from-kubeconfig (default: its current context).
    #[arg(long)]
    pub from_context: Option<String>,
    /// Kubeconfig of the workload cluster (default: the in-cluster configuration).
    #[arg(long)]
    pub to_kubeconfig: Option<PathBuf>,
    /// Context in --to-kubeconfig (default: its current context).
    #[arg(long)]
    pub to_context: Option<String>,
    /// The SyncTarget this syncer serves; names the syncer on every copy it makes.
    #[arg(long)]
    pub sync_target_name: String,
    /// The SyncTarget's UID (recorded in logs).
    #[arg(long)]
    pub sync_target_uid: Option<String>,
    /// Concurrent reconcilers.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Cap on requests per second to each side (0: no cap). Unset, the syncer goes at
    /// each server's pace where the server paces clients itself (API priority and
    /// fairness, shown by its X-Kubernetes-PF-* response headers, or a Ferry hub, which
    /// answers 429 with Retry-After when busy), as kubectl and client-go do, and at 30
    /// per second to any other server. A client-side limit in front of a server that
    /// paces clients only slows the syncer: at 30 per second a 10,000-object initial
    /// sync takes over five minutes.
    #[arg(long)]
    pub qps: Option<f32>,
    /// Requests that may go at once before the per-second limit applies.
    #[arg(long, default_value_t = 20)]
    pub burst: u32,
    /// How often the heartbeat is written onto the SyncerConfigs (e.g. 20s, 1m).
    #[arg(long, default_value = "20s", value_parser = crate::kubeconfig::parse_duration)]
    pub heartbeat_period: Duration,
    /// Where to serve /metrics (plus /healthz and /readyz); port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub metrics_address: SocketAddr,
    /// Where to serve /healthz and /readyz, if not on the metrics address.
    #[arg(long)]
    pub health_address: Option<SocketAddr>,
    /// Write the downstream status of downsynced objects back upstream (reported state).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub return_status: bool,
}

pub async fn run(args: SyncerArgs) -> anyhow::Result<()> {
    let upstream = crate::kubeconfig::load(Some(&args.from_kubeconfig), args.from_context.as_deref()).await?;
    let downstream = match &args.to_kubeconfig {
        Some(path) => crate::kubeconfig::load(Some(path), args.to_context.as_deref()).await?,
        None => kube::Config::incluster().context(
            "no --to-kubeconfig given and not running in a cluster (in-cluster configuration unavailable)",
        )?,
    };
    let mut opts = ferry_syncer::SyncerOptions::new(upstream, downstream, &args.sync_target_name);
    opts.sync_target_uid = args.sync_target_uid;
    opts.workers = args.workers;
    opts.qps = args.qps;
    opts.burst = args.burst;
    opts.heartbeat_period = args.heartbeat_period;
    opts.metrics_address = Some(args.metrics_address);
    opts.health_address = args.health_address;
    opts.return_status = args.return_status;
    ferry_syncer::run(opts, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
