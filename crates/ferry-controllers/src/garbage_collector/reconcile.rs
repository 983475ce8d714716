//! Acting on one work item: read the live objects, decide, and delete or
//! patch through the hub's API paths (as the loopback user).

use parking_lot::Mutex;
use serde_json::{json, Value};

use super::decide::{decide, OwnerState, Verdict};
use super::index::DependentsIndex;
use super::owners::{OwnerRef, Ownership};
use super::policy::{PropagationPolicy, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use super::Work;
use crate::info_for_storage_key;
use ferry_server::controller::ControllerContext;
use ferry_server::service::{self, DeleteOptions, PatchType};
use ferry_server::status::ApiError;
use ferry_server::storage::ObjectKey;

/// Field manager of the collector's writes.
const MANAGER: &str = "garbage-collector";
/// Optimistic-concurrency retries of one metadata patch before giving up (and backing off).
const CONFLICT_RETRIES: usize = 8;

/// Why one work item failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// An owner reference names a kind the workspace does not serve (perhaps not yet).
    #[error("{object}: {reason}; it is kept and looked at again later")]
    UnresolvedOwner { object: String, reason: String },
    /// Deleting a dependent whose owners are gone failed.
    #[error("deleting {object} failed: {source}")]
    DeleteDependent { object: String, source: ApiError },
    /// Removing references to gone owners from a dependent failed.
    #[error("removing owner references from {object} failed: {source}")]
    RemoveReferences { object: String, source: ApiError },
    /// Clearing `blockOwnerDeletion` on a dependent in a foreground cycle failed.
    #[error("clearing blockOwnerDeletion on {object} failed: {source}")]
    Unblock { object: String, source: ApiError },
    /// Removing the collector's finalizer from a waiting owner failed.
    #[error("removing the {finalizer} finalizer from {object} failed: {source}")]
    RemoveFinalizer {
        object: String,
        finalizer: &'static str,
        source: ApiError,
    },
    /// The worker itself failed.
    #[error("a garbage-collector worker stopped: {0}")]
    Panicked(String),
}

/// `configmaps default/child in workspace root`.
fn describe(key: &ObjectKey) -> String {
    let resource = match key.resource.split_once('/') {
        Some(("", plural)) => plural.to_string(),
        Some((group, plural)) => format!("{plural}.{group}"),
        None => key.resource.clone(),
    };
    let name = if key.namespace.is_empty() {
        key.name.clone()
    } else {
        format!("{}/{}", key.namespace, key.name)
    };
    format!("{resource} {name} in workspace {}", key.cluster)
}

/// Process one item; returns further items to look at.
pub async fn process(
    ctx: &ControllerContext,
    index: &Mutex<DependentsIndex>,
    work: &Work,
) -> Result<Vec<Work>, CollectError> {
    let (Work::Dependent(key) | Work::Owner(key)) = work;
    let Some(me) = stored_ownership(ctx, key) else {
        return Ok(Vec::new()); // gone already
    };
    match work {
        Work::Dependent(_) => dependent(ctx, index, key, me).await,
        Work::Owner(_) => owner(ctx, index, key, me).await,
    }
}

/// What the owner reference `r` of `dependent` points at, in the live store.
fn owner_state(ctx: &ControllerContext, dependent: &ObjectKey, r: &OwnerRef) -> OwnerState {
    let (group, version) = r.group_version();
    let Some(info) = ctx.lookup_kind(&dependent.cluster, group, version, &r.kind) else {
        return OwnerState::Unresolvable(format!(
            "its owner {} is of a kind workspace {} does not serve",
            r.describe(),
            dependent.cluster
        ));
    };
    if info.namespaced && dependent.namespace.is_empty() {
        return OwnerState::Invalid(format!(
            "it is cluster-scoped, so its owner reference to the namespaced {} can never resolve",
            r.describe()
        ));
    }
    let key = ObjectKey {
        cluster: dependent.cluster.clone(),
        resource: info.storage_key(),
        namespace: if info.namespaced {
            dependent.namespace.clone()
        } else {
            String::new()
        },
        name: r.name.clone(),
    };
    match stored_ownership(ctx, &key) {
        None => OwnerState::Absent,
        Some(owner) => {
            if owner.uid != r.uid {
                OwnerState::Absent
            } else if owner.deleting_dependents() {
                OwnerState::DeletingDependents
            } else {
                OwnerState::Alive
            }
        }
    }
}

/// The ownership metadata of the object at `key`, while it is stored.
fn stored_ownership(ctx: &ControllerContext, key: &ObjectKey) -> Option<Ownership> {
    ctx.get(key).map(|stored| Ownership::parse(&stored.json))
}

async fn dependent(
    ctx: &ControllerContext,
    index: &Mutex<DependentsIndex>,
    key: &ObjectKey,
    me: Ownership,
) -> Result<Vec<Work>, CollectError> {
    if me.deleting {
        // Already going; as an owner it may still wait for the collector.
        return if me.deleting_dependents() {
            owner(ctx, index, key, me).await
        } else {
            Ok(Vec::new())
        };
    }
    let (descendants, deleted) = {
        let index = index.lock();
        let deleted: Vec<String> = me
            .owners
            .iter()
            .filter(|r| index.is_deleted(&key.cluster, &r.uid))
            .map(|r| r.uid.clone())
            .collect();
        (index.descendants(&key.cluster, &me.uid), deleted)
    };
    let object = || describe(key);
    let lookup = |r: &OwnerRef| {
        if deleted.contains(&r.uid) {
            OwnerState::Absent
        } else {
            owner_state(ctx, key, r)
        }
    };
    match decide(&me, descendants, lookup) {
        Verdict::Keep => {}
        Verdict::Ignore(why) => tracing::warn!("garbage collector: {}: {why}; it is left alone", object()),
        Verdict::Retry(reason) => {
            return Err(CollectError::UnresolvedOwner {
                object: object(),
                reason,
            })
        }
        Verdict::RemoveReferences(uids) => {
            patch_metadata(ctx, key, &me.uid, |meta| without_references(meta, &uids))
                .await
                .map_err(|source| CollectError::RemoveReferences {
                    object: object(),
                    source,
                })?;
        }
        Verdict::Delete { policy, unblock } => {
            if unblock {
                patch_metadata(ctx, key, &me.uid, unblocked)
                    .await
                    .map_err(|source| CollectError::Unblock {
                        object: object(),
                        source,
                    })?;
            }
            tracing::debug!(
                policy = policy.as_str(),
                "garbage collector: deleting {}: no owner is left",
                object()
            );
            delete(ctx, key, &me.uid, policy)
                .await
                .map_err(|source| CollectError::DeleteDependent {
                    object: object(),
                    source,
                })?;
        }
    }
    Ok(Vec::new())
}

async fn owner(
    ctx: &ControllerContext,
    index: &Mutex<DependentsIndex>,
    key: &ObjectKey,
    me: Ownership,
) -> Result<Vec<Work>, CollectError> {
    let dependents = index.lock().dependents_of(&key.cluster, &me.uid);
    let uid = me.uid.as_str();
    let remove_finalizer = |finalizer: &'static str| async move {
        patch_metadata(ctx, key, uid, |meta| without_finalizer(meta, finalizer))
            .await
            .map_err(|source| CollectError::RemoveFinalizer {
                object: describe(key),
                finalizer,
                source,
            })
    };
    if me.orphaning_dependents() {
        for d in &dependents {
            let Some(dep) = ctx.get(d) else { continue };
            let dep_uid = Ownership::parse(&dep.json).uid;
            let owner_uid = [me.uid.clone()];
            patch_metadata(ctx, d, &dep_uid, |meta| without_references(meta, &owner_uid))
                .await
                .map_err(|source| CollectError::RemoveReferences {
                    object: describe(d),
                    source,
                })?;
        }
        remove_finalizer(ORPHAN_FINALIZER).await?;
        return Ok(Vec::new());
    }
    if !me.deleting_dependents() {
        return Ok(Vec::new());
    }
    let mut blocked = false;
    let mut follow_up = Vec::new();
    for d in dependents {
        let Some(dep) = ctx.get(&d) else { continue };
        let dep = Ownership::parse(&dep.json);
        let Some(reference) = dep.owners.iter().find(|r| r.uid == me.uid) else {
            continue;
        };
        blocked |= reference.block_owner_deletion;
        if !dep.deleting {
            follow_up.push(Work::Dependent(d));
        }
    }
    if !blocked {
        remove_finalizer(FOREGROUND_FINALIZER).await?;
    }
    Ok(follow_up)
}

/// Delete the object at `key` if it still has `uid`, with `policy`.
async fn delete(
    ctx: &ControllerContext,
    key: &ObjectKey,
    uid: &str,
    policy: PropagationPolicy,
) -> Result<(), ApiError> {
    let Some(info) = info_for_storage_key(ctx, &key.cluster, &key.resource) else {
        // Not served any more: its CRD's clean-up removes it.
        return Ok(());
    };
    let options = DeleteOptions {
        uid: Some(uid.to_string()),
        propagation: Some(policy),
        ..Default::default()
    };
    let request = ctx.request_at(info, key, "delete", MANAGER)?;
    match service::delete(&request, &options).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        // A uid precondition failure: a new object took the name; it is not ours to delete.
        Err(e) if e.code == 409 && !has_uid(ctx, key, uid) => Ok(()),
        Err(e) => Err(e),
    }
}

fn has_uid(ctx: &ControllerContext, key: &ObjectKey, uid: &str) -> bool {
    ctx.get(key).is_some_and(|o| Ownership::parse(&o.json).uid == uid)
}

/// Merge-patch the metadata of the object at `key` (if it still has `uid`)
/// with what `change` makes of its current metadata (`None`: nothing to do),
/// guarded by its resourceVersion and retried on conflicts.
async fn patch_metadata(
    ctx: &ControllerContext,
    key: &ObjectKey,
    uid: &str,
    change: impl Fn(&Value) -> Option<Value>,
) -> Result<(), ApiError> {
    for _ in 0..CONFLICT_RETRIES {
        let Some(stored) = ctx.get(key) else {
            return Ok(());
        };
        let current = stored.value();
        let meta = current.get("metadata").cloned().unwrap_or_else(|| json!({}));
        if meta.get("uid").and_then(Value::as_str) != Some(uid) {
            return Ok(());
        }
        let Some(Value::Object(mut patch)) = change(&meta) else {
            return Ok(());
        };
        patch.insert("resourceVersion".into(), json!(stored.rv.to_string()));
        let Some(info) = info_for_storage_key(ctx, &key.cluster, &key.resource) else {
            return Ok(());
        };
        let request = ctx.request_at(info, key, "patch", MANAGER)?;
        let body = serde_json::to_vec(&json!({ "metadata": patch })).unwrap_or_default();
        match service::patch(&request, PatchType::Merge, body.into()).await {
            Ok(_) => return Ok(()),
            Err(e) if e.code == 409 => continue,
            Err(e) if e.code == 404 => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Err(ApiError::conflict(
        "",
        &key.resource,
        &key.name,
        "the object kept changing; the garbage collector will try again",
    ))
}

/// A metadata patch dropping the owner references with these uids.
fn without_references(meta: &Value, uids: &[String]) -> Option<Value> {
    let refs = meta.get("ownerReferences")?.as_array()?;
    let kept: Vec<Value> = refs
        .iter()
        .filter(|r| {
            !r.get("uid")
                .and_then(Value::as_str)
                .is_some_and(|u| uids.iter().any(|x| x == u))
        })
        .cloned()
        .collect();
    if kept.len() == refs.len() {
        return None;
    }
    Some(json!({ "ownerReferences": if kept.is_empty() { Value::Null } else { Value::Array(kept) } }))
}

/// A metadata patch clearing `blockOwnerDeletion` on every reference.
fn unblocked(meta: &Value) -> Option<Value> {
    let refs = meta.get("ownerReferences")?.as_array()?;
    if !refs
        .iter()
        .any(|r| r.get("blockOwnerDeletion") == Some(&Value::Bool(true)))
    {
        return None;
    }
    let refs: Vec<Value> = refs
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if let Some(m) = r.as_object_mut() {
                if m.get("blockOwnerDeletion") == Some(&Value::Bool(true)) {
                    m.insert("blockOwnerDeletion".into(), json!(false));
                }
            }
            r
        })
        .collect();
    Some(json!({ "ownerReferences": refs }))
}

/// A metadata patch removing `finalizer`.
fn without_finalizer(meta: &Value, finalizer: &str) -> Option<Value> {
    let finalizers = meta.get("finalizers")?.as_array()?;
    let kept: Vec<Value> = finalizers.iter().filter(|f| *f != finalizer).cloned().collect();
    (kept.len() != finalizers.len()).then(|| json!({ "finalizers": kept }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_patches_touch_only_what_changes() {
        let meta = json!({
            "uid": "d",
            "finalizers": ["orphan", "example.com/keep"],
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "a", "blockOwnerDeletion": true},
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "b"},
            ],
        });
        assert_eq!(
            without_references(&meta, &["a".into()]),
            Some(
                json!({"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "b"}]})
            )
        );
        assert_eq!(
            without_references(&meta, &["a".into(), "b".into()]),
            Some(json!({"ownerReferences": null}))
        );
        assert_eq!(without_references(&meta, &["zzz".into()]), None);
        assert_eq!(
            without_finalizer(&meta, "orphan"),
            Some(json!({"finalizers": ["example.com/keep"]}))
        );
        assert_eq!(without_finalizer(&meta, "foregroundDeletion"), None);
        let unblocked = unblocked(&meta).unwrap();
        assert_eq!(
            unblocked["ownerReferences"][0]["blockOwnerDeletion"],
            json!(false)
        );
        assert_eq!(unblocked["ownerReferences"][1].get("blockOwnerDeletion"), None);
    }

    #[test]
    fn objects_are_described_by_resource_namespace_name_and_workspace() {
        let key = ObjectKey {
            cluster: "root".into(),
            resource: "apps/replicasets".into(),
            namespace: "default".into(),
            name: "web".into(),
        };
        assert_eq!(describe(&key), "replicasets.apps default/web in workspace root");
    }
}
