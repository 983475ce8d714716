//! `ferry console`: the hub's web console served from this machine in front
//! of any hub, for hubs that run with `--disable-console` or sit behind a
//! gateway. The page and its API reads share this one origin; the reads go
//! on to the hub with the token the user signed in with.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args)]
pub struct ConsoleArgs {
    /// Kubeconfig naming the hub (default: $KUBECONFIG). Only its server and
    /// certificate authority are used; the page signs in with a bearer token.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Where to serve the console (plain HTTP; keep it on loopback).
    #[arg(long, default_value = "127.0.0.1:8001")]
    pub listen: SocketAddr,
}

/// The kubeconfig's hub as a client that carries no credentials and has no
/// read timeout (watches stay open), at the server's origin (a workspace
/// path in the server URL would be prefixed to the page's own paths).
pub fn anonymous_upstream(mut config: kube::Config) -> anyhow::Result<kube::Client> {
    config.auth_info = Default::default();
    config.read_timeout = None;
    let mut origin = config.cluster_url.clone().into_parts();
    origin.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
    config.cluster_url = http::Uri::from_parts(origin).context("the kubeconfig's server URL")?;
    Ok(kube::Client::try_from(config)?)
}

pub async fn run(args: ConsoleArgs) -> anyhow::Result<()> {
    let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let hub = config.cluster_url.clone();
    let upstream = anonymous_upstream(config)?;
    if !args.listen.ip().is_loopback() {
        tracing::warn!(
            "serving the console on {} over plain HTTP: tokens typed into it cross the network unencrypted",
            args.listen
        );
    }
    let app = ferry_console::router().merge(ferry_console::proxy(upstream));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    println!(
        "web console for {hub} at http://{}/console/ (sign in with a bearer token)",
        listener.local_addr()?
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(crate::hub_cmd::shutdown_signal())
        .await
        .context("serving the console")
}
