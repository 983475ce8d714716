//! CRD clean-up, as kube-apiserver's finalizing controller: a CRD being
//! deleted carries the `customresourcecleanup.apiextensions.k8s.io`
//! finalizer and keeps serving its custom resources while each is deleted
//! through the object service (so their own finalizers are honoured); once
//! none is left, the finalizer goes and so does the CRD.
//!
//! Driven by the store's watch and resynced at start (a CRD left
//! terminating by a restart finishes); the delete path also runs one pass
//! at once ([`first_pass`]), so a CRD whose custom resources have no
//! finalizers is gone when the DELETE answers.

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use super::finalizing::{self, Finalizing};
use ferry_server::controller::{ControllerContext, CRDS};
use ferry_server::service::{self, PatchType};
use ferry_server::storage::{ClusterScope, ObjectKey};
pub use ferry_server::strategy::apiextensions::crd::{terminating_condition, CLEANUP_FINALIZER};

/// Field manager of the controller's writes.
const MANAGER: &str = "apiextensions-finalizer";

struct CrdCleanup;

/// Run CRD clean-up while `ctx`'s lease is held.
pub fn spawn(ctx: ControllerContext) -> JoinHandle<()> {
    finalizing::spawn(ctx, CrdCleanup)
}

/// One clean-up pass over the CRD at `key`, as part of the request that
/// marked it as being deleted.
pub async fn first_pass(ctx: &ControllerContext, key: &ObjectKey) {
    if let Err(e) = step(ctx, key).await {
        tracing::warn!(cluster = %key.cluster, crd = %key.name, "CRD clean-up: {e}");
    }
    // The watch-driven pass may have done the work a moment earlier, still
    // being committed: the DELETE answers once that is visible too.
    ctx.settle(std::time::Duration::from_secs(5)).await;
}

fn holds(crd: &Value) -> bool {
    crd.pointer("/metadata/deletionTimestamp").is_some()
        && crd
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|f| f == CLEANUP_FINALIZER))
}

impl Finalizing for CrdCleanup {
    const NAME: &'static str = "CRD clean-up";

    fn resource(&self) -> &'static str {
        CRDS
    }

    fn waits(&self, crd: &Value) -> bool {
        holds(crd)
    }

    fn concerns(&self, waiting: &ObjectKey, changed: &ObjectKey) -> bool {
        changed.cluster == waiting.cluster
    }

    fn step<'a>(
        &'a self,
        ctx: &'a ControllerContext,
        key: &'a ObjectKey,
    ) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(step(ctx, key))
    }
}

/// The storage key of the custom resources a CRD defines; `None` when the
/// CRD names a built-in resource, whose objects are not the CRD's to delete.
fn storage_key_of(ctx: &ControllerContext, crd: &Value) -> Option<String> {
    let group = crd.pointer("/spec/group").and_then(Value::as_str)?;
    let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str)?;
    if ctx.is_builtin(group, plural) {
        return None;
    }
    Some(ferry_server::registry::storage_key(group, plural))
}

/// Delete the custom resources left; when none is, drop the finalizer.
/// Returns true when done.
fn step<'a>(ctx: &'a ControllerContext, key: &'a ObjectKey) -> BoxFuture<'a, Result<bool, String>> {
    // Boxed: deleting custom resources goes through the delete path, which
    // is what runs the first pass.
    Box::pin(async move {
        let cluster = key.cluster.as_str();
        let Some(crd) = ctx.get(key) else {
            return Ok(true);
        };
        let v = crd.value();
        if !holds(&v) {
            return Ok(true);
        }
        let mut remaining = 0;
        if let Some(storage_key) = storage_key_of(ctx, &v) {
            let (objects, _) = ctx.list(&ClusterScope::One(cluster.into()), &storage_key, None, None);
            let info = super::info_for_storage_key(ctx, cluster, &storage_key);
            remaining =
                finalizing::delete_contents(ctx, info.as_ref(), objects, MANAGER, CrdCleanup::NAME).await?;
        }
        if remaining > 0 {
            return Ok(false);
        }
        let finalizers: Vec<Value> = v
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|f| f.iter().filter(|f| *f != CLEANUP_FINALIZER).cloned().collect())
            .unwrap_or_default();
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": crd.rv.to_string()}});
        let request = ctx
            .request(
                cluster,
                ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
                None,
                Some(&key.name),
                "patch",
                MANAGER,
            )
            .map_err(|e| e.message)?;
        let body = serde_json::to_vec(&patch).unwrap_or_default();
        match service::patch(&request, PatchType::Merge, body.into()).await {
            Ok(_) => Ok(true),
            Err(e) if e.code == 404 => Ok(true),
            // Changed meanwhile: the next event brings it back.
            Err(e) if e.code == 409 => Ok(false),
            Err(e) => Err(e.message),
        }
    })
}
