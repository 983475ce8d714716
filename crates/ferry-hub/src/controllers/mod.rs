//! Built-in controllers: what a fresh cluster has, workspaces, namespace
//! termination, CRD clean-up, garbage collection of `ownerReferences` dependents.

pub mod apiservices;
pub mod crds;
pub mod garbage_collector;
pub mod mailbox;
pub mod namespaces;
pub mod security;

use std::sync::Arc;

use serde_json::{json, Value};

use crate::hub::{logical_cluster_of, Hub};
use crate::registry::ResourceInfo;
use crate::service::create_internal;
use crate::storage::{ClusterScope, Expect};
use crate::workspace::ROOT;

/// Namespaces every logical cluster starts with.
pub const DEFAULT_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// Make sure the root cluster has what a fresh cluster has.
pub async fn bootstrap(hub: &Arc<Hub>) {
    bootstrap_cluster(hub, ROOT).await;
    // Workspaces from before the hub had default RBAC objects get them too.
    for cluster in hub.store.clusters() {
        if cluster != ROOT && hub.workspaces.by_name(&cluster).is_some() {
            security::ensure_default_rbac(hub, &cluster).await;
        }
    }
    crds::resume_terminations(hub).await;
}

async fn bootstrap_cluster(hub: &Arc<Hub>, cluster: &str) {
    security::ensure_default_rbac(hub, cluster).await;
    for ns in DEFAULT_NAMESPACES {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match create_internal(hub, cluster, ("", "v1", "namespaces"), None, obj).await {
            Ok(_) => {}
            Err(e) if e.code == 409 => ensure_default_service_account(hub, cluster, ns).await,
            Err(e) => tracing::warn!(
                cluster,
                namespace = ns,
                "creating a default namespace failed: {e}"
            ),
        }
    }
    // Last: clients may use the workspace as soon as its namespaces exist.
    apiservices::sync(hub, cluster).await;
}

/// Every namespace has a `default` ServiceAccount.
pub async fn ensure_default_service_account(hub: &Arc<Hub>, cluster: &str, namespace: &str) {
    let obj = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": namespace}});
    match create_internal(hub, cluster, ("", "v1", "serviceaccounts"), Some(namespace), obj).await {
        Ok(_) => {}
        Err(e) if e.code == 409 || e.code == 403 => {}
        Err(e) => tracing::warn!(
            cluster,
            namespace,
            "creating the default ServiceAccount failed: {e}"
        ),
    }
}

/// A Workspace object was written in `parent` (or deleted: `new` is None).
pub async fn workspace_written(hub: &Arc<Hub>, parent: &str, new: Option<&Value>) {
    let Some(ws) = new else { return };
    let Some(parent_lc) = hub.workspaces.by_name(parent) else {
        return;
    };
    let Some(lc) = logical_cluster_of(&parent_lc, ws) else {
        return;
    };
    let fresh = hub.workspaces.by_name(&lc.name).is_none();
    let name = lc.name.clone();
    hub.workspaces.insert(lc);
    if fresh {
        bootstrap_cluster(hub, &name).await;
    }
}

/// Remove a logical cluster: its child workspaces first, then every object.
pub fn remove_cluster<'a>(hub: &'a Arc<Hub>, cluster: &'a str) -> futures::future::BoxFuture<'a, ()> {
    Box::pin(async move {
        for child in hub.workspaces.children(cluster) {
            remove_cluster(hub, &child.name).await;
        }
        for resource in hub.store.resources_in(cluster) {
            let (objects, _) = hub
                .store
                .list(&ClusterScope::One(cluster.into()), &resource, None, None);
            for (key, _) in objects {
                if let Ok(c) = hub.store.delete(key, Expect::Exists) {
                    let _ = c.durable().await;
                }
            }
        }
        hub.registry.set_crd_resources(cluster, Vec::new());
        hub.security.rbac.invalidate(cluster);
        hub.workspaces.remove(cluster);
    })
}

/// A CRD is removed from storage: custom resources still left (its clean-up
/// finalizer was removed by hand) go with it at once.
pub async fn remove_custom_resources(hub: &Arc<Hub>, cluster: &str, crd: &Value) {
    let (Some(group), Some(plural)) = (
        crd.pointer("/spec/group").and_then(Value::as_str),
        crd.pointer("/spec/names/plural").and_then(Value::as_str),
    ) else {
        return;
    };
    let key = crate::registry::storage_key(group, plural);
    let (objects, _) = hub
        .store
        .list(&ClusterScope::One(cluster.into()), &key, None, None);
    for (key, _) in objects {
        if let Ok(c) = hub.store.delete(key, Expect::Exists) {
            let _ = c.durable().await;
        }
    }
}

/// The resource stored under `storage_key` in `cluster`, at its storage
/// version when it has several.
pub fn info_for_storage_key(hub: &Hub, cluster: &str, storage_key: &str) -> Option<ResourceInfo> {
    let served: Vec<ResourceInfo> = hub
        .registry
        .resources(Some(cluster))
        .into_iter()
        .filter(|r| r.storage_key() == storage_key)
        .collect();
    let storage = served.iter().position(|r| r.storage_version).unwrap_or(0);
    served.into_iter().nth(storage)
}
