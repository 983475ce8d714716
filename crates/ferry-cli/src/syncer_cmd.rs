//! `ferry syncer`.

#[derive(clap::Args)]
pub struct SyncerArgs {}

pub async fn run(_args: SyncerArgs) -> anyhow::Result<()> {
    anyhow::bail!("the syncer is not built yet")
}
