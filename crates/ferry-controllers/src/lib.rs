//! The built-in controllers of what a Kubernetes cluster and kcp's tenancy
//! have: what a fresh cluster has, workspaces and their logical clusters,
//! namespace termination, CRD clean-up, APIServices, APIExports and
//! APIBindings, token Secrets and CSR signing, the `kubernetes` Services and
//! garbage collection of `ownerReferences` dependents. KubeStellar's
//! controllers are the `ferry-kubestellar` crate's, kcp TMC's the
//! `ferry-tmc` crate's; neither depends on this one, so changing a
//! controller here recompiles this crate, the few lines that wire the three
//! (`ferry-hub`) and the binaries, not theirs.
//!
//! They are clients of the object service ([`ferry_server::service`]), writing as
//! the loopback user with their own field managers. Each follows the
//! store's watch and resyncs when it starts ([`follow`], [`finalizing`],
//! [`garbage_collector`]); [`BuiltIn`] is their first pass within a write,
//! for effects the client sees on its next request.
//!
//! The server runs [`BuiltIn`] as its
//! [`ferry_server::controller::WriteObserver`], and [`bootstrap`] and
//! [`spawn`] through its [`ferry_server::server::Controllers`] hook, which
//! the `ferry-hub` crate implements with the other profiles' controllers.
//! Nothing below this crate depends on it.

pub mod apis;
pub mod apiservices;
pub mod crds;
pub mod finalizing;
pub use ferry_server::controller::{info_for_storage_key, is_deleting, update_status};
pub use ferry_server::follow;
pub mod garbage_collector;
pub mod kubernetes_service;
pub mod logical_cluster;
pub mod namespaces;
pub mod security;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use ferry_server::controller::{logical_cluster_of, ControllerContext, WriteObserver, CRDS};
use ferry_server::registry::ResourceInfo;
use ferry_server::storage::{ClusterScope, Expect, ObjectKey};
use ferry_server::workspace::{ROOT, WORKSPACES};

/// The built-in controllers' part of a write: the first pass that makes a
/// write's effect visible to the client's next request. Their watch loops
/// ([`spawn`], the garbage collector, the mailbox controller) do the rest.
pub struct BuiltIn;

impl WriteObserver for BuiltIn {
    fn creating<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        key: &'a ObjectKey,
        obj: &'a Value,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if key.resource == WORKSPACES {
                // The new logical cluster gets what a fresh cluster has before its
                // Workspace is visible as Ready, so clients can use it at once.
                workspace_written(ctx, &key.cluster, Some(obj)).await;
            }
        })
    }

    fn written<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        _info: &'a ResourceInfo,
        key: &'a ObjectKey,
        new: Option<&'a Value>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let storage_key = key.resource.as_str();
            if storage_key == CRDS {
                apiservices::sync(ctx, &key.cluster).await;
            } else if storage_key == WORKSPACES {
                workspace_written(ctx, &key.cluster, new).await;
            } else if security::watches(storage_key) {
                security::object_written(ctx, storage_key, key, new).await;
            } else if storage_key == "/namespaces" {
                if let Some(ns) = new {
                    if ns.pointer("/metadata/deletionTimestamp").is_none() {
                        ensure_default_service_account(ctx, &key.cluster, &key.name).await;
                    }
                }
            }
        })
    }

    fn deleting<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        _info: &'a ResourceInfo,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if key.resource == CRDS {
                crds::first_pass(ctx, key).await;
            }
        })
    }

    fn removed<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        _info: &'a ResourceInfo,
        key: &'a ObjectKey,
        old: &'a Value,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if key.resource == CRDS {
                remove_custom_resources(ctx, &key.cluster, old).await;
            } else if key.resource == WORKSPACES {
                if let Some(cluster) = old.pointer("/spec/cluster").and_then(Value::as_str) {
                    remove_cluster(ctx, cluster).await;
                }
            }
        })
    }

    fn serving<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        info: &'a ResourceInfo,
        cluster: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if apiservices::is_apiservices(info) {
                apiservices::materialize(ctx, cluster).await;
            } else if security::holds_default_rbac(info) {
                security::materialize_default_rbac(ctx, cluster).await;
            }
        })
    }
}

/// Start the controllers that follow the store's watch (namespace
/// termination, CRD clean-up, APIServices, token Secrets and CSR signing,
/// APIExports, the `kubernetes` Services, the garbage collector); they stop
/// when `ctx`'s lease is lost. Await the handles to know they have stopped
/// writing.
pub fn spawn(ctx: &ControllerContext) -> Vec<JoinHandle<()>> {
    vec![
        namespaces::spawn(ctx.clone()),
        crds::spawn(ctx.clone()),
        follow::spawn(ctx.clone(), apiservices::ApiServices),
        follow::spawn(ctx.clone(), security::SecurityControllers),
        follow::spawn(ctx.clone(), apis::ApiExports),
        follow::spawn(ctx.clone(), kubernetes_service::KubernetesService),
        garbage_collector::spawn(ctx.clone()),
    ]
}

/// Namespaces every logical cluster starts with.
pub const DEFAULT_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// Make sure the root cluster has what a fresh cluster has (the server has
/// installed [`BuiltIn`] first).
pub async fn bootstrap(ctx: &ControllerContext) {
    bootstrap_cluster(ctx, ROOT, None).await;
    // Workspaces from before the hub had default RBAC objects (or their
    // LogicalCluster) get them too.
    for cluster in ctx.clusters() {
        if cluster != ROOT && ctx.logical_cluster(&cluster).is_some() {
            // Defaults deleted from a workspace that stores them come back, as
            // kube-apiserver's RBAC bootstrap does at each start.
            if security::default_rbac_made(ctx, &cluster) {
                security::ensure_default_rbac(ctx, &cluster).await;
            }
            kubernetes_service::repair(ctx, &cluster).await;
            logical_cluster::ensure(ctx, &cluster, None).await;
        }
    }
}

/// What a fresh logical cluster has; `workspace` is the Workspace object
/// being created for it (`None` for root).
async fn bootstrap_cluster(ctx: &ControllerContext, cluster: &str, workspace: Option<&Value>) {
    logical_cluster::ensure(ctx, cluster, workspace).await;
    // Each write waits for its commit: issued together, they share commits
    // instead of paying one each in turn.
    let namespaces = futures::future::join_all(DEFAULT_NAMESPACES.iter().map(|ns| async move {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match ctx.create(cluster, ("", "v1", "namespaces"), None, obj).await {
            Ok(_) => {}
            Err(e) if e.code == 409 => ensure_default_service_account(ctx, cluster, ns).await,
            Err(e) => tracing::warn!(
                cluster,
                namespace = ns,
                "creating a default namespace failed: {e}"
            ),
        }
    }));
    // The `kubernetes` Service goes into namespace `default`: after it.
    let default_rbac = async {
        if workspace.is_none() {
            security::ensure_default_rbac(ctx, cluster).await;
        }
    };
    futures::join!(default_rbac, async {
        namespaces.await;
        kubernetes_service::ensure(ctx, cluster).await;
    });
    // A workspace's default RBAC objects and APIServices are stored when a
    // client first asks for them (`security::materialize_default_rbac`,
    // `apiservices::materialize`; it is judged with the default RBAC from
    // the start): few clients do, and they were four fifths of what an empty
    // workspace wrote and held. Root has its RBAC defaults from the start.
}

/// Run `make` in `cluster` unless `made` says it is done or the cluster is
/// no workspace: what a workspace stores only once a client asks for it.
/// Concurrent first requests wait for one another, so it is made once and
/// each finds it whole.
async fn make_on_demand(
    ctx: &ControllerContext,
    cluster: &str,
    made: fn(&ControllerContext, &str) -> bool,
    make: impl std::future::Future<Output = ()>,
) {
    static MAKING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    if made(ctx, cluster) || ctx.logical_cluster(cluster).is_none() {
        return;
    }
    let _one_at_a_time = MAKING.lock().await;
    if !made(ctx, cluster) {
        make.await;
    }
}

/// Every namespace has a `default` ServiceAccount.
pub async fn ensure_default_service_account(ctx: &ControllerContext, cluster: &str, namespace: &str) {
    let obj = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": namespace}});
    match ctx
        .create(cluster, ("", "v1", "serviceaccounts"), Some(namespace), obj)
        .await
    {
        Ok(_) => {}
        Err(e) if e.code == 409 => {
            // Made by a racing write that may still be committing: wait for
            // it, so the client's next read sees the account.
            let key = ObjectKey {
                cluster: cluster.into(),
                resource: "/serviceaccounts".into(),
                namespace: namespace.into(),
                name: "default".into(),
            };
            if let Some(existing) = ctx.get(&key) {
                let _ = ctx.wait_for(existing.rv, std::time::Duration::from_secs(5)).await;
            }
        }
        Err(e) if e.code == 403 => {}
        Err(e) => tracing::warn!(
            cluster,
            namespace,
            "creating the default ServiceAccount failed: {e}"
        ),
    }
}

/// A Workspace object was written in `parent` (or deleted: `new` is None).
pub async fn workspace_written(ctx: &ControllerContext, parent: &str, new: Option<&Value>) {
    let Some(ws) = new else { return };
    let Some(parent_lc) = ctx.logical_cluster(parent) else {
        return;
    };
    let Some(lc) = logical_cluster_of(&parent_lc, ws) else {
        return;
    };
    let fresh = ctx.logical_cluster(&lc.name).is_none();
    let name = lc.name.clone();
    ctx.route_logical_cluster(lc);
    if fresh {
        bootstrap_cluster(ctx, &name, Some(ws)).await;
    }
}

/// Remove a logical cluster: its child workspaces first, then every object.
pub fn remove_cluster<'a>(
    ctx: &'a ControllerContext,
    cluster: &'a str,
) -> futures::future::BoxFuture<'a, ()> {
    Box::pin(async move {
        for child in ctx.child_clusters(cluster) {
            remove_cluster(ctx, &child.name).await;
        }
        for resource in ctx.resources_in(cluster) {
            let (objects, _) = ctx.list(&ClusterScope::One(cluster.into()), &resource, None, None);
            for (key, _) in objects {
                if let Ok(c) = ctx.purge(key, Expect::Exists) {
                    let _ = c.durable().await;
                }
            }
        }
        ctx.forget_logical_cluster(cluster);
    })
}

/// A CRD is removed from storage: custom resources still left (its clean-up
/// finalizer was removed by hand) go with it at once.
pub async fn remove_custom_resources(ctx: &ControllerContext, cluster: &str, crd: &Value) {
    let (Some(group), Some(plural)) = (
        crd.pointer("/spec/group").and_then(Value::as_str),
        crd.pointer("/spec/names/plural").and_then(Value::as_str),
    ) else {
        return;
    };
    if ctx.is_builtin(group, plural) {
        return; // served built in: the objects are not the CRD's
    }
    let key = ferry_server::registry::storage_key(group, plural);
    let (objects, _) = ctx.list(&ClusterScope::One(cluster.into()), &key, None, None);
    for (key, _) in objects {
        if let Ok(c) = ctx.purge(key, Expect::Exists) {
            let _ = c.durable().await;
        }
    }
}
