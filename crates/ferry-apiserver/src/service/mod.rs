//! The object service: every write of a stored object (create, update, the
//! four patch types and apply, delete, delete-collection, status and other
//! subresources) and single-object reads, with no HTTP in it — what
//! kube-apiserver's generic registry store is. The REST handlers (`api`)
//! translate requests into calls here; the hub's built-in controllers call
//! it too, as the loopback user, so their writes get the same defaulting,
//! validation, managedFields and watch events as a client's.
//!
//! Every write runs one sequence: decode ([`decode_object`]) → prepare and
//! validate ([`prepare`], with the resource's strategy) → store → after-write
//! ([`hooks`]).

pub mod change;
pub mod delete;
pub mod hooks;
pub mod prepare;
pub mod reserved;
pub mod token;

// The policy of a DELETE lives below the service and the strategies, which
// both read it; callers still find it here.
pub use crate::propagation;
// What a call is about lives below the service and the strategies too.
pub use crate::request::{Request, WriteOptions};

use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;

use crate::hub::Hub;
use crate::json;
use crate::registry::ResourceInfo;
use crate::status::{ApiError, Cause};
use crate::storage::{Expect, ObjectKey, StoreError, StoredObject};
pub use change::{Change, PatchType};
pub use prepare::WriteKind;
use propagation::PropagationPolicy;

/// The object a write left, whether it was created, and the strategy's
/// warnings about it (for the client's `Warning` header).
#[derive(Debug)]
pub struct Written {
    pub object: Value,
    pub created: bool,
    pub warnings: Vec<String>,
}

impl Written {
    fn new(r: &Request, object: Value, created: bool) -> Written {
        let mut warnings = std::mem::take(&mut *r.warnings.lock());
        warnings.extend(crate::strategy::for_resource(&r.hub, &r.info).warnings(r, &object));
        Written {
            object,
            created,
            warnings,
        }
    }
}

pub fn store_error(r: &Request, name: &str, e: StoreError) -> ApiError {
    let (g, res) = (&r.info.group, &r.info.resource);
    match e {
        StoreError::AlreadyExists => ApiError::already_exists(g, res, name),
        StoreError::NotFound => ApiError::not_found(g, res, name),
        StoreError::Conflict => ApiError::conflict(g, res, name, &e.to_string()),
        StoreError::Unavailable(m) => ApiError::service_unavailable(m),
        StoreError::TooDeep { at, limit } => ApiError::invalid(
            g,
            &r.info.kind,
            name,
            vec![Cause::invalid(
                at,
                format!(
                    "Too deep: objects and lists may nest at most {limit} levels (what JSON decoders read back); \
                     flatten the structure"
                ),
            )],
        ),
        StoreError::TooLarge { size, limit } => ApiError::too_large(format!(
            "{res} {name:?} is too large to store: {size} bytes, over the limit of {limit} bytes \
             (etcd's default request limit, which kube-apiserver's storage has too); make the object smaller"
        )),
    }
}

/// An object as served at the requested version.
pub fn served_value(stored: &StoredObject, info: &ResourceInfo) -> Value {
    served(stored.value(), info)
}

/// A stored object's value as served at the requested version.
fn served(mut v: Value, info: &ResourceInfo) -> Value {
    if info.from_crd {
        if let Some(m) = v.as_object_mut() {
            m.insert("apiVersion".into(), Value::String(info.api_version()));
        }
    }
    v
}

/// The stored JSON when it already is the object served at `api_version` (the
/// served `apiVersion`, [`crate::registry::ResourceInfo::api_version`]), so that
/// lists and watches send it as it is instead of parsing and re-serialising it: a
/// built-in's always; a custom resource's when its stored `apiVersion` comes first
/// and is the served one (the only field [`served_value`] changes). `None`: serve
/// [`served_value`].
pub fn served_json<'a>(stored: &'a StoredObject, info: &ResourceInfo, api_version: &str) -> Option<&'a [u8]> {
    let json = &stored.json[..];
    if !info.from_crd {
        return Some(json);
    }
    let rest = json.strip_prefix(b"{\"apiVersion\":\"")?;
    let rest = rest.strip_prefix(api_version.as_bytes())?;
    rest.starts_with(b"\"").then_some(json)
}

/// Check a client's object against what the request addresses and decode
/// its metadata: `apiVersion`/`kind` (filled in when absent), `metadata` as
/// `ObjectMeta`, the namespace of the body against the request's.
pub fn decode_object(r: &Request, mut obj: Value) -> Result<Value, ApiError> {
    crate::decode::check_metadata(&obj, &r.info.kind, &r.info.version)?;
    let (kind, api_version) = match r.subresource.as_deref() {
        Some("scale") => ("Scale".to_string(), "autoscaling/v1".to_string()),
        _ => (r.info.kind.clone(), r.info.api_version()),
    };
    crate::decode::check_type(&mut obj, &r.info, &kind, &api_version)?;
    if r.info.namespaced {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(String::from);
        match (&ns, &r.namespace) {
            (Some(b), Some(p)) if b != p => {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the provided object ({b}) does not match the namespace sent on the request ({p})"
                )))
            }
            (_, Some(p)) => json::set(&mut obj, &["metadata", "namespace"], Value::String(p.clone()))?,
            (_, None) => {
                return Err(ApiError::bad_request(format!(
                    "{} is namespaced: send the request to .../namespaces/<namespace>/{}",
                    r.info.resource, r.info.resource
                )))
            }
        }
    } else {
        json::remove(&mut obj, &["metadata", "namespace"]);
    }
    Ok(obj)
}

fn generate_name(prefix: &str) -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// The object named by the request.
pub fn get(r: &Request) -> Result<Value, ApiError> {
    let name = r.name()?;
    // What is durable: a client never reads a write a crash could take back.
    let stored = r
        .hub
        .store
        .get_committed(&r.key(&name)?)
        .ok_or_else(|| ApiError::not_found(&r.info.group, &r.info.resource, &name))?;
    Ok(served_value(&stored, &r.info))
}

/// One page of a list: the objects, the list's resourceVersion, and the
/// token for the next page when there is one.
pub struct ListPage {
    pub items: Vec<(ObjectKey, Arc<StoredObject>)>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
}

fn encode_continue(key: &ObjectKey, rv: u64) -> String {
    let raw = serde_json::json!([key.cluster, key.namespace, key.name, rv]).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str, resource: &str) -> Result<(ObjectKey, u64), ApiError> {
    let bad = || {
        ApiError::bad_request(format!(
            "continue token {token:?} is not valid; start the list again"
        ))
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let s = |i: usize| v.get(i).and_then(Value::as_str).map(String::from).ok_or_else(bad);
    Ok((
        ObjectKey {
            cluster: s(0)?,
            resource: resource.to_string(),
            namespace: s(1)?,
            name: s(2)?,
        },
        v.get(3).and_then(Value::as_u64).ok_or_else(bad)?,
    ))
}

/// The objects of the request's resource (in its namespace, workspace or
/// all workspaces) that `matches` accepts, at most `limit` of them, from
/// where `continue_token` left off.
pub fn list(
    r: &Request,
    limit: Option<usize>,
    continue_token: Option<&str>,
    matches: impl Fn(&ObjectKey, &StoredObject) -> bool,
) -> Result<ListPage, ApiError> {
    let resource = r.info.storage_key();
    let (after, pinned_rv) = match continue_token {
        Some(t) => {
            let (k, rv) = decode_continue(t, &resource)?;
            (Some(k), Some(rv))
        }
        None => (None, None),
    };
    let (objects, rv) = r
        .hub
        .store
        .list(&r.scope(), &resource, r.namespace.as_deref(), after.as_ref());
    let rv = pinned_rv.unwrap_or(rv);
    let mut items = Vec::new();
    let mut iter = objects.into_iter().filter(|(k, o)| matches(k, o));
    for item in iter.by_ref() {
        items.push(item);
        if limit.is_some_and(|l| items.len() >= l) {
            break;
        }
    }
    let continue_token = if limit.is_some() && iter.next().is_some() {
        items.last().map(|(k, _)| encode_continue(k, rv))
    } else {
        None
    };
    Ok(ListPage {
        items,
        resource_version: rv,
        continue_token,
    })
}

/// Create `obj` (as a client sent it); returns the stored object.
pub async fn create(r: &Request, obj: Value) -> Result<Written, ApiError> {
    r.cluster()?;
    let mut obj = decode_object(r, obj)?;
    let name = match obj.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => match obj.pointer("/metadata/generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => generate_name(prefix),
            _ => {
                return Err(ApiError::invalid(
                    &r.info.group,
                    &r.info.kind,
                    "",
                    vec![Cause::required("metadata.name")],
                ))
            }
        },
    };
    json::set(&mut obj, &["metadata", "name"], Value::String(name.clone()))?;
    hooks::ensure_namespace_accepts(r)?;
    hooks::ensure_crd_accepts(r)?;
    let obj = prepare::prepare(r, WriteKind::Create, None, obj)?;
    let key = r.key(&name)?;
    if let Some(view) = &r.visibility {
        view.admit_write(&key, None, &obj)?;
    }
    if r.options.dry_run {
        // A dry run answers what the real request would, AlreadyExists included.
        if r.hub.store.get(&key).is_some() {
            return Err(store_error(r, &name, StoreError::AlreadyExists));
        }
        return Ok(Written::new(r, obj, true));
    }
    let makes_logical_cluster = r
        .hub
        .logical_cluster_objects()
        .is_some_and(|objects| key.resource == objects.resource);
    if makes_logical_cluster {
        if r.hub.store.get(&key).is_some() {
            return Err(store_error(r, &name, StoreError::AlreadyExists));
        }
        // The new logical cluster gets what a fresh cluster has before its
        // Workspace is visible as Ready, so clients can use it at once.
        if let Some(hooks) = r.hub.write_hooks() {
            hooks.creating(&r.hub, &key, &obj).await;
        }
    }
    let committed = r
        .hub
        .store
        .put(key.clone(), Expect::Absent, obj)
        .map_err(|e| store_error(r, &name, e))?;
    let (_, stored) = committed
        .durable_value()
        .await
        .map_err(|e| store_error(r, &name, e))?
        .ok_or_else(|| ApiError::internal("the store did not return the created object"))?;
    let v = served(stored, &r.info);
    hooks::after_write(&r.hub, &r.info, &key, Some(&v)).await;
    Ok(Written::new(r, v, true))
}

/// Replace the object with `obj` (as a client sent it).
pub async fn update(r: &Request, obj: Value) -> Result<Written, ApiError> {
    let name = r.name()?;
    let mut obj = decode_object(r, obj)?;
    if r.subresource.as_deref() != Some("scale") {
        match obj.pointer("/metadata/name").and_then(Value::as_str) {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )))
            }
            Some(_) => {}
            None => json::set(&mut obj, &["metadata", "name"], Value::String(name.clone()))?,
        }
    }
    modify(r, &name, Change::Replace(obj)).await
}

/// Patch the object with `body`, in `patch_type`'s format.
pub async fn patch(r: &Request, patch_type: PatchType, body: Bytes) -> Result<Written, ApiError> {
    let name = r.name()?;
    modify(r, &name, Change::Patch { patch_type, body }).await
}

/// Read-modify-write with retries on internal conflicts (GuaranteedUpdate).
async fn modify(r: &Request, name: &str, change: Change) -> Result<Written, ApiError> {
    let key = r.key(name)?;
    let done = |object: Value, created: bool| Ok(Written::new(r, object, created));
    let mut caught_up = false;
    for _attempt in 0..16 {
        let turn = r.hub.write_turn(&key).await;
        let current = r.hub.store.get(&key);
        if let (Some(view), Some(c)) = (&r.visibility, &current) {
            // Through a virtual workspace: what the view hides does not exist.
            if !view.stored(&key, c) {
                return Err(ApiError::not_found(&r.info.group, &r.info.resource, name));
            }
        }
        let current_value = current.as_ref().map(|c| served_value(c, &r.info));
        let outcome = change::compute_update(r, current_value.as_ref(), &change)?;
        // A virtual workspace's write rules act as validating admission: in kube
        // they run after the resourceVersion precondition, so a stale write is a
        // conflict whatever it changes.
        let admit = |old: Option<&Value>, new: &Value| match &r.visibility {
            Some(view) => view.admit_write(&key, old, new),
            None => Ok(()),
        };
        let (new, expect_rv) = match outcome {
            change::Outcome::Unchanged(v) => return done(v, false),
            change::Outcome::Create(v) => {
                admit(None, &v)?;
                hooks::ensure_namespace_accepts(r)?;
                hooks::ensure_crd_accepts(r)?;
                if r.options.dry_run {
                    return done(v, true);
                }
                let put = r.hub.store.put(key.clone(), Expect::Absent, v);
                drop(turn);
                let written = match put {
                    Ok(committed) => committed.durable_value().await,
                    Err(e) => Err(e),
                };
                let (_, stored) = match written {
                    Err(StoreError::AlreadyExists) => {
                        r.hub.write_retries.inc();
                        continue;
                    }
                    other => other.map_err(|e| store_error(r, name, e))?,
                }
                .ok_or_else(|| ApiError::internal("the store did not return the created object"))?;
                let v = served(stored, &r.info);
                hooks::after_write(&r.hub, &r.info, &key, Some(&v)).await;
                return done(v, true);
            }
            change::Outcome::Update { new, client_rv } => (new, client_rv),
        };
        let Some(current) = current else {
            return Err(ApiError::not_found(&r.info.group, &r.info.resource, name));
        };
        if let Some(rv) = expect_rv {
            if rv != current.rv {
                // With hubs sharing etcd, the client may have read a newer
                // version through another hub than this one has seen yet:
                // catch up once before calling it a conflict.
                if r.hub.store.shared() && !caught_up && rv > r.hub.store.resource_version() {
                    caught_up = true;
                    drop(turn);
                    let _ = r.hub.store.wait_for(rv, std::time::Duration::from_secs(1)).await;
                    continue;
                }
                return Err(store_error(r, name, StoreError::Conflict));
            }
        }
        admit(current_value.as_ref(), &new)?;
        if r.options.dry_run {
            return done(new, false);
        }
        let finalized = change::is_finalized(&r.hub, &r.info, &new);
        let result = if finalized {
            r.hub.store.delete(key.clone(), Expect::Version(current.rv))
        } else {
            r.hub.store.put(key.clone(), Expect::Version(current.rv), new)
        };
        drop(turn);
        // With etcd, a conflict is known only once the transaction ran.
        let written = match result {
            Ok(committed) => committed.durable_value().await,
            Err(e) => Err(e),
        };
        let (_, stored) = match written {
            Err(StoreError::Conflict) if expect_rv.is_none() => {
                r.hub.write_retries.inc();
                continue;
            }
            other => other.map_err(|e| store_error(r, name, e))?,
        }
        .ok_or_else(|| ApiError::internal("the store did not return the written object"))?;
        let v = served(stored, &r.info);
        if finalized {
            hooks::remove_contents(&r.hub, &r.info, &key, &v).await;
        }
        hooks::after_write(&r.hub, &r.info, &key, if finalized { None } else { Some(&v) }).await;
        return done(v, false);
    }
    Err(ApiError::conflict(
        &r.info.group,
        &r.info.resource,
        name,
        "too many concurrent writers; try again",
    ))
}

/// `DeleteOptions` the hub honours.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    pub dry_run: bool,
    /// What happens to the object's dependents; `None` when the request does not say.
    pub propagation: Option<PropagationPolicy>,
}

fn delete_error(r: &Request, name: &str, e: delete::DeleteError) -> Option<ApiError> {
    match e {
        delete::DeleteError::Conflict => None,
        delete::DeleteError::Store(e) => Some(store_error(r, name, e)),
        delete::DeleteError::Invalid(e) => Some(ApiError::internal(format!(
            "the stored object is malformed: {}",
            e.message
        ))),
    }
}

/// Delete the object: marked while finalizers (or a namespace's contents)
/// hold it, removed otherwise. Returns the object as it was left.
pub async fn delete(r: &Request, opts: &DeleteOptions) -> Result<Value, ApiError> {
    let name = r.name()?;
    let key = r.key(&name)?;
    for _ in 0..16 {
        let current = r
            .hub
            .store
            .get(&key)
            .ok_or_else(|| ApiError::not_found(&r.info.group, &r.info.resource, &name))?;
        if r.visibility
            .as_ref()
            .is_some_and(|view| !view.stored(&key, &current))
        {
            return Err(ApiError::not_found(&r.info.group, &r.info.resource, &name));
        }
        let v = served_value(&current, &r.info);
        if let Some(uid) = &opts.uid {
            let actual = json::str_at(&v, "/metadata/uid");
            if actual != uid {
                return Err(ApiError::conflict(
                    &r.info.group,
                    &r.info.resource,
                    &name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                ));
            }
        }
        if let Some(rv) = &opts.resource_version {
            if *rv != current.rv.to_string() {
                return Err(ApiError::conflict(
                    &r.info.group,
                    &r.info.resource,
                    &name,
                    &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", current.rv),
                ));
            }
        }
        let deleted =
            delete::delete_object(&r.hub, &r.info, &key, &current, v, opts.dry_run, opts.propagation).await;
        match deleted {
            Ok(v) => return Ok(v),
            Err(e) => match delete_error(r, &name, e) {
                None => continue,
                Some(e) => return Err(e),
            },
        }
    }
    Err(ApiError::conflict(
        &r.info.group,
        &r.info.resource,
        &name,
        "too many concurrent writers; try again",
    ))
}

/// Delete every object of the request's resource (in its namespace) that
/// `matches`; returns what was deleted and the list's resourceVersion.
pub async fn delete_collection(
    r: &Request,
    opts: &DeleteOptions,
    matches: impl Fn(&ObjectKey, &StoredObject) -> bool,
) -> Result<(Vec<Value>, u64), ApiError> {
    r.cluster()?;
    let (objects, rv) = r
        .hub
        .store
        .list(&r.scope(), &r.info.storage_key(), r.namespace.as_deref(), None);
    let mut deleted = Vec::new();
    for (key, obj) in objects.iter().filter(|(k, o)| matches(k, o)) {
        let v = served_value(obj, &r.info);
        match delete::delete_object(&r.hub, &r.info, key, obj, v, opts.dry_run, opts.propagation).await {
            Ok(v) => deleted.push(v),
            Err(delete::DeleteError::Conflict) | Err(delete::DeleteError::Store(StoreError::NotFound)) => {}
            Err(e) => {
                if let Some(e) = delete_error(r, &key.name, e) {
                    return Err(e);
                }
            }
        }
    }
    Ok((deleted, rv))
}

/// Field manager of the hub's own writes when a controller names none.
pub const HUB_MANAGER: &str = "ferry-hub";

/// Create `obj` as the hub itself (a controller): the loopback user, with
/// the same defaults and validation as a client's create. AlreadyExists is
/// returned as an error.
pub async fn create_internal(
    hub: &Arc<Hub>,
    cluster: &str,
    resource: (&str, &str, &str),
    namespace: Option<&str>,
    obj: Value,
) -> Result<Value, ApiError> {
    let r = Request::internal(hub, cluster, resource, namespace, None, "create", HUB_MANAGER)?;
    create(&r, obj).await.map(|w| w.object)
}
