//! Logging: human-readable by default, JSON for machines.

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

pub fn init(verbosity: u8, format: LogFormat, quiet: bool) {
    let level = match verbosity {
        0 if quiet => "warn",
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    // kube-rs logs every failed request and every watch stream cut short
    // (`kube_client::client`), then returns the error, which Ferry reports in its own
    // words, once: during an outage those lines would repeat for every request.
    let filter = EnvFilter::try_from_env("FERRY_LOG").unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "{level},hyper=warn,h2=warn,rustls=warn,tower=warn,kube_client=warn,kube_client::client=off,kube_runtime=warn"
        ))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
