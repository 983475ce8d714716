//! `ferry bench sync`.

#[derive(clap::Args)]
pub struct SyncBenchArgs {
    /// Objects to sync.
    #[arg(long, default_value_t = 1000)]
    pub objects: usize,
    /// Print the figures as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(_args: SyncBenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("not built yet")
}
