//! get, list, create, update, patch, delete and deletecollection over HTTP:
//! bodies, media types, query options and the representations of answers
//! (Table, PartialObjectMetadata, Scale, `Warning` headers). The work is the
//! object service's ([`crate::service`]).

use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use serde_json::{json, Map, Value};

use super::body::{content_type, json_value, parse_object};
use super::negotiate::Format;
use super::query::Query;
use crate::registry::field_labels::FieldLabels;
use crate::registry::ResourceInfo;
use crate::selector::{FieldSelector, LabelSelector};
use crate::service::change::{scale_of, unsupported_patch};
use crate::service::propagation as policy;
pub use crate::service::served_value;
use crate::service::{self, DeleteOptions, PatchType};
use crate::status::ApiError;
use crate::storage::{ObjectKey, StoredObject};
use crate::table::{builtin_columns, render_table, IncludeObject};

/// Everything a resource request is about: the object service's request
/// plus how the client wants the answer.
pub struct Scope {
    pub request: service::Request,
    pub query: Query,
    pub format: Format,
    pub headers: HeaderMap,
}

/// A scope is read as the service request it carries (`s.hub`, `s.info`,
/// `s.key(..)`, ...); the HTTP parts are its own fields.
impl std::ops::Deref for Scope {
    type Target = service::Request;
    fn deref(&self) -> &service::Request {
        &self.request
    }
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

/// The Table columns of `info`'s objects: its own (a CRD's, or those a
/// layer above gave its built-in kind), else the default for its sort.
pub fn columns(info: &ResourceInfo) -> Vec<crate::table::PrinterColumn> {
    if !info.printer_columns.is_empty() {
        info.printer_columns.clone()
    } else if info.from_crd {
        crate::table::crd_columns(&Value::Null)
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
    // Subresources as discovery lists them: GET where it lists `get`.
    if let Some(sub) = s.subresource.as_deref() {
        match crate::discovery::subresource_verbs(&s.info, sub) {
            None => return Err(unknown_subresource(s, sub)),
            Some(verbs) if !verbs.contains(&"get") => return Err(ApiError::verb_not_served()),
            Some(_) => {}
        }
    }
    read_current(s).await?;
    let v = service::get(s)?;
    match s.subresource.as_deref() {
        Some("scale") => Ok(json_value(StatusCode::OK, &scale_of(&s.info, &v))),
        // status, approval, ephemeralcontainers: views of the whole object.
        _ => Ok(respond_object(s, StatusCode::OK, v)),
    }
}

pub fn unknown_subresource(s: &Scope, sub: &str) -> ApiError {
    ApiError::not_found_message(format!(
        "the server could not find the requested resource: {}/{sub} is not served",
        s.info.resource
    ))
}

pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    /// What the field selector may name, and the values objects have.
    field_labels: FieldLabels,
}

impl Selectors {
    /// Parse the request's selectors for `info`; a field selector naming a
    /// field label the resource does not support is a 400, as in kube-apiserver.
    pub fn parse(q: &Query, info: &ResourceInfo) -> Result<Selectors, ApiError> {
        let labels = LabelSelector::parse(&q.label_selector).map_err(|e| {
            ApiError::bad_request(format!("invalid labelSelector {:?}: {e}", q.label_selector))
        })?;
        let fields = FieldSelector::parse(&q.field_selector).map_err(|e| {
            ApiError::bad_request(format!("invalid fieldSelector {:?}: {e}", q.field_selector))
        })?;
        let field_labels = FieldLabels::of(info);
        for field in fields.fields() {
            field_labels.check(field).map_err(ApiError::bad_request)?;
        }
        Ok(Selectors {
            labels,
            fields,
            field_labels,
        })
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
            label => self.field_labels.value(parsed.get_or_init(|| obj.value()), label),
        })
    }
}

/// How long a read waits for the hub's cache to catch up with etcd.
const CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// A read of the newest state (no resourceVersion): with etcd, the cache
/// first takes in whatever another replica wrote before the request came.
pub(super) async fn read_current(s: &Scope) -> Result<(), ApiError> {
    s.hub
        .store
        .catch_up(CATCH_UP_WAIT)
        .await
        .map_err(ApiError::service_unavailable)
}

/// What a list's `resourceVersion` and `resourceVersionMatch` ask for, as
/// kube-apiserver reads them: unset means the newest; `0` means any;
/// `N` (or `NotOlderThan`) means at least `N`, which the hub waits briefly for
/// when it has not reached it (then 504, never an older list); `Exact` means
/// exactly `N`, which the hub can serve only while `N` is the newest (410
/// for an older one: no snapshots are kept).
async fn consistent_list_at(s: &Scope) -> Result<(), ApiError> {
    let rv = s.query.resource_version.as_deref();
    let rv_match = s.query.resource_version_match.as_deref();
    let invalid = |message: String| {
        ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::status::Cause::forbidden("resourceVersionMatch", message)],
        )
    };
    let Some(rv) = rv else {
        return match rv_match {
            Some(_) => Err(invalid(
                "resourceVersionMatch is forbidden unless resourceVersion is provided".into(),
            )),
            None => read_current(s).await,
        };
    };
    if rv_match.is_some() && s.query.continue_token.is_some() {
        return Err(invalid(
            "resourceVersionMatch is forbidden when continue is provided".into(),
        ));
    }
    let asked: u64 = rv
        .parse()
        .map_err(|_| ApiError::bad_request(format!("resourceVersion: invalid value {rv:?}")))?;
    match rv_match {
        None | Some("NotOlderThan") => {}
        Some("Exact") if asked == 0 => {
            return Err(invalid(
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into(),
            ))
        }
        Some("Exact") => {}
        Some(other) => {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                vec![crate::status::Cause::unsupported(
                    "resourceVersionMatch",
                    format!("Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""),
                )],
            ))
        }
    }
    let current = s.hub.store.resource_version();
    if asked > current {
        s.hub
            .store
            .wait_for(asked, super::watch::FUTURE_RV_WAIT)
            .await
            .map_err(|current| ApiError::resource_version_too_large(asked, current))?;
    }
    if rv_match == Some("Exact") {
        let current = s.hub.store.resource_version();
        if asked < current {
            return Err(ApiError::gone(format!(
                "too old resource version: {asked} ({current}); the hub serves lists at its newest resourceVersion only"
            )));
        }
    }
    Ok(())
}

pub async fn list(s: &Scope) -> Result<Response, ApiError> {
    let sel = Selectors::parse(&s.query, &s.info)?;
    if s.query.continue_token.is_none() {
        consistent_list_at(s).await?;
    }
    let page = service::list(s, s.query.limit, s.query.continue_token.as_deref(), |k, o| {
        sel.matches(k, o)
    })?;
    let (items, rv, next) = (page.items, page.resource_version, page.continue_token);
    let mut meta = Map::new();
    meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    if let Some(c) = &next {
        meta.insert("continue".into(), Value::String(c.clone()));
    }
    let response = match s.format {
        Format::Object => {
            // Splice the stored JSON: no parse, no re-serialise (unless a custom
            // resource's stored apiVersion is not the served one).
            let api_version = s.info.api_version();
            let mut body = serde_json::to_vec(&json!({
                "kind": s.info.list_kind, "apiVersion": api_version, "metadata": meta,
            }))
            .expect("serialisable");
            body.pop();
            body.reserve(items.iter().map(|(_, o)| o.json.len() + 1).sum::<usize>() + 16);
            body.extend_from_slice(b",\"items\":[");
            for (i, (_, o)) in items.iter().enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                match service::served_json(o, &s.info, &api_version) {
                    Some(json) => body.extend_from_slice(json),
                    None => {
                        serde_json::to_writer(&mut body, &served_value(o, &s.info)).expect("serialisable")
                    }
                }
            }
            body.extend_from_slice(b"]}");
            super::body::json_response(StatusCode::OK, body)
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

/// Parse the body of a create or update as the media type it says it is.
fn body_object(s: &Scope, body: &Bytes) -> Result<Value, ApiError> {
    parse_object(body, &content_type(&s.headers))
}

pub async fn create(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    if let Some(sub) = s.subresource.as_deref() {
        return super::special::create_subresource(s, sub, body).await;
    }
    let obj = body_object(s, &body)?;
    let written = service::create(s, obj).await?;
    Ok(respond_written(s, written))
}

pub async fn update(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    let obj = body_object(s, &body)?;
    let written = service::update(s, obj).await?;
    Ok(respond_written(s, written))
}

/// The patch format a PATCH's media type names.
fn patch_type(s: &Scope) -> Result<PatchType, ApiError> {
    Ok(match content_type(&s.headers).as_str() {
        "application/json-patch+json" => PatchType::Json,
        "application/merge-patch+json" => PatchType::Merge,
        "application/strategic-merge-patch+json" => PatchType::StrategicMerge,
        "application/apply-patch+yaml" => PatchType::Apply,
        other => return Err(unsupported_patch(&s.info, other)),
    })
}

pub async fn patch(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    if body.len() > super::body::MAX_BODY {
        return Err(ApiError::too_large("the request body is larger than 3 MiB"));
    }
    let written = service::patch(s, patch_type(s)?, body).await?;
    Ok(respond_written(s, written))
}

fn respond_written(s: &Scope, written: service::Written) -> Response {
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut response = if s.subresource.as_deref() == Some("scale") {
        json_value(code, &scale_of(&s.info, &written.object))
    } else {
        respond_object(s, code, written.object)
    };
    for warning in &written.warnings {
        // RFC 7234's warn-code 299 ("miscellaneous persistent warning"), as kube-apiserver sends.
        let quoted = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = http::HeaderValue::from_str(&format!("299 - \"{quoted}\"")) {
            response.headers_mut().append(http::header::WARNING, value);
        }
    }
    response
}

/// The `DeleteOptions` of a DELETE: its query and (optional) body.
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

/// Resources whose kube-apiserver storage answers a DELETE with the deleted
/// object (`ReturnDeletedObject`); every other resource, custom resources
/// included, answers an object removed at once with a `Success` Status naming
/// it, which clients such as kube-rs read as "deleted now".
const RETURNS_DELETED_OBJECT: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("", "pods"),
    ("", "podtemplates"),
    ("", "resourcequotas"),
    ("", "services"),
    ("", "serviceaccounts"),
    ("resource.k8s.io", "deviceclasses"),
    ("resource.k8s.io", "devicetaintrules"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.k8s.io", "resourceclaimtemplates"),
    ("resource.k8s.io", "resourceslices"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "volumeattachments"),
    ("storage.k8s.io", "volumeattributesclasses"),
];

pub async fn delete(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    let opts = delete_options(s, &body)?;
    let v = service::delete(s, &opts).await?;
    let removed = v.pointer("/metadata/deletionTimestamp").is_none();
    let returns_object = RETURNS_DELETED_OBJECT.contains(&(s.info.group.as_str(), s.info.resource.as_str()));
    if removed && !returns_object {
        return Ok(json_value(StatusCode::OK, &deleted_status(&s.info, &v)));
    }
    Ok(respond_object(s, StatusCode::OK, v))
}

/// kube-apiserver's answer to a DELETE that removed `obj` at once.
fn deleted_status(info: &ResourceInfo, obj: &Value) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": {
            "name": obj.pointer("/metadata/name").cloned().unwrap_or(Value::Null),
            "group": info.group,
            // kube-apiserver puts the resource here, as it says, "Yes we set Kind field to resource."
            "kind": info.resource,
            "uid": obj.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
        },
    })
}

pub async fn delete_collection(s: &Scope, body: Bytes) -> Result<Response, ApiError> {
    let opts = delete_options(s, &body)?;
    let sel = Selectors::parse(&s.query, &s.info)?;
    let (deleted, rv) = service::delete_collection(s, &opts, |k, o| sel.matches(k, o)).await?;
    Ok(json_value(
        StatusCode::OK,
        &json!({"kind": s.info.list_kind, "apiVersion": s.info.api_version(),
                "metadata": {"resourceVersion": rv.to_string()}, "items": deleted}),
    ))
}

/// Route a resource request by method.
pub async fn serve(s: Scope, method: &Method, body: Bytes) -> Result<Response, ApiError> {
    let has_name = s.name.is_some();
    // A write to a subresource the kind does not have (`/status` of a
    // ConfigMap, or of a CRD without the status subresource) is a 404, as
    // kube-apiserver answers: it must not write the object.
    if let (Some(sub), "PUT" | "PATCH") = (s.subresource.as_deref(), method.as_str()) {
        let verb = if method == Method::PUT { "update" } else { "patch" };
        match crate::discovery::subresource_verbs(&s.info, sub) {
            None => return Err(unknown_subresource(&s, sub)),
            Some(verbs) if !verbs.contains(&verb) => return Err(ApiError::verb_not_served()),
            Some(_) => {}
        }
    }
    // A workspace's own view (not the wildcard, not a virtual workspace's).
    if let (Some(lc), None) = (&s.cluster, &s.visibility) {
        service::hooks::before_serving(&s.hub, &s.info, &lc.name).await;
    }
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
