//! Namespace termination: delete everything in the namespace, then remove the
//! `kubernetes` finalizer so the namespace itself goes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::garbage_collector::policy::PropagationPolicy;
use crate::hub::Hub;
use crate::service::change::is_finalized;
use crate::service::delete::delete_object;
use crate::storage::{ClusterScope, Expect, ObjectKey};

/// Start (idempotently enough) the clean-up of a namespace being deleted.
pub fn start_termination(hub: Arc<Hub>, cluster: String, namespace: String) {
    tokio::spawn(async move {
        loop {
            match step(&hub, &cluster, &namespace).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!(cluster, namespace, "namespace clean-up: {e}"),
            }
            // Objects with finalizers are still there: wait for any change, then look again.
            let rv = hub.store.resource_version();
            if let Ok(mut sub) = hub.store.watch(rv) {
                let _ = tokio::time::timeout(Duration::from_secs(2), async {
                    while let Some(e) = sub.next().await {
                        if e.key.cluster == cluster && e.key.namespace == namespace {
                            return;
                        }
                    }
                })
                .await;
            } else {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
}

/// Delete what is left; when nothing is, finalize. Returns true when done.
async fn step(hub: &Arc<Hub>, cluster: &str, namespace: &str) -> Result<bool, String> {
    let ns_key = ObjectKey {
        cluster: cluster.into(),
        resource: "/namespaces".into(),
        namespace: String::new(),
        name: namespace.into(),
    };
    let Some(ns) = hub.store.get(&ns_key) else {
        return Ok(true);
    };
    let mut remaining = 0;
    for resource in hub.store.resources_in(cluster) {
        if resource == "/namespaces" {
            continue;
        }
        let (objects, _) = hub.store.list(
            &ClusterScope::One(cluster.into()),
            &resource,
            Some(namespace),
            None,
        );
        if objects.is_empty() {
            continue;
        }
        let Some(info) = super::info_for_storage_key(hub, cluster, &resource) else {
            // Served by nothing any more (CRD gone): remove outright.
            for (key, _) in objects {
                if let Ok(c) = hub.store.delete(key, Expect::Exists) {
                    let _ = c.durable().await;
                }
            }
            continue;
        };
        for (key, obj) in objects {
            let v = obj.value();
            // As Kubernetes' namespace controller: dependents go in the background.
            let background = Some(PropagationPolicy::Background);
            let _ = delete_object(hub, &info, &key, &obj, v, false, background).await;
            if hub.store.get(&key).is_some() {
                remaining += 1;
            }
        }
    }
    if remaining > 0 {
        return Ok(false);
    }
    let mut v: Value = ns.value();
    crate::json::set(&mut v, &["spec", "finalizers"], json!([])).map_err(|e| e.to_string())?;
    let result = if is_finalized(&v) {
        hub.store.delete(ns_key, Expect::Version(ns.rv))
    } else {
        hub.store.put(ns_key, Expect::Version(ns.rv), v)
    };
    match result {
        Ok(c) => {
            c.durable().await.map_err(|e| e.to_string())?;
            Ok(true)
        }
        Err(e) => Err(e.to_string()),
    }
}
