//! The assembled control plane: storage, what each workspace serves, and the
//! workspace index. Request handlers and built-in controllers share one `Hub`.

use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;
use serde_json::Value;

use crate::registry::{resources_from_crd, Registry, ResourceInfo};
use crate::storage::{ClusterScope, ObjectKey, Store};
use crate::workspace::{LogicalCluster, WorkspaceIndex, ROOT, WORKSPACES};

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
/// hub's own indexes: the built-in controllers' first pass over the object.
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
        let hub = Hub {
            store,
            registry: Registry::default(),
            workspaces: WorkspaceIndex::new(),
            config,
            security,
            external_url: RwLock::new(String::new()),
            write_hooks: RwLock::new(None),
            openapi: Default::default(),
            refreshing: Default::default(),
            follow_metrics: Default::default(),
            extensions,
        };
        hub.rebuild_indexes();
        Arc::new(hub)
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
        // Workspaces: parents first, so paths can be built top-down.
        let (all, _) = self.store.list(&ClusterScope::All, WORKSPACES, None, None);
        let mut pending: Vec<(String, Value)> =
            all.into_iter().map(|(k, o)| (k.cluster, o.value())).collect();
        while !pending.is_empty() {
            let before = pending.len();
            pending.retain(|(parent, ws)| {
                let Some(parent_lc) = self.workspaces.by_name(parent) else {
                    return true;
                };
                if let Some(lc) = logical_cluster_of(&parent_lc, ws) {
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

/// The logical cluster a Workspace object (stored in `parent`) stands for.
pub fn logical_cluster_of(parent: &LogicalCluster, ws: &Value) -> Option<LogicalCluster> {
    let name = ws.pointer("/metadata/name")?.as_str()?;
    let cluster = ws.pointer("/spec/cluster")?.as_str()?;
    Some(LogicalCluster {
        name: cluster.to_string(),
        path: format!("{}:{name}", parent.path),
        parent: Some(parent.name.clone()),
    })
}
