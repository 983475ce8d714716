//! What a write needs besides storage: checks before a create (the
//! namespace exists and is not terminating, the CRD is not terminating) and
//! the hooks that make a write take effect (serving a CRD's resources,
//! making a workspace usable, giving a namespace its default ServiceAccount).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::delete::is;
use super::Request;
use crate::auth::rbac;
use crate::hub::{Hub, CRDS};
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::storage::ObjectKey;
use crate::workspace::WORKSPACES;

/// Reject creates of custom resources whose CRD is being deleted, as
/// kube-apiserver does.
pub fn ensure_crd_accepts(s: &Request) -> Result<(), ApiError> {
    if s.info.terminating {
        return Err(ApiError::method_not_allowed(
            "create not allowed while custom resource definition is terminating",
        ));
    }
    Ok(())
}

/// Reject creates in namespaces that do not exist or are being deleted.
pub fn ensure_namespace_accepts(s: &Request) -> Result<(), ApiError> {
    let (Some(ns), true, Some(cluster)) = (&s.namespace, s.info.namespaced, &s.cluster) else {
        return Ok(());
    };
    let key = ObjectKey {
        cluster: cluster.name.clone(),
        resource: "/namespaces".into(),
        namespace: String::new(),
        name: ns.clone(),
    };
    match s.hub.store.get(&key) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(obj) if obj.value().pointer("/metadata/deletionTimestamp").is_some() => Err(ApiError::forbidden(format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            s.info.resource,
            s.name.as_deref().unwrap_or_default()
        ))),
        Some(_) => Ok(()),
    }
}

/// What goes with an object that is removed from storage: a CRD's custom
/// resources, a Workspace's logical cluster. Runs whether the object is
/// deleted outright or its last finalizer is removed.
pub async fn remove_contents(hub: &Arc<Hub>, info: &ResourceInfo, key: &ObjectKey, v: &Value) {
    if is(info, "apiextensions.k8s.io", "customresourcedefinitions") {
        crate::controllers::remove_custom_resources(hub, &key.cluster, v).await;
    }
    if is(info, "tenancy.kcp.io", "workspaces") {
        if let Some(cluster) = v.pointer("/spec/cluster").and_then(Value::as_str) {
            crate::controllers::remove_cluster(hub, cluster).await;
        }
    }
}

/// Hooks that make a write take effect beyond storage: serving a CRD's
/// resources, making a workspace usable, giving a namespace its default
/// ServiceAccount.
pub fn after_write<'a>(
    hub: &'a Arc<Hub>,
    info: &'a ResourceInfo,
    key: &'a ObjectKey,
    new: Option<&'a Value>,
) -> BoxFuture<'a, ()> {
    Box::pin(async move {
        let storage_key = info.storage_key();
        if storage_key == CRDS {
            hub.refresh_crds(&key.cluster);
            crate::controllers::apiservices::sync(hub, &key.cluster).await;
        } else if storage_key == WORKSPACES {
            crate::controllers::workspace_written(hub, &key.cluster, new).await;
        } else if rbac::is_rbac_resource(&storage_key) {
            hub.security.rbac.invalidate(&key.cluster);
        } else if crate::controllers::security::watches(&storage_key) {
            crate::controllers::security::object_written(hub, &storage_key, key, new).await;
        } else if storage_key == "/namespaces" {
            if let Some(ns) = new {
                if ns.pointer("/metadata/deletionTimestamp").is_none() {
                    crate::controllers::ensure_default_service_account(hub, &key.cluster, &key.name).await;
                }
            }
        }
    })
}
