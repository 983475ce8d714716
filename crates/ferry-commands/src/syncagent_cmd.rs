//! `ferry syncagent`: kcp's api-syncagent. Runs beside a service cluster, publishes the
//! CRDs its PublishedResources name into the APIExport of `--apiexportendpointslice-ref`
//! (in the workspace `--kcp-kubeconfig` points at), and syncs the objects every bound
//! workspace makes of them down to the service cluster, status back. Flag names follow
//! the reference (`cmd/api-syncagent/options.go`).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use ferry_syncer::profiles::syncagent::{self, EngineTuning, SyncAgentOptions};

#[derive(clap::Args, Debug)]
pub struct SyncAgentArgs {
    /// Kubeconfig of kcp, pointing at the workspace holding the APIExport and its
    /// endpoint slice (server URL ending in /clusters/<path>).
    #[arg(long)]
    pub kcp_kubeconfig: PathBuf,
    /// Context in --kcp-kubeconfig (default: its current context).
    #[arg(long)]
    pub kcp_context: Option<String>,
    /// Kubeconfig of the service cluster (default: the in-cluster configuration).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in --kubeconfig (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
    /// The namespace the agent runs in (its Lease and state live there).
    #[arg(long)]
    pub namespace: String,
    /// The agent's name, put on every object it makes on the service cluster
    /// (label syncagent.kcp.io/agent-name): a DNS-1035 label such as "nora". Its fully
    /// qualified name is <agent-name>.<APIExport name>. Default: <endpoint slice>-syncagent.
    #[arg(long)]
    pub agent_name: Option<String>,
    /// The APIExportEndpointSlice (in the kcp workspace) whose export the agent serves.
    #[arg(long)]
    pub apiexportendpointslice_ref: String,
    /// Only PublishedResources matching this label selector (k=v,...) are handled.
    #[arg(long)]
    pub published_resource_selector: Option<String>,
    /// Controllers not to run: apiexport, apiresourceschema, sync.
    #[arg(long, value_delimiter = ',')]
    pub disabled_controllers: Vec<String>,
    /// Leader election: the Lease is syncagent.<agent-name> in --namespace on the
    /// service cluster, as the reference's.
    #[command(flatten)]
    pub leader_election: crate::leader_flags::LeaderElectionArgs,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:8085")]
    pub metrics_address: SocketAddr,
    /// Where to serve /healthz and /readyz, if not on the metrics address.
    #[arg(long)]
    pub health_address: Option<SocketAddr>,
    /// Concurrent sync workers. Each keeps two objects in flight: one's finalizer
    /// written on kcp while the other's copy is written on the service cluster.
    #[arg(long, default_value_t = 4)]
    pub workers: usize,
    /// Cap on requests per second to each side (default: each server's pace).
    #[arg(long)]
    pub qps: Option<f32>,
    /// How often every object's related resources are synced again although no
    /// watch saw a change (a safety net; Ferry's own flag, the reference has none).
    #[arg(long, default_value = "30s", value_parser = crate::kubeconfig::parse_duration)]
    pub related_resync_period: std::time::Duration,
}

/// The agent's options from the flags.
pub async fn options(args: SyncAgentArgs) -> anyhow::Result<SyncAgentOptions> {
    for c in &args.disabled_controllers {
        anyhow::ensure!(
            syncagent::publish::CONTROLLERS.contains(&c.as_str()),
            "--disabled-controllers: unknown controller {c:?}; known: {}",
            syncagent::publish::CONTROLLERS.join(", ")
        );
    }
    if let Some(name) = args.agent_name.as_ref().filter(|n| !n.is_empty()) {
        syncagent::publish::validate_agent_name(name).map_err(anyhow::Error::msg)?;
    }
    let kcp = crate::kubeconfig::load(Some(&args.kcp_kubeconfig), args.kcp_context.as_deref())
        .await
        .with_context(|| format!("--kcp-kubeconfig {}", args.kcp_kubeconfig.display()))?;
    let service = match &args.kubeconfig {
        Some(path) => crate::kubeconfig::load(Some(path), args.context.as_deref())
            .await
            .with_context(|| format!("--kubeconfig {}", path.display()))?,
        None => kube::Config::incluster().context(
            "no --kubeconfig given and not running in a cluster (in-cluster configuration unavailable)",
        )?,
    };
    let mut opts = SyncAgentOptions::new(kcp, service, &args.apiexportendpointslice_ref, &args.namespace);
    if let Some(name) = args.agent_name.filter(|n| !n.is_empty()) {
        opts.agent_name = name;
    }
    opts.selector = args.published_resource_selector.filter(|s| !s.is_empty());
    opts.disabled_controllers = args.disabled_controllers;
    opts.workers = args.workers;
    anyhow::ensure!(
        !args.related_resync_period.is_zero(),
        "--related-resync-period must be longer than 0s (e.g. 30s)"
    );
    opts.related_resync = args.related_resync_period;
    opts.engine = Some(EngineTuning {
        qps: args.qps,
        metrics_address: Some(args.metrics_address),
        health_address: args.health_address,
        ..Default::default()
    });
    Ok(opts)
}

/// The agent's leader election, if `--enable-leader-election`: the Lease
/// `syncagent.<agent name>` in `--namespace` on the service cluster.
pub fn election(
    args: &crate::leader_flags::LeaderElectionArgs,
    opts: &SyncAgentOptions,
) -> anyhow::Result<Option<ferry_syncer::leader::LeaderElectionConfig>> {
    args.config(&opts.namespace, &format!("syncagent.{}", opts.agent_name))
}

pub async fn run(args: SyncAgentArgs) -> anyhow::Result<()> {
    let flags = args.leader_election.clone();
    let opts = options(args).await?;
    let shutdown = crate::hub_cmd::shutdown_signal();
    let Some(config) = election(&flags, &opts)? else {
        let agent = syncagent::start(opts).await?;
        shutdown.await;
        tracing::info!("shutting down");
        agent.stop().await;
        return Ok(());
    };
    // Losing the Lease stops the agent and ends the process with an error, as the
    // reference's controller-runtime manager does; its Deployment restarts it as a
    // standby.
    let client = kube::Client::try_from(opts.service.clone()).context("service cluster client")?;
    let elector = ferry_syncer::leader::LeaderElector::new(client, config);
    let standby = match opts
        .engine
        .as_ref()
        .and_then(|e| e.health_address.or(e.metrics_address))
    {
        Some(addr) => Some(ferry_syncer::health::serve_standby(addr).await?.1),
        None => None,
    };
    ferry_syncer::leader::run_elected(
        elector,
        shutdown,
        || async move {
            if let Some(task) = standby {
                task.abort();
                let _ = task.await;
            }
            syncagent::start(opts).await
        },
        |agent| async move {
            tracing::info!("stopping the agent");
            agent.stop().await;
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SyncAgentArgs,
    }

    #[test]
    fn reference_flags_are_accepted() {
        let cli = Cli::try_parse_from([
            "syncagent",
            "--kcp-kubeconfig=/kcp",
            "--apiexportendpointslice-ref=databases.example.io",
            "--namespace=ferry-system",
            "--agent-name=nora",
            "--published-resource-selector=team=db",
            "--disabled-controllers=apiexport,sync",
            "--enable-leader-election=false",
        ])
        .unwrap();
        let args = cli.args;
        assert_eq!(args.apiexportendpointslice_ref, "databases.example.io");
        assert_eq!(args.agent_name.as_deref(), Some("nora"));
        assert_eq!(args.published_resource_selector.as_deref(), Some("team=db"));
        assert_eq!(args.disabled_controllers, ["apiexport", "sync"]);
        assert_eq!(args.metrics_address, "127.0.0.1:8085".parse().unwrap());
        assert_eq!(args.related_resync_period, std::time::Duration::from_secs(30));
        assert!(Cli::try_parse_from(["syncagent", "--kcp-kubeconfig=/kcp", "--namespace=x"]).is_err());
    }
}
