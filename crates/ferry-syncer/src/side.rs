//! The two servers a syncer talks to: a client, a rate limiter and reachability for each,
//! and reading discovery into [`DiscoveredResource`]s.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::discovery::{Discovery, Scope};

use crate::ratelimit::RateLimiter;
use crate::selection::DiscoveredResource;

/// Upstream (the workspace) or downstream (the workload cluster).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The workspace workloads come from.
    Upstream,
    /// The cluster workloads run in.
    Downstream,
}

impl Side {
    /// `upstream` or `downstream`, as in metric labels and messages.
    pub fn name(self) -> &'static str {
        match self {
            Side::Upstream => "upstream",
            Side::Downstream => "downstream",
        }
    }
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A connection to one side.
pub struct SideClient {
    /// Which side.
    pub side: Side,
    /// The kube-rs client (its URL may carry a `/clusters/<path>` prefix).
    pub client: kube::Client,
    /// Applied before every request the reconcilers make.
    pub limiter: RateLimiter,
    connected: AtomicBool,
}

impl SideClient {
    /// A client for `config`, limited to `qps`/`burst`.
    pub fn new(side: Side, config: kube::Config, qps: f32, burst: u32) -> anyhow::Result<Self> {
        let client =
            kube::Client::try_from(config).map_err(|e| anyhow::anyhow!("building the {side} client: {e}"))?;
        Ok(SideClient {
            side,
            client,
            limiter: RateLimiter::new(qps, burst),
            connected: AtomicBool::new(false),
        })
    }

    /// Whether the last contact succeeded.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Records reachability; returns the previous value.
    pub fn set_connected(&self, connected: bool) -> bool {
        self.connected.swap(connected, Ordering::Relaxed)
    }

    /// `GET /version` with a deadline: whether the server answers.
    pub async fn probe(&self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.client.apiserver_version()).await,
            Ok(Ok(_))
        )
    }

    /// Every resource (and subresource, as `resource/sub`) the server serves.
    pub async fn discover(&self) -> Result<Vec<DiscoveredResource>, kube::Error> {
        let discovery = match Discovery::new(self.client.clone()).run_aggregated().await {
            Ok(d) => d,
            Err(_) => Discovery::new(self.client.clone()).run().await?,
        };
        Ok(discovered_resources(&discovery))
    }
}

fn discovered_resources(discovery: &Discovery) -> Vec<DiscoveredResource> {
    let mut out = vec![];
    for group in discovery.groups() {
        let preferred = group.preferred_version_or_latest().to_string();
        for version in group.versions() {
            for (ar, caps) in group.versioned_resources(version) {
                let namespaced = caps.scope == Scope::Namespaced;
                for (sub, sub_caps) in &caps.subresources {
                    out.push(DiscoveredResource {
                        group: ar.group.clone(),
                        version: ar.version.clone(),
                        resource: format!("{}/{}", ar.plural, sub.plural),
                        kind: sub.kind.clone(),
                        namespaced,
                        verbs: sub_caps.operations.clone(),
                        preferred: version == preferred,
                    });
                }
                out.push(DiscoveredResource {
                    group: ar.group,
                    version: ar.version,
                    resource: ar.plural,
                    kind: ar.kind,
                    namespaced,
                    verbs: caps.operations,
                    preferred: version == preferred,
                });
            }
        }
    }
    out
}

/// Whether `discovered` lists `resource` (group, version, plural).
pub fn serves(discovered: &[DiscoveredResource], group: &str, version: &str, resource: &str) -> bool {
    discovered
        .iter()
        .any(|d| d.group == group && d.version == version && d.resource == resource)
}
