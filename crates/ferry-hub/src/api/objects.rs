//! get, list, create, update, patch, delete and deletecollection.

use std::sync::Arc;

use axum::response::Response;
use base64::Engine;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{json, Map, Value};

use super::body::{check_type, content_type, json_value, parse_object};
use super::negotiate::Format;
use super::query::Query;
use super::write::{self, WriteKind};
use crate::auth::rbac::Request;
use crate::auth::{Attributes, UserInfo};
use crate::controllers::garbage_collector::policy::{self, PropagationPolicy};
use crate::hub::Hub;
use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::storage::{ClusterScope, Expect, ObjectKey, StoreError, StoredObject};
use crate::table::{builtin_columns, render_table, IncludeObject};
use crate::workspace::LogicalCluster;

/// Everything a resource request is about.
pub struct Scope {
    pub hub: Arc<Hub>,
    /// `None`: the `/clusters/*` wildcard.
    pub cluster: Option<LogicalCluster>,
    pub info: ResourceInfo,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
    pub query: Query,
    pub format: Format,
    pub headers: HeaderMap,
    /// Field manager for writes that do not name one.
    pub default_manager: String,
    /// Who asked ([`UserInfo::loopback`] for the hub's own writes).
    pub user: UserInfo,
    /// The RBAC verb the request was authorized for (`create`, `patch`, ...).
    pub verb: String,
}

impl Scope {
    pub fn scope(&self) -> ClusterScope {
        match &self.cluster {
            Some(lc) => ClusterScope::One(lc.name.clone()),
            None => ClusterScope::All,
        }
    }

    pub fn cluster(&self) -> Result<&LogicalCluster, ApiError> {
        self.cluster.as_ref().ok_or_else(|| {
            ApiError::method_not_allowed(
                "the /clusters/* wildcard only supports list and watch; name one workspace",
            )
        })
    }

    pub fn key(&self, name: &str) -> Result<ObjectKey, ApiError> {
        Ok(ObjectKey {
            cluster: self.cluster()?.name.clone(),
            resource: self.info.storage_key(),
            namespace: self.namespace.clone().unwrap_or_default(),
            name: name.to_string(),
        })
    }

    /// The request as RBAC sees it: verb, resource, namespace and name as
    /// in the URL, in this scope's workspace.
    pub fn attributes(&self) -> Attributes {
        Attributes {
            request: Request::Resource {
                verb: self.verb.clone(),
                group: self.info.group.clone(),
                resource: self.info.resource.clone(),
                subresource: self.subresource.clone().unwrap_or_default(),
                namespace: self.namespace.clone().unwrap_or_default(),
                name: self.name.clone().unwrap_or_default(),
            },
            workspace: self.cluster.clone(),
        }
    }

    pub fn manager(&self) -> String {
        self.query
            .field_manager
            .clone()
            .unwrap_or_else(|| self.default_manager.clone())
    }
}

pub fn store_error(s: &Scope, name: &str, e: StoreError) -> ApiError {
    let (g, r) = (&s.info.group, &s.info.resource);
    match e {
        StoreError::AlreadyExists => ApiError::already_exists(g, r, name),
        StoreError::NotFound => ApiError::not_found(g, r, name),
        StoreError::Conflict => ApiError::conflict(g, r, name, &e.to_string()),
        StoreError::Unavailable(m) => ApiError::service_unavailable(m),
        StoreError::TooLarge { size, limit } => ApiError::too_large(format!(
            "{r} {name:?} is too large to store: {size} bytes, over the limit of {limit} bytes \
             (etcd's default request limit, which kube-apiserver's storage has too); make the object smaller"
        )),
    }
}

/// An object as served at the requested version.
pub fn served_value(stored: &StoredObject, info: &ResourceInfo) -> Value {
    let mut v = stored.value();
    if info.from_crd {
        v["apiVersion"] = Value::String(info.api_version());
    }
    v
}

fn partial_metadata(v: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": v.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn include_object(q: &Query) -> IncludeObject {
    match q.include_object.as_deref() {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    }
}

pub fn columns(info: &ResourceInfo) -> Vec<crate::table::PrinterColumn> {
    if info.from_crd {
        if info.printer_columns.is_empty() {
            crate::table::crd_columns(&Value::Null)
        } else {
            info.printer_columns.clone()
        }
    } else {
        builtin_columns(&info.group, &info.resource)
    }
}

/// One object in the representation the client asked for.
pub fn respond_object(s: &Scope, code: StatusCode, v: Value) -> Response {
    let out = match s.format {
        Format::Object => v,
        Format::Metadata => partial_metadata(&v),
        Format::Table => render_table(
            &columns(&s.info),
            std::slice::from_ref(&v),
            include_object(&s.query),
            Map::new(),
            chrono::Utc::now(),
        ),
    };
    json_value(code, &out)
}

pub async fn get(s: &Scope) -> Result<Response, ApiError> {
    let name = s.name.as_deref().expect("get has a name");
    let stored = s
        .hub
        .store
        .get(&s.key(name)?)
        .ok_or_else(|| ApiError::not_found(&s.info.group, &s.info.resource, name))?;
    let v = served_value(&stored, &s.info);
    match s.subresource.as_deref() {
        None | Some("status") | Some("ephemeralcontainers") => Ok(respond_object(s, StatusCode::OK, v)),
        Some("scale") => Ok(json_value(StatusCode::OK, &write::scale_of(&s.info, &v))),
        Some(other) => Err(unknown_subresource(s, other)),
    }
}

pub fn unknown_subresource(s: &Scope, sub: &str) -> ApiError {
    ApiError::not_found_message(format!(
        "the server could not find the requested resource: {}/{sub} is not served",
        s.info.resource
    ))
}

/// Field values a field selector may name: any dotted path into the object.
pub fn field_value(v: &Value, path: &str) -> Option<String> {
    let mut cur = v;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    match cur {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub fn parse(q: &Query) -> Result<Selectors, ApiError> {
        let labels = LabelSelector::parse(&q.label_selector).map_err(|e| {
            ApiError::bad_request(format!("invalid labelSelector {:?}: {e}", q.label_selector))
        })?;
        let fields = FieldSelector::parse(&q.field_selector).map_err(|e| {
            ApiError::bad_request(format!("invalid fieldSelector {:?}: {e}", q.field_selector))
        })?;
        Ok(Selectors { labels, fields })
    }

    /// Whether the stored object matches; parses the JSON only when a field
    /// selector needs more than name and namespace.
    pub fn matches(&self, key: &ObjectKey, obj: &StoredObject) -> bool {
        if !self.labels.matches(&obj.labels) {
            return false;
        }
        if self.fields.is_empty() {
            return true;
        }
        let parsed = std::cell::OnceCell::new();
        self.fields.matches(|f| match f {
            "metadata.name" => Some(key.name.clone()),
            "metadata.namespace" => Some(key.namespace.clone()),
            path => field_value(parsed.get_or_init(|| obj.value()), path),
        })
    }
}

fn encode_continue(key: &ObjectKey, rv: u64) -> String {
    let raw = json!([key.cluster, key.namespace, key.name, rv]).to_string();
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

pub async fn list(s: &Scope) -> Result<Response, ApiError> {
    let sel = Selectors::parse(&s.query)?;
    let resource = s.info.storage_key();
    let (after, pinned_rv) = match &s.query.continue_token {
        Some(t) => {
            let (k, rv) = decode_continue(t, &resource)?;
            (Some(k), Some(rv))
        }
        None => (None, None),
    };
    let (objects, rv) = s
        .hub
        .store
        .list(&s.scope(), &resource, s.namespace.as_deref(), after.as_ref());
    let rv = pinned_rv.unwrap_or(rv);
    let mut items = Vec::new();
    let mut next = None;
    let mut iter = objects.iter().filter(|(k, o)| sel.matches(k, o));
    for (k, o) in iter.by_ref() {
        items.push((k, o));
        if s.query.limit.is_some_and(|l| items.len() >= l) {
            break;
        }
    }
    if s.query.limit.is_some() && iter.next().is_some() {
        next = items.last().map(|(k, _)| encode_continue(k, rv));
    }
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    if let Some(c) = &next {
        meta.insert("continue".into(), Value::String(c.clone()));
    }
    let response = match s.format {
        Format::Object if !s.info.from_crd => {
            // Splice the stored JSON: no parse, no re-serialise.
            let mut body = serde_json::to_vec(&json!({
                "kind": s.info.list_kind, "apiVersion": s.info.api_version(), "metadata": meta,
            }))
            .expect("serialisable");
            body.pop();
            body.reserve(items.iter().map(|(_, o)| o.json.len() + 1).sum::<usize>() + 16);
            body.extend_from_slice(b",\"items\":[");
            for (i, (_, o)) in items.iter().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(&o.json);
            }
            body.extend_from_slice(b"]}");
            super::body::json_response(StatusCode::OK, body)
        }
        Format::Object => {
            let values: Vec<Value> = items.iter().map(|(_, o)| served_value(o, &s.info)).collect();
            json_value(
                StatusCode::OK,
                &json!({"kind": s.info.list_kind, "apiVersion": s.info.api_version(), "metadata": meta, "items": values}),
            )
        }
        Format::Metadata => {
            let values: Vec<Value> = items.iter().map(|(_, o)| partial_metadata(&o.value())).collect();
            json_value(
                StatusCode::OK,
                &json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "items": values}),
            )
        }
        Format::Table => {
            let values: Vec<Value> = items.iter().map(|(_, o)| served_value(o, &s.info)).collect();
            json_value(
                StatusCode::OK,
                &render_table(
                    &columns(&s.info),
                    &values,
                    include_object(&s.query),
                    meta,
                    chrono::Utc::now(),
                ),
            )
        }
    };
    Ok(response)
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

/// Read and check the body of a create or update.
fn body_object(s: &Scope, body: &Bytes) -> Result<Value, ApiError> {
    let mut obj = parse_object(body, &content_type(&s.headers))?;
    let (kind, api_version) = match s.subresource.as_deref() {
        Some("scale") => ("Scale".to_string(), "autoscaling/v1".to_string()),
        _ => (s.info.kind.clone(), s.info.api_version()),
    };
    check_type(&mut obj, &s.info, &kind, &api_version)?;
    if s.info.namespaced {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(String::from);
        match (&ns, &s.namespace) {
            (Some(b), Some(p)) if b != p => {
                return Err(ApiError::bad_request(format!(
                    "the namespace of the provided object ({b}) does not match the namespace sent on the request ({p})"
                )))
            }
            (_, Some(p)) => obj["metadata"]["namespace"] = Value::String(p.clone()),
            (_, None) => {
                return Err(ApiError::bad_request(format!(
                    "{} is namespaced: send the request to .../namespaces/<namespace>/{}",
                    s.info.resource, s.info.resource
                )))
            }
        }
    } else if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("namespace");
    }
    Ok(obj)
}

pub async fn create(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    if let Some(sub) = s.subresource.as_deref() {
        return super::special::create_subresource(s, sub, body).await;
    }
    s.cluster()?;
    let mut obj = body_object(s, &body)?;
    let name = match obj.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => match obj.pointer("/metadata/generateName").and_then(Value::as_str) {
            Some(prefix) if !prefix.is_empty() => generate_name(prefix),
            _ => {
                return Err(ApiError::invalid(
                    &s.info.group,
                    &s.info.kind,
                    "",
                    vec![crate::status::Cause::required("metadata.name")],
                ))
            }
        },
    };
    obj["metadata"]["name"] = Value::String(name.clone());
    write::ensure_namespace_accepts(s)?;
    write::ensure_crd_accepts(s)?;
    let obj = write::prepare(s, WriteKind::Create, None, obj)?;
    let key = s.key(&name)?;
    if s.query.dry_run {
        // A dry run answers what the real request would, AlreadyExists included.
        if s.hub.store.get(&key).is_some() {
            return Err(store_error(s, &name, StoreError::AlreadyExists));
        }
        return Ok(respond_object(s, StatusCode::CREATED, obj));
    }
    if key.resource == crate::workspace::WORKSPACES {
        if s.hub.store.get(&key).is_some() {
            return Err(store_error(s, &name, StoreError::AlreadyExists));
        }
        // The new logical cluster gets what a fresh cluster has before its
        // Workspace is visible as Ready, so clients can use it at once.
        Box::pin(crate::controllers::workspace_written(
            &s.hub,
            &key.cluster,
            Some(&obj),
        ))
        .await;
    }
    let committed = s
        .hub
        .store
        .put(key.clone(), Expect::Absent, obj)
        .map_err(|e| store_error(s, &name, e))?;
    let stored = committed
        .durable()
        .await
        .map_err(|e| store_error(s, &name, e))?
        .expect("put returns the object");
    let v = served_value(&stored, &s.info);
    write::after_write(&s.hub, &s.info, &key, Some(&v)).await;
    Ok(respond_object(s, StatusCode::CREATED, v))
}

/// How an update or patch turns the current object into the new one.
pub enum Change {
    Replace(Value),
    Patch { content_type: String, body: Bytes },
}

pub async fn update(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    let name = s.name.clone().expect("update has a name");
    let mut obj = body_object(s, &body)?;
    if s.subresource.as_deref() != Some("scale") {
        match obj.pointer("/metadata/name").and_then(Value::as_str) {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )))
            }
            Some(_) => {}
            None => obj["metadata"]["name"] = Value::String(name.clone()),
        }
    }
    modify(s, &name, Change::Replace(obj), StatusCode::OK).await
}

pub async fn patch(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    let name = s.name.clone().expect("patch has a name");
    let ct = content_type(&s.headers);
    if body.len() > super::body::MAX_BODY {
        return Err(ApiError::too_large("the request body is larger than 3 MiB"));
    }
    modify(
        s,
        &name,
        Change::Patch {
            content_type: ct,
            body,
        },
        StatusCode::OK,
    )
    .await
}

/// Read-modify-write with retries on internal conflicts (GuaranteedUpdate).
async fn modify(s: &Scope, name: &str, change: Change, code: StatusCode) -> Result<Response, ApiError> {
    let key = s.key(name)?;
    for _attempt in 0..16 {
        let current = s.hub.store.get(&key);
        let current_value = current.as_ref().map(|c| served_value(c, &s.info));
        let outcome = write::compute_update(s, current_value.as_ref(), &change)?;
        let (new, expect_rv) = match outcome {
            write::Outcome::Unchanged(v) => return Ok(respond_sub(s, StatusCode::OK, v)),
            write::Outcome::Create(v) => {
                write::ensure_namespace_accepts(s)?;
                write::ensure_crd_accepts(s)?;
                if s.query.dry_run {
                    return Ok(respond_sub(s, StatusCode::CREATED, v));
                }
                let committed = match s.hub.store.put(key.clone(), Expect::Absent, v) {
                    Err(StoreError::AlreadyExists) => continue,
                    other => other.map_err(|e| store_error(s, name, e))?,
                };
                let stored = committed
                    .durable()
                    .await
                    .map_err(|e| store_error(s, name, e))?
                    .expect("object");
                let v = served_value(&stored, &s.info);
                write::after_write(&s.hub, &s.info, &key, Some(&v)).await;
                return Ok(respond_sub(s, StatusCode::CREATED, v));
            }
            write::Outcome::Update { new, client_rv } => (new, client_rv),
        };
        let current = current.expect("update outcome implies a current object");
        if let Some(rv) = expect_rv {
            if rv != current.rv {
                return Err(store_error(s, name, StoreError::Conflict));
            }
        }
        if s.query.dry_run {
            return Ok(respond_sub(s, code, new));
        }
        let finalized = write::is_finalized(&new);
        let result = if finalized {
            s.hub.store.delete(key.clone(), Expect::Version(current.rv))
        } else {
            s.hub.store.put(key.clone(), Expect::Version(current.rv), new)
        };
        let committed = match result {
            Err(StoreError::Conflict) if expect_rv.is_none() => continue,
            other => other.map_err(|e| store_error(s, name, e))?,
        };
        let stored = committed
            .durable()
            .await
            .map_err(|e| store_error(s, name, e))?
            .expect("object");
        let v = served_value(&stored, &s.info);
        if finalized {
            write::remove_contents(&s.hub, &s.info, &key, &v).await;
        }
        write::after_write(&s.hub, &s.info, &key, if finalized { None } else { Some(&v) }).await;
        return Ok(respond_sub(s, code, v));
    }
    Err(ApiError::conflict(
        &s.info.group,
        &s.info.resource,
        name,
        "too many concurrent writers; try again",
    ))
}

fn respond_sub(s: &Scope, code: StatusCode, v: Value) -> Response {
    if s.subresource.as_deref() == Some("scale") {
        json_value(code, &write::scale_of(&s.info, &v))
    } else {
        respond_object(s, code, v)
    }
}

/// `DeleteOptions` fields the hub honours.
#[derive(Default)]
struct DeleteOptions {
    uid: Option<String>,
    resource_version: Option<String>,
    dry_run: bool,
    /// What happens to the object's dependents; `None` when the request does not say.
    propagation: Option<PropagationPolicy>,
}

fn delete_options(s: &Scope, body: &Bytes) -> Result<DeleteOptions, ApiError> {
    let mut o = DeleteOptions {
        dry_run: s.query.dry_run,
        ..Default::default()
    };
    let v = if body.iter().all(|b| b.is_ascii_whitespace()) {
        None
    } else {
        Some(parse_object(body, &content_type(&s.headers))?)
    };
    o.propagation = policy::requested(
        s.query.propagation_policy.as_deref(),
        s.query.orphan_dependents,
        v.as_ref(),
    )
    .map_err(|causes| ApiError::invalid("meta.k8s.io", "DeleteOptions", "", causes))?;
    let Some(v) = v else { return Ok(o) };
    o.uid = v
        .pointer("/preconditions/uid")
        .and_then(Value::as_str)
        .map(String::from);
    o.resource_version = v
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
        .map(String::from);
    if let Some(d) = v.get("dryRun").and_then(Value::as_array) {
        o.dry_run |= d.iter().any(|x| x == "All");
    }
    Ok(o)
}

pub async fn delete(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    let name = s.name.clone().expect("delete has a name");
    let opts = delete_options(s, &body)?;
    let key = s.key(&name)?;
    for _ in 0..16 {
        let current = s
            .hub
            .store
            .get(&key)
            .ok_or_else(|| ApiError::not_found(&s.info.group, &s.info.resource, &name))?;
        let v = served_value(&current, &s.info);
        if let Some(uid) = &opts.uid {
            if v.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
                return Err(ApiError::conflict(
                    &s.info.group,
                    &s.info.resource,
                    &name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        v["metadata"]["uid"]
                    ),
                ));
            }
        }
        if let Some(rv) = &opts.resource_version {
            if *rv != current.rv.to_string() {
                return Err(ApiError::conflict(
                    &s.info.group,
                    &s.info.resource,
                    &name,
                    &format!("Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", current.rv),
                ));
            }
        }
        let deleted =
            write::delete_object(&s.hub, &s.info, &key, &current, v, opts.dry_run, opts.propagation).await;
        match deleted {
            Err(write::DeleteError::Conflict) => continue,
            Err(write::DeleteError::Store(e)) => return Err(store_error(s, &name, e)),
            Ok(v) => return Ok(respond_object(s, StatusCode::OK, v)),
        }
    }
    Err(ApiError::conflict(
        &s.info.group,
        &s.info.resource,
        &name,
        "too many concurrent writers; try again",
    ))
}

pub async fn delete_collection(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    let opts = delete_options(s, &body)?;
    let sel = Selectors::parse(&s.query)?;
    s.cluster()?;
    let (objects, rv) = s
        .hub
        .store
        .list(&s.scope(), &s.info.storage_key(), s.namespace.as_deref(), None);
    let mut deleted = Vec::new();
    for (key, obj) in objects.iter().filter(|(k, o)| sel.matches(k, o)) {
        let v = served_value(obj, &s.info);
        match write::delete_object(&s.hub, &s.info, key, obj, v, opts.dry_run, opts.propagation).await {
            Ok(v) => deleted.push(v),
            Err(write::DeleteError::Conflict) | Err(write::DeleteError::Store(StoreError::NotFound)) => {}
            Err(write::DeleteError::Store(e)) => return Err(store_error(s, &key.name, e)),
        }
    }
    Ok(json_value(
        StatusCode::OK,
        &json!({"kind": s.info.list_kind, "apiVersion": s.info.api_version(),
                "metadata": {"resourceVersion": rv.to_string()}, "items": deleted}),
    ))
}

/// Route a resource request by method.
pub async fn serve(s: Scope, method: &Method, body: Bytes) -> Result<Response, ApiError> {
    let has_name = s.name.is_some();
    match (method.as_str(), has_name) {
        ("GET", true) => get(&s).await,
        ("GET", false) if s.query.watch => super::watch::watch(s).await,
        ("GET", false) => list(&s).await,
        ("POST", false) => create(&s, body).await,
        ("POST", true) if s.subresource.is_some() => create(&s, body).await,
        ("PUT", true) => update(&s, body).await,
        ("PATCH", true) => patch(&s, body).await,
        ("DELETE", true) => delete(&s, body).await,
        ("DELETE", false) => delete_collection(&s, body).await,
        (m, _) => Err(ApiError::method_not_allowed(format!(
            "{m} is not supported on {}{}",
            s.info.resource,
            if has_name { "/<name>" } else { "" }
        ))),
    }
}
