//! CRD termination, as kube-apiserver's finalizing controller: a CRD being
//! deleted carries the `customresourcecleanup.apiextensions.k8s.io` finalizer
//! and keeps serving its custom resources while each is deleted through the
//! normal delete path (so their own finalizers are honoured); once none is
//! left, the finalizer goes and so does the CRD.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::garbage_collector::policy::PropagationPolicy;
use crate::hub::{Hub, CRDS};
use crate::service::change::is_finalized;
use crate::service::delete::delete_object;
use crate::service::hooks::after_write;
use crate::storage::{ClusterScope, Expect, ObjectKey};

/// The finalizer that holds a CRD until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The condition a CRD being deleted carries while its custom resources go.
pub fn terminating_condition() -> Value {
    json!({
        "type": "Terminating", "status": "True",
        "lastTransitionTime": ferry_api::timestamp::now(),
        "reason": "InstanceDeletionInProgress",
        "message": "CustomResource deletion is in progress",
    })
}

/// The storage key of the custom resources a CRD defines.
fn storage_key_of(crd: &Value) -> Option<String> {
    let group = crd.pointer("/spec/group").and_then(Value::as_str)?;
    let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str)?;
    Some(crate::registry::storage_key(group, plural))
}

fn crd_key(cluster: &str, name: &str) -> ObjectKey {
    ObjectKey {
        cluster: cluster.into(),
        resource: CRDS.into(),
        namespace: String::new(),
        name: name.into(),
    }
}

/// Clean up a CRD being deleted: one pass now (so a CRD whose custom
/// resources have no finalizers is gone when the DELETE answers), then in the
/// background until its custom resources are gone.
pub fn start_termination(hub: Arc<Hub>, cluster: String, name: String) -> BoxFuture<'static, ()> {
    // Boxed as `Send`: cleaning up deletes custom resources through
    // `delete_object`, which is what calls this.
    Box::pin(async move {
        match step(&hub, &cluster, &name).await {
            Ok(true) => return,
            Ok(false) => {}
            Err(e) => tracing::warn!(cluster, crd = name, "CRD clean-up: {e}"),
        }
        tokio::spawn(async move {
            loop {
                // Custom resources with finalizers are still there: wait for a change, then look again.
                let rv = hub.store.resource_version();
                if let Ok(mut sub) = hub.store.watch(rv) {
                    let _ = tokio::time::timeout(Duration::from_secs(2), async {
                        while let Some(e) = sub.next().await {
                            if e.key.cluster == cluster {
                                return;
                            }
                        }
                    })
                    .await;
                } else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                match step(&hub, &cluster, &name).await {
                    Ok(true) => return,
                    Ok(false) => {}
                    Err(e) => tracing::warn!(cluster, crd = name, "CRD clean-up: {e}"),
                }
            }
        });
    })
}

/// After a restart: resume the clean-up of every CRD left terminating.
pub async fn resume_terminations(hub: &Arc<Hub>) {
    let (crds, _) = hub.store.list(&ClusterScope::All, CRDS, None, None);
    for (key, obj) in crds {
        let v = obj.value();
        let holds = v
            .pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|f| f == CLEANUP_FINALIZER));
        if v.pointer("/metadata/deletionTimestamp").is_some() && holds {
            start_termination(hub.clone(), key.cluster, key.name).await;
        }
    }
}

/// Delete the custom resources left; when none is, drop the finalizer.
/// Returns true when done.
async fn step(hub: &Arc<Hub>, cluster: &str, name: &str) -> Result<bool, String> {
    let key = crd_key(cluster, name);
    let Some(crd) = hub.store.get(&key) else {
        return Ok(true);
    };
    let v = crd.value();
    let mut finalizers: Vec<Value> = v
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if v.pointer("/metadata/deletionTimestamp").is_none()
        || !finalizers.iter().any(|f| f == CLEANUP_FINALIZER)
    {
        return Ok(true);
    }
    let mut remaining = 0;
    if let Some(storage_key) = storage_key_of(&v) {
        let (objects, _) = hub
            .store
            .list(&ClusterScope::One(cluster.into()), &storage_key, None, None);
        let info = super::info_for_storage_key(hub, cluster, &storage_key);
        for (cr_key, obj) in objects {
            match &info {
                Some(info) => {
                    // As Kubernetes' finalizing controller: dependents go in the background.
                    let background = Some(PropagationPolicy::Background);
                    let _ = delete_object(hub, info, &cr_key, &obj, obj.value(), false, background).await;
                }
                // Not served (an invalid CRD): nothing can finalize them.
                None => {
                    if let Ok(c) = hub.store.delete(cr_key.clone(), Expect::Exists) {
                        let _ = c.durable().await;
                    }
                }
            }
            if hub.store.get(&cr_key).is_some() {
                remaining += 1;
            }
        }
    }
    if remaining > 0 {
        return Ok(false);
    }
    finalizers.retain(|f| f != CLEANUP_FINALIZER);
    let mut v = v;
    crate::json::set(&mut v, &["metadata", "finalizers"], json!(finalizers)).map_err(|e| e.to_string())?;
    let finalized = is_finalized(&v);
    let result = if finalized {
        hub.store.delete(key.clone(), Expect::Version(crd.rv))
    } else {
        hub.store.put(key.clone(), Expect::Version(crd.rv), v)
    };
    let committed = result.map_err(|e| e.to_string())?;
    let stored = committed
        .durable()
        .await
        .map_err(|e| e.to_string())?
        .expect("object");
    let Some(info) = hub.registry.lookup(
        Some(cluster),
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
    ) else {
        return Ok(true);
    };
    let v = stored.value();
    after_write(hub, &info, &key, (!finalized).then_some(&v)).await;
    Ok(true)
}
