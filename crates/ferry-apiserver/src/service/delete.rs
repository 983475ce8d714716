//! Deleting one object: preconditions are checked by the caller; here,
//! finalizers, propagation (the garbage collector's finalizers), namespace
//! termination and CRD clean-up marks, or removal from storage.

use std::sync::Arc;

use serde_json::{json, Value};

use super::hooks::{after_write, marked_deleting, remove_contents};
use crate::hub::Hub;
use crate::json;
use crate::propagation::PropagationPolicy;
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::storage::{Expect, ObjectKey, StoreError, StoredObject};
use crate::strategy::Strategy;

pub enum DeleteError {
    /// The object changed under us; read it again.
    Conflict,
    Store(StoreError),
    /// The stored object cannot be marked as being deleted (a field that
    /// must be an object is not).
    Invalid(ApiError),
}

/// Set `deletionTimestamp` on an object about to wait for its finalizers,
/// and what its strategy adds (a namespace's phase, a CRD's condition).
fn mark_deleting(strategy: &dyn Strategy, v: &mut Value) -> Result<(), ApiError> {
    let meta = json::object_mut(v, &["metadata"])?;
    meta.insert(
        "deletionTimestamp".into(),
        Value::String(ferry_api::timestamp::now()),
    );
    meta.insert("deletionGracePeriodSeconds".into(), json!(0));
    strategy.prepare_for_delete(v)
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
    let strategy = crate::strategy::for_resource(hub, info);
    let current = finalizers_of(&v);
    let deleting = v.pointer("/metadata/deletionTimestamp").is_some();
    let finalizers = strategy.finalizers_on_delete(info, &current, deleting, propagation);
    if !finalizers.is_empty() || strategy.always_graceful() {
        if !deleting || finalizers != current {
            if !deleting {
                mark_deleting(strategy, &mut v).map_err(DeleteError::Invalid)?;
            }
            if finalizers != current {
                json::set(&mut v, &["metadata", "finalizers"], json!(finalizers))
                    .map_err(|e| DeleteError::Invalid(e.into()))?;
            }
            if dry_run {
                return Ok(v);
            }
            let written = match hub.store.put(key.clone(), Expect::Version(stored.rv), v) {
                Ok(committed) => committed.durable().await,
                Err(e) => Err(e),
            };
            let stored = match written {
                Err(StoreError::Conflict) => return Err(DeleteError::Conflict),
                other => other.map_err(DeleteError::Store)?,
            }
            .ok_or(DeleteError::Store(StoreError::NotFound))?;
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
    let written = match hub.store.delete(key.clone(), Expect::Version(stored.rv)) {
        Ok(committed) => committed.durable().await,
        Err(e) => Err(e),
    };
    let tombstone = match written {
        Err(StoreError::Conflict) => return Err(DeleteError::Conflict),
        other => other.map_err(DeleteError::Store)?,
    }
    .ok_or(DeleteError::Store(StoreError::NotFound))?;
    after_write(hub, info, key, None).await;
    Ok(tombstone.value())
}
