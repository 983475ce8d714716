//! The two servers a syncer talks to: a client, a rate limiter and reachability for each,
//! and reading discovery into [`DiscoveredResource`]s. The probe that checks
//! reachability also reads whether the server paces clients itself, which decides the
//! limiter's default (see [`crate::ratelimit`]). A side's server may move while the
//! syncer runs ([`SideClient::retarget`]): kcp's syncer virtual workspace is wherever
//! the SyncTarget says it is now.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::discovery::{Discovery, Scope};

use parking_lot::Mutex;

use crate::ratelimit::{Pacing, RateLimiter, ServerPacing};
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
    /// The kube-rs client (its URL may carry a `/clusters/<path>` prefix); its requests
    /// go to the server [`SideClient::retarget`] last named.
    pub client: kube::Client,
    server: Server,
    /// Applied before every request the reconcilers make.
    pub limiter: RateLimiter,
    pacing: Pacing,
    /// How the server paces clients, once it has answered a probe.
    server_pacing: Mutex<Option<ServerPacing>>,
    reachability: tokio::sync::watch::Sender<Reachability>,
    /// Clients addressing one logical cluster (`/clusters/<c>` under this side's URL),
    /// made on first use; they share this client's connections.
    in_clusters: Mutex<std::collections::HashMap<String, kube::Client>>,
    /// Where objects going up are read and written, if not through `client` (kcp TMC's
    /// upsyncer virtual workspace), with its per-cluster clients.
    upsync: Option<Upsync>,
}

/// Where objects going up are read and written, when not through the side's own client.
struct Upsync {
    client: kube::Client,
    server: Server,
    /// Its per-cluster clients.
    in_clusters: Mutex<std::collections::HashMap<String, kube::Client>>,
}

/// The client for the server a side talks to now.
type Server = Arc<Mutex<kube::Client>>;

/// A client for `config`'s server, and a client that sends each request to whichever
/// server the first holds when the request is made (requests under way finish where
/// they were sent).
fn following(config: kube::Config) -> Result<(kube::Client, Server), kube::Error> {
    let default_namespace = config.default_namespace.clone();
    let server: Server = Arc::new(Mutex::new(kube::Client::try_from(config)?));
    let current = server.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = current.lock().clone();
        async move { client.send(request).await }
    });
    Ok((kube::Client::new(service, default_namespace), server))
}

impl SideClient {
    /// A client for `config`, its requests paced as `pacing` says (until the server has
    /// answered a probe, as for a server that does not pace clients).
    pub fn new(side: Side, config: kube::Config, pacing: Pacing) -> anyhow::Result<Self> {
        let (client, server) =
            following(config).map_err(|e| anyhow::anyhow!("building the {side} client: {e}"))?;
        let (qps, burst) = pacing.limit_for(ServerPacing::Unknown);
        Ok(SideClient {
            side,
            client,
            server,
            limiter: RateLimiter::new(qps, burst),
            pacing,
            server_pacing: Mutex::new(None),
            reachability: tokio::sync::watch::Sender::new(Reachability::Unknown),
            in_clusters: Mutex::new(std::collections::HashMap::new()),
            upsync: None,
        })
    }

    /// Objects going up are read and written through `config` (kcp TMC's upsyncer
    /// virtual workspace) rather than this side's own URL.
    pub fn with_upsync(mut self, config: kube::Config) -> anyhow::Result<Self> {
        let side = self.side;
        let (client, server) =
            following(config).map_err(|e| anyhow::anyhow!("building the {side} client for upsync: {e}"))?;
        self.upsync = Some(Upsync {
            client,
            server,
            in_clusters: Mutex::new(std::collections::HashMap::new()),
        });
        Ok(self)
    }

    /// From now on this side's requests go to `config`'s server, and, given `upsync`,
    /// the requests of objects going up to that one's (see [`SideClient::with_upsync`]).
    /// Every client of the side follows, per-cluster ones included; requests and
    /// watches under way stay where they were sent (see [`crate::engine::Engine::moved`]).
    pub fn retarget(&self, config: kube::Config, upsync: Option<kube::Config>) -> anyhow::Result<()> {
        let side = self.side;
        let client =
            kube::Client::try_from(config).map_err(|e| anyhow::anyhow!("building the {side} client: {e}"))?;
        let upsync = match (upsync, &self.upsync) {
            (Some(config), Some(to)) => Some((
                kube::Client::try_from(config)
                    .map_err(|e| anyhow::anyhow!("building the {side} client for upsync: {e}"))?,
                &to.server,
            )),
            _ => None,
        };
        *self.server.lock() = client;
        if let Some((client, server)) = upsync {
            *server.lock() = client;
        }
        Ok(())
    }

    /// The client for objects travelling in `direction` in logical cluster `cluster`
    /// (see [`SideClient::client_in`]).
    pub fn client_for(&self, direction: crate::selection::Direction, cluster: Option<&str>) -> kube::Client {
        match (&self.upsync, direction) {
            (Some(upsync), crate::selection::Direction::Upsync) => match cluster {
                None => upsync.client.clone(),
                Some(cluster) => upsync
                    .in_clusters
                    .lock()
                    .entry(cluster.to_string())
                    .or_insert_with(|| in_cluster(upsync.client.clone(), cluster))
                    .clone(),
            },
            _ => self.client_in(cluster),
        }
    }

    /// The client for logical cluster `cluster` of a side that spans several (`*` for
    /// all of them, as lists and watches use), or this side's own client for `None`.
    pub fn client_in(&self, cluster: Option<&str>) -> kube::Client {
        let Some(cluster) = cluster else {
            return self.client.clone();
        };
        let mut clients = self.in_clusters.lock();
        clients
            .entry(cluster.to_string())
            .or_insert_with(|| in_cluster(self.client.clone(), cluster))
            .clone()
    }

    /// How the server paces clients, as its last answer to a probe showed.
    pub fn server_pacing(&self) -> Option<ServerPacing> {
        *self.server_pacing.lock()
    }

    /// Records how the server paces clients and sets the limiter to match (a change is
    /// logged once).
    fn judged(&self, server: ServerPacing) {
        let before = self.server_pacing.lock().replace(server);
        if before == Some(server) {
            return;
        }
        let (qps, burst) = self.pacing.limit_for(server);
        self.limiter.set_limit(qps, burst);
        let side = self.side;
        let limit = if qps > 0.0 {
            format!("at most {qps} requests per second (burst {burst})")
        } else {
            "no client-side limit".to_string()
        };
        match (self.pacing, server) {
            (Pacing::Capped { .. }, _) => {
                tracing::debug!(%side, ?server, "requests to the {side} server: {limit} (--qps)")
            }
            (_, ServerPacing::PriorityAndFairness) => tracing::info!(
                %side,
                "the {side} server does API priority and fairness: requests go at its pace ({limit}; --qps sets a cap)"
            ),
            (_, ServerPacing::FerryHub) => tracing::info!(
                %side,
                "the {side} server is a Ferry hub, which paces clients with 429 and Retry-After: requests go at its pace ({limit}; --qps sets a cap)"
            ),
            (_, ServerPacing::Unknown) => tracing::info!(
                %side,
                "the {side} server shows no API priority and fairness: requests are limited to {limit} (--qps changes it)"
            ),
        }
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

    /// `GET /version` with a deadline: `Err` says why the server did not answer. The
    /// answer also shows whether the server paces clients itself; the limiter follows.
    pub async fn probe(&self, timeout: Duration) -> Result<(), String> {
        match tokio::time::timeout(timeout, self.version()).await {
            Ok(Ok(server)) => {
                self.judged(server);
                Ok(())
            }
            Ok(Err(e)) => Err(format!("GET /version failed: {e}")),
            Err(_) => Err(format!("no answer to GET /version within {timeout:?}")),
        }
    }

    /// `GET /version`, judged by its headers and body.
    async fn version(&self) -> Result<ServerPacing, String> {
        let request = http::Request::get("/version")
            .body(kube::client::Body::empty())
            .map_err(|e| e.to_string())?;
        let response = self.client.send(request).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect_bytes().await.map_err(|e| e.to_string())?;
        if !parts.status.is_success() {
            return Err(format!(
                "HTTP {}: {}",
                parts.status,
                String::from_utf8_lossy(&body).trim()
            ));
        }
        let version: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        Ok(ServerPacing::of(&parts.headers, &version))
    }

    /// Every resource (and subresource, as `resource/sub`) the server serves.
    pub async fn discover(&self) -> Result<Vec<DiscoveredResource>, kube::Error> {
        self.discover_in(None).await
    }

    /// Every resource the server serves in logical cluster `cluster` (`*`: across all
    /// of them, as kcp's virtual workspaces serve it); `None`: at this side's URL.
    pub async fn discover_in(&self, cluster: Option<&str>) -> Result<Vec<DiscoveredResource>, kube::Error> {
        let client = self.client_in(cluster);
        let discovery = match Discovery::new(client.clone()).run_aggregated().await {
            Ok(d) => d,
            Err(_) => Discovery::new(client).run().await?,
        };
        Ok(discovered_resources(&discovery))
    }
}

/// A client whose requests go to `/clusters/<cluster>` under `base`'s URL, through
/// `base` (its connections, credentials and base path).
fn in_cluster(base: kube::Client, cluster: &str) -> kube::Client {
    let prefix = format!("/clusters/{cluster}");
    let default_namespace = base.default_namespace().to_string();
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let base = base.clone();
        let uri = request
            .uri()
            .path_and_query()
            .map(|pq| format!("{prefix}{pq}"))
            .unwrap_or_else(|| prefix.clone())
            .parse::<http::Uri>();
        async move {
            *request.uri_mut() = uri.map_err(|e| kube::Error::HttpError(e.into()))?;
            base.send(request).await
        }
    });
    kube::Client::new(service, default_namespace)
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
        SideClient::new(Side::Downstream, config, Pacing::from_flags(Some(0.0), 1)).unwrap()
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

    /// A server answering `GET /version` with `headers` and `git_version`.
    async fn fake_server(
        headers: &'static [(&'static str, &'static str)],
        git_version: &'static str,
    ) -> kube::Config {
        let app = axum::Router::new().route(
            "/version",
            axum::routing::get(move || async move {
                let mut response = axum::response::IntoResponse::into_response(axum::Json(
                    serde_json::json!({ "major": "1", "minor": "33", "gitVersion": git_version }),
                ));
                for (name, value) in headers {
                    response
                        .headers_mut()
                        .insert(*name, http::HeaderValue::from_static(value));
                }
                response
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        crate::spawn(async move { axum::serve(listener, app).await.unwrap() });
        kube::Config::new(format!("http://{addr}").parse().unwrap())
    }

    /// A server that answers every request with `name`.
    async fn named_server(name: &'static str) -> kube::Config {
        let app = axum::Router::new().fallback(move || async move { name });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        crate::spawn(async move { axum::serve(listener, app).await.unwrap() });
        kube::Config::new(format!("http://{addr}").parse().unwrap())
    }

    async fn answer(client: &kube::Client) -> String {
        let request = http::Request::get("/version").body(vec![]).unwrap();
        client.request_text(request).await.unwrap()
    }

    #[tokio::test]
    async fn a_retargeted_side_sends_every_later_request_to_its_new_server() {
        let side = SideClient::new(
            Side::Upstream,
            named_server("first").await,
            Pacing::from_flags(Some(0.0), 1),
        )
        .unwrap()
        .with_upsync(named_server("first upsync").await)
        .unwrap();
        // Clients made before the move follow it, as watches keep theirs.
        let in_cluster = side.client_in(Some("c1"));
        let upsync = side.client_for(crate::selection::Direction::Upsync, Some("c1"));
        assert_eq!(answer(&in_cluster).await, "first");
        assert_eq!(answer(&upsync).await, "first upsync");

        side.retarget(
            named_server("second").await,
            Some(named_server("second upsync").await),
        )
        .unwrap();
        assert_eq!(answer(&side.client).await, "second");
        assert_eq!(answer(&in_cluster).await, "second");
        assert_eq!(answer(&upsync).await, "second upsync");
        let downsync = side.client_for(crate::selection::Direction::Downsync, Some("c2"));
        assert_eq!(answer(&downsync).await, "second");
    }

    const APF: &[(&str, &str)] = &[
        (
            "x-kubernetes-pf-flowschema-uid",
            "0e0e2a4e-7d0f-4b7e-9b0e-2f1f1c7a0001",
        ),
        (
            "x-kubernetes-pf-prioritylevel-uid",
            "0e0e2a4e-7d0f-4b7e-9b0e-2f1f1c7a0002",
        ),
    ];

    #[tokio::test]
    async fn the_default_limit_is_lifted_for_a_server_that_does_priority_and_fairness() {
        let side = SideClient::new(
            Side::Upstream,
            fake_server(APF, "v1.33.1").await,
            Pacing::from_flags(None, 20),
        )
        .unwrap();
        assert_eq!(
            side.limiter.limit(),
            (crate::ratelimit::FALLBACK_QPS, 20),
            "until it answers"
        );
        side.probe(Duration::from_secs(5)).await.unwrap();
        assert_eq!(side.server_pacing(), Some(ServerPacing::PriorityAndFairness));
        assert_eq!(side.limiter.limit(), (0.0, 1), "no client-side limit");
    }

    #[tokio::test]
    async fn the_default_limit_stays_for_a_server_that_shows_no_pacing() {
        let side = SideClient::new(
            Side::Upstream,
            fake_server(&[], "v1.33.1").await,
            Pacing::from_flags(None, 20),
        )
        .unwrap();
        side.probe(Duration::from_secs(5)).await.unwrap();
        assert_eq!(side.server_pacing(), Some(ServerPacing::Unknown));
        assert_eq!(side.limiter.limit(), (crate::ratelimit::FALLBACK_QPS, 20));
    }

    #[tokio::test]
    async fn an_explicit_qps_is_a_cap_even_for_a_server_that_paces_clients() {
        let side = SideClient::new(
            Side::Upstream,
            fake_server(APF, "v1.33.1").await,
            Pacing::from_flags(Some(50.0), 80),
        )
        .unwrap();
        side.probe(Duration::from_secs(5)).await.unwrap();
        assert_eq!(side.server_pacing(), Some(ServerPacing::PriorityAndFairness));
        assert_eq!(side.limiter.limit(), (50.0, 80));
    }

    #[tokio::test]
    async fn waiting_for_a_side_ends_when_it_answers() {
        let side = Arc::new(client());
        side.mark_unreachable();
        let waiter = crate::spawn({
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
