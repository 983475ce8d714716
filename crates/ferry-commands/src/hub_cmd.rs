//! `ferry hub`.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::hubs::start;
use ferry_server::server::HubOptions;
use ferry_server::storage::{EtcdOptions, DEFAULT_ETCD_PREFIX};
use ferry_server::strategy::core::service::ServiceRanges;

#[derive(clap::Args)]
pub struct HubArgs {
    /// Where the hub keeps its database, certificates and admin.kubeconfig.
    #[arg(long, default_value = "./hub-data")]
    pub data_dir: PathBuf,
    /// Address to serve HTTPS on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Extra host names or addresses for the generated serving certificate.
    #[arg(long = "host")]
    pub hosts: Vec<String>,
    /// Serving certificate (PEM) to use instead of the generated one.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) for --tls-cert-file.
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// Static bearer tokens, kube-apiserver's CSV format: `token,user,uid,"group1,group2"`.
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Also serve plain HTTP on 127.0.0.1:PORT (loopback only; requests are
    /// still authenticated). Off unless given.
    #[arg(long)]
    pub insecure_port: Option<u16>,
    /// Requests served at once before answering 429 (watches do not count).
    #[arg(long, default_value_t = 400)]
    pub max_requests_inflight: usize,
    /// Keep objects in memory only: nothing survives a restart (benchmark baselines, demos).
    #[arg(long, hide = true)]
    pub ephemeral: bool,
    /// Where objects are kept: `sqlite` (`<data-dir>/hub.db`) or `etcd`
    /// (`--etcd-servers`; several hubs can share one etcd).
    #[arg(long, value_enum, default_value_t = StorageKind::Sqlite)]
    pub storage: StorageKind,
    /// etcd members for `--storage etcd`, comma-separated (`http://127.0.0.1:2379`).
    #[arg(long, value_delimiter = ',')]
    pub etcd_servers: Vec<String>,
    /// The prefix of every key the hub keeps in etcd; hubs sharing it serve the same objects.
    #[arg(long, default_value = DEFAULT_ETCD_PREFIX)]
    pub etcd_prefix: String,
    /// CA bundle (PEM) to verify etcd's serving certificate.
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// Client certificate (PEM) to present to etcd.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// Private key (PEM) for --etcd-certfile.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    /// With --storage etcd: seconds the hub running the built-in controllers
    /// may go without renewing their Lease before another hub takes over.
    #[arg(long, default_value_t = 15)]
    pub leader_elect_lease_duration: u64,
    /// Do not run the mailbox controller (one mailbox workspace per SyncTarget).
    #[arg(long)]
    pub disable_mailbox_controller: bool,
    /// Do not run the where-resolver and placement translator (EdgePlacements
    /// in workload management workspaces fill the mailbox workspaces).
    #[arg(long)]
    pub disable_placement_translator: bool,
    /// The range Services' cluster IPs are allocated from (IPv4 CIDR), as
    /// kube-apiserver's flag. Its first address is `default/kubernetes`'s.
    #[arg(long, default_value = "10.96.0.0/12")]
    pub service_cluster_ip_range: String,
    /// The range NodePort and LoadBalancer Services' node ports come from.
    #[arg(long, default_value = "30000-32767")]
    pub service_node_port_range: String,
    /// kcp TMC: a SyncTarget whose syncer sent no heartbeat for this long
    /// becomes HeartbeatHealthy=False (and not Ready), as kcp's flag.
    #[arg(long, default_value = "1m", value_parser = crate::kubeconfig::parse_duration)]
    pub sync_target_heartbeat_threshold: std::time::Duration,
    /// Do not create kcp's `root:compute` workspace (the `kubernetes`
    /// APIExport SyncTargets and `kubectl ferry bind compute` use).
    #[arg(long)]
    pub disable_compute_workspace: bool,
    /// Do not serve the web console at /console/ (it reads the API with the
    /// signed-in user's own token, so it shows nothing the API would not).
    #[arg(long)]
    pub disable_console: bool,
}

/// `--storage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StorageKind {
    Sqlite,
    Etcd,
}

/// The etcd options the flags give, or why they do not fit together.
fn etcd_options(args: &HubArgs) -> anyhow::Result<Option<EtcdOptions>> {
    let etcd_flags = !args.etcd_servers.is_empty()
        || args.etcd_cafile.is_some()
        || args.etcd_certfile.is_some()
        || args.etcd_keyfile.is_some();
    match args.storage {
        StorageKind::Sqlite if etcd_flags => {
            anyhow::bail!("--etcd-* flags need --storage etcd (the default storage is sqlite)")
        }
        StorageKind::Sqlite => Ok(None),
        StorageKind::Etcd if args.ephemeral => {
            anyhow::bail!("--ephemeral and --storage etcd exclude each other")
        }
        StorageKind::Etcd => {
            let servers: Vec<String> = args
                .etcd_servers
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            if servers.is_empty() {
                anyhow::bail!(
                    "--storage etcd needs --etcd-servers, for example --etcd-servers http://127.0.0.1:2379"
                );
            }
            Ok(Some(EtcdOptions {
                servers,
                prefix: args.etcd_prefix.clone(),
                ca_file: args.etcd_cafile.clone(),
                cert_file: args.etcd_certfile.clone(),
                key_file: args.etcd_keyfile.clone(),
            }))
        }
    }
}

pub async fn run(args: HubArgs) -> anyhow::Result<()> {
    let mut opts = HubOptions::new(&args.data_dir);
    opts.etcd = etcd_options(&args)?;
    if args.leader_elect_lease_duration == 0 {
        anyhow::bail!("--leader-elect-lease-duration must be at least 1 (seconds)");
    }
    opts.controllers_lease_duration = std::time::Duration::from_secs(args.leader_elect_lease_duration);
    opts.listen = args.listen;
    opts.hosts = args.hosts;
    opts.tls_cert_file = args.tls_cert_file;
    opts.tls_private_key_file = args.tls_private_key_file;
    opts.max_in_flight = args.max_requests_inflight;
    opts.token_auth_file = args.token_auth_file;
    opts.insecure_port = args.insecure_port;
    opts.ephemeral = args.ephemeral;
    opts.mailbox_controller = !args.disable_mailbox_controller;
    opts.placement_translator = !args.disable_placement_translator;
    opts.sync_target_heartbeat_threshold = args.sync_target_heartbeat_threshold;
    opts.compute_workspace = !args.disable_compute_workspace;
    opts.console = !args.disable_console;
    opts.service_ranges = ServiceRanges {
        cluster_ip: ServiceRanges::parse_cidr(&args.service_cluster_ip_range)
            .map_err(|e| anyhow::anyhow!("--service-cluster-ip-range: {e}"))?,
        node_ports: ServiceRanges::parse_ports(&args.service_node_port_range)
            .map_err(|e| anyhow::anyhow!("--service-node-port-range: {e}"))?,
    };
    let running = start(opts).await?;
    if let Some(plain) = &running.insecure_url {
        println!("plain HTTP (loopback only) at {plain}");
    }
    println!(
        "ferry hub is ready at {} (export KUBECONFIG={})",
        running.url,
        running.kubeconfig_path.display()
    );
    if !args.disable_console {
        println!(
            "web console at {}/console/ (sign in with a bearer token)",
            running.url
        );
    }
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.stop().await;
    Ok(())
}

/// Ctrl-C or SIGTERM (what a pod is sent when it is stopped).
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("signal handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
