//! Namespace termination, as kube-controller-manager's namespace controller:
//! a namespace being deleted (it carries the `kubernetes` finalizer in
//! `spec.finalizers`) has everything in it deleted through the object
//! service (so each object's own finalizers are honoured); once nothing is
//! left, the finalizer is removed through `namespaces/<name>/finalize` and
//! the namespace goes. Driven by the store's watch; resynced at start, so a
//! namespace left terminating by a restart finishes.

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::finalizing::{self, Finalizing};
use ferry_server::controller::ControllerContext;
use ferry_server::service;
use ferry_server::storage::{ClusterScope, ObjectKey};
use ferry_server::strategy::core::namespace::KUBERNETES_FINALIZER;

/// Field manager of the controller's writes.
const MANAGER: &str = "namespace-controller";

struct NamespaceTermination;

/// Run namespace termination while `ctx`'s lease is held.
pub fn spawn(ctx: ControllerContext) -> JoinHandle<()> {
    finalizing::spawn(ctx, NamespaceTermination)
}

/// Whether namespace termination still has work on `ns`: it is being
/// deleted and holds the `kubernetes` finalizer (or no spec finalizer at
/// all, so finalizing removes it).
fn waits_for_termination(ns: &Value) -> bool {
    let holds = ns
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .is_none_or(|f| f.is_empty() || f.iter().any(|f| f == KUBERNETES_FINALIZER));
    ns.pointer("/metadata/deletionTimestamp").is_some() && holds
}

impl Finalizing for NamespaceTermination {
    const NAME: &'static str = "namespace termination";

    fn resource(&self) -> &'static str {
        "/namespaces"
    }

    fn waits(&self, ns: &Value) -> bool {
        waits_for_termination(ns)
    }

    fn concerns(&self, waiting: &ObjectKey, changed: &ObjectKey) -> bool {
        changed.cluster == waiting.cluster && changed.namespace == waiting.name
    }

    fn step<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(step(ctx, key))
    }
}

/// Delete what is left; when nothing is, finalize. Returns true when done.
async fn step(ctx: &ControllerContext, ns_key: &ObjectKey) -> Result<bool, String> {
    let (cluster, namespace) = (ns_key.cluster.as_str(), ns_key.name.as_str());
    let Some(ns) = ctx.get(ns_key) else {
        return Ok(true);
    };
    let ns = ns.value();
    if !waits_for_termination(&ns) {
        return Ok(true);
    }
    let mut remaining = 0;
    for resource in ctx.resources_in(cluster) {
        if resource == "/namespaces" {
            continue;
        }
        let (objects, _) = ctx.list(
            &ClusterScope::One(cluster.into()),
            &resource,
            Some(namespace),
            None,
        );
        if objects.is_empty() {
            continue;
        }
        let info = super::info_for_storage_key(ctx, cluster, &resource);
        remaining +=
            finalizing::delete_contents(ctx, info.as_ref(), objects, MANAGER, NamespaceTermination::NAME)
                .await?;
    }
    if remaining > 0 {
        return Ok(false);
    }
    let mut finalize = ns.clone();
    let kept: Vec<Value> = ns
        .pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter(|f| *f != KUBERNETES_FINALIZER).cloned().collect())
        .unwrap_or_default();
    ferry_server::json::set(&mut finalize, &["spec", "finalizers"], json!(kept))
        .map_err(|e| e.to_string())?;
    let info = ctx
        .lookup(Some(cluster), "", "v1", "namespaces")
        .ok_or("namespaces are not served")?;
    let request = ctx
        .request_at(info, ns_key, "update", MANAGER)
        .map_err(|e| e.message)?
        .on_subresource("finalize");
    match service::update(&request, finalize).await {
        Ok(_) => Ok(true),
        Err(e) if e.code == 404 => Ok(true),
        Err(e) => Err(e.message),
    }
}
