//! A syncer run in-process against test hubs, with test-speed timers; its
//! readiness, its HTTP endpoints and its log.

use std::time::Duration;

use crate::TestHub;
use ferry_syncer::{RunningSyncer, SyncerOptions};
use serde_json::Value;

use crate::cluster::kube_config;
use crate::eventually;

/// Options for a syncer from `ws` on `up` to all of `down`, with test-speed timers.
pub async fn syncer_options(up: &TestHub, ws: &str, down: &TestHub, name: &str) -> SyncerOptions {
    let mut opts = SyncerOptions::new(
        kube_config(up, Some(ws)).await,
        kube_config(down, None).await,
        name,
    );
    opts.qps = Some(0.0);
    opts.workers = 4;
    opts.heartbeat_period = Duration::from_millis(500);
    opts.metrics_address = Some("127.0.0.1:0".parse().unwrap());
    opts.discovery_refresh = Duration::from_millis(300);
    opts.probe_period = Duration::from_millis(100);
    opts.min_backoff = Duration::from_millis(20);
    opts.max_backoff = Duration::from_millis(500);
    opts
}

pub async fn start_syncer(up: &TestHub, ws: &str, down: &TestHub, name: &str) -> RunningSyncer {
    init_logs();
    ferry_syncer::start(syncer_options(up, ws, down, name).await)
        .await
        .expect("syncer starts")
}

/// Starts a syncer with `opts` and waits until it is ready.
pub async fn start_ready(opts: SyncerOptions) -> RunningSyncer {
    let syncer = ferry_syncer::start(opts).await.expect("syncer starts");
    wait_ready(&syncer).await;
    syncer
}

/// Logs to the test output when `FERRY_TEST_LOG` is set (e.g. `ferry_syncer=debug`).
pub fn init_logs() {
    if let Ok(filter) = std::env::var("FERRY_TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
}

/// Waits until `/readyz` is true.
pub async fn wait_ready(syncer: &RunningSyncer) {
    eventually(15, "the syncer to be ready", || async {
        syncer.is_ready().then_some(())
    })
    .await;
}

pub use crate::net::http_get;

/// The condition of `type_` on a SyncerConfig.
pub fn condition(config: &Value, type_: &str) -> Option<Value> {
    config["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .cloned()
}

/// The syncer's log as text, for tests that check what a fault makes it say. Install it
/// on every thread of the test's runtime with [`LogCapture::runtime`].
#[derive(Clone)]
pub struct LogCapture {
    buffer: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    dispatch: tracing::Dispatch,
}

impl LogCapture {
    /// Captures events that `filter` (an `EnvFilter` directive such as
    /// `ferry_syncer=info,kube=warn`) lets through, one line each, without colours.
    pub fn new(filter: &str) -> LogCapture {
        let buffer = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let writer = {
            let buffer = buffer.clone();
            move || CaptureWriter(buffer.clone())
        };
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_ansi(false)
            .with_writer(writer)
            .finish();
        LogCapture {
            buffer,
            dispatch: tracing::Dispatch::new(subscriber),
        }
    }

    /// A multi-threaded runtime (two workers, as CI has two cores) whose threads all log
    /// here, so the hubs and the syncer it runs are captured without a global subscriber.
    pub fn runtime(&self) -> tokio::runtime::Runtime {
        let dispatch = self.dispatch.clone();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .on_thread_start(move || {
                // The thread ends with the runtime; its default lives as long.
                std::mem::forget(tracing::dispatcher::set_default(&dispatch));
            })
            .build()
            .expect("runtime")
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        let buffer = self.buffer.lock().unwrap();
        String::from_utf8_lossy(&buffer)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The WARN and ERROR lines after the first `skip` lines.
    pub fn warnings_after(&self, skip: usize) -> Vec<String> {
        self.lines()
            .into_iter()
            .skip(skip)
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect()
    }
}

struct CaptureWriter(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        if std::env::var_os("FERRY_TEST_LOG").is_some() {
            eprint!("{}", String::from_utf8_lossy(bytes));
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
