//! `ferry syncer`: keep a workload cluster in sync with its upstream workspace.
//!
//! `--profile kubestellar` (the default) reads SyncerConfigs in a mailbox workspace;
//! `--profile tmc` (or `ferry workload-syncer`) is kcp's TMC workload syncer: it reads
//! its SyncTarget in `--from-cluster` and syncs what is scheduled onto it. kcp's flag
//! names (`--from-cluster`, `-r/--resources`, ...) and the seed's
//! (`--kcp-kubeconfig`, `--cluster-kubeconfig`, `--workspace-cluster`) are accepted.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

/// Which kind of syncer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileName {
    /// KubeStellar's edge syncer: SyncerConfigs in a mailbox workspace.
    Kubestellar,
    /// kcp's TMC workload syncer: objects scheduled onto a SyncTarget.
    Tmc,
    /// kcp's api-syncagent (for `ferry quickstart`; the agent itself is `ferry syncagent`).
    Syncagent,
}

#[derive(clap::Args)]
pub struct SyncerArgs {
    /// Which kind of syncer: kubestellar (KubeStellar's edge syncer, reading a
    /// mailbox workspace) or tmc (kcp's TMC workload syncer); syncagent is for
    /// `ferry quickstart --profile syncagent` (the agent itself runs as `ferry syncagent`).
    #[arg(long, value_enum, default_value = "kubestellar")]
    pub profile: ProfileName,
    /// Kubeconfig of the upstream workspace (its server URL may end in /clusters/<path>).
    #[arg(long, visible_alias = "kcp-kubeconfig")]
    pub from_kubeconfig: PathBuf,
    /// Context in --from-kubeconfig (default: its current context).
    #[arg(long)]
    pub from_context: Option<String>,
    /// The upstream workspace (logical cluster path, e.g. root:my-org); with tmc, the
    /// one holding the SyncTarget. Default: the server URL's own /clusters/<path>.
    #[arg(long, visible_alias = "workspace-cluster")]
    pub from_cluster: Option<String>,
    /// Kubeconfig of the workload cluster (default: the in-cluster configuration).
    #[arg(long, visible_alias = "cluster-kubeconfig")]
    pub to_kubeconfig: Option<PathBuf>,
    /// Context in --to-kubeconfig (default: its current context).
    #[arg(long)]
    pub to_context: Option<String>,
    /// The SyncTarget this syncer serves; names the syncer on every copy it makes.
    #[arg(long)]
    pub sync_target_name: String,
    /// The SyncTarget's UID (tmc: required, and a SyncTarget with another uid is
    /// refused; kubestellar: recorded in logs).
    #[arg(long)]
    pub sync_target_uid: Option<String>,
    /// tmc: resources whose schemas are imported besides those the SyncTarget lists
    /// (<plural>.<group>, e.g. routes.route.openshift.io), so the hub can accept them.
    #[arg(short = 'r', long, value_delimiter = ',')]
    pub resources: Vec<String>,
    /// tmc: how often the cluster's schemas are imported upstream (APIResourceImports
    /// of the SyncTarget, from which the hub decides what it can sync).
    #[arg(long, default_value = "1m", value_parser = crate::kubeconfig::parse_duration)]
    pub api_import_poll_interval: Duration,
    /// tmc: how long a downstream kcp-<hash> namespace whose upstream namespace is gone
    /// is kept; it is then deleted only if it is empty.
    #[arg(long, default_value = "30s", value_parser = crate::kubeconfig::parse_duration)]
    pub downstream_namespace_clean_delay: Duration,
    /// tmc: kcp feature gates (accepted for compatibility; none changes Ferry's syncer).
    #[arg(long, value_delimiter = ',')]
    pub feature_gates: Vec<String>,
    /// tmc: kcp's DNS server image (accepted for compatibility; Ferry runs no DNS
    /// server, so workloads resolve names in the physical cluster).
    #[arg(long)]
    pub dns_image: Option<String>,
    /// Reconcile every object again this often (0: never; watches and relists already
    /// catch every change).
    #[arg(long, default_value = "0s", value_parser = crate::kubeconfig::parse_duration)]
    pub resync_period: Duration,
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
    /// How often the heartbeat is written (onto the SyncerConfigs, or with tmc the
    /// SyncTarget's status.lastSyncerHeartbeatTime), e.g. 20s, 1m.
    #[arg(long, default_value = "20s", value_parser = crate::kubeconfig::parse_duration)]
    pub heartbeat_period: Duration,
    /// Where to serve /metrics (plus /healthz and /readyz); port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub metrics_address: SocketAddr,
    /// Where to serve /healthz and /readyz, if not on the metrics address.
    #[arg(long)]
    pub health_address: Option<SocketAddr>,
    /// Write the downstream status of downsynced objects back upstream (reported state).
    /// kubestellar: a SyncerConfig or EdgeSyncConfig with `returnReportedState: false`
    /// turns it off as well.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub return_status: bool,
    #[command(flatten)]
    pub leader_election: crate::leader_flags::LeaderElectionArgs,
    /// Namespace of the leader election Lease in the workload cluster (default: the
    /// namespace the syncer's pod runs in, or `default` outside a cluster).
    #[arg(long)]
    pub leader_elect_resource_namespace: Option<String>,
    /// Name of the leader election Lease (default: ferry-syncer.<sync-target-name>).
    #[arg(long)]
    pub leader_elect_resource_name: Option<String>,
}

/// Runs the syncer, reporting `version` (`ferry --version`'s) with its heartbeats.
pub async fn run(args: SyncerArgs, version: &str) -> anyhow::Result<()> {
    let kubestellar = args.profile == ProfileName::Kubestellar;
    let mut opts = options(args).await?;
    opts.version = version.to_string();
    if kubestellar {
        crate::syncer_gen::check_mailbox_owner(&opts.upstream, &opts.sync_target_name).await?;
    }
    // With --enable-leader-election, losing the Lease stops syncing and ends the
    // process with an error, as client-go's components do; its supervisor (the
    // Deployment) restarts it as a standby.
    ferry_syncer::run(opts, crate::hub_cmd::shutdown_signal()).await
}

/// The syncer's options from the flags.
pub async fn options(args: SyncerArgs) -> anyhow::Result<ferry_syncer::SyncerOptions> {
    anyhow::ensure!(
        args.profile != ProfileName::Syncagent,
        "--profile syncagent: the api-syncagent runs as `ferry syncagent --kcp-kubeconfig ... --apiexportendpointslice-ref ... --namespace ...`"
    );
    let mut upstream =
        crate::kubeconfig::load(Some(&args.from_kubeconfig), args.from_context.as_deref()).await?;
    if let Some(cluster) = &args.from_cluster {
        upstream = ferry_server::kubeconfig::at_workspace(&upstream, cluster)
            .with_context(|| format!("--from-cluster {cluster:?} is not a workspace path"))?;
    }
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
    opts.resync_period = (!args.resync_period.is_zero()).then_some(args.resync_period);
    let lease_namespace = args
        .leader_elect_resource_namespace
        .clone()
        .unwrap_or_else(crate::leader_flags::own_namespace);
    let lease_name = args
        .leader_elect_resource_name
        .clone()
        .unwrap_or_else(|| format!("ferry-syncer.{}", args.sync_target_name));
    opts.leader_election = args.leader_election.config(&lease_namespace, &lease_name)?;
    if args.profile == ProfileName::Tmc {
        let uid = opts.sync_target_uid.clone().filter(|u| !u.is_empty()).context(
            "--sync-target-uid is required with --profile tmc: kubectl get synctarget <name> -o jsonpath='{.metadata.uid}'",
        )?;
        let mut tmc = ferry_syncer::profiles::tmc::TmcOptions::new(&uid);
        tmc.heartbeat_period = args.heartbeat_period;
        tmc.namespace_clean_delay = args.downstream_namespace_clean_delay;
        tmc.resources = args.resources;
        tmc.api_import_poll_interval = args.api_import_poll_interval;
        if !args.feature_gates.is_empty() || args.dns_image.is_some() {
            tracing::info!(feature_gates = ?args.feature_gates, dns_image = ?args.dns_image, "--feature-gates and --dns-image are accepted for kcp compatibility and change nothing");
        }
        if let Ok(namespace) = std::env::var("NAMESPACE") {
            tracing::info!(%namespace, "the syncer runs in namespace {namespace}");
        }
        opts.tmc = Some(tmc);
    }
    Ok(opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SyncerArgs,
    }

    #[test]
    fn kcp_and_seed_flag_names_are_accepted() {
        let cli = Cli::try_parse_from([
            "syncer",
            "--profile=tmc",
            "--kcp-kubeconfig=/kcp/kubeconfig",
            "--workspace-cluster=root:my-org",
            "--cluster-kubeconfig=/pcluster",
            "--sync-target-name=east",
            "--sync-target-uid=u-1",
            "-r",
            "routes.route.openshift.io,services",
            "--api-import-poll-interval=5s",
            "--downstream-namespace-clean-delay=1m",
            "--resync-period=30s",
            "--heartbeat-period=15s",
            "--feature-gates=SyncerTunnel=true",
            "--dns-image=kcp/dns",
        ])
        .unwrap();
        let args = cli.args;
        assert_eq!(args.profile, ProfileName::Tmc);
        assert_eq!(args.from_cluster.as_deref(), Some("root:my-org"));
        assert_eq!(args.resources, ["routes.route.openshift.io", "services"]);
        assert_eq!(args.downstream_namespace_clean_delay, Duration::from_secs(60));
        assert_eq!(args.resync_period, Duration::from_secs(30));
        assert_eq!(
            args.to_kubeconfig.as_deref(),
            Some(std::path::Path::new("/pcluster"))
        );
    }
}
