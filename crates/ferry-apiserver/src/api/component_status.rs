//! `componentstatuses` (core/v1, deprecated since 1.19 and still served by
//! kube-apiserver): computed on every read, never stored, `get` and `list`
//! only, each answer carrying kube-apiserver's deprecation warning.
//!
//! The hub runs in one process what a cluster runs as separate components,
//! so it reports kube's three names, healthy whenever it can answer:
//! `scheduler` and `controller-manager` (the hub's built-in controllers) and
//! `etcd-0` (its store).

use axum::response::Response;
use http::{HeaderValue, Method, StatusCode};
use serde_json::{json, Map, Value};

use super::body::json_value;
use super::negotiate::Format;
use super::objects::{columns, respond_object, Scope, Selectors};
use crate::registry::ResourceInfo;
use crate::status::ApiError;
use crate::table::{render_table, IncludeObject};

/// kube-apiserver's `Warning` header on every ComponentStatus response.
pub const DEPRECATION_WARNING: &str = "299 - \"v1 ComponentStatus is deprecated in v1.19+\"";

/// The components reported, in kube-apiserver's order.
pub const COMPONENTS: &[&str] = &["scheduler", "controller-manager", "etcd-0"];

/// Whether `info` is the resource answered here.
pub fn serves(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.resource == "componentstatuses"
}

fn component(name: &str) -> Value {
    json!({
        "kind": "ComponentStatus",
        "apiVersion": "v1",
        "metadata": {"name": name},
        "conditions": [{"type": "Healthy", "status": "True", "message": "ok"}],
    })
}

/// GET of one component or the list; anything else is 405.
pub fn serve(s: &Scope, method: &Method) -> Result<Response, ApiError> {
    if method != Method::GET || s.query.watch || s.subresource.is_some() {
        return Err(ApiError::verb_not_served());
    }
    let mut response = match &s.name {
        Some(name) if COMPONENTS.contains(&name.as_str()) => {
            respond_object(s, StatusCode::OK, component(name))
        }
        Some(name) => return Err(ApiError::not_found("", "componentstatuses", name)),
        None => list(s)?,
    };
    response
        .headers_mut()
        .insert("warning", HeaderValue::from_static(DEPRECATION_WARNING));
    Ok(response)
}

fn list(s: &Scope) -> Result<Response, ApiError> {
    let sel = Selectors::parse(&s.query, &s.info)?;
    let no_labels = Default::default();
    let items: Vec<Value> = COMPONENTS
        .iter()
        .filter(|name| {
            sel.labels.matches(&no_labels)
                && sel.fields.matches(|f| match f {
                    "metadata.name" => Some(name.to_string()),
                    _ => None,
                })
        })
        .map(|name| component(name))
        .collect();
    let body = match s.format {
        Format::Object => {
            json!({"kind": "ComponentStatusList", "apiVersion": "v1", "metadata": {}, "items": items})
        }
        Format::Metadata => {
            let items: Vec<Value> = items
                .iter()
                .map(|c| json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": c["metadata"]}))
                .collect();
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": {}, "items": items})
        }
        Format::Table => {
            let include = match s.query.include_object.as_deref() {
                Some("None") => IncludeObject::None,
                Some("Object") => IncludeObject::Object,
                _ => IncludeObject::Metadata,
            };
            render_table(&columns(&s.info), &items, include, Map::new(), chrono::Utc::now())
        }
    };
    Ok(json_value(StatusCode::OK, &body))
}
