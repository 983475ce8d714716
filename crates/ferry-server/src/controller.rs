//! What a built-in controller is handed: [`ControllerContext`], its narrow
//! handle on the hub, and the [`Lease`] it runs under. The server owns the
//! [`Hub`]; controllers read, watch and write through the handle — writes
//! through the object service ([`crate::service`]), the same typed write
//! path as a client's, with the same admission, strategies and validation —
//! as kube-runtime's controllers do through a client and reflector stores.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::watch;

use crate::auth::service_account::TokenSpec;
use crate::auth::UserInfo;
use crate::grants::tmc::LocationSource;
use crate::hub::{Hub, WriteHooks};
use crate::registry::ResourceInfo;
use crate::service::{Request, HUB_MANAGER};
use crate::status::ApiError;
use crate::storage::{
    ClusterScope, Committed, Expect, ObjectKey, StoreError, StoredObject, WatchError, WatchSubscription,
};
use crate::tls::TlsMaterial;
use crate::workspace::LogicalCluster;

// What the controllers name besides the handle: the storage key of CRDs
// and the logical cluster of a Workspace.
pub use crate::hub::CRDS;
pub use crate::workspace::logical_cluster_of;

/// What the hub's built-in controllers do within a write, before it
/// answers: their first pass over the object, for effects a client sees on
/// its next request (a new workspace is usable, a CRD deleted with no
/// custom resources left is gone, a token Secret has its token). Each
/// controller also follows the store's watch and resyncs when it starts,
/// so what a restart interrupted is finished.
///
/// The object service runs it, through the hub's [`WriteHooks`] that
/// [`ObservedWrites`] provides, with the controllers' handle on the hub;
/// the controllers implement it (`ferry_controllers::BuiltIn`), so the
/// server never imports them.
pub trait WriteObserver: Send + Sync {
    /// A create of `obj` at `key` is about to be stored.
    fn creating<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        key: &'a ObjectKey,
        obj: &'a Value,
    ) -> BoxFuture<'a, ()>;
    /// The object at `key` (served as `info`) was written (`new`) or removed (`None`).
    fn written<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
        new: Option<&'a Value>,
    ) -> BoxFuture<'a, ()>;
    /// The object at `key` was just marked as being deleted, held by finalizers.
    fn deleting<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, ()>;
    /// `old` was removed from storage: what goes with it goes now.
    fn removed<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
        old: &'a Value,
    ) -> BoxFuture<'a, ()>;
    /// A client's request on `info`'s objects in `cluster` is about to be
    /// served: make what is kept only once someone asks for it.
    fn serving<'a>(
        &'a self,
        _ctx: &'a ControllerContext,
        _info: &'a ResourceInfo,
        _cluster: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// The hub's [`WriteHooks`] that run the controllers' [`WriteObserver`],
/// each call with a fresh [`ControllerContext`] on the hub.
pub struct ObservedWrites(pub Arc<dyn WriteObserver>);

impl WriteHooks for ObservedWrites {
    fn creating<'a>(&'a self, hub: &'a Arc<Hub>, key: &'a ObjectKey, obj: &'a Value) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let ctx = ControllerContext::new(hub.clone());
            self.0.creating(&ctx, key, obj).await;
        })
    }

    fn written<'a>(
        &'a self,
        hub: &'a Arc<Hub>,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
        new: Option<&'a Value>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let ctx = ControllerContext::new(hub.clone());
            self.0.written(&ctx, info, key, new).await;
        })
    }

    fn deleting<'a>(
        &'a self,
        hub: &'a Arc<Hub>,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let ctx = ControllerContext::new(hub.clone());
            self.0.deleting(&ctx, info, key).await;
        })
    }

    fn removed<'a>(
        &'a self,
        hub: &'a Arc<Hub>,
        info: &'a ResourceInfo,
        key: &'a ObjectKey,
        old: &'a Value,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let ctx = ControllerContext::new(hub.clone());
            self.0.removed(&ctx, info, key, old).await;
        })
    }

    fn serving<'a>(
        &'a self,
        hub: &'a Arc<Hub>,
        info: &'a ResourceInfo,
        cluster: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let ctx = ControllerContext::new(hub.clone());
            self.0.serving(&ctx, info, cluster).await;
        })
    }
}

/// The built-in controllers' handle on the hub: reads, watches and writes
/// of objects per logical cluster and resource, the workspace lookups they
/// need, a clock, and the [`Lease`] they run under. Cheap to clone.
///
/// Reads see the newest state of an object, a write not yet durable
/// included (what the write path checks against), so a controller's
/// read-modify-write is never acknowledged before the write it read.
/// Writes go through [`crate::service`] with a [`Request`] built here (the
/// loopback user, the controller's field manager): the same decode,
/// admission, strategy, validation and after-write hooks as a client's.
///
/// Porting a controller that took the whole hub (`hub: &Arc<Hub>`):
///
/// | was                                             | now                                   |
/// | ----------------------------------------------- | ------------------------------------- |
/// | `hub.store.get(key)`                            | `ctx.get(key)`                        |
/// | `hub.store.list(scope, res, ns, after)`         | `ctx.list(scope, res, ns, after)`     |
/// | `hub.store.resources_in(c)` / `resource_keys()` / `clusters()` | the same name on `ctx` |
/// | `hub.store.resource_version()` / `watch(rv)`    | `ctx.resource_version()` / `ctx.watch(rv)` |
/// | `hub.store.settle(t)` / `wait_for(rv, t)`       | `ctx.settle(t)` / `ctx.wait_for(rv, t)` |
/// | `hub.store.delete(key, expect)`                 | `ctx.purge(key, expect)` (see there)  |
/// | `Request::internal(hub, …)` / `internal_at(hub, …)` | `ctx.request(…)` / `ctx.request_at(…)` |
/// | `service::create_internal(hub, …)`              | `ctx.create(…)`                       |
/// | `hub.registry.lookup(c, g, v, r)` / `lookup_kind(c, g, v, k)` | `ctx.lookup(…)` / `ctx.lookup_kind(…)` |
/// | `hub.registry.resources(c)`                     | `ctx.served_resources(c)`             |
/// | `hub.registry.is_builtin(g, r)` / `is_builtin_group(g)` | the same name on `ctx`        |
/// | `hub.workspaces.by_name(c)` / `resolve(p)` / `children(c)` | `ctx.logical_cluster(c)` / `ctx.resolve_workspace(p)` / `ctx.child_clusters(c)` |
/// | `hub.workspaces.insert(lc)`                     | `ctx.route_logical_cluster(lc)`       |
/// | `hub.workspaces.remove(c)` (with the registry and RBAC caches) | `ctx.forget_logical_cluster(c)` |
/// | `hub.refresh_crds(c)`                           | `ctx.refresh_served(c)`               |
/// | `hub.security.rbac.invalidate(c)`               | `ctx.invalidate_rbac(c)`              |
/// | `hub.security.ca()`                             | `ctx.certificate_authority()`         |
/// | `hub.security.service_accounts.mint(spec, now)` | `ctx.mint_service_account_token(spec)` |
/// | `hub.external_url()`                            | `ctx.external_url()`                  |
/// | `grants::edge::may_place(hub, …)`, `grants::tmc::location_source(hub, …)`, `kinds::apis::export_cluster(hub, …)`, `synctarget::{desired, supported_exports, supported_resources}(hub, …)` | the same name on `ctx` (`sync_target_status` for `desired`) |
/// | `chrono::Utc::now()`                            | `ctx.now()`                           |
/// | `stop: watch::Receiver<bool>`                   | `ctx.lease()` ([`Lease`])             |
#[derive(Clone)]
pub struct ControllerContext {
    hub: Arc<Hub>,
    lease: Lease,
    /// `None`: the system clock (no allocation for a write's first pass).
    clock: Option<Clock>,
}

/// Where a controller reads the time: the system clock, or a test's.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

impl ControllerContext {
    /// A handle on `hub` under no lease (it never ends) with the system clock:
    /// what a write's first pass and the bootstrap run with.
    pub fn new(hub: Arc<Hub>) -> ControllerContext {
        ControllerContext {
            hub,
            lease: Lease::unbounded(),
            clock: None,
        }
    }

    /// The same handle for controllers that run while `lease` is held.
    pub fn with_lease(mut self, lease: Lease) -> ControllerContext {
        self.lease = lease;
        self
    }

    /// The same handle reading the time from `clock`.
    pub fn with_clock(mut self, clock: Clock) -> ControllerContext {
        self.clock = Some(clock);
        self
    }

    /// The hub itself, for the server's own followers.
    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    /// The lease the controllers run under: they stop writing once it is lost.
    pub fn lease(&self) -> Lease {
        self.lease.clone()
    }

    /// The time now.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.as_ref().map_or_else(Utc::now, |clock| clock())
    }

    // ------------------------------------------------------------ reads

    /// The newest state of the object at `key`, a write not yet durable included.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<StoredObject>> {
        self.hub.store.get(key)
    }

    /// Every object of `resource` (a storage key) in `scope` (and
    /// `namespace`, if given), in (cluster, namespace, name) order, after
    /// `after` if given, and the resourceVersion the list is consistent with.
    pub fn list(
        &self,
        scope: &ClusterScope,
        resource: &str,
        namespace: Option<&str>,
        after: Option<&ObjectKey>,
    ) -> (Vec<(ObjectKey, Arc<StoredObject>)>, u64) {
        self.hub.store.list(scope, resource, namespace, after)
    }

    /// Storage keys of the resources with objects in `cluster`.
    pub fn resources_in(&self, cluster: &str) -> Vec<String> {
        self.hub.store.resources_in(cluster)
    }

    /// Storage keys of the resources with objects in some cluster.
    pub fn resource_keys(&self) -> Vec<String> {
        self.hub.store.resource_keys()
    }

    /// Names of the logical clusters that hold at least one object.
    pub fn clusters(&self) -> Vec<String> {
        self.hub.store.clusters()
    }

    /// The committed resourceVersion: where a watch that misses nothing starts.
    pub fn resource_version(&self) -> u64 {
        self.hub.store.resource_version()
    }

    /// Every change after `from_rv`, in every logical cluster.
    pub fn watch(&self, from_rv: u64) -> Result<WatchSubscription, WatchError> {
        self.hub.store.watch(from_rv)
    }

    /// Wait (at most `timeout`) until every write accepted so far is
    /// visible to readers: before answering a client from what other tasks
    /// may have written a moment before.
    pub async fn settle(&self, timeout: Duration) {
        self.hub.store.settle(timeout).await
    }

    /// Wait (at most `timeout`) until the committed resourceVersion reaches `rv`.
    pub async fn wait_for(&self, rv: u64, timeout: Duration) -> Result<(), u64> {
        self.hub.store.wait_for(rv, timeout).await
    }

    // ----------------------------------------------------------- writes

    /// A write of the controller's own on `resource` (group, version,
    /// plural) in `cluster`, as the loopback user with `manager` as field
    /// manager; pass it to [`crate::service`]'s `create`, `update`, `patch`
    /// or `delete`.
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        &self,
        cluster: &str,
        resource: (&str, &str, &str),
        namespace: Option<&str>,
        name: Option<&str>,
        verb: &str,
        manager: &str,
    ) -> Result<Request, ApiError> {
        Request::internal(&self.hub, cluster, resource, namespace, name, verb, manager)
    }

    /// As [`ControllerContext::request`], for the object at `key` served as `info`.
    pub fn request_at(
        &self,
        info: ResourceInfo,
        key: &ObjectKey,
        verb: &str,
        manager: &str,
    ) -> Result<Request, ApiError> {
        Request::internal_at(&self.hub, info, key, verb, manager)
    }

    /// Create `obj` as the hub itself (field manager `ferry-hub`), with the
    /// same defaults and validation as a client's create; AlreadyExists is an error.
    pub async fn create(
        &self,
        cluster: &str,
        resource: (&str, &str, &str),
        namespace: Option<&str>,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let r = self.request(cluster, resource, namespace, None, "create", HUB_MANAGER)?;
        crate::service::create(&r, obj).await.map(|w| w.object)
    }

    /// Remove the object at `key` from storage if it matches `expect`, with
    /// no finalizers, strategy or after-write hooks: no client can. Only for
    /// objects nothing else can remove — those of a logical cluster or
    /// custom resource definition that is gone, those no resource serves any
    /// more, and a CRD handed to an APIBinding (its objects stay).
    pub fn purge(&self, key: ObjectKey, expect: Expect) -> Result<Committed, StoreError> {
        self.hub.store.delete(key, expect)
    }

    // ------------------------------------------------- what is served

    /// The resource `group`/`version`/`resource` as served in `cluster` (a
    /// built-in one when `None`).
    pub fn lookup(
        &self,
        cluster: Option<&str>,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<ResourceInfo> {
        self.hub.registry.lookup(cluster, group, version, resource)
    }

    /// The resource of `kind` in `group`/`version` as served in `cluster`.
    pub fn lookup_kind(&self, cluster: &str, group: &str, version: &str, kind: &str) -> Option<ResourceInfo> {
        self.hub.registry.lookup_kind(cluster, group, version, kind)
    }

    /// Every resource `cluster` serves (the built-in ones when `None`).
    pub fn served_resources(&self, cluster: Option<&str>) -> Vec<ResourceInfo> {
        self.hub.registry.resources(cluster)
    }

    /// Whether the hub serves `group`/`resource` built in.
    pub fn is_builtin(&self, group: &str, resource: &str) -> bool {
        self.hub.registry.is_builtin(group, resource)
    }

    /// Whether `group` is one the hub serves built in.
    pub fn is_builtin_group(&self, group: &str) -> bool {
        self.hub.registry.is_builtin_group(group)
    }

    /// `https://host:port`, the URL clients reach the hub at.
    pub fn external_url(&self) -> String {
        self.hub.external_url()
    }

    // ------------------------------------------------------- workspaces

    /// The logical cluster named `name`.
    pub fn logical_cluster(&self, name: &str) -> Option<LogicalCluster> {
        self.hub.workspaces.by_name(name)
    }

    /// The logical cluster at a workspace path (`root:org:ws`) or of that name.
    pub fn resolve_workspace(&self, path_or_name: &str) -> Option<LogicalCluster> {
        self.hub.workspaces.resolve(path_or_name)
    }

    /// The logical clusters of the child workspaces of `parent`.
    pub fn child_clusters(&self, parent: &str) -> Vec<LogicalCluster> {
        self.hub.workspaces.children(parent)
    }

    // ------------------------- what no client can do: the hub's own state

    /// Route requests to a new logical cluster (its Workspace was written):
    /// what the workspace controller does in kcp's shard.
    pub fn route_logical_cluster(&self, lc: LogicalCluster) {
        self.hub.workspaces.insert(lc);
    }

    /// Forget a removed logical cluster: what it served, its cached RBAC,
    /// and its route.
    pub fn forget_logical_cluster(&self, name: &str) {
        self.hub.registry.set_crd_resources(name, Vec::new());
        self.hub.security.rbac.invalidate(name);
        self.hub.workspaces.remove(name);
    }

    /// Recompute what `cluster` serves from its CRDs and Bound APIBindings
    /// (after a CRD was handed to a binding without a write of either).
    pub fn refresh_served(&self, cluster: &str) {
        self.hub.refresh_crds(cluster);
    }

    /// Forget `cluster`'s cached RBAC: a grant changed, and a watch event can
    /// arrive before the write's own invalidation.
    pub fn invalidate_rbac(&self, cluster: &str) {
        self.hub.security.rbac.invalidate(cluster);
    }

    /// The CA that signs client certificates (the CSR signer's key), once
    /// the server has one.
    pub fn certificate_authority(&self) -> Option<Arc<TlsMaterial>> {
        self.hub.security.ca()
    }

    /// A ServiceAccount token for `spec`, issued now and signed with the
    /// hub's key (a token Secret's `token`).
    pub fn mint_service_account_token(&self, spec: &TokenSpec<'_>) -> String {
        let (token, _) = self
            .hub
            .security
            .service_accounts
            .mint(spec, self.now().timestamp());
        token
    }

    // ------------------ rules the server owns, checked against this hub

    /// Whether `placer` may place onto the Location `location` of
    /// `cluster` ([`crate::grants::edge::may_place`]).
    pub fn may_place(&self, placer: &UserInfo, cluster: &str, location: &str) -> bool {
        crate::grants::edge::may_place(&self.hub, placer, cluster, location)
    }

    /// The location workspace of a Placement in `cluster`, and the Locations
    /// it may use ([`crate::grants::tmc::location_source`]).
    pub fn location_source(&self, cluster: &str, placement: &Value) -> LocationSource {
        crate::grants::tmc::location_source(&self.hub, cluster, placement)
    }

    /// Whether `user` may bind Location `name` (`None`: every Location) in
    /// `lc` ([`crate::grants::tmc::may_bind`]): one Location's grant, where
    /// [`Self::location_source`] reads every Location of the workspace.
    pub fn may_bind_location(
        &self,
        user: &crate::auth::UserInfo,
        lc: &LogicalCluster,
        name: Option<&str>,
    ) -> bool {
        crate::grants::tmc::may_bind(&self.hub, user, lc, name)
    }

    /// The workspace an APIBinding's export reference names
    /// ([`crate::kinds::apis::export_cluster`]).
    pub fn export_cluster(&self, binding_cluster: &LogicalCluster, path: &str) -> Option<LogicalCluster> {
        crate::kinds::apis::export_cluster(&self.hub, binding_cluster, path)
    }

    /// The status a kcp SyncTarget should have now ([`crate::synctarget::desired`]).
    pub fn sync_target_status(
        &self,
        key: &ObjectKey,
        target: &Value,
        threshold: Duration,
        resources: crate::synctarget::Resources<'_>,
    ) -> crate::synctarget::Desired {
        crate::synctarget::desired(&self.hub, key, target, threshold, self.now(), resources)
    }

    /// The exports a kcp SyncTarget supports ([`crate::synctarget::supported_exports`]).
    pub fn supported_exports(&self, key: &ObjectKey, target: &Value) -> Vec<(String, String)> {
        crate::synctarget::supported_exports(&self.hub, key, target)
    }

    /// The resources a kcp SyncTarget's exports offer ([`crate::synctarget::supported_resources`]).
    pub fn supported_resources(
        &self,
        key: &ObjectKey,
        target: &Value,
    ) -> std::collections::HashSet<(String, String)> {
        crate::synctarget::supported_resources(&self.hub, key, target)
    }
}

/// The term controllers run for: until the hub stops, or, with hubs
/// sharing etcd, while this hub holds the controllers' Lease. Once it is
/// lost, the controllers stop writing (another hub's take over).
#[derive(Clone)]
pub struct Lease {
    /// Turns true when the term ends (as does dropping its sender).
    ended: Option<watch::Receiver<bool>>,
}

impl Lease {
    /// A term that ends when `ended` turns true or its sender is dropped.
    pub fn until(ended: watch::Receiver<bool>) -> Lease {
        Lease { ended: Some(ended) }
    }

    /// A term that never ends.
    pub fn unbounded() -> Lease {
        Lease { ended: None }
    }

    /// Whether the term still runs.
    pub fn is_held(&self) -> bool {
        match &self.ended {
            Some(ended) => !*ended.borrow() && ended.has_changed().is_ok(),
            None => true,
        }
    }

    /// Resolves once the term ends (never for an unbounded one). Cancel-safe:
    /// for `tokio::select!` in a controller's loop.
    pub async fn lost(&mut self) {
        let Some(ended) = &mut self.ended else {
            return std::future::pending().await;
        };
        loop {
            if *ended.borrow() {
                return;
            }
            if ended.changed().await.is_err() {
                return;
            }
        }
    }
}

// What the controllers of every profile share (Kubernetes' own, KubeStellar's,
// kcp TMC's), here so that none of their crates depends on another's.

/// Whether the stored object is being deleted (parses only when it may be).
pub fn is_deleting(obj: &StoredObject) -> bool {
    memchr::memmem::find(&obj.json, b"deletionTimestamp").is_some()
        && obj.value().pointer("/metadata/deletionTimestamp").is_some()
}

/// The resource stored under `storage_key` in `cluster`, at its storage
/// version when it has several.
pub fn info_for_storage_key(
    ctx: &ControllerContext,
    cluster: &str,
    storage_key: &str,
) -> Option<ResourceInfo> {
    let served: Vec<ResourceInfo> = ctx
        .served_resources(Some(cluster))
        .into_iter()
        .filter(|r| r.storage_key() == storage_key)
        .collect();
    let storage = served.iter().position(|r| r.storage_version).unwrap_or(0);
    served.into_iter().nth(storage)
}

/// Update the status of the cluster-scoped object at `key`, of `resource`
/// (group, version, plural), to `obj`'s, as `manager`. A conflict or a gone
/// object is left to the write that caused it, whose event brings the
/// object back to the controller; another refusal is logged, naming the
/// object.
pub async fn update_status(
    ctx: &ControllerContext,
    key: &ObjectKey,
    resource: (&str, &str, &str),
    manager: &str,
    obj: Value,
) {
    let request = ctx.request(&key.cluster, resource, None, Some(&key.name), "update", manager);
    let Ok(request) = request else { return };
    match crate::service::update(&request.on_subresource("status"), obj).await {
        Ok(_) => {}
        Err(e) if e.code == 409 || e.code == 404 => {}
        Err(e) => {
            let (group, _, plural) = resource;
            tracing::warn!(
                cluster = %key.cluster,
                name = %key.name,
                "writing the status of {plural}.{group} {} failed: {e}",
                key.name
            )
        }
    }
}

/// Create one of Ferry's CRDs in `cluster` (a workspace made before its kind
/// existed, or a mailbox on a hub without the ESPW): `Ok(true)` when created,
/// `Ok(false)` when it was there already.
pub async fn install_crd(
    ctx: &ControllerContext,
    cluster: &str,
    crd: &impl serde::Serialize,
) -> Result<bool, ApiError> {
    let crd = serde_json::to_value(crd).unwrap_or_default();
    match ctx
        .create(
            cluster,
            ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
            None,
            crd,
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `lease.lost()` resolves within a moment.
    async fn lost_now(lease: &mut Lease) -> bool {
        tokio::time::timeout(Duration::from_millis(50), lease.lost())
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_lease_is_lost_when_its_term_ends_or_its_sender_is_dropped() {
        let (end, ended) = watch::channel(false);
        let mut lease = Lease::until(ended);
        assert!(lease.is_held());
        assert!(!lost_now(&mut lease).await);
        end.send(false).expect("the lease listens");
        assert!(
            lease.is_held() && !lost_now(&mut lease).await,
            "only true ends the term"
        );
        end.send(true).expect("the lease listens");
        assert!(!lease.is_held() && lost_now(&mut lease).await);

        let (end, ended) = watch::channel(false);
        let mut lease = Lease::until(ended);
        drop(end);
        assert!(!lease.is_held() && lost_now(&mut lease).await);

        let mut unbounded = Lease::unbounded();
        assert!(unbounded.is_held() && !lost_now(&mut unbounded).await);
    }
}
