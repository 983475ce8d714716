//! The `default/kubernetes` Service of every workspace, with its Endpoints
//! and EndpointSlice pointing at the hub, as kube-apiserver's "kubernetes
//! service" controller keeps them: created with the workspace (and at start
//! for existing ones, which also moves them to the hub's current address),
//! and recreated or repaired whenever they are deleted or changed.
//!
//! Only the fields this controller sets are compared, so defaults other
//! parts of the hub add never make it write again.

use futures::future::BoxFuture;
use serde_json::{json, Value};

use ferry_server::controller::ControllerContext;
use ferry_server::service::{self, PatchType};
use ferry_server::storage::{ObjectKey, WatchEvent};
use ferry_server::workspace::{ROOT, WORKSPACES};

/// Name of the Service, Endpoints and EndpointSlice.
pub const NAME: &str = "kubernetes";
/// Their namespace.
pub const NAMESPACE: &str = "default";
pub use ferry_server::strategy::core::service::KUBERNETES_CLUSTER_IP as CLUSTER_IP;

/// One object this controller owns.
struct Owned {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    /// The object as created.
    object: Value,
    /// The part compared with what is stored and patched back when it differs.
    owned: Value,
}

/// The hub's address as the Endpoints name it: its IP and port.
fn hub_address(ctx: &ControllerContext) -> Option<(String, u16)> {
    let url = ctx.external_url();
    let host_port = url.split("://").nth(1)?.split('/').next()?;
    let (host, port) = host_port.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = host.parse().ok()?;
    Some((ip.to_string(), port.parse().ok()?))
}

/// The three objects for a hub at `ip:port`.
fn desired(ip: &str, port: u16) -> [Owned; 3] {
    let meta = |labels: Value| json!({"name": NAME, "namespace": NAMESPACE, "labels": labels});
    let service_labels = json!({"component": "apiserver", "provider": "kubernetes"});
    let service_ports = json!([{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]);
    let endpoint_ports = json!([{"name": "https", "port": port, "protocol": "TCP"}]);
    let address_type = if ip.contains(':') { "IPv6" } else { "IPv4" };
    let skip_mirror = json!({"endpointslice.kubernetes.io/skip-mirror": "true"});
    let slice_labels = json!({"kubernetes.io/service-name": NAME});
    let subsets = json!([{"addresses": [{"ip": ip}], "ports": endpoint_ports}]);
    let endpoints = json!([{"addresses": [ip], "conditions": {"ready": true}}]);
    [
        Owned {
            group: "",
            version: "v1",
            resource: "services",
            object: json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": meta(service_labels.clone()),
                "spec": {
                    "clusterIP": CLUSTER_IP,
                    "clusterIPs": [CLUSTER_IP],
                    "internalTrafficPolicy": "Cluster",
                    "ipFamilies": ["IPv4"],
                    "ipFamilyPolicy": "SingleStack",
                    "ports": service_ports,
                    "sessionAffinity": "None",
                    "type": "ClusterIP",
                },
            }),
            owned: json!({
                "metadata": {"labels": service_labels},
                "spec": {"ports": service_ports, "type": "ClusterIP"},
            }),
        },
        Owned {
            group: "",
            version: "v1",
            resource: "endpoints",
            object: json!({
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": meta(skip_mirror.clone()),
                "subsets": subsets,
            }),
            owned: json!({"metadata": {"labels": skip_mirror}, "subsets": subsets}),
        },
        Owned {
            group: "discovery.k8s.io",
            version: "v1",
            resource: "endpointslices",
            object: json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": meta(slice_labels.clone()),
                "addressType": address_type,
                "endpoints": endpoints,
                "ports": endpoint_ports,
            }),
            owned: json!({
                "metadata": {"labels": slice_labels},
                "addressType": address_type,
                "endpoints": endpoints,
                "ports": endpoint_ports,
            }),
        },
    ]
}

/// Whether `actual` has every value `wanted` sets (lists element by element).
fn covers(actual: &Value, wanted: &Value) -> bool {
    match (actual, wanted) {
        (Value::Object(a), Value::Object(w)) => {
            w.iter().all(|(k, wv)| a.get(k).is_some_and(|av| covers(av, wv)))
        }
        (Value::Array(a), Value::Array(w)) => {
            a.len() == w.len() && a.iter().zip(w).all(|(av, wv)| covers(av, wv))
        }
        (a, w) => a == w,
    }
}

/// Whether `cluster` is a live workspace (not one being removed, whose
/// objects must not come back).
fn is_live(ctx: &ControllerContext, cluster: &str) -> bool {
    if cluster == ROOT {
        return true;
    }
    let Some(lc) = ctx.logical_cluster(cluster) else {
        return false;
    };
    let (Some(parent), Some((_, name))) = (lc.parent, lc.path.rsplit_once(':')) else {
        return false;
    };
    let key = ObjectKey {
        cluster: parent,
        resource: WORKSPACES.into(),
        namespace: String::new(),
        name: name.into(),
    };
    ctx.get(&key)
        .is_some_and(|ws| ws.value().pointer("/metadata/deletionTimestamp").is_none())
}

/// [`ensure`] for a workspace that still exists and is not being deleted.
pub async fn repair(ctx: &ControllerContext, cluster: &str) {
    if is_live(ctx, cluster) {
        ensure(ctx, cluster).await;
    }
}

/// Create, or repair, the `kubernetes` Service, Endpoints and EndpointSlice
/// of `cluster`.
pub async fn ensure(ctx: &ControllerContext, cluster: &str) {
    let Some((ip, port)) = hub_address(ctx) else {
        return;
    };
    // Concurrently: the store commits them together.
    let results = futures::future::join_all(desired(&ip, port).map(|owned| async move {
        let result = ensure_one(ctx, cluster, &owned).await;
        (owned.resource, result)
    }))
    .await;
    for (resource, result) in results {
        match result {
            Ok(()) => {}
            // Someone else wrote it meanwhile (the watch brings us back), or
            // the namespace is gone or terminating.
            Err(e) if matches!(e.code, 409 | 404 | 403) => {}
            Err(e) => tracing::warn!(cluster, resource, "keeping default/kubernetes failed: {e}"),
        }
    }
}

async fn ensure_one(
    ctx: &ControllerContext,
    cluster: &str,
    owned: &Owned,
) -> Result<(), ferry_server::status::ApiError> {
    let key = ObjectKey {
        cluster: cluster.into(),
        resource: ferry_server::registry::storage_key(owned.group, owned.resource),
        namespace: NAMESPACE.into(),
        name: NAME.into(),
    };
    match ctx.get(&key) {
        Some(stored) if covers(&stored.value(), &owned.owned) => Ok(()),
        Some(_) => match ctx.lookup(Some(cluster), owned.group, owned.version, owned.resource) {
            Some(info) => {
                let r = ctx.request_at(info, &key, "patch", "kube-apiserver")?;
                let body = bytes::Bytes::from(serde_json::to_vec(&owned.owned).unwrap_or_default());
                service::patch(&r, PatchType::Merge, body).await.map(|_| ())
            }
            None => Ok(()),
        },
        None => create(ctx, cluster, owned).await,
    }
}

async fn create(
    ctx: &ControllerContext,
    cluster: &str,
    owned: &Owned,
) -> Result<(), ferry_server::status::ApiError> {
    let create = |object: Value| {
        ctx.create(
            cluster,
            (owned.group, owned.version, owned.resource),
            Some(NAMESPACE),
            object,
        )
    };
    match create(owned.object.clone()).await {
        // A service range that does not hold CLUSTER_IP: let the hub pick.
        Err(e) if e.code == 422 && owned.resource == "services" => {
            let mut object = owned.object.clone();
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
            }
            create(object).await.map(|_| ())
        }
        other => other.map(|_| ()),
    }
}

/// Whether a change at `key` concerns one of the objects kept here.
fn is_owned_key(key: &ObjectKey) -> bool {
    key.namespace == NAMESPACE
        && key.name == NAME
        && matches!(
            key.resource.as_str(),
            "/services" | "/endpoints" | "discovery.k8s.io/endpointslices"
        )
}

/// Repairs the objects whenever they change. It runs with the other
/// built-in controllers, so on one replica at a time: replicas on one etcd
/// listen on different addresses and would otherwise take the Endpoints
/// from each other without end.
pub struct KubernetesService;

impl super::follow::Follower for KubernetesService {
    fn follows(&self, storage_key: &str) -> bool {
        matches!(
            storage_key,
            "/services" | "/endpoints" | "discovery.k8s.io/endpointslices"
        )
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for cluster in ctx.clusters() {
                repair(ctx, &cluster).await;
            }
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if is_owned_key(&event.key) {
                repair(ctx, &event.key.cluster).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_objects_with_extra_defaults_need_no_repair() {
        let [service, endpoints, slice] = desired("127.0.0.1", 6443);
        let mut stored = service.object.clone();
        stored["spec"]["ports"][0]["nodePort"] = json!(null);
        stored["spec"]["ipFamilies"] = json!(["IPv4"]);
        stored["metadata"]["labels"]["extra"] = json!("x");
        assert!(covers(&stored, &service.owned));
        assert!(covers(&endpoints.object, &endpoints.owned));
        assert!(covers(&slice.object, &slice.owned));
        assert_eq!(slice.object["addressType"], "IPv4");
        // A hub restarted on another port moves its Endpoints.
        let [_, moved, _] = desired("127.0.0.1", 7443);
        assert!(!covers(&endpoints.object, &moved.owned));
        stored["spec"]["type"] = json!("NodePort");
        assert!(!covers(&stored, &service.owned));
    }

    #[test]
    fn only_default_kubernetes_is_watched() {
        let key = |resource: &str, namespace: &str, name: &str| ObjectKey {
            cluster: "root".into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        };
        assert!(is_owned_key(&key("/services", "default", "kubernetes")));
        assert!(is_owned_key(&key(
            "discovery.k8s.io/endpointslices",
            "default",
            "kubernetes"
        )));
        assert!(!is_owned_key(&key("/services", "other", "kubernetes")));
        assert!(!is_owned_key(&key("/configmaps", "default", "kubernetes")));
    }
}
