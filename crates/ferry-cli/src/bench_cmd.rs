//! `ferry bench`: benchmarks that report figures as ratios against a baseline
//! measured in the same run.

#[derive(clap::Subcommand)]
pub enum BenchCommand {
    /// Hub throughput, LIST latency, watch fan-out and memory.
    Hub(HubBenchArgs),
    /// Syncer throughput, latency and memory against hubs.
    Sync(crate::bench_sync::SyncBenchArgs),
}

#[derive(clap::Args)]
pub struct HubBenchArgs {
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Hub(_) => anyhow::bail!("not built yet"),
        BenchCommand::Sync(args) => crate::bench_sync::run(args).await,
    }
}
