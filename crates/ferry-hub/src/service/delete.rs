//! Deleting one object: preconditions are checked by the caller; here,
//! finalizers, propagation (the garbage collector's finalizers), namespace
//! termination and CRD clean-up marks, or removal from storage.

use std::sync::Arc;

use serde_json::{json, Value};

use super::hooks::{after_write, marked_deleting, remove_contents};
use super::propagation::{self as policy, PropagationPolicy};
use crate::hub::Hub;
use crate::json;
use crate::registry::ResourceInfo;
use crate::storage::{Expect, ObjectKey, StoreError, StoredObject};

pub enum DeleteError {
    /// The object changed under us; read it again.
    Conflict,
    Store(StoreError),
    /// The stored object cannot be marked as being deleted (a field that
    /// must be an object is not).
    Invalid(json::PathError),
}

/// Set `deletionTimestamp` (and a namespace's `Terminating` phase, a CRD's
/// `Terminating` condition) on an object about to wait for its finalizers.
fn mark_deleting(v: &mut Value, namespace: bool, crd: bool) -> Result<(), json::PathError> {
    let meta = json::object_mut(v, &["metadata"])?;
    meta.insert(
        "deletionTimestamp".into(),
        Value::String(ferry_api::timestamp::now()),
    );
    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    if namespace {
        json::set(v, &["status", "phase"], json!("Terminating"))?;
    }
    if crd {
        let status = json::object_mut(v, &["status"])?;
        let mut kept: Vec<Value> = match status.remove("conditions") {
            Some(Value::Array(c)) => c
                .into_iter()
                .filter(|c| c.get("type") != Some(&json!("Terminating")))
                .collect(),
            _ => Vec::new(),
        };
        kept.push(crate::strategy::apiextensions::crd::terminating_condition());
        status.insert("conditions".into(), json!(kept));
    }
    Ok(())
}

pub(super) fn is(info: &ResourceInfo, group: &str, resource: &str) -> bool {
    info.group == group && info.resource == resource
}

/// The string entries of `metadata.finalizers`.
fn finalizers_of(v: &Value) -> Vec<String> {
    v.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|f| f.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// Delete one object: mark it if finalizers (or namespace contents) must go
/// first, remove it otherwise. `propagation` is what the request asked for
/// the object's dependents (`None`: not said); it adds or drops the
/// garbage collector's `orphan` and `foregroundDeletion` finalizers.
/// Returns the object as it was left.
pub async fn delete_object(
    hub: &Arc<Hub>,
    info: &ResourceInfo,
    key: &ObjectKey,
    stored: &StoredObject,
    mut v: Value,
    dry_run: bool,
    propagation: Option<PropagationPolicy>,
) -> Result<Value, DeleteError> {
    let namespace = is(info, "", "namespaces");
    let crd = is(info, "apiextensions.k8s.io", "customresourcedefinitions");
    let current = finalizers_of(&v);
    let deleting = v.pointer("/metadata/deletionTimestamp").is_some();
    // Namespaces go through namespace termination; their dependents elsewhere
    // are collected once they are gone.
    let mut finalizers = if namespace {
        current.clone()
    } else {
        policy::finalizers_on_delete(&current, propagation, policy::default_policy(info))
    };
    // A CRD is held until its custom resources are gone (kube-apiserver adds
    // this finalizer when a CRD is deleted).
    let cleanup = crate::strategy::apiextensions::crd::CLEANUP_FINALIZER;
    if crd && !deleting && !finalizers.iter().any(|f| f == cleanup) {
        finalizers.push(cleanup.to_string());
    }
    if !finalizers.is_empty() || namespace {
        if !deleting || finalizers != current {
            if !deleting {
                mark_deleting(&mut v, namespace, crd).map_err(DeleteError::Invalid)?;
            }
            if finalizers != current {
                json::set(&mut v, &["metadata", "finalizers"], json!(finalizers))
                    .map_err(DeleteError::Invalid)?;
            }
            if dry_run {
                return Ok(v);
            }
            let committed = match hub.store.put(key.clone(), Expect::Version(stored.rv), v) {
                Err(StoreError::Conflict) => return Err(DeleteError::Conflict),
                other => other.map_err(DeleteError::Store)?,
            };
            let stored = committed
                .durable()
                .await
                .map_err(DeleteError::Store)?
                .expect("object");
            v = stored.value();
            if !deleting {
                // Namespace termination and CRD clean-up start here.
                marked_deleting(hub, info, key).await;
            }
        }
        return Ok(v);
    }
    if dry_run {
        return Ok(v);
    }
    remove_contents(hub, info, key, &v).await;
    let committed = match hub.store.delete(key.clone(), Expect::Version(stored.rv)) {
        Err(StoreError::Conflict) => return Err(DeleteError::Conflict),
        other => other.map_err(DeleteError::Store)?,
    };
    let tombstone = committed
        .durable()
        .await
        .map_err(DeleteError::Store)?
        .expect("tombstone");
    after_write(hub, info, key, None).await;
    Ok(tombstone.value())
}
