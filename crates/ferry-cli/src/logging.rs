//! Logging: human-readable by default, JSON for machines, at the `-v` levels of
//! kcp's workload syncer (klog's numbers):
//!
//! | `-v` | shows |
//! | --- | --- |
//! | 0, 1 | operations: start, connections, outages, warnings and errors |
//! | 2 | and each sync operation: a copy created, updated or deleted, a status returned |
//! | 3 | and each sync event: every object reconciled, with its outcome |
//! | 4 | debug: everything Ferry logs at debug |
//! | 5+ | trace |

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// The verbosity kcp's workload syncer document gives as its default.
pub const TMC_SYNCER_DEFAULT_VERBOSITY: u8 = 2;

/// The `tracing` filter for `-v verbosity` (`quiet`: warnings only at 0).
pub fn filter(verbosity: u8, quiet: bool) -> String {
    let sync = ferry_syncer::engine::SYNC_LOG;
    let level = match verbosity {
        0 if quiet => "warn".to_string(),
        0 | 1 => format!("info,{sync}=warn"),
        2 => "info".to_string(),
        3 => format!("info,{sync}=debug"),
        4 => "debug".to_string(),
        _ => "trace".to_string(),
    };
    // kube-rs logs every failed request and every watch stream cut short
    // (`kube_client::client`), then returns the error, which Ferry reports in its own
    // words, once: during an outage those lines would repeat for every request.
    format!(
        "{level},hyper=warn,h2=warn,rustls=warn,tower=warn,kube_client=warn,kube_client::client=off,kube_runtime=warn"
    )
}

pub fn init(verbosity: u8, format: LogFormat, quiet: bool) {
    let filter =
        EnvFilter::try_from_env("FERRY_LOG").unwrap_or_else(|_| EnvFilter::new(filter(verbosity, quiet)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_operations_show_from_level_2_and_sync_events_from_level_3() {
        let sync = ferry_syncer::engine::SYNC_LOG;
        assert!(filter(1, false).starts_with(&format!("info,{sync}=warn,")));
        assert!(filter(2, false).starts_with("info,hyper"));
        assert!(filter(3, false).starts_with(&format!("info,{sync}=debug,")));
        assert!(filter(4, false).starts_with("debug,"));
        assert!(filter(9, false).starts_with("trace,"));
        assert!(filter(0, true).starts_with("warn,"));
        for v in 0..6 {
            EnvFilter::try_new(filter(v, false)).expect("a valid filter");
        }
    }
}
