//! The hub's Prometheus metrics, served at `/metrics` to whoever may `get` that
//! non-resource URL in root (the admin; kube's `system:monitoring` group).
//!
//! Named as kube-apiserver's where they correspond, so dashboards and alerts written
//! for kube-apiserver read them: `apiserver_request_total`,
//! `apiserver_request_duration_seconds`, `apiserver_current_inflight_requests`,
//! `apiserver_longrunning_requests` (open watches) and `apiserver_storage_objects`.
//!
//! Label values never carry what a tenant chose: no workspace, namespace or object
//! name, no user, and a resource only when it is one of the hub's built-ins (every
//! resource a CRD or an APIBinding serves is counted as `(custom)`, since its group
//! and plural are a tenant's words). Every label takes values from a small fixed set,
//! so no client can grow the scrape by sending odd paths or methods.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use futures::StreamExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::path::{self, Target};
use crate::hub::Hub;

/// The label value standing for every resource a CRD or APIBinding serves.
pub const CUSTOM: &str = "(custom)";

/// Subresources kube-apiserver serves; any other is counted as `other`.
const SUBRESOURCES: &[&str] = &[
    "status",
    "scale",
    "finalize",
    "token",
    "approval",
    "eviction",
    "binding",
    "log",
    "exec",
    "attach",
    "portforward",
    "proxy",
    "ephemeralcontainers",
    "resize",
];

/// What a request is, in the terms of kube-apiserver's metrics.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestShape {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`,
    /// `DELETECOLLECTION`, or the HTTP method of a non-resource request.
    pub verb: String,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: String,
    /// `resource` (one object), `namespace`, `cluster`, or empty (not a resource).
    pub scope: String,
}

impl RequestShape {
    /// The shape of `method path?query`; `builtin(group, version, resource)` says
    /// whether the hub serves that resource itself. Paths under `/services/`
    /// (virtual workspaces) are shaped by what follows their `/clusters/<c>`.
    pub fn of(
        method: &http::Method,
        path: &str,
        query: Option<&str>,
        content_type: Option<&str>,
        builtin: impl Fn(&str, &str, &str) -> bool,
    ) -> RequestShape {
        let inner = if path == "/services" || path.starts_with("/services/") {
            path.find("/clusters/").map(|at| &path[at..]).unwrap_or("/")
        } else {
            path
        };
        let plain = RequestShape {
            verb: http_verb(method).to_string(),
            ..Default::default()
        };
        let Ok(parsed) = path::parse(inner) else {
            return plain;
        };
        let Target::Resource(rp) = parsed.target else {
            return plain;
        };
        let watch = super::query::Query::watch_of(query);
        let named = rp.name.is_some();
        let verb = match (method.as_str(), named) {
            ("GET", _) if watch => "WATCH",
            ("GET", true) => "GET",
            ("GET", false) => "LIST",
            ("PATCH", _) if content_type.is_some_and(|t| t.contains("apply-patch")) => "APPLY",
            ("DELETE", false) => "DELETECOLLECTION",
            _ => http_verb(method),
        };
        let known = builtin(&rp.group, &rp.version, &rp.resource);
        let subresource = match rp.subresource.as_deref() {
            None => "",
            Some(s) if SUBRESOURCES.contains(&s) => s,
            Some(_) => "other",
        };
        RequestShape {
            verb: verb.to_string(),
            group: if known { rp.group } else { CUSTOM.to_string() },
            version: if known { rp.version } else { String::new() },
            resource: if known { rp.resource } else { CUSTOM.to_string() },
            subresource: subresource.to_string(),
            scope: if named {
                "resource"
            } else if rp.namespace.is_some() {
                "namespace"
            } else {
                "cluster"
            }
            .to_string(),
        }
    }

    /// Watches stay open: kube-apiserver counts them apart from the requests in
    /// flight and leaves them out of the latency histogram.
    pub fn long_running(&self) -> bool {
        self.verb == "WATCH"
    }

    fn request_kind(&self) -> &'static str {
        match self.verb.as_str() {
            "GET" | "LIST" | "WATCH" | "HEAD" | "OPTIONS" => "readOnly",
            _ => "mutating",
        }
    }
}

/// The method as a label value: one of HTTP's, or `OTHER` (a client may send any
/// token as a method).
fn http_verb(method: &http::Method) -> &'static str {
    match method.as_str() {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "PATCH" => "PATCH",
        "DELETE" => "DELETE",
        "OPTIONS" => "OPTIONS",
        _ => "OTHER",
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    #[prometheus(flatten)]
    shape: RequestShape,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    request_kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StorageLabels {
    resource: String,
}

/// The hub's metrics and the registry that renders them; one per serving hub.
pub struct HubMetrics {
    registry: Registry,
    requests: Family<CodeLabels, Counter>,
    duration: Family<RequestShape, Histogram>,
    in_flight: Family<KindLabels, Gauge>,
    long_running: Family<RequestShape, Gauge>,
    objects: Family<StorageLabels, Gauge>,
}

impl Default for HubMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl HubMetrics {
    /// The metrics of a hub serving `hub`: its requests, its controllers' and its
    /// store's commits.
    pub fn of(hub: &Hub) -> Self {
        let mut metrics = Self::new();
        hub.follow_metrics.register(&mut metrics.registry);
        hub.store.commit_metrics.register(&mut metrics.registry);
        metrics.registry.register(
            "ferry_write_retries",
            "Updates and patches the hub computed again because the object changed between their read and their write",
            hub.write_retries.clone(),
        );
        metrics
    }

    pub fn new() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<CodeLabels, Counter>::default();
        // kube-apiserver's buckets.
        let duration = Family::<RequestShape, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
                10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
            ])
        });
        let in_flight = Family::<KindLabels, Gauge>::default();
        let long_running = Family::<RequestShape, Gauge>::default();
        let objects = Family::<StorageLabels, Gauge>::default();
        // prometheus-client appends `_total` to counters.
        registry.register(
            "apiserver_request",
            "Requests answered, by verb, group, version, resource, subresource, scope and HTTP code",
            requests.clone(),
        );
        registry.register(
            "apiserver_request_duration_seconds",
            "Time to answer a request (watches excluded), by verb, group, version, resource, subresource and scope",
            duration.clone(),
        );
        registry.register(
            "apiserver_current_inflight_requests",
            "Requests being served (watches excluded), by request kind (readOnly or mutating)",
            in_flight.clone(),
        );
        registry.register(
            "apiserver_longrunning_requests",
            "Open watches, by group, version, resource and scope",
            long_running.clone(),
        );
        registry.register(
            "apiserver_storage_objects",
            "Objects stored, by resource (resource.group), over every workspace",
            objects.clone(),
        );
        for request_kind in ["readOnly", "mutating"] {
            let _ = in_flight.get_or_create(&KindLabels { request_kind });
        }
        HubMetrics {
            registry,
            requests,
            duration,
            in_flight,
            long_running,
            objects,
        }
    }

    /// Counts `shape` in flight until the guard drops (nothing for a watch).
    pub fn in_flight(&self, shape: &RequestShape) -> Option<GaugeGuard> {
        (!shape.long_running()).then(|| {
            GaugeGuard::up(
                self.in_flight
                    .get_or_create(&KindLabels {
                        request_kind: shape.request_kind(),
                    })
                    .clone(),
            )
        })
    }

    /// Records an answered request: its code, and unless it is a watch, its
    /// latency. A watch that was accepted is counted open until its `response`
    /// body ends (the client leaves or the hub ends it).
    pub fn answered(&self, shape: RequestShape, code: u16, took: Duration, response: Response) -> Response {
        if !shape.long_running() {
            self.duration.get_or_create(&shape).observe(took.as_secs_f64());
        }
        let open =
            (shape.long_running() && code < 300).then(|| self.long_running.get_or_create(&shape).clone());
        self.requests
            .get_or_create(&CodeLabels {
                shape,
                code: code.to_string(),
            })
            .inc();
        match open {
            Some(gauge) => {
                let guard = GaugeGuard::up(gauge);
                let (parts, body) = response.into_parts();
                let body = body.into_data_stream().map(move |chunk| {
                    let _open = &guard;
                    chunk
                });
                Response::from_parts(parts, Body::from_stream(body))
            }
            None => response,
        }
    }

    /// The scrape, in Prometheus's text format, with the storage gauges read now.
    pub fn render(&self, hub: &Hub) -> String {
        self.objects.clear();
        for (resource, count) in storage_objects(hub, hub.store.object_counts()) {
            self.objects
                .get_or_create(&StorageLabels { resource })
                .set(i64::try_from(count).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Per-resource object counts as `apiserver_storage_objects` labels them
/// (`deployments.apps`, `configmaps`), from the store's `(storage key, count)`;
/// every resource that is not built in is summed under `(custom)`.
fn storage_objects(hub: &Hub, counts: Vec<(String, usize)>) -> Vec<(String, usize)> {
    let mut out: std::collections::BTreeMap<String, usize> = Default::default();
    for (key, count) in counts {
        let (group, resource) = key.split_once('/').unwrap_or(("", key.as_str()));
        let label = if hub.registry.is_builtin(group, resource) {
            if group.is_empty() {
                resource.to_string()
            } else {
                format!("{resource}.{group}")
            }
        } else {
            CUSTOM.to_string()
        };
        *out.entry(label).or_default() += count;
    }
    out.into_iter().collect()
}

/// A gauge raised while this lives.
pub struct GaugeGuard(Gauge);

impl GaugeGuard {
    fn up(gauge: Gauge) -> Self {
        gauge.inc();
        GaugeGuard(gauge)
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The shape of a request the hub `hub` serves.
pub fn shape_of(hub: &Hub, req: &axum::extract::Request) -> RequestShape {
    let content_type = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    RequestShape::of(
        req.method(),
        req.uri().path(),
        req.uri().query(),
        content_type,
        // Built-ins are found before any CRD is looked at; a resource that is
        // not built in is never looked up (that would scan every workspace's CRDs).
        |group, version, resource| {
            hub.registry.is_builtin(group, resource)
                && hub
                    .registry
                    .lookup(None, group, version, resource)
                    .is_some_and(|info| !info.from_crd)
        },
    )
}

/// `GET /`: the paths of a workspace serving the group versions `served`
/// (`(group, version)`, the core group empty), as kube-apiserver's
/// `{"paths": [...]}`; `/metrics` only at the top, where it is served.
pub fn root_paths<'a>(served: impl IntoIterator<Item = (&'a str, &'a str)>, top: bool) -> serde_json::Value {
    let mut paths: std::collections::BTreeSet<String> = [
        "/api",
        "/api/v1",
        "/apis",
        "/healthz",
        "/livez",
        "/openapi/v2",
        "/openapi/v3",
        "/readyz",
        "/version",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    if top {
        paths.insert("/metrics".into());
    }
    for (group, version) in served.into_iter().filter(|(g, _)| !g.is_empty()) {
        paths.insert(format!("/apis/{group}"));
        paths.insert(format!("/apis/{group}/{version}"));
    }
    serde_json::json!({ "paths": paths })
}

/// The metrics of the router serving this request (put there by [`super::router`]).
pub fn of_request(parts: &http::request::Parts) -> Option<Arc<HubMetrics>> {
    parts.extensions.get::<Arc<HubMetrics>>().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(method: &str, path: &str, query: Option<&str>) -> RequestShape {
        RequestShape::of(&method.parse().unwrap(), path, query, None, |g, v, r| {
            matches!(
                (g, v, r),
                ("", "v1", "configmaps") | ("apps", "v1", "deployments")
            )
        })
    }

    #[test]
    fn verbs_are_kube_apiservers() {
        let cm = "/clusters/root:acme/api/v1/namespaces/ns/configmaps";
        assert_eq!(shape("GET", cm, None).verb, "LIST");
        assert_eq!(shape("GET", cm, Some("watch=true")).verb, "WATCH");
        assert_eq!(shape("GET", &format!("{cm}/x"), None).verb, "GET");
        assert_eq!(shape("DELETE", cm, None).verb, "DELETECOLLECTION");
        assert_eq!(shape("DELETE", &format!("{cm}/x"), None).verb, "DELETE");
        assert_eq!(shape("GET", "/version", None).verb, "GET");
        assert_eq!(shape("BREW", "/version", None).verb, "OTHER");
        let apply = RequestShape::of(
            &http::Method::PATCH,
            &format!("{cm}/x"),
            None,
            Some("application/apply-patch+yaml"),
            |_, _, _| true,
        );
        assert_eq!(apply.verb, "APPLY");
    }

    #[test]
    fn labels_carry_no_workspace_namespace_or_name() {
        let s = shape(
            "GET",
            "/clusters/root:acme/apis/apps/v1/namespaces/secret-ns/deployments/secret-name/status",
            None,
        );
        assert_eq!(
            s,
            RequestShape {
                verb: "GET".into(),
                group: "apps".into(),
                version: "v1".into(),
                resource: "deployments".into(),
                subresource: "status".into(),
                scope: "resource".into(),
            }
        );
        let custom = shape("GET", "/clusters/root:acme/apis/acme.io/v1/acme-widgets", None);
        assert_eq!(
            (custom.group.as_str(), custom.resource.as_str()),
            (CUSTOM, CUSTOM)
        );
        assert_eq!(custom.version, "");
        // A version the hub does not serve is a client's word too.
        let odd = shape("GET", "/apis/apps/v9-acme/deployments", None);
        assert_eq!(odd.resource, CUSTOM);
        let sub = shape("GET", "/api/v1/namespaces/n/configmaps/x/acme-sub", None);
        assert_eq!(sub.subresource, "other");
    }

    #[test]
    fn a_virtual_workspace_request_is_shaped_by_its_inner_path() {
        let s = shape(
            "GET",
            "/services/syncer/acme-cluster/east/uid-1/clusters/*/api/v1/configmaps",
            Some("watch=1"),
        );
        assert_eq!(
            (s.verb.as_str(), s.resource.as_str(), s.scope.as_str()),
            ("WATCH", "configmaps", "cluster")
        );
        assert!(s.long_running());
        let odd = shape("GET", "/services/acme/anything", None);
        assert_eq!((odd.verb.as_str(), odd.resource.as_str()), ("GET", ""));
    }

    #[test]
    fn a_watch_is_counted_open_until_its_body_ends() {
        let metrics = HubMetrics::new();
        let watch = shape("GET", "/api/v1/configmaps", Some("watch=true"));
        let response = metrics.answered(watch.clone(), 200, Duration::ZERO, Response::new(Body::empty()));
        let open = || metrics.long_running.get_or_create(&watch).get();
        assert_eq!(open(), 1);
        drop(response);
        assert_eq!(open(), 0);
        let refused = metrics.answered(watch.clone(), 403, Duration::ZERO, Response::new(Body::empty()));
        assert_eq!(open(), 0, "a refused watch is not open");
        drop(refused);
    }

    #[test]
    fn root_paths_list_groups_and_versions() {
        let v = root_paths([("apps", "v1"), ("", "v1")], true);
        let paths: Vec<&str> = v["paths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap())
            .collect();
        assert!(
            paths.contains(&"/apis/apps") && paths.contains(&"/apis/apps/v1"),
            "{paths:?}"
        );
        assert!(
            paths.contains(&"/metrics") && paths.contains(&"/api/v1"),
            "{paths:?}"
        );
        assert!(!root_paths([], false).to_string().contains("/metrics"));
    }
}
