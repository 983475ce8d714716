//! The two servers a syncer talks to: a client, a rate limiter and reachability for each,
//! and reading discovery into [`DiscoveredResource`]s.

use std::time::{Duration, Instant};

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

/// Whether a side answers, as far as the syncer knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reachability {
    /// Not asked yet.
    Unknown,
    /// The last probe or request got an answer.
    Reachable,
    /// A request got no answer, and no probe has since.
    Unreachable {
        /// When contact was lost.
        since: Instant,
    },
}

/// A connection to one side.
pub struct SideClient {
    /// Which side.
    pub side: Side,
    /// The kube-rs client (its URL may carry a `/clusters/<path>` prefix).
    pub client: kube::Client,
    /// Applied before every request the reconcilers make.
    pub limiter: RateLimiter,
    reachability: tokio::sync::watch::Sender<Reachability>,
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
            reachability: tokio::sync::watch::Sender::new(Reachability::Unknown),
        })
    }

    /// Whether the last contact succeeded.
    pub fn is_connected(&self) -> bool {
        *self.reachability.borrow() == Reachability::Reachable
    }

    /// What is known about reaching this side.
    pub fn reachability(&self) -> Reachability {
        *self.reachability.borrow()
    }

    /// Records that a request got no answer. Returns the state before, if this changed it.
    pub fn mark_unreachable(&self) -> Option<Reachability> {
        let mut before = None;
        self.reachability.send_if_modified(|state| match *state {
            Reachability::Unreachable { .. } => false,
            previous => {
                before = Some(previous);
                *state = Reachability::Unreachable {
                    since: Instant::now(),
                };
                true
            }
        });
        before
    }

    /// Records that the server answered. Returns the state before, if this changed it.
    pub fn mark_reachable(&self) -> Option<Reachability> {
        let mut before = None;
        self.reachability.send_if_modified(|state| {
            if *state == Reachability::Reachable {
                return false;
            }
            before = Some(std::mem::replace(state, Reachability::Reachable));
            true
        });
        before
    }

    /// Waits until the side is known to answer (at once if it is).
    pub async fn reachable(&self) {
        let mut changes = self.reachability.subscribe();
        // The sender lives as long as `self`, so this cannot fail while awaited.
        let _ = changes.wait_for(|r| *r == Reachability::Reachable).await;
    }

    /// A receiver that sees every change of reachability.
    pub fn reachability_changes(&self) -> tokio::sync::watch::Receiver<Reachability> {
        self.reachability.subscribe()
    }

    /// `GET /version` with a deadline: `Err` says why the server did not answer.
    pub async fn probe(&self, timeout: Duration) -> Result<(), String> {
        match tokio::time::timeout(timeout, self.client.apiserver_version()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(format!("GET /version failed: {e}")),
            Err(_) => Err(format!("no answer to GET /version within {timeout:?}")),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn client() -> SideClient {
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        SideClient::new(Side::Downstream, config, 0.0, 1).unwrap()
    }

    #[tokio::test]
    async fn each_change_of_reachability_is_reported_once() {
        let side = client();
        assert_eq!(side.reachability(), Reachability::Unknown);
        assert_eq!(side.mark_unreachable(), Some(Reachability::Unknown));
        assert_eq!(side.mark_unreachable(), None, "already known");
        assert!(!side.is_connected());
        assert!(matches!(
            side.mark_reachable(),
            Some(Reachability::Unreachable { .. })
        ));
        assert_eq!(side.mark_reachable(), None);
        assert_eq!(side.mark_unreachable(), Some(Reachability::Reachable));
    }

    #[tokio::test]
    async fn waiting_for_a_side_ends_when_it_answers() {
        let side = Arc::new(client());
        side.mark_unreachable();
        let waiter = tokio::spawn({
            let side = side.clone();
            async move { side.reachable().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        side.mark_reachable();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .unwrap();
        // Reachable already: no wait.
        side.reachable().await;
    }
}
