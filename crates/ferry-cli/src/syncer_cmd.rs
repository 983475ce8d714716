//! `ferry syncer`: keep a workload cluster in sync with its upstream workspace.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};

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
    /// Requests per second to each side (0: unlimited).
    #[arg(long, default_value_t = 30.0)]
    pub qps: f32,
    /// Requests that may go at once before --qps applies.
    #[arg(long, default_value_t = 20)]
    pub burst: u32,
    /// How often the heartbeat is written onto the SyncerConfigs (e.g. 20s, 1m).
    #[arg(long, default_value = "20s", value_parser = parse_duration)]
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

/// Parses `500ms`, `20s`, `1m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration; write e.g. 500ms, 20s, 1m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {text:?}; use ms, s, m or h")),
    };
    Ok(Duration::from_secs_f64(seconds))
}

async fn config_from(path: &PathBuf, context: &Option<String>) -> anyhow::Result<kube::Config> {
    let kubeconfig =
        Kubeconfig::read_from(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let options = KubeConfigOptions {
        context: context.clone(),
        ..Default::default()
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .with_context(|| format!("using kubeconfig {}", path.display()))
}

pub async fn run(args: SyncerArgs) -> anyhow::Result<()> {
    let upstream = config_from(&args.from_kubeconfig, &args.from_context).await?;
    let downstream = match &args.to_kubeconfig {
        Some(path) => config_from(path, &args.to_context).await?,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("20s").unwrap(), Duration::from_secs(20));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("3 weeks").is_err());
    }
}
