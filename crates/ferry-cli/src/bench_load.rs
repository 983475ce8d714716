//! `ferry bench create-load` (hidden): the baseline client of `ferry bench sync`, in a
//! process of its own so that it runs as the syncer does — its own process, a
//! current-thread runtime, the same number of requests in flight — and not on the
//! bench's runtime beside the measuring watches.
//!
//! Protocol on stdin/stdout: it connects, prints `ready`, waits for a line on stdin,
//! creates its objects, prints `done`, and exits when stdin closes. The bench times from the line it sends
//! until its own watch has seen every object, as it times the syncer.

use std::path::PathBuf;

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

#[derive(clap::Args)]
pub struct CreateLoadArgs {
    /// Kubeconfig of the server to create on.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Namespace of the objects (must exist).
    #[arg(long)]
    pub namespace: String,
    /// Objects are named `<prefix>-<i>`.
    #[arg(long)]
    pub prefix: String,
    /// How many objects.
    #[arg(long)]
    pub objects: usize,
    /// Requests in flight.
    #[arg(long)]
    pub concurrency: usize,
}

pub async fn run(args: CreateLoadArgs) -> anyhow::Result<()> {
    let client = crate::bench_cmd::client_for(&args.kubeconfig).await?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &args.namespace);
    // One request before the start signal, as the syncer has listed and watched before
    // its SyncerConfig appears: the connection is open when the clock starts.
    api.list(&kube::api::ListParams::default().limit(1))
        .await
        .with_context(|| format!("listing ConfigMaps in {}", args.namespace))?;
    let mut stdout = tokio::io::stdout();
    stdout.write_all(b"ready\n").await?;
    stdout.flush().await?;
    let mut go = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    stdin.read_line(&mut go).await?;
    let namespace = args.namespace.clone();
    futures::stream::iter(0..args.objects)
        .map(|i| {
            let api = api.clone();
            let cm = crate::bench_sync::configmap(format!("{}-{i}", args.prefix), &namespace);
            async move { api.create(&PostParams::default(), &cm).await }
        })
        .buffer_unordered(args.concurrency.max(1))
        .try_collect::<Vec<_>>()
        .await
        .with_context(|| format!("creating {}-* in {}", args.prefix, args.namespace))?;
    stdout.write_all(b"done\n").await?;
    stdout.flush().await?;
    // Stay until the bench has read this process's CPU time (it closes stdin).
    go.clear();
    stdin.read_line(&mut go).await?;
    Ok(())
}
