//! A token bucket in front of each side's requests, and how its limit is chosen.
//!
//! By default a syncer goes at the server's pace. A server that does API priority and
//! fairness (kube-apiserver since 1.20, kcp) queues and sheds load per client itself,
//! and says so on every response (`X-Kubernetes-PF-FlowSchema-UID`,
//! `X-Kubernetes-PF-PriorityLevel-UID`); a client-side limit in front of it only slows
//! the syncer down (at 30 requests per second a 10,000-object initial sync takes over
//! five minutes). Current client-go and kubectl turn their own limiter off when they
//! see those headers; Ferry does the same. Ferry's hub does not do priority and
//! fairness, but it caps the requests it serves at once and answers 429 with
//! `Retry-After` past the cap, which kube-rs retries: it too sets the pace, so a hub
//! (recognised by the `+ferry` build metadata of its `/version`) gets no client-side
//! limit either. Any other server gets KubeStellar's defaults ([`FALLBACK_QPS`],
//! [`FALLBACK_BURST`]). An explicit `--qps` is a cap whatever the server.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Requests per second to a server that shows no pacing of its own (KubeStellar's
/// syncer default).
pub const FALLBACK_QPS: f32 = 30.0;
/// Burst to a server that shows no pacing of its own (KubeStellar's syncer default).
pub const FALLBACK_BURST: u32 = 20;

/// Response header naming the flow schema that API priority and fairness matched.
pub const APF_FLOW_SCHEMA_HEADER: &str = "X-Kubernetes-PF-FlowSchema-UID";
/// Response header naming the priority level that API priority and fairness chose.
pub const APF_PRIORITY_LEVEL_HEADER: &str = "X-Kubernetes-PF-PriorityLevel-UID";

/// Whether a server paces clients itself, as its answer to `GET /version` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerPacing {
    /// API priority and fairness: the response carried its headers.
    PriorityAndFairness,
    /// Ferry's hub: a cap on requests in flight, 429 with `Retry-After` past it.
    FerryHub,
    /// Nothing shows that it does.
    Unknown,
}

impl ServerPacing {
    /// Judges a server by its response headers and `/version` body.
    pub fn of(headers: &http::HeaderMap, version: &serde_json::Value) -> ServerPacing {
        let apf = [APF_FLOW_SCHEMA_HEADER, APF_PRIORITY_LEVEL_HEADER]
            .iter()
            .any(|h| headers.contains_key(*h));
        let git_version = version.get("gitVersion").and_then(serde_json::Value::as_str);
        if apf {
            ServerPacing::PriorityAndFairness
        } else if git_version.is_some_and(|v| v.contains("+ferry")) {
            ServerPacing::FerryHub
        } else {
            ServerPacing::Unknown
        }
    }

    /// Whether the server sets the pace, so no client-side limit is needed.
    pub fn paces_clients(self) -> bool {
        self != ServerPacing::Unknown
    }
}

/// How requests to a side are limited.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pacing {
    /// `--qps`/`--burst` given: at most `qps` requests per second (none if `qps <= 0`),
    /// with bursts of `burst`, whatever the server.
    Capped {
        /// Requests per second; `0` or less means unlimited.
        qps: f32,
        /// Requests that may go at once before `qps` applies.
        burst: u32,
    },
    /// The default: unlimited where the server paces clients itself
    /// ([`ServerPacing::paces_clients`]), otherwise [`FALLBACK_QPS`] and `burst`.
    ServerPaced {
        /// The burst for a server that does not pace clients.
        burst: u32,
    },
}

impl Pacing {
    /// From the `--qps` and `--burst` flags: `None` for qps means "at the server's pace".
    pub fn from_flags(qps: Option<f32>, burst: u32) -> Pacing {
        match qps {
            Some(qps) => Pacing::Capped { qps, burst },
            None => Pacing::ServerPaced { burst },
        }
    }

    /// The `(qps, burst)` to apply to a server judged `server` (`Unknown` before the
    /// first answer).
    pub fn limit_for(self, server: ServerPacing) -> (f32, u32) {
        match self {
            Pacing::Capped { qps, burst } => (qps, burst),
            Pacing::ServerPaced { .. } if server.paces_clients() => (0.0, 1),
            Pacing::ServerPaced { burst } => (FALLBACK_QPS, burst),
        }
    }
}

/// Requests per second with a burst allowance. Waiting callers queue up in order of
/// arrival: each takes a token, possibly going into debt, and sleeps off the debt.
pub struct RateLimiter {
    state: Mutex<Bucket>,
}

struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// A limiter for `qps` requests per second (unlimited if `qps <= 0`) with room for
    /// `burst` at once (at least 1).
    pub fn new(qps: f32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            state: Mutex::new(Bucket {
                qps: f64::from(qps),
                burst,
                tokens: burst,
                at: Instant::now(),
            }),
        }
    }

    /// Changes the limit (the tokens saved up so far stay, up to the new burst).
    pub fn set_limit(&self, qps: f32, burst: u32) {
        let mut bucket = self.state.lock();
        bucket.qps = f64::from(qps);
        bucket.burst = f64::from(burst.max(1));
        bucket.tokens = bucket.tokens.min(bucket.burst);
    }

    /// The limit: `(qps, burst)`; qps `0` means unlimited.
    pub fn limit(&self) -> (f32, u32) {
        let bucket = self.state.lock();
        // Both were set from an f32 and a u32.
        (bucket.qps.max(0.0) as f32, bucket.burst as u32)
    }

    /// How long the caller must wait for its token (taking it now).
    pub fn reserve(&self) -> Duration {
        let mut bucket = self.state.lock();
        if bucket.qps <= 0.0 {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let elapsed = now.duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * bucket.qps).min(bucket.burst);
        bucket.at = now;
        bucket.tokens -= 1.0;
        if bucket.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-bucket.tokens / bucket.qps)
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_goes_at_once_then_qps_applies() {
        let limiter = RateLimiter::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(limiter.reserve(), Duration::ZERO);
        }
        let wait = limiter.reserve();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        let wait = limiter.reserve();
        assert!((wait.as_secs_f64() - 0.2).abs() < 1e-6, "{wait:?}");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(limiter.reserve(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_limit_can_be_lifted_and_put_back() {
        let limiter = RateLimiter::new(10.0, 1);
        assert_eq!(limiter.reserve(), Duration::ZERO);
        assert!(!limiter.reserve().is_zero(), "limited");
        limiter.set_limit(0.0, 1);
        assert_eq!(limiter.limit(), (0.0, 1));
        for _ in 0..1000 {
            assert_eq!(limiter.reserve(), Duration::ZERO);
        }
        limiter.set_limit(10.0, 1);
        assert!(!limiter.reserve().is_zero(), "limited again");
    }

    fn headers(names: &[&str]) -> http::HeaderMap {
        let mut map = http::HeaderMap::new();
        for name in names {
            map.insert(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                http::HeaderValue::from_static("5c3bbd5f"),
            );
        }
        map
    }

    #[test]
    fn a_server_paces_clients_when_it_shows_priority_and_fairness_or_is_a_hub() {
        let kube = serde_json::json!({ "gitVersion": "v1.33.1" });
        let hub = serde_json::json!({ "gitVersion": "v1.33.0+ferry-0.1.0" });
        let apf = headers(&[
            "x-kubernetes-pf-flowschema-uid",
            "x-kubernetes-pf-prioritylevel-uid",
        ]);
        assert_eq!(ServerPacing::of(&apf, &kube), ServerPacing::PriorityAndFairness);
        assert_eq!(ServerPacing::of(&headers(&[]), &hub), ServerPacing::FerryHub);
        assert_eq!(ServerPacing::of(&headers(&[]), &kube), ServerPacing::Unknown);
        assert_eq!(
            ServerPacing::of(&headers(&["x-other"]), &serde_json::Value::Null),
            ServerPacing::Unknown
        );
    }

    #[test]
    fn by_default_only_a_server_that_shows_no_pacing_gets_a_client_side_limit() {
        let default = Pacing::from_flags(None, 20);
        assert_eq!(default.limit_for(ServerPacing::PriorityAndFairness), (0.0, 1));
        assert_eq!(default.limit_for(ServerPacing::FerryHub), (0.0, 1));
        assert_eq!(default.limit_for(ServerPacing::Unknown), (FALLBACK_QPS, 20));
        let capped = Pacing::from_flags(Some(50.0), 100);
        for server in [
            ServerPacing::PriorityAndFairness,
            ServerPacing::FerryHub,
            ServerPacing::Unknown,
        ] {
            assert_eq!(
                capped.limit_for(server),
                (50.0, 100),
                "an explicit --qps is a cap"
            );
        }
        assert_eq!(
            Pacing::from_flags(Some(0.0), 20)
                .limit_for(ServerPacing::Unknown)
                .0,
            0.0
        );
    }

    #[test]
    fn zero_qps_is_unlimited() {
        let limiter = RateLimiter::new(0.0, 1);
        for _ in 0..1000 {
            assert_eq!(limiter.reserve(), Duration::ZERO);
        }
    }
}
