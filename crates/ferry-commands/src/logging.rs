//! Logging: human-readable by default, JSON for machines, at the `-v` levels of
//! kcp's workload syncer (klog's numbers):
//!
//! | `-v` | shows |
//! | --- | --- |
//! | 0, 1 | operations: start, connections, outages, warnings and errors |
//! | 2 | and each sync operation: a copy created, updated or deleted, a status returned; the hub's failed requests |
//! | 3 | and each sync event: every object reconciled, with its outcome; every request the hub serves |
//! | 4 | debug: everything Ferry logs at debug, and where a failed command's error arose |
//! | 5+ | trace |
//!
//! Colour only when standard error is a terminal and `NO_COLOR` is unset or empty
//! (<https://no-color.org>), so redirected logs hold no escape codes.

use std::io::IsTerminal;

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
    let requests = ferry_server::api::REQUEST_LOG;
    let level = match verbosity {
        0 if quiet => "warn".to_string(),
        0 | 1 => format!("info,{sync}=warn,{requests}=warn"),
        2 => "info".to_string(),
        3 => format!("info,{sync}=debug,{requests}=debug"),
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

/// Whether log lines are coloured: only on a terminal, and not when `NO_COLOR`
/// is set to anything but the empty string.
pub fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

pub fn init(verbosity: u8, format: LogFormat, quiet: bool) {
    let filter =
        EnvFilter::try_from_env("FERRY_LOG").unwrap_or_else(|_| EnvFilter::new(filter(verbosity, quiet)));
    let ansi = colour(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
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
    fn colour_only_on_a_terminal_without_no_color() {
        use std::ffi::OsStr;
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
    }

    #[test]
    fn sync_operations_show_from_level_2_and_sync_events_from_level_3() {
        let sync = ferry_syncer::engine::SYNC_LOG;
        let requests = ferry_server::api::REQUEST_LOG;
        assert!(filter(1, false).starts_with(&format!("info,{sync}=warn,{requests}=warn,")));
        assert!(filter(2, false).starts_with("info,hyper"));
        assert!(filter(3, false).starts_with(&format!("info,{sync}=debug,{requests}=debug,")));
        assert!(filter(4, false).starts_with("debug,"));
        assert!(filter(9, false).starts_with("trace,"));
        assert!(filter(0, true).starts_with("warn,"));
        for v in 0..6 {
            // Each level shows more than the one below.
            if v > 1 {
                assert_ne!(filter(v, false), filter(v - 1, false));
            }
            EnvFilter::try_new(filter(v, false)).expect("a valid filter");
        }
    }
}
