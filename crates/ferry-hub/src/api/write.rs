//! What every write goes through: server-set metadata, status-subresource
//! rules, per-kind defaults, validation, managedFields, and the hooks that run
//! after a write lands (CRDs, workspaces, namespaces).

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::body::parse_object;
use super::objects::{Change, Scope};
use crate::auth::escalation;
use crate::auth::rbac::{self, RBAC_GROUP};
use crate::controllers::garbage_collector::policy::{self, PropagationPolicy};
use crate::hub::{Hub, CRDS};
use crate::patch;
use crate::registry::ResourceInfo;
use crate::status::{ApiError, Cause};
use crate::storage::{Expect, ObjectKey, StoreError, StoredObject};
use crate::validation::{self, NameRule};
use crate::workspace::WORKSPACES;

/// Annotation kcp puts on every object: the logical cluster's name.
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Create,
    Update,
}

/// Everything but metadata and status: what `generation` tracks.
fn spec_part(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

fn meta_mut(v: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    v["metadata"].as_object_mut().expect("metadata is an object")
}

/// Turn what the client sent into what will be stored.
pub fn prepare(s: &Scope, kind: WriteKind, old: Option<&Value>, new: Value) -> Result<Value, ApiError> {
    prepare_with(s, kind, old, new, true)
}

fn prepare_with(
    s: &Scope,
    kind: WriteKind,
    old: Option<&Value>,
    mut new: Value,
    track_update: bool,
) -> Result<Value, ApiError> {
    let info = &s.info;
    let sub = s.subresource.as_deref();
    let now = ferry_api::timestamp::now();
    match (kind, old) {
        (WriteKind::Update, Some(old)) => {
            match sub {
                Some("status") => {
                    let mut merged = old.clone();
                    match new.get("status") {
                        Some(st) => merged["status"] = st.clone(),
                        None => {
                            merged.as_object_mut().map(|m| m.remove("status"));
                        }
                    }
                    new = merged;
                }
                // CSR approval: only the conditions change (kube's approval strategy).
                Some("approval") => {
                    let mut merged = old.clone();
                    merged["status"]["conditions"] =
                        new.pointer("/status/conditions").cloned().unwrap_or(json!([]));
                    new = merged;
                }
                Some("ephemeralcontainers") => {
                    let mut merged = old.clone();
                    merged["spec"]["ephemeralContainers"] = new
                        .pointer("/spec/ephemeralContainers")
                        .cloned()
                        .unwrap_or(json!([]));
                    new = merged;
                }
                _ if info.status_subresource => match old.get("status") {
                    Some(st) => new["status"] = st.clone(),
                    None => {
                        new.as_object_mut().map(|m| m.remove("status"));
                    }
                },
                _ => {}
            }
            let old_meta = old.get("metadata").cloned().unwrap_or_default();
            let deleting = old_meta.get("deletionTimestamp").is_some();
            let m = meta_mut(&mut new);
            for f in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                match old_meta.get(f) {
                    Some(v) => m.insert(f.into(), v.clone()),
                    None => m.remove(f),
                };
            }
            m.remove("resourceVersion");
            m.remove("selfLink");
            if deleting {
                let before: Vec<&Value> = old_meta
                    .get("finalizers")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().collect())
                    .unwrap_or_default();
                if let Some(after) = m.get("finalizers").and_then(Value::as_array) {
                    if after.iter().any(|f| !before.contains(&f)) {
                        return Err(ApiError::invalid(
                            &info.group,
                            &info.kind,
                            s.name.as_deref().unwrap_or(""),
                            vec![Cause::forbidden(
                                "metadata.finalizers",
                                "no new finalizers can be added if the object is being deleted",
                            )],
                        ));
                    }
                }
            }
            if spec_part(old) != spec_part(&new) {
                if let Some(g) = old.pointer("/metadata/generation").and_then(Value::as_i64) {
                    meta_mut(&mut new).insert("generation".into(), json!(g + 1));
                }
            }
        }
        _ => {
            if info.status_subresource {
                new.as_object_mut().map(|m| m.remove("status"));
            }
            let has_spec = new.get("spec").is_some() || info.from_crd;
            let m = meta_mut(&mut new);
            m.insert("uid".into(), Value::String(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), Value::String(now.clone()));
            for f in [
                "resourceVersion",
                "selfLink",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ] {
                m.remove(f);
            }
            if has_spec {
                m.insert("generation".into(), json!(1));
            }
        }
    }
    if let Some(cluster) = &s.cluster {
        let m = meta_mut(&mut new);
        let ann = m.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = ann.as_object_mut() {
            a.insert(CLUSTER_ANNOTATION.into(), Value::String(cluster.name.clone()));
        }
    }
    super::kinds::mutate(s, kind, old, &mut new)?;
    validate(s, &mut new)?;
    if info.group == RBAC_GROUP {
        // After validation, so a malformed object is told which field is wrong.
        escalation::check_rbac_write(&s.hub, &s.user, &s.attributes(), old, &new)?;
    }
    if track_update {
        let op_sub = sub.filter(|x| *x == "status");
        patch::record_update(old, &mut new, &s.manager(), "Update", op_sub, &now);
    }
    Ok(new)
}

fn validate(s: &Scope, new: &mut Value) -> Result<(), ApiError> {
    let info = &s.info;
    let mut causes = validation::validate_metadata(
        new,
        NameRule::for_resource(&info.group, &info.resource),
        info.namespaced,
    );
    if let Some(schema) = &info.schema {
        // Validate and prune a copy without metadata, so metadata is judged only once.
        causes.extend(validation::validate_and_prune(schema, new));
    }
    if info.group == "apiextensions.k8s.io" && info.resource == "customresourcedefinitions" {
        causes.extend(validation::validate_crd(new));
    }
    if info.group == RBAC_GROUP {
        let old = s
            .name
            .as_deref()
            .and_then(|n| s.key(n).ok())
            .and_then(|k| s.hub.store.get(&k));
        causes.extend(rbac::validate(
            &info.resource,
            new,
            old.map(|o| o.value()).as_ref(),
        ));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        let name = new
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Err(ApiError::invalid(&info.group, &info.kind, name, causes))
    }
}

/// The result of applying an update or patch to the current object.
pub enum Outcome {
    /// Nothing would change: no write, the current object is returned.
    Unchanged(Value),
    /// Server-side apply of an object that does not exist yet.
    Create(Value),
    /// Write `new`; `client_rv` is the resourceVersion the client required.
    Update { new: Value, client_rv: Option<u64> },
}

fn parse_rv(v: &Value) -> Result<Option<u64>, ApiError> {
    match v.pointer("/metadata/resourceVersion") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => s.parse().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "metadata.resourceVersion: invalid value {s:?}; it must come from the server"
            ))
        }),
        Some(other) => Err(ApiError::bad_request(format!(
            "metadata.resourceVersion must be a string, not {other}"
        ))),
    }
}

fn without_volatile(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    v
}

/// The Scale view of an object with a scale subresource.
pub fn scale_of(info: &ResourceInfo, v: &Value) -> Value {
    let paths = info
        .scale_subresource
        .clone()
        .unwrap_or(crate::registry::ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: None,
        });
    let at = |p: &str| v.pointer(&p.replace('.', "/")).cloned();
    let mut meta = json!({});
    for f in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(x) = v["metadata"].get(f) {
            meta[f] = x.clone();
        }
    }
    let selector = v
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        });
    let mut status = json!({ "replicas": at(&paths.status_replicas).unwrap_or(json!(0)) });
    if let Some(sel) = paths
        .label_selector
        .as_deref()
        .and_then(at)
        .or(selector.map(Value::String))
    {
        status["selector"] = sel;
    }
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
        "spec": { "replicas": at(&paths.spec_replicas).unwrap_or(json!(0)) },
        "status": status,
    })
}

fn with_scale(info: &ResourceInfo, cur: &Value, scale: &Value) -> Value {
    let path = info
        .scale_subresource
        .as_ref()
        .map(|p| p.spec_replicas.clone())
        .unwrap_or(".spec.replicas".into());
    let mut new = cur.clone();
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let mut target = &mut new;
    for p in &parts[..parts.len() - 1] {
        if !target.get(*p).is_some_and(Value::is_object) {
            target[*p] = json!({});
        }
        target = &mut target[*p];
    }
    target[parts[parts.len() - 1]] = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    new
}

fn patch_error(e: patch::PatchError) -> ApiError {
    match e {
        patch::PatchError::Decode(_) | patch::PatchError::NotAnObject(_) => {
            ApiError::bad_request(e.to_string())
        }
        patch::PatchError::TooLarge(m) => ApiError::too_large(m),
        other => ApiError::unprocessable_patch(other.to_string()),
    }
}

/// Compute the object an update or patch produces from `current`.
pub fn compute_update(s: &Scope, current: Option<&Value>, change: &Change) -> Result<Outcome, ApiError> {
    let info = &s.info;
    let name = s.name.as_deref().unwrap_or_default();
    let not_found = || ApiError::not_found(&info.group, &info.resource, name);
    let scale = s.subresource.as_deref() == Some("scale");
    let (new, client_rv, tracked) = match change {
        Change::Replace(obj) => {
            let cur = current.ok_or_else(not_found)?;
            let client_rv = parse_rv(obj)?;
            let obj = if scale {
                with_scale(info, cur, obj)
            } else {
                obj.clone()
            };
            (obj, client_rv, true)
        }
        Change::Patch { content_type, body } if content_type == "application/apply-patch+yaml" => {
            if s.subresource.is_some() && s.subresource.as_deref() != Some("status") {
                return Err(ApiError::unsupported_media_type(
                    "apply patches are not supported on this subresource",
                ));
            }
            let mut applied = parse_object(body, "application/yaml")?;
            if s.subresource.as_deref() == Some("status") {
                // Status applies merge the applied status into the live one;
                // ownership is recorded as an update by this manager.
                let cur = current.ok_or_else(not_found)?;
                let status = json!({"status": applied.get("status").cloned().unwrap_or(json!({}))});
                let patched = patch::merge_patch(cur, status.to_string().as_bytes()).map_err(patch_error)?;
                let new = prepare_with(s, WriteKind::Update, Some(cur), patched, true)?;
                if without_volatile(&new) == without_volatile(cur) {
                    return Ok(Outcome::Unchanged(cur.clone()));
                }
                return Ok(Outcome::Update { new, client_rv: None });
            }
            for f in ["apiVersion", "kind"] {
                if applied.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                    return Err(ApiError::bad_request(format!(
                        "{f} must be set in an apply patch (add `{f}:` to the applied object)"
                    )));
                }
            }
            if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
            if s.info.namespaced {
                if let Some(ns) = &s.namespace {
                    applied["metadata"]["namespace"] = Value::String(ns.clone());
                }
            }
            applied["metadata"]["name"] = Value::String(name.to_string());
            applied["apiVersion"] = Value::String(info.api_version());
            let client_rv = parse_rv(&applied)?;
            let result = patch::server_side_apply(
                current,
                &applied,
                &s.manager(),
                s.query.force,
                &info.group,
                &info.kind,
                &ferry_api::timestamp::now(),
            )
            .map_err(|e| apply_error(s, name, e))?;
            match current {
                None => {
                    let created = prepare_with(s, WriteKind::Create, None, result, false)?;
                    return Ok(Outcome::Create(created));
                }
                Some(_) => (result, client_rv, false),
            }
        }
        Change::Patch { content_type, body } => {
            let cur = current.ok_or_else(not_found)?;
            let base = if scale { scale_of(info, cur) } else { cur.clone() };
            let patched = match content_type.as_str() {
                "application/json-patch+json" => patch::json_patch(&base, body).map_err(patch_error)?,
                "application/merge-patch+json" => patch::merge_patch(&base, body).map_err(patch_error)?,
                "application/strategic-merge-patch+json" if !info.from_crd => {
                    patch::strategic_merge_patch(&base, body, &info.group, &info.kind).map_err(patch_error)?
                }
                other => {
                    return Err(ApiError::unsupported_media_type(format!(
                        "the body of the request was in an unknown format ({other}) - accepted media types include: \
                         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}",
                        if info.from_crd { "" } else { ", application/strategic-merge-patch+json" }
                    )))
                }
            };
            if !patched.is_object() {
                return Err(ApiError::unprocessable_patch(
                    "the patch did not produce an object".into(),
                ));
            }
            let patched_rv = parse_rv(&patched)?;
            let cur_rv = parse_rv(cur)?;
            if patched_rv.is_some() && patched_rv != cur_rv {
                return Err(ApiError::conflict(
                    &info.group,
                    &info.resource,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            let obj = if scale {
                with_scale(info, cur, &patched)
            } else {
                patched
            };
            (obj, None, true)
        }
    };
    let cur = current.expect("checked above");
    let new = prepare_with(s, WriteKind::Update, Some(cur), new, tracked)?;
    if without_volatile(&new) == without_volatile(cur) {
        return Ok(Outcome::Unchanged(cur.clone()));
    }
    Ok(Outcome::Update { new, client_rv })
}

fn apply_error(s: &Scope, name: &str, e: patch::ApplyError) -> ApiError {
    match e {
        patch::ApplyError::Conflict(conflicts) => {
            let causes: Vec<Cause> = conflicts
                .iter()
                .map(|c| Cause {
                    reason: "FieldManagerConflict".into(),
                    field: c.field.clone(),
                    message: format!("conflict with \"{}\"", c.manager),
                })
                .collect();
            let list: Vec<String> = conflicts
                .iter()
                .map(|c| format!("- conflict with \"{}\": {}", c.manager, c.field))
                .collect();
            let message = format!(
                "Apply failed with {} conflict{}: {}\nPlease review the fields above--they currently have other managers. \
                 Re-run the apply with --force-conflicts (force=true) to take them over, or drop them from your configuration.",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                list.join("\n")
            );
            ApiError::apply_conflict(&s.info.group, &s.info.resource, name, message, &causes)
        }
        other => ApiError::bad_request(other.to_string()),
    }
}

/// Whether an update leaves an object being deleted with no finalizers: it is
/// then removed from storage instead of written.
pub fn is_finalized(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp").is_some()
        && v.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|f| f.is_empty())
}

/// Reject creates of custom resources whose CRD is being deleted, as
/// kube-apiserver does.
pub fn ensure_crd_accepts(s: &Scope) -> Result<(), ApiError> {
    if s.info.terminating {
        return Err(ApiError::method_not_allowed(
            "create not allowed while custom resource definition is terminating",
        ));
    }
    Ok(())
}

/// Reject creates in namespaces that do not exist or are being deleted.
pub fn ensure_namespace_accepts(s: &Scope) -> Result<(), ApiError> {
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

pub enum DeleteError {
    /// The object changed under us; read it again.
    Conflict,
    Store(StoreError),
}

fn is(info: &ResourceInfo, group: &str, resource: &str) -> bool {
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
    let cleanup = crate::controllers::crds::CLEANUP_FINALIZER;
    if crd && !deleting && !finalizers.iter().any(|f| f == cleanup) {
        finalizers.push(cleanup.to_string());
    }
    if !finalizers.is_empty() || namespace {
        if !deleting || finalizers != current {
            if !deleting {
                v["metadata"]["deletionTimestamp"] = Value::String(ferry_api::timestamp::now());
                v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
                if namespace {
                    v["status"]["phase"] = json!("Terminating");
                }
                if crd {
                    let conditions = v["status"]["conditions"].as_array_mut();
                    let mut kept: Vec<Value> = conditions
                        .map(|c| c.drain(..).filter(|c| c["type"] != "Terminating").collect())
                        .unwrap_or_default();
                    kept.push(crate::controllers::crds::terminating_condition());
                    v["status"]["conditions"] = json!(kept);
                }
            }
            if finalizers != current {
                v["metadata"]["finalizers"] = json!(finalizers);
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
            if namespace && !deleting {
                crate::controllers::namespaces::start_termination(
                    hub.clone(),
                    key.cluster.clone(),
                    key.name.clone(),
                );
            }
            if crd && !deleting {
                // Serve its resources as terminating (creates refused).
                hub.refresh_crds(&key.cluster);
                crate::controllers::crds::start_termination(
                    hub.clone(),
                    key.cluster.clone(),
                    key.name.clone(),
                )
                .await;
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
