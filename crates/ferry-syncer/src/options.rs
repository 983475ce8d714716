//! How to run a syncer: both sides' connection settings, identity and tuning.

use std::net::SocketAddr;
use std::time::Duration;

/// Everything [`crate::start`] needs. Build with [`SyncerOptions::new`] and adjust fields.
#[derive(Clone)]
pub struct SyncerOptions {
    /// The upstream workspace (mailbox workspace or any cluster). Its URL may end in
    /// `/clusters/<path>`.
    pub upstream: kube::Config,
    /// The workload execution cluster.
    pub downstream: kube::Config,
    /// The SyncTarget this syncer serves. It names the syncer: the `ferry.dev/syncer`
    /// label on every copy carries it.
    pub sync_target_name: String,
    /// The SyncTarget's UID, if known (recorded in logs and conditions).
    pub sync_target_uid: Option<String>,
    /// Concurrent reconcilers.
    pub workers: usize,
    /// Requests per second to each side (token bucket), a cap whatever the server; `0`
    /// or less means unlimited. `None` (the default) goes at the server's pace where the
    /// server paces clients itself (API priority and fairness, or a Ferry hub), and at
    /// [`crate::ratelimit::FALLBACK_QPS`] elsewhere (see [`crate::ratelimit`]).
    pub qps: Option<f32>,
    /// Bucket size: requests that may go at once before the per-second limit applies.
    pub burst: u32,
    /// How often `status.lastSyncerHeartbeatTime` and conditions are written.
    pub heartbeat_period: Duration,
    /// Where `/metrics` (plus `/healthz` and `/readyz`) is served; `None` turns it off.
    pub metrics_address: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` (plus `/metrics`) are served; `None` turns it off.
    pub health_address: Option<SocketAddr>,
    /// Whether the downstream `.status` of downsynced objects is written back upstream
    /// (reported state). On by default; `ferry syncer --return-status=false` turns it off,
    /// and so does a KubeStellar config's `returnReportedState: false`.
    pub return_status: bool,
    /// How often discovery is re-read while some resource the configs name is not
    /// served (on either side) or a removed resource type still has copies to clean.
    pub discovery_refresh: Duration,
    /// How often each side's reachability is checked (`GET /version`) while it answers;
    /// a side that does not is checked every 250 ms (at most this period), so its return
    /// is noticed at once.
    pub probe_period: Duration,
    /// First retry delay of a failing object; doubles on every failure.
    pub min_backoff: Duration,
    /// Longest retry delay of a failing object (and of a failing watch).
    pub max_backoff: Duration,
    /// What kind of syncer this is (see [`crate::profile`]); `None` means the
    /// KubeStellar profile for `sync_target_name`.
    pub profile: Option<crate::profile::Profile>,
    /// Run as a kcp TMC workload syncer: `upstream` is then the SyncTarget's workspace,
    /// and the syncer reads and writes its virtual workspaces (see
    /// [`crate::profiles::tmc`]). Takes precedence over `profile`.
    pub tmc: Option<crate::profiles::tmc::TmcOptions>,
    /// Reconcile every object again this often (`--resync-period`); `None`: never
    /// (watches and relists already bring every change).
    pub resync_period: Option<Duration>,
    /// Sync only while holding this Lease in the downstream cluster
    /// (`--enable-leader-election`; see [`crate::leader`]); used by [`crate::run`].
    pub leader_election: Option<crate::leader::LeaderElectionConfig>,
    /// What the syncer reports as its version with every heartbeat
    /// (`status.syncerVersion`): `ferry --version`'s `0.1.0 (commit abc123def456)`
    /// when run as `ferry syncer`, else [`DEFAULT_VERSION`].
    pub version: String,
}

/// The version a syncer reports when its binary names none: this crate's release.
pub const DEFAULT_VERSION: &str = env!("CARGO_PKG_VERSION");

impl SyncerOptions {
    /// Options with the reference defaults: 4 workers, requests at the server's pace
    /// (30 qps, burst 20 to a server that does not pace clients), heartbeat every 20 s,
    /// discovery re-read every 10 s while something is missing.
    pub fn new(upstream: kube::Config, downstream: kube::Config, sync_target_name: &str) -> Self {
        SyncerOptions {
            upstream,
            downstream,
            sync_target_name: sync_target_name.to_string(),
            sync_target_uid: None,
            workers: 4,
            qps: None,
            burst: crate::ratelimit::FALLBACK_BURST,
            heartbeat_period: Duration::from_secs(20),
            metrics_address: None,
            health_address: None,
            return_status: true,
            discovery_refresh: Duration::from_secs(10),
            probe_period: Duration::from_secs(5),
            min_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(10),
            profile: None,
            tmc: None,
            resync_period: None,
            leader_election: None,
            version: DEFAULT_VERSION.into(),
        }
    }
}
