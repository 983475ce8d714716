//! What a write needs besides storage: checks before a create (the
//! namespace exists and is not terminating, the CRD is not terminating) and
//! the hooks that make a write take effect (serving a CRD's resources,
//! making a workspace usable, giving a namespace its default ServiceAccount).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::Request;
use crate::hub::Hub;
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::storage::{ObjectKey, StoredObject};

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
        Some(obj) if terminating(&obj) => Err(ApiError::forbidden(format!(
            "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
            s.info.resource,
            s.name.as_deref().unwrap_or_default()
        ))),
        Some(_) => Ok(()),
    }
}

/// Whether a stored Namespace is being deleted. Its JSON is the hub's own
/// serialisation, whose keys are never escaped, so bytes without the key's
/// spelling hold no `deletionTimestamp` and only the rest are parsed: every
/// namespaced create asks this, and parsing the namespace was 5% of a hub's
/// time in a create-heavy `ferry bench sync`.
fn terminating(namespace: &StoredObject) -> bool {
    memchr::memmem::find(&namespace.json, b"\"deletionTimestamp\"").is_some()
        && namespace.value().pointer("/metadata/deletionTimestamp").is_some()
}

/// What goes with an object that is removed from storage (a CRD's custom
/// resources, a Workspace's logical cluster). Runs whether the object is
/// deleted outright or its last finalizer is removed.
pub async fn remove_contents(hub: &Arc<Hub>, info: &ResourceInfo, key: &ObjectKey, v: &Value) {
    if let Some(hooks) = hub.write_hooks() {
        hooks.removed(hub, info, key, v).await;
    }
}

/// What makes a write take effect beyond storage: the hub's own indexes
/// (the resources CRDs serve, RBAC), then the built-in controllers' first
/// pass ([`crate::hub::WriteHooks`]).
pub fn after_write<'a>(
    hub: &'a Arc<Hub>,
    info: &'a ResourceInfo,
    key: &'a ObjectKey,
    new: Option<&'a Value>,
) -> BoxFuture<'a, ()> {
    Box::pin(async move {
        crate::strategy::for_resource(hub, info).after_commit(hub, &key.cluster);
        if let Some(hooks) = hub.write_hooks() {
            hooks.written(hub, info, key, new).await;
        }
    })
}

/// Before a client's request on `info`'s objects in `cluster` is served
/// ([`crate::hub::WriteHooks::serving`]).
pub async fn before_serving(hub: &Arc<Hub>, info: &ResourceInfo, cluster: &str) {
    if let Some(hooks) = hub.write_hooks() {
        hooks.serving(hub, info, cluster).await;
    }
}

/// An object was marked as being deleted and waits for its finalizers.
pub async fn marked_deleting(hub: &Arc<Hub>, info: &ResourceInfo, key: &ObjectKey) {
    // A CRD's resources are served as terminating from now on (creates refused).
    crate::strategy::for_resource(hub, info).after_commit(hub, &key.cluster);
    if let Some(hooks) = hub.write_hooks() {
        hooks.deleting(hub, info, key).await;
    }
}
