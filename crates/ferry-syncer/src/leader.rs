//! Leader election through a `coordination.k8s.io/v1` Lease, as client-go's
//! `leaderelection` package does it, so two replicas of a syncer or agent can
//! run and exactly one syncs.
//!
//! Each round reads the Lease and, if it is free, ours, or expired, writes it
//! back with an update conditional on the resourceVersion read: the server lets
//! one contender win each round (409 for the others). Expiry is judged on the
//! local clock only, as client-go does — a Lease has expired once its record
//! has not changed for `leaseDurationSeconds` since this process first saw it —
//! so the machines' clocks need not agree. The holder renews every retry
//! period and counts leadership as lost once no renewal has succeeded for the
//! renew deadline, or once the Lease names someone else.
//!
//! Why not a crate: `kube-leader-election` is built on kube 4 (Ferry uses 5),
//! and `kube-lease-manager` (kube 5) takes expired Leases by comparing their
//! renewTime with the local clock and relies on server-side-apply field
//! ownership rather than resourceVersion preconditions for exclusion.

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

/// Timing and naming of one election (client-go's `--leader-elect-*` flags).
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease, in the cluster the agent runs on.
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's name in `holderIdentity` (client-go: `<hostname>_<uuid>`).
    pub identity: String,
    /// How long a standby waits, after the Lease last changed, before taking it.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// How often contenders try to acquire and the holder renews.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// client-go's defaults: 15s lease, 10s renew deadline, 2s retry period.
    pub fn new(namespace: &str, name: &str) -> Self {
        LeaderElectionConfig {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Refuses timings under which two replicas could both believe they lead.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            !self.namespace.is_empty() && !self.name.is_empty(),
            "leader election needs a Lease namespace and name (--leader-elect-resource-namespace, --leader-elect-resource-name)"
        );
        anyhow::ensure!(
            self.lease_duration >= Duration::from_secs(1),
            "--leader-elect-lease-duration must be at least 1s (leaseDurationSeconds is whole seconds)"
        );
        anyhow::ensure!(
            self.renew_deadline < self.lease_duration,
            "--leader-elect-renew-deadline ({:?}) must be shorter than --leader-elect-lease-duration ({:?})",
            self.renew_deadline,
            self.lease_duration
        );
        anyhow::ensure!(
            self.retry_period < self.renew_deadline && !self.retry_period.is_zero(),
            "--leader-elect-retry-period ({:?}) must be above zero and shorter than --leader-elect-renew-deadline ({:?})",
            self.retry_period,
            self.renew_deadline
        );
        Ok(())
    }
}

/// `<hostname>_<uuid>`, as client-go's components name themselves; in a pod
/// the hostname is the pod's name.
pub fn default_identity() -> String {
    format!("{}_{}", hostname(), uuid::Uuid::new_v4())
}

/// This machine's name (`$HOSTNAME`, else the kernel's); in a pod, the pod's name.
pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ferry".to_string())
}

/// One contender in an election.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    /// The Lease's resourceVersion when last seen held by someone else, and
    /// when this process first saw that version.
    observed: Option<(String, Instant)>,
}

/// Leadership ended while held.
#[derive(Debug, thiserror::Error)]
#[error("lost the leader election Lease {namespace}/{name}: {why}")]
pub struct LostLease {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// Renewal failed for the renew deadline, or another holder is named.
    pub why: String,
}

impl LeaderElector {
    /// A contender for `config`'s Lease in the cluster `client` talks to.
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    /// The election's settings.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Returns once this replica holds the Lease (retries forever; cancel by
    /// dropping the future).
    pub async fn acquire(&mut self) {
        tracing::info!(lease = %self.lease_ref(), identity = %self.config.identity, "waiting to acquire the leader election Lease");
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %self.lease_ref(), identity = %self.config.identity, "acquired the leader election Lease");
                    return;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(lease = %self.lease_ref(), "leader election: {e}"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews the Lease every retry period while held; returns why once
    /// leadership is lost. Dropping the future stops renewing (then call
    /// [`release`](Self::release)).
    pub async fn hold(&mut self) -> LostLease {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => renewed = Instant::now(),
                Ok(false) => return self.lost("the Lease names another holder".into()),
                Err(e) => {
                    tracing::warn!(lease = %self.lease_ref(), "renewing the leader election Lease: {e}");
                    if renewed.elapsed() >= self.config.renew_deadline {
                        return self.lost(format!(
                            "not renewed for {:?} (--leader-elect-renew-deadline); last error: {e}",
                            self.config.renew_deadline
                        ));
                    }
                }
            }
        }
    }

    /// Gives the Lease up so a standby takes over at once (client-go's
    /// ReleaseOnCancel): empties holderIdentity if this replica still holds it.
    /// A renewal cut short by the caller may still land first, so a conflict
    /// is met by reading the Lease again.
    pub async fn release(&mut self) {
        for _ in 0..5 {
            let Ok(Some(mut lease)) = self.api.get_opt(&self.config.name).await else {
                return;
            };
            let spec = lease.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return;
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(now());
            match self
                .api
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await
            {
                Ok(_) => {
                    tracing::info!(lease = %self.lease_ref(), "released the leader election Lease");
                    return;
                }
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => {
                    tracing::warn!(lease = %self.lease_ref(), "could not release the leader election Lease (a standby takes over when it expires): {e}");
                    return;
                }
            }
        }
        tracing::warn!(lease = %self.lease_ref(), "could not release the leader election Lease (it kept changing); a standby takes over when it expires");
    }

    fn lease_ref(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn lost(&self, why: String) -> LostLease {
        LostLease {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            why,
        }
    }

    /// One round: whether this replica holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let seconds = i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let me = self.config.identity.clone();
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(seconds),
                    acquire_time: Some(now()),
                    renew_time: Some(now()),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(kube::Error::Api(s)) if s.code == 404 => {
                    tracing::warn!(
                        lease = %self.lease_ref(),
                        "cannot create the leader election Lease: namespace {:?} does not exist on this cluster; create it (kubectl create namespace {})",
                        self.config.namespace,
                        self.config.namespace
                    );
                    Err(kube::Error::Api(s))
                }
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ours = holder == me;
        if !ours && !holder.is_empty() {
            let rv = lease.metadata.resource_version.clone().unwrap_or_default();
            if self.observed.as_ref().is_none_or(|(seen, _)| *seen != rv) {
                self.observed = Some((rv, Instant::now()));
            }
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs)
                .unwrap_or(self.config.lease_duration);
            let since = self
                .observed
                .as_ref()
                .map(|(_, t)| *t)
                .unwrap_or_else(Instant::now);
            if since.elapsed() < duration {
                return Ok(false);
            }
            tracing::info!(lease = %self.lease_ref(), previous = %holder, "the leader election Lease expired; taking it over");
        }
        if !ours {
            spec.acquire_time = Some(now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(me);
        spec.lease_duration_seconds = Some(seconds);
        spec.renew_time = Some(now());
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observed = None;
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Runs `work` only while this replica holds the Lease: waits to acquire it
/// (or for `shutdown`), starts the work, renews while it runs, and stops it
/// when leadership is lost or `shutdown` completes. On shutdown the Lease is
/// released and `Ok` returned; on loss, [`LostLease`] is returned after the
/// work has stopped, and the caller should exit (as client-go's components
/// do) so that it comes back as a standby.
pub async fn run_elected<T, Start, Started, Stop, Stopped>(
    mut elector: LeaderElector,
    shutdown: impl Future<Output = ()>,
    start: Start,
    stop: Stop,
) -> anyhow::Result<()>
where
    Start: FnOnce() -> Started,
    Started: Future<Output = anyhow::Result<T>>,
    Stop: FnOnce(T) -> Stopped,
    Stopped: Future<Output = ()>,
{
    tokio::pin!(shutdown);
    tokio::select! {
        _ = elector.acquire() => {}
        _ = &mut shutdown => return Ok(()),
    }
    let work = match start().await {
        Ok(w) => w,
        Err(e) => {
            elector.release().await;
            return Err(e);
        }
    };
    let outcome = tokio::select! {
        lost = elector.hold() => Err(lost),
        _ = &mut shutdown => Ok(()),
    };
    stop(work).await;
    match outcome {
        Ok(()) => {
            elector.release().await;
            Ok(())
        }
        Err(lost) => {
            tracing::error!("{lost}: stopped syncing");
            Err(lost.into())
        }
    }
}
