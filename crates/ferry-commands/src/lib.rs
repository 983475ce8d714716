//! The `ferry` command line: the hub, the syncer, registration, quickstart and
//! benchmarks. The binaries `ferry` and `kubectl-ferry` (a kubectl plugin, both
//! in `ferry-cli`) are thin wrappers around [`main`], which they hand what this
//! crate leaves out ([`Binary`]): the hub's built-in controllers, plugged into
//! every hub the commands start ([`hubs`]), and the version they were built as.
//! Leaving the controllers out keeps a controller change from recompiling the
//! commands.

pub mod bench_apiexport;
pub mod bench_cmd;
pub mod bench_compare;
pub mod bench_fleet;
pub mod bench_load;
pub mod bench_placement;
pub mod bench_requests;
pub mod bench_stats;
pub mod bench_sync;
pub mod bench_syncagent;
pub mod bench_workspaces;
pub mod bind_cmd;
pub mod console_cmd;
pub mod crds_cmd;
pub mod database_service;
pub mod docs_cmd;
pub mod ensure_cmd;
pub mod hub_cmd;
pub mod hub_process;
pub mod hubs;
pub mod kubeconfig;
pub mod kubeconfig_file;
pub mod kubestellar_cmd;
pub mod leader_flags;
pub mod logging;
pub mod quickstart;
pub mod quickstart_syncagent;
pub mod quickstart_tmc;
pub mod syncagent_cmd;
pub mod syncagent_gen;
pub mod syncer_cmd;
pub mod syncer_gen;
pub mod syncer_pod;
pub mod workload_cmd;
pub mod ws_cmd;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ferry",
    about = "Keep Kubernetes objects in sync between a control plane and workload clusters"
)]
pub struct Cli {
    /// Log verbosity, kcp's levels: 0-1 operations, 2 sync operations, 3 sync events,
    /// 4 debug, 5 trace [default: 2 for kcp's workload syncer, else 0]. From 4 on, a
    /// failing command also prints the error's causes one per line and where it arose.
    #[arg(short = 'v', long = "v", global = true)]
    verbosity: Option<u8>,
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
    /// Serve the web console against any hub (the hub serves it itself at /console/).
    Console(console_cmd::ConsoleArgs),
    /// Run a syncer beside a workload cluster.
    Syncer(syncer_cmd::SyncerArgs),
    /// Run kcp's TMC workload syncer (`ferry syncer --profile tmc`).
    WorkloadSyncer(syncer_cmd::SyncerArgs),
    /// Run kcp's api-syncagent beside a service cluster: publish its CRDs into an
    /// APIExport and sync the objects of every workspace that binds it.
    Syncagent(syncagent_cmd::SyncAgentArgs),
    /// Print the CustomResourceDefinitions of Ferry's APIs (pipe to `kubectl apply -f -`),
    /// less those of kinds the target server serves built in.
    Crds(crds_cmd::CrdsArgs),
    /// Run the whole system on this machine: a hub, two stand-in clusters, their syncers, a workload.
    Quickstart(quickstart::QuickstartArgs),
    /// Register a workload cluster: write the manifest that installs its syncer.
    SyncerGen(syncer_gen::SyncerGenArgs),
    /// Install kcp's api-syncagent for a service cluster: its ServiceAccount and rights in
    /// the provider workspace, and the manifest for the service cluster.
    SyncagentGen(syncagent_gen::SyncagentGenArgs),
    /// Create or update inventory objects.
    #[command(subcommand)]
    Ensure(ensure_cmd::EnsureCommand),
    /// KubeStellar's deployment shape: `init` (root:espw and root:imw1), `remove wmw NAME`.
    #[command(subcommand)]
    Kubestellar(kubestellar_cmd::KubestellarCommand),
    /// Remove what KubeStellar's commands made (`remove wmw NAME`, as `kubectl kubestellar remove wmw`).
    #[command(subcommand)]
    Remove(kubestellar_cmd::RemoveCommand),
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
    /// Print a shell completion script (`source <(ferry completion bash)`).
    Completion(CompletionArgs),
    /// Write man pages for `ferry` and each of its commands into a directory.
    Man(ManArgs),
    /// Write the book's reference pages (commands and CRDs) from the code.
    #[command(hide = true)]
    Docs(docs_cmd::DocsArgs),
}

/// What the binary supplies to [`main`].
pub struct Binary {
    /// `ferry --version`: the release and the commit it was built from.
    pub version: &'static str,
    /// The controllers of every hub the commands start.
    pub controllers: std::sync::Arc<dyn ferry_server::server::Controllers>,
}

/// The command line as `name`, answering `--version` with `version`.
fn command(name: &'static str, version: &'static str) -> clap::Command {
    Cli::command().name(name).bin_name(name).version(version)
}

#[derive(clap::Args)]
struct CompletionArgs {
    /// The shell to complete for.
    shell: clap_complete::Shell,
}

#[derive(clap::Args)]
struct ManArgs {
    /// Where to write the pages (created if missing), e.g. /usr/local/share/man/man1.
    #[arg(long, default_value = ".")]
    out_dir: std::path::PathBuf,
}

/// Prints the completion script for `shell` to standard output.
fn completion(mut command: clap::Command, name: &'static str, args: CompletionArgs) -> anyhow::Result<()> {
    // A kubectl plugin is completed through kubectl; its script is `ferry`'s.
    let bin = name.replace(' ', "-");
    // Into memory first: clap_complete panics when its writer fails, and a reader that
    // stops early (`| head`) closes the pipe.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, bin, &mut script);
    match std::io::Write::write_all(&mut std::io::stdout(), &script) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write the completion script: {e}"))
        }
        _ => Ok(()),
    }
}

/// Writes `ferry.1` and a page per command (`ferry-syncer.1`, ...) into `out_dir`.
fn man(command: clap::Command, args: ManArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out_dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", args.out_dir.display()))?;
    clap_mangen::generate_to(command, &args.out_dir)
        .map_err(|e| anyhow::anyhow!("cannot write man pages into {}: {e}", args.out_dir.display()))?;
    println!("wrote man pages into {}", args.out_dir.display());
    Ok(())
}

/// The `ApiResource` of `kind` (`plural`) in `group`/`version`, for `Api<DynamicObject>`.
pub fn ar(group: &str, version: &str, kind: &str, plural: &str) -> kube::core::ApiResource {
    kube::core::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk(group, version, kind),
        plural,
    )
}

/// mimalloc's settings for an agent (a syncer or the api-syncagent), which keeps its
/// stores for good and meets bursts (an initial sync, a relist) between long quiet
/// spells: pages freed after a burst are returned at once (`PURGE_DELAY=0`; by
/// default they are returned 10 ms later, but only when the heap's thread allocates
/// again, which an idle syncer's one thread does not), and no transparent huge pages
/// (which mimalloc asks for, and which keep whole 2 MiB pages resident for a few
/// live objects). Measured with `ferry bench sync --rss-levels 10000,100000`: 136.7
/// MiB at 100k synced objects without, 108.1 with; CPU per object unchanged.
const AGENT_ALLOCATOR_ENV: &[(&str, &str)] = &[("MIMALLOC_PURGE_DELAY", "0"), ("MIMALLOC_ALLOW_THP", "0")];

/// Runs this process again with [`AGENT_ALLOCATOR_ENV`] (each variable the user has
/// not set): mimalloc reads its options when the process starts, before `main`.
/// Returns (carrying on as it is) if that cannot be done.
fn agent_allocator() {
    use std::os::unix::process::CommandExt;
    let missing: Vec<_> = AGENT_ALLOCATOR_ENV
        .iter()
        .filter(|(name, _)| std::env::var_os(name).is_none())
        .collect();
    if missing.is_empty() {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let mut args = std::env::args_os();
    let mut again = std::process::Command::new(exe);
    if let Some(arg0) = args.next() {
        again.arg0(arg0);
    }
    again.args(args);
    for (name, value) in missing {
        again.env(name, value);
    }
    // Returns only if it failed.
    let error = again.exec();
    eprintln!(
        "note: could not restart with the agent's allocator settings ({error}); running with the defaults"
    );
}

/// The `-v` level from which logs include debug lines (kcp's 4).
const DEBUG: u8 = 4;

/// Parse the command line (as `name`) and run the command. A failure is one line on
/// standard error (`error: what failed: why`), whatever `RUST_BACKTRACE` says: a user
/// reads the cause, not Rust's frames; `-v 4` adds the causes one per line and the
/// backtrace.
pub fn main(name: &'static str, binary: Binary) -> std::process::ExitCode {
    hubs::plug(binary.controllers);
    let matches = command(name, binary.version).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(error) => error.exit(),
    };
    let verbosity = cli.verbosity.unwrap_or(0);
    if verbosity >= DEBUG && std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // Read by anyhow when an error is made; no other thread runs yet.
        std::env::set_var("RUST_LIB_BACKTRACE", "1");
    }
    match run(name, binary.version, cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) if verbosity >= DEBUG => {
            eprintln!("error: {error:?}");
            std::process::ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(name: &'static str, version: &'static str, cli: Cli) -> anyhow::Result<()> {
    if matches!(
        cli.command,
        Command::Syncer(_) | Command::WorkloadSyncer(_) | Command::Syncagent(_)
    ) {
        agent_allocator();
    }
    // The quickstart shows progress itself; its logs stay quiet unless asked for.
    let quiet = matches!(cli.command, Command::Quickstart(_)) && cli.verbosity.is_none();
    let tmc_syncer = match &cli.command {
        Command::WorkloadSyncer(_) => true,
        Command::Syncer(args) => args.profile == syncer_cmd::ProfileName::Tmc,
        _ => false,
    };
    let verbosity = cli.verbosity.unwrap_or(if tmc_syncer {
        logging::TMC_SYNCER_DEFAULT_VERBOSITY
    } else {
        0
    });
    logging::init(verbosity, cli.log_format, quiet);
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
            Command::Console(args) => console_cmd::run(args).await,
            Command::Syncer(args) => syncer_cmd::run(args, version).await,
            Command::WorkloadSyncer(mut args) => {
                args.profile = syncer_cmd::ProfileName::Tmc;
                syncer_cmd::run(args, version).await
            }
            Command::Syncagent(args) => syncagent_cmd::run(args).await,
            Command::Crds(args) => crds_cmd::run(args).await,
            Command::SyncerGen(args) => syncer_gen::run(args).await,
            Command::SyncagentGen(args) => syncagent_gen::run(args).await,
            Command::Quickstart(args) => quickstart::run(args).await,
            Command::Bind(cmd) => bind_cmd::run(cmd).await,
            Command::Ensure(cmd) => ensure_cmd::run(cmd).await,
            Command::Kubestellar(cmd) => kubestellar_cmd::run(cmd).await,
            Command::Remove(kubestellar_cmd::RemoveCommand::Wmw(args)) => kubestellar_cmd::remove(args).await,
            Command::Bench(cmd) => bench_cmd::run(cmd).await,
            Command::Ws(args) => ws_cmd::run(args).await,
            Command::Workload(cmd) => workload_cmd::run(cmd).await,
            Command::Completion(args) => completion(command(name, version), name, args),
            Command::Man(args) => man(Cli::command().version(version), args),
            Command::Docs(args) => docs_cmd::run(Cli::command().version(version), args),
        }
    })
}
