//! The assembled control plane: storage, what each workspace serves, and the
//! workspace index. Request handlers and built-in controllers share one `Hub`.

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;
use serde_json::Value;

use crate::registry::{resources_from_crd, BuiltinResources, Registry, ResourceInfo};
use crate::storage::{ClusterScope, ObjectKey, Store};
use crate::workspace::{LogicalCluster, LogicalClusterObjects, WorkspaceIndex, ROOT};

/// Settings that shape what clients see.
#[derive(Clone)]
pub struct HubConfig {
    /// The admin bearer token written into `admin.kubeconfig`.
    pub admin_token: String,
    /// Cap on requests served at once; past it, 429 with Retry-After.
    pub max_in_flight: usize,
    /// Users from `--token-auth-file`.
    pub static_tokens: Vec<crate::auth::StaticToken>,
    /// Key that signs ServiceAccount tokens (random per process when empty).
    pub service_account_key: Vec<u8>,
    /// Where Services' cluster IPs and node ports are allocated from.
    pub service_ranges: crate::service_ranges::ServiceRanges,
}

impl std::fmt::Debug for HubConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Tokens and keys stay out of logs.
        f.debug_struct("HubConfig")
            .field("max_in_flight", &self.max_in_flight)
            .field("static_tokens", &self.static_tokens.len())
            .finish_non_exhaustive()
    }
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            admin_token: String::new(),
            max_in_flight: 400,
            static_tokens: Vec::new(),
            service_account_key: Vec::new(),
            service_ranges: Default::default(),
        }
    }
}

/// Storage key of CRDs.
pub const CRDS: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// What runs within a write, before it answers, beyond storage and the
/// hub's own indexes: the built-in controllers' first pass over the object;
/// and before a client's request, what is made only on demand.
///
/// The object service calls it with the hub; the server installs the
/// controllers' `WriteObserver` through `ObservedWrites` (`ferry-server`'s
/// `controller` module), which hands each call the controllers' narrow
/// handle, so the hub names neither.
pub trait WriteHooks: Send + Sync {
    /// A create of `obj` at `key` is about to be stored.
    fn creating<'a>(&'a self, hub: &'a Arc<Hub>, key: &'a ObjectKey, obj: &'a Value) -> BoxFuture<'a, ()>;
    /// The object at `key` (served as `info`) was written (`new`) or removed (`None`).
    fn written<'a>(
        &'a self,
        hub: &'a Arc<Hub>,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
        new: Option<&'a Value>,
    ) -> BoxFuture<'a, ()>;
    /// The object at `key` was just marked as being deleted, held by finalizers.
    fn deleting<'a>(
        &'a self,
        hub: &'a Arc<Hub>,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, ()>;
    /// `old` was removed from storage: what goes with it goes now.
    fn removed<'a>(
        &'a self,
        hub: &'a Arc<Hub>,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
        old: &'a Value,
    ) -> BoxFuture<'a, ()>;
    /// A client's request on `info`'s objects in `cluster` is about to be
    /// served: what the layer above makes only once someone asks for it
    /// (a workspace's APIServices) is made now, so the request sees it.
    fn serving<'a>(
        &'a self,
        _hub: &'a Arc<Hub>,
        _info: &'a ResourceInfo,
        _cluster: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// What a layer above the API server adds to the hubs it builds, one value
/// per type: given when a hub is built ([`Hub::with_extensions`]), then read
/// by the module that owns the type (the strategies of the layer's kinds are
/// a `strategy::StrategyTable`). A hub built with none serves Kubernetes'
/// own kinds and CRDs only. It is http's type map (what axum and kube-rs
/// carry request extensions in), so values are `Clone + Send + Sync`.
pub type Extensions = http::Extensions;

/// What a logical cluster serves through a layer above the API server
/// beyond its CRDs (kcp's APIBindings serve the resources of an export),
/// among the hub's extensions as an `Arc<dyn ServedResources>`:
/// [`Hub::refresh_crds`] asks it whenever it recomputes what a logical
/// cluster serves.
pub trait ServedResources: Send + Sync {
    /// The storage key of the objects that serve resources: the hub
    /// refreshes every logical cluster holding one when it starts.
    fn source(&self) -> &'static str;

    /// Add to `served` (what `cluster`'s CRDs serve) what the layer serves
    /// there now, and return what the layer records about it once the hub's
    /// registry serves them. Runs under the hub's refresh lock, so refreshes
    /// of one logical cluster never overtake one another.
    fn refresh<'a>(
        &'a self,
        hub: &Hub,
        cluster: &str,
        served: &mut Vec<ResourceInfo>,
    ) -> Box<dyn FnOnce() + 'a>;
}

pub struct Hub {
    pub store: Arc<Store>,
    pub registry: Registry,
    pub workspaces: WorkspaceIndex,
    pub config: HubConfig,
    /// Authentication, RBAC and the CA that signs client certificates.
    pub security: crate::auth::Security,
    /// `https://host:port`, known once the listener is bound.
    external_url: RwLock<String>,
    /// The built-in controllers' part of a write (none until they are installed).
    write_hooks: RwLock<Option<Arc<dyn WriteHooks>>>,
    /// OpenAPI documents per workspace generation.
    pub openapi: crate::openapi::cache::OpenApiCache,
    /// Held across one [`Hub::refresh_crds`]: two writers refreshing at once
    /// must not let the one that read older state install it last.
    refreshing: parking_lot::Mutex<()>,
    /// How the controllers following the store keep up (on `/metrics`).
    pub follow_metrics: crate::follow_metrics::FollowMetrics,
    /// What the layers above added when the hub was built.
    pub extensions: Extensions,
    /// One write at a time to each object ([`Hub::write_turn`]).
    write_turns: WriteTurns,
    /// Updates and patches computed again because the object moved between
    /// their read and their write (on `/metrics`).
    pub write_retries: prometheus_client::metrics::counter::Counter,
}

/// Turns to read-modify-write one object. An update or patch reads the object,
/// computes the new one and writes it if the object has not moved meanwhile,
/// else starts again: with many writers of one object at once (a hundred kcp
/// TMC syncers each adding its finalizer) all but one computed for nothing, round
/// after round, and the last gave up (409). Taking turns, each computes once, on
/// the state the one before left. Keys share a fixed set of turns by hash, so
/// memory does not grow with the objects; two objects sharing one only take
/// turns with each other (by a hash seeded per process, so no client can pick
/// names that share another's turn).
struct WriteTurns {
    turns: Box<[tokio::sync::Mutex<()>]>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for WriteTurns {
    fn default() -> Self {
        WriteTurns {
            turns: (0..1024).map(|_| tokio::sync::Mutex::new(())).collect(),
            hasher: Default::default(),
        }
    }
}

impl Hub {
    /// Build a hub over `store`: rebuild the workspace index and the CRD
    /// registry from what is stored. The server then has the built-in
    /// controllers (`ferry-server`'s `server::Controllers`) create what a
    /// fresh cluster has.
    pub fn new(store: Arc<Store>, config: HubConfig) -> Arc<Hub> {
        Hub::with_extensions(store, config, Extensions::default())
    }

    /// [`Hub::new`] with what a layer above adds ([`Extensions`]).
    pub fn with_extensions(store: Arc<Store>, config: HubConfig, extensions: Extensions) -> Arc<Hub> {
        let security = crate::auth::Security::new(crate::auth::SecurityConfig {
            admin_token: config.admin_token.clone(),
            static_tokens: config.static_tokens.clone(),
            service_account_key: config.service_account_key.clone(),
        });
        let builtins = extensions.get::<BuiltinResources>();
        let hub = Hub {
            store,
            registry: Registry::with_builtins(builtins.map_or(&[], |b| b.0.as_slice())),
            workspaces: WorkspaceIndex::new(),
            config,
            security,
            external_url: RwLock::new(String::new()),
            write_hooks: RwLock::new(None),
            openapi: Default::default(),
            refreshing: Default::default(),
            follow_metrics: Default::default(),
            extensions,
            write_turns: Default::default(),
            write_retries: Default::default(),
        };
        hub.rebuild_indexes();
        Arc::new(hub)
    }

    /// Wait for the turn to read-modify-write the object at `key`; the turn is
    /// held until the guard drops. Held from reading the object to handing the
    /// write to the store (not until it is durable: the next writer reads the
    /// store's newest state, durable or not). Nothing that holds a turn may wait
    /// for another.
    pub async fn write_turn(&self, key: &crate::storage::ObjectKey) -> tokio::sync::MutexGuard<'_, ()> {
        use std::hash::BuildHasher;
        let WriteTurns { turns, hasher } = &self.write_turns;
        turns[(hasher.hash_one(key) % turns.len() as u64) as usize]
            .lock()
            .await
    }

    pub fn external_url(&self) -> String {
        self.external_url.read().clone()
    }

    pub fn set_external_url(&self, url: String) {
        *self.external_url.write() = url;
    }

    /// Install what the built-in controllers do within a write.
    pub fn set_write_hooks(&self, hooks: Arc<dyn WriteHooks>) {
        *self.write_hooks.write() = Some(hooks);
    }

    pub fn write_hooks(&self) -> Option<Arc<dyn WriteHooks>> {
        self.write_hooks.read().clone()
    }

    /// Rebuild the logical-cluster index and what each logical cluster
    /// serves from the store (when the hub starts, and when a replica takes
    /// over from hubs that wrote the shared store).
    pub fn rebuild_indexes(&self) {
        if let Some(objects) = self.logical_cluster_objects() {
            self.index_logical_clusters(objects);
        }
        let (crds, _) = self.store.list(&ClusterScope::All, CRDS, None, None);
        let (served, _) = match self.served_resources() {
            Some(layer) => self.store.list(&ClusterScope::All, layer.source(), None, None),
            None => Default::default(),
        };
        let mut clusters: Vec<String> = crds
            .iter()
            .chain(served.iter())
            .map(|(k, _)| k.cluster.clone())
            .collect();
        clusters.sort();
        clusters.dedup();
        for c in clusters {
            self.refresh_crds(&c);
        }
    }

    /// Add to the index the logical cluster every one of `objects` stands for.
    fn index_logical_clusters(&self, objects: &LogicalClusterObjects) {
        // Parents first, so paths can be built top-down.
        let (all, _) = self.store.list(&ClusterScope::All, objects.resource, None, None);
        let mut pending: Vec<(String, Value)> =
            all.into_iter().map(|(k, o)| (k.cluster, o.value())).collect();
        while !pending.is_empty() {
            let before = pending.len();
            pending.retain(|(parent, ws)| {
                let Some(parent_lc) = self.workspaces.by_name(parent) else {
                    return true;
                };
                if let Some(lc) = (objects.cluster_of)(&parent_lc, ws) {
                    self.workspaces.insert(lc);
                }
                false
            });
            if pending.len() == before {
                tracing::warn!(
                    orphans = pending.len(),
                    "workspaces whose parent no longer exists are ignored"
                );
                break;
            }
        }
    }

    /// Recompute what `cluster` serves beyond the built-ins: its CRDs'
    /// resources and what the layer above serves there ([`ServedResources`]:
    /// kcp's Bound APIBindings, and which exports it is bound to).
    pub fn refresh_crds(&self, cluster: &str) {
        // Read and install under one lock: a refresh that read the store
        // later always installs later (the store's committed state only
        // moves forward), so a Bound binding or a new CRD is never undone
        // by a slower refresh that read before it.
        let _serial = self.refreshing.lock();
        let scope = ClusterScope::One(cluster.into());
        let (crds, _) = self.store.list(&scope, CRDS, None, None);
        let mut served = Vec::new();
        for (key, obj) in crds {
            // A CRD being deleted keeps serving until it is gone.
            let crd = obj.value();
            match resources_from_crd(&crd) {
                // A CRD naming a built-in resource (`ferry crds` includes
                // `synctargets.workload.kcp.io`, which the hub serves itself)
                // is stored and Established, but the built-in serves.
                Ok(rs) => served.extend(
                    rs.into_iter()
                        .filter(|r| !self.registry.is_builtin(&r.group, &r.resource)),
                ),
                Err(e) => tracing::warn!(crd = %key.name, cluster, "not serving CRD: {e}"),
            }
        }
        let layer = self.served_resources();
        let record = layer.map(|layer| layer.refresh(self, cluster, &mut served));
        self.registry.set_crd_resources(cluster, served);
        if let Some(record) = record {
            record();
        }
    }

    /// The layer above that serves resources beyond CRDs, if one was added.
    fn served_resources(&self) -> Option<&Arc<dyn ServedResources>> {
        self.extensions.get::<Arc<dyn ServedResources>>()
    }

    /// The objects logical clusters below root are made from, if a layer
    /// above added them ([`LogicalClusterObjects`]).
    pub fn logical_cluster_objects(&self) -> Option<&LogicalClusterObjects> {
        self.extensions.get::<LogicalClusterObjects>()
    }

    /// The logical cluster a client addressed (`None` in the URL means root).
    pub fn resolve_cluster(&self, raw: Option<&str>) -> Option<LogicalCluster> {
        self.workspaces.resolve(raw.unwrap_or(ROOT))
    }
}

impl crate::auth::AuthContext for Hub {
    fn store(&self) -> &Store {
        &self.store
    }

    fn security(&self) -> &crate::auth::Security {
        &self.security
    }

    fn workspaces(&self) -> &WorkspaceIndex {
        &self.workspaces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kubernetes' groups: the core group, its unsuffixed legacy ones, and
    /// the `*.k8s.io` ones.
    fn is_kubernetes_group(group: &str) -> bool {
        ["", "apps", "batch", "autoscaling", "policy"].contains(&group) || group.ends_with(".k8s.io")
    }

    #[test]
    fn a_plain_hub_serves_kubernetes_own_kinds_only() {
        let hub = Hub::new(Store::in_memory(), HubConfig::default());
        let resources = hub.registry.resources(Some(ROOT));
        let discovered = crate::discovery::aggregated_discovery(&resources, false);
        let groups: Vec<&str> = discovered["items"]
            .as_array()
            .expect("groups")
            .iter()
            .filter_map(|g| g.pointer("/metadata/name")?.as_str())
            .collect();
        assert!(groups.contains(&"apps"), "{groups:?}");
        let foreign: Vec<&&str> = groups.iter().filter(|g| !is_kubernetes_group(g)).collect();
        assert!(foreign.is_empty(), "served beyond Kubernetes: {foreign:?}");
        for r in &resources {
            assert!(is_kubernetes_group(&r.group), "{}", r.api_version());
            assert!(!r.yields_plural, "{}", r.resource);
            for category in &r.categories {
                assert!(
                    ["all", "api-extensions"].contains(&category.as_str()),
                    "{category}"
                );
            }
        }
        // Root is the only logical cluster, and a missing one says no more.
        assert!(hub.logical_cluster_objects().is_none());
        assert_eq!(
            hub.resolve_cluster(None).map(|lc| lc.path),
            Some(ROOT.to_string())
        );
        assert!(hub.resolve_cluster(Some("root:team")).is_none());
    }

    #[test]
    fn a_layers_builtins_are_served_after_kubernetes_own() {
        let added = crate::registry::BuiltinKind::new("example.org", "v1", "gadgets", "Gadget")
            .short_names(&["gd"])
            .with_status()
            .in_categories(&["example"]);
        let mut extensions = Extensions::default();
        extensions.insert(BuiltinResources(vec![added.info()]));
        let hub = Hub::with_extensions(Store::in_memory(), HubConfig::default(), extensions);
        let resources = hub.registry.resources(Some(ROOT));
        assert_eq!(resources.last().map(|r| r.kind.as_str()), Some("Gadget"));
        assert!(hub.registry.is_builtin("example.org", "gadgets"));
        let gadgets = hub
            .registry
            .lookup(Some(ROOT), "example.org", "v1", "gadgets")
            .expect("served");
        assert_eq!(gadgets.short_names, ["gd"]);
        assert_eq!(gadgets.categories, ["example"]);
        assert!(gadgets.status_subresource && !gadgets.from_crd);
        // A hub built without them does not serve them.
        let plain = Hub::new(Store::in_memory(), HubConfig::default());
        assert!(!plain.registry.is_builtin("example.org", "gadgets"));
    }
}
