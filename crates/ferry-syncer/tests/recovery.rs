//! End to end: recovery from an outage of either side, at 1,000 objects, with the
//! syncer's production timers (only the rate limit is off, so the measure is recovery,
//! not `--qps`). A side that comes back is noticed within a fraction of a second, the
//! work that waited for it runs at once, and the outage costs a line of log, not one
//! per object and retry.
//!
//! Copying 1,000 changes takes a few seconds in a debug build on a busy machine, so
//! recovery is measured against the same work done without an outage, moments before.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::*;
use ferry_syncer::{RunningSyncer, SyncerOptions};
use ferry_testkit::TestHub;
use futures::StreamExt;
use kube::runtime::{watcher, WatchStreamExt};
use serde_json::json;

const OBJECTS: usize = 1000;
/// How long a side stays down: long enough for the retry delays of the syncer before
/// this fix to grow to five seconds.
const OUTAGE: Duration = Duration::from_secs(5);
/// What recovery may add to the time the same work takes without an outage: 2 s plus a
/// quarter (the machine's load drifts between the two measures). Noticing the return
/// takes at most a quarter of a second, relisting 1,000 objects a fraction of one; the
/// syncer before this fix added five seconds or more after an upstream restart (a 410
/// waited out the full watch backoff).
fn recovery_bound(baseline: Duration) -> Duration {
    baseline + baseline / 4 + Duration::from_secs(2)
}
/// WARN/ERROR lines one outage may cost (one, when the side goes down, is expected).
const WARNINGS_BOUND: usize = 3;
/// What `ferry syncer` logs by default (`crates/ferry-commands/src/logging.rs`), less the
/// hubs, which are other processes in production.
const LOG_FILTER: &str = "ferry_syncer=info,hyper=warn,h2=warn,rustls=warn,tower=warn,kube_client=warn,kube_client::client=off,kube_runtime=warn";

/// Both tests measure time: running them side by side on two cores would measure each
/// other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn name(i: usize) -> String {
    format!("c{i:04}")
}

/// Sets `v` on every ConfigMap, 16 writes at a time.
async fn set_all(mb: &Cluster, v: &str) {
    futures::stream::iter(0..OBJECTS)
        .map(|i| async move {
            mb.merge(
                &configmaps(),
                Some("app"),
                &name(i),
                json!({ "data": { "v": v } }),
            )
            .await;
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// Waits until every ConfigMap downstream carries `v`. Watches rather than polls:
/// listing 1,000 objects every few milliseconds would compete with the syncer for the
/// two cores.
async fn converged(down: &Cluster, v: &str, secs: u64) {
    let api = down.api(&configmaps(), Some("app"));
    let mut events = watcher(api, watcher::Config::default()).default_backoff().boxed();
    let mut values: HashMap<String, bool> = HashMap::new();
    let mut count = 0;
    let all_carry_v = async {
        while let Some(event) = events.next().await {
            let (watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) = (match event {
                Ok(event) => event,
                Err(_) => continue,
            }) else {
                continue;
            };
            let carries_v = obj.data["data"]["v"] == v;
            let carried_v = values.insert(obj.metadata.name.clone().unwrap_or_default(), carries_v);
            match (carried_v == Some(true), carries_v) {
                (false, true) => count += 1,
                (true, false) => count -= 1,
                _ => {}
            }
            if count == OBJECTS {
                return;
            }
        }
    };
    if tokio::time::timeout(Duration::from_secs(secs), all_carry_v)
        .await
        .is_err()
    {
        panic!("timed out after {secs}s waiting for all {OBJECTS} copies to carry v={v} ({count} do)");
    }
}

/// Production timers (probe period, retry delays), without a rate limit.
async fn options(stage: &Stage) -> SyncerOptions {
    let mut opts = SyncerOptions::new(
        kube_config(&stage.up, Some(&stage.ws)).await,
        kube_config(&stage.wec, None).await,
        "florin",
    );
    opts.qps = Some(0.0);
    opts
}

/// A mailbox with 1,000 ConfigMaps, all synced, and how long copying them took from
/// the syncer's start: the same work, 1,000 objects waiting to be copied, as after a
/// downstream outage.
async fn synced_stage() -> (Stage, RunningSyncer, Duration) {
    let stage = Stage::start().await;
    let mb = &stage.mb;
    mb.create(&namespaces(), namespace("app")).await;
    sync_in(mb, "app", &[("", "configmaps")]).await;
    futures::stream::iter(0..OBJECTS)
        .map(|i| async move {
            mb.create(&configmaps(), configmap("app", &name(i), json!({ "v": "0" })))
                .await;
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    let started = Instant::now();
    let syncer = ferry_syncer::start(options(&stage).await)
        .await
        .expect("syncer starts");
    converged(&stage.down, "0", 60).await;
    let pending = started.elapsed();
    wait_ready(&syncer).await;
    (stage, syncer, pending)
}

/// How long 1,000 changes upstream take to be copied as they are made, with both sides
/// up: the same work as after an upstream restart.
async fn live_changes(stage: &Stage) -> Duration {
    let started = Instant::now();
    set_all(&stage.mb, "1").await;
    converged(&stage.down, "1", 60).await;
    started.elapsed()
}

/// A hub that was stopped, and its data, kept for a restart on the same address.
struct Stopped {
    listen: std::net::SocketAddr,
    data_dir: std::path::PathBuf,
    _keep_dir: Option<tempfile::TempDir>,
}

impl Stopped {
    async fn stop(hub: TestHub) -> Stopped {
        let listen = hub.running.addr;
        let data_dir = hub.data_dir().to_path_buf();
        let (running, keep_dir) = hub.into_parts();
        running.stop().await;
        Stopped {
            listen,
            data_dir,
            _keep_dir: keep_dir,
        }
    }

    async fn restart(&self) -> TestHub {
        TestHub::start_with(|o| {
            o.data_dir = self.data_dir.clone();
            o.listen = self.listen;
        })
        .await
    }
}

/// Recovery took at most [`recovery_bound`] of `baseline`, and the log said one
/// line when the side went down, one when it returned, and hardly anything else.
fn check_outage(side: &str, took: Duration, baseline: Duration, log: &LogCapture, skip: usize) {
    let lines: Vec<String> = log.lines().into_iter().skip(skip).collect();
    let warnings = log.warnings_after(skip);
    eprintln!(
        "{side} restart: {OBJECTS} changes copied {took:?} after the return (the same work \
         without an outage: {baseline:?}); {} WARN/ERROR lines",
        warnings.len()
    );
    assert!(
        took < recovery_bound(baseline),
        "after the {side} restart, {OBJECTS} changes took {took:?} to be copied, \
         {baseline:?} without an outage (at most {:?} expected)",
        recovery_bound(baseline)
    );
    assert!(
        warnings.len() <= WARNINGS_BOUND,
        "the {side} outage cost {} WARN/ERROR lines (at most {WARNINGS_BOUND} expected):\n{}",
        warnings.len(),
        warnings.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
    let said = |what: &str| lines.iter().filter(|l| l.contains(what)).count();
    for what in [
        format!("lost contact with the {side} server"),
        format!("the {side} server answers again"),
    ] {
        assert_eq!(said(&what), 1, "{what:?} once in:\n{}", lines.join("\n"));
    }
}

#[test]
fn upstream_restart_is_caught_up_at_once() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let log = LogCapture::new(LOG_FILTER);
    log.runtime().block_on(async {
        let (stage, syncer, _) = synced_stage().await;
        let baseline = live_changes(&stage).await;
        let Stage { up, wec, ws, .. } = stage;
        // Other work on the hub moves its resourceVersion past the last one the syncer's
        // watches saw, as on any busy server: after the restart, resuming them gets a 410.
        let root = Cluster::of(&up, Some("root")).await;
        root.create(&namespaces(), namespace("elsewhere")).await;
        let before = log.lines().len();

        let stopped = Stopped::stop(up).await;
        tokio::time::sleep(OUTAGE).await;
        let up = stopped.restart().await;
        let returned = Instant::now();
        // The restarted hub keeps no watch history: the syncer must relist to see these.
        let mb = Cluster::of(&up, Some(&ws)).await;
        set_all(&mb, "2").await;
        let down = Cluster::of(&wec, None).await;
        converged(&down, "2", 30).await;
        check_outage("upstream", returned.elapsed(), baseline, &log, before);
        syncer.stop().await;
    });
}

#[test]
fn downstream_restart_is_caught_up_at_once() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let log = LogCapture::new(LOG_FILTER);
    log.runtime().block_on(async {
        let (stage, syncer, baseline) = synced_stage().await;
        let Stage { wec, mb, .. } = stage;
        let before = log.lines().len();

        let stopped = Stopped::stop(wec).await;
        // Work piles up for the missing side.
        set_all(&mb, "2").await;
        tokio::time::sleep(OUTAGE).await;
        let wec = stopped.restart().await;
        let returned = Instant::now();
        let down = Cluster::of(&wec, None).await;
        converged(&down, "2", 30).await;
        check_outage("downstream", returned.elapsed(), baseline, &log, before);
        syncer.stop().await;
    });
}
