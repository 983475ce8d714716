//! The `ferry` command line: the hub, the syncer, registration, quickstart and
//! benchmarks. The binaries `ferry` and `kubectl-ferry` (a kubectl plugin) are
//! thin wrappers around [`main`].

pub mod bench_apiexport;
pub mod bench_cmd;
pub mod bench_compare;
pub mod bench_load;
pub mod bench_stats;
pub mod bench_sync;
pub mod bind_cmd;
pub mod crds_cmd;
pub mod ensure_cmd;
pub mod hub_cmd;
pub mod kubeconfig;
pub mod kubeconfig_file;
pub mod leader_flags;
pub mod logging;
pub mod quickstart;
pub mod quickstart_tmc;
pub mod syncagent_cmd;
pub mod syncer_cmd;
pub mod syncer_gen;
pub mod workload_cmd;
pub mod ws_cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ferry",
    version,
    about = "Keep Kubernetes objects in sync between a control plane and workload clusters"
)]
pub struct Cli {
    /// Log verbosity (0: info, 1: debug, 2+: trace).
    #[arg(short = 'v', long = "v", global = true, default_value_t = 0)]
    verbosity: u8,
    /// Log format: text or json.
    #[arg(long, global = true, default_value = "text")]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the hub: a Kubernetes-compatible API server with kcp-style workspaces.
    Hub(hub_cmd::HubArgs),
    /// Run a syncer beside a workload cluster.
    Syncer(syncer_cmd::SyncerArgs),
    /// Run kcp's TMC workload syncer (`ferry syncer --profile tmc`).
    WorkloadSyncer(syncer_cmd::SyncerArgs),
    /// Run kcp's api-syncagent beside a service cluster: publish its CRDs into an
    /// APIExport and sync the objects of every workspace that binds it.
    Syncagent(syncagent_cmd::SyncAgentArgs),
    /// Print the CustomResourceDefinitions of Ferry's APIs (pipe to `kubectl apply -f -`).
    Crds,
    /// Run the whole system on this machine: a hub, two stand-in clusters, their syncers, a workload.
    Quickstart(quickstart::QuickstartArgs),
    /// Register a workload cluster: write the manifest that installs its syncer.
    SyncerGen(syncer_gen::SyncerGenArgs),
    /// Create or update inventory objects.
    #[command(subcommand)]
    Ensure(ensure_cmd::EnsureCommand),
    /// Measure the hub or the syncer.
    #[command(subcommand)]
    Bench(bench_cmd::BenchCommand),
    /// Bind an API into the current workspace (`bind apiexport root:provider:widgets.example.io`).
    #[command(subcommand)]
    Bind(bind_cmd::BindCommand),
    /// Move between workspaces, create them, show them (like kcp's `kubectl ws`).
    #[command(name = "ws", visible_alias = "workspace", alias = "workspaces")]
    Ws(ws_cmd::WsArgs),
    /// kcp workload sync: register a SyncTarget and its syncer; cordon, uncordon or drain it.
    #[command(subcommand)]
    Workload(workload_cmd::WorkloadCommand),
}

/// Parse the command line (as `name`) and run the command.
pub fn main(name: &'static str) -> anyhow::Result<()> {
    let cli = Cli::command().name(name).get_matches();
    let cli = Cli::from_arg_matches(&cli)?;
    // The quickstart shows progress itself; its logs stay quiet unless asked for.
    let quiet = matches!(cli.command, Command::Quickstart(_)) && cli.verbosity == 0;
    logging::init(cli.verbosity, cli.log_format, quiet);
    // A syncer is mostly waiting on its two servers; one thread avoids cross-thread
    // wake-ups and leaves the other cores to the servers beside it. The sync bench's
    // baseline client runs the same way, so the two are measured alike.
    let runtime = match cli.command {
        Command::Syncer(_)
        | Command::WorkloadSyncer(_)
        | Command::Syncagent(_)
        | Command::Bench(bench_cmd::BenchCommand::CreateLoad(_)) => {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        }
        _ => tokio::runtime::Builder::new_multi_thread().enable_all().build()?,
    };
    runtime.block_on(async move {
        match cli.command {
            Command::Hub(args) => hub_cmd::run(args).await,
            Command::Syncer(args) => syncer_cmd::run(args).await,
            Command::WorkloadSyncer(mut args) => {
                args.profile = syncer_cmd::ProfileName::Tmc;
                syncer_cmd::run(args).await
            }
            Command::Syncagent(args) => syncagent_cmd::run(args).await,
            Command::Crds => crds_cmd::run(),
            Command::SyncerGen(args) => syncer_gen::run(args).await,
            Command::Quickstart(args) => quickstart::run(args).await,
            Command::Bind(cmd) => bind_cmd::run(cmd).await,
            Command::Ensure(cmd) => ensure_cmd::run(cmd).await,
            Command::Bench(cmd) => bench_cmd::run(cmd).await,
            Command::Ws(args) => ws_cmd::run(args).await,
            Command::Workload(cmd) => workload_cmd::run(cmd).await,
        }
    })
}
