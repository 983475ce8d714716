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
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
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
    /// What to create: the ConfigMaps of the syncer profiles, or the service cluster's
    /// Databases of `--profile syncagent`.
    #[arg(long, value_enum, default_value = "configmap")]
    pub kind: LoadKind,
}

/// The objects `ferry bench create-load` creates.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadKind {
    /// [`crate::bench_sync::configmap`].
    Configmap,
    /// [`crate::database_service::database`] of the service cluster's CRD.
    Database,
}

impl LoadKind {
    /// The value of `--kind`.
    pub fn flag(self) -> &'static str {
        match self {
            LoadKind::Configmap => "configmap",
            LoadKind::Database => "database",
        }
    }

    /// The resource created.
    pub fn resource(self) -> ApiResource {
        match self {
            LoadKind::Configmap => crate::ar("", "v1", "ConfigMap", "configmaps"),
            LoadKind::Database => crate::database_service::local_databases(),
        }
    }

    fn object(self, name: String, namespace: &str) -> anyhow::Result<DynamicObject> {
        Ok(match self {
            LoadKind::Configmap => {
                serde_json::from_value(crate::bench_sync::configmap_json(name, namespace))?
            }
            LoadKind::Database => crate::database_service::database(&self.resource(), namespace, &name),
        })
    }
}

pub async fn run(args: CreateLoadArgs) -> anyhow::Result<()> {
    let client = crate::bench_cmd::client_for(&args.kubeconfig).await?;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &args.namespace, &args.kind.resource());
    // One request before the start signal, as the syncer has listed and watched before
    // its SyncerConfig appears: the connection is open when the clock starts.
    api.list(&kube::api::ListParams::default().limit(1))
        .await
        .with_context(|| format!("listing {} objects in {}", args.kind.flag(), args.namespace))?;
    let mut stdout = tokio::io::stdout();
    stdout.write_all(b"ready\n").await?;
    stdout.flush().await?;
    let mut go = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    stdin.read_line(&mut go).await?;
    let (kind, namespace) = (args.kind, args.namespace.clone());
    futures::stream::iter(0..args.objects)
        .map(|i| {
            let api = api.clone();
            let obj = kind.object(format!("{}-{i}", args.prefix), &namespace);
            async move { anyhow::Ok(api.create(&PostParams::default(), &obj?).await?) }
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
