//! `ferry bench hub`'s workspaces block: what an empty kcp workspace costs the
//! hub. On a hub of its own (SQLite, nothing else in it), `workspaces`
//! Workspaces are created in `rounds` equal rounds with 32 clients; measured:
//! creations per second in each round (a creation returns once the new
//! workspace holds what a fresh cluster has), and the hub's resident memory
//! and data directory before and after, per workspace.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use crate::ar;
use crate::bench_apiexport::client_at;

/// Clients creating workspaces at once.
pub const CLIENTS: usize = 32;

/// What the block measured.
pub struct Figures {
    pub workspaces: usize,
    /// Creations per second, one per round.
    pub per_sec: Vec<f64>,
    pub rss_before: u64,
    pub rss_after: u64,
    pub disk_before: u64,
    pub disk_after: u64,
}

/// Bytes of every file under `dir`.
pub fn dir_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

/// Create `workspaces` Workspaces named `bench-ws-<i>` in root of the hub at
/// `url` (admin config `base`), over `rounds` rounds; `rss` reads the hub
/// process's resident memory, `data_dir` is its data directory.
pub async fn measure(
    base: &kube::Config,
    url: &str,
    data_dir: &Path,
    workspaces: usize,
    rounds: usize,
    rss: impl Fn() -> u64,
) -> anyhow::Result<Figures> {
    anyhow::ensure!(workspaces > 0, "no workspaces to create");
    let root = client_at(base, &format!("{url}/clusters/root"))?;
    let api: Api<DynamicObject> =
        Api::all_with(root, &ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"));
    let (rss_before, disk_before) = (rss(), dir_bytes(data_dir)?);
    let rounds = rounds.clamp(1, workspaces);
    let mut per_sec = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let (from, to) = (workspaces * round / rounds, workspaces * (round + 1) / rounds);
        let start = Instant::now();
        futures::stream::iter(from..to)
            .map(|i| {
                let api = api.clone();
                async move {
                    let ws: DynamicObject = serde_json::from_value(json!({
                        "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
                        "metadata": {"name": format!("bench-ws-{i}")}
                    }))?;
                    api.create(&PostParams::default(), &ws)
                        .await
                        .with_context(|| format!("creating workspace bench-ws-{i}"))?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(CLIENTS)
            .try_collect::<Vec<()>>()
            .await?;
        per_sec.push((to - from) as f64 / start.elapsed().as_secs_f64());
    }
    // The last workspace made is usable at once, with its default namespaces.
    let last = client_at(base, &format!("{url}/clusters/root:bench-ws-{}", workspaces - 1))?;
    let namespaces = Api::<Namespace>::all(last)
        .list(&Default::default())
        .await
        .context("listing the namespaces of the last workspace made")?;
    for wanted in ["default", "kube-system", "kube-public"] {
        anyhow::ensure!(
            namespaces
                .items
                .iter()
                .any(|ns| ns.metadata.name.as_deref() == Some(wanted)),
            "the last workspace made has no namespace {wanted}"
        );
    }
    Ok(Figures {
        workspaces,
        per_sec,
        rss_before,
        rss_after: rss(),
        disk_before,
        disk_after: dir_bytes(data_dir)?,
    })
}
