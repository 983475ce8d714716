//! Kubernetes Events (core/v1) about objects the syncer handles: failures on upstream
//! objects, adoptions on downstream ones.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::Value;

use crate::transform::ObjectType;

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug)]
pub enum EventType {
    /// Something the user may want to know.
    Normal,
    /// Something went wrong.
    Warning,
}

fn unique_suffix() -> u128 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    nanos + u128::from(COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Posts an Event about `obj` (of type `ty`) in the background; failures are only logged.
pub fn post(
    client: kube::Client,
    obj: &Value,
    ty: &ObjectType,
    event_type: EventType,
    reason: &str,
    message: String,
    reporter: &str,
) {
    let meta = obj.get("metadata").cloned().unwrap_or(Value::Null);
    let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_owned);
    let name = text("name").unwrap_or_default();
    let namespace = text("namespace");
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let event = Event {
        metadata: ObjectMeta {
            // client-go's recorder names events `<object>.<hex nanoseconds>`.
            name: Some(format!("{name}.{:x}", unique_suffix())),
            namespace: Some(namespace.clone().unwrap_or_else(|| "default".into())),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some(ty.api_version.clone()),
            kind: Some(ty.kind.clone()),
            name: Some(name.clone()),
            namespace: namespace.clone(),
            uid: text("uid"),
            resource_version: text("resourceVersion"),
            ..Default::default()
        },
        reason: Some(reason.to_string()),
        message: Some(message),
        type_: Some(
            match event_type {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        source: Some(EventSource {
            component: Some("ferry-syncer".into()),
            host: None,
        }),
        reporting_component: Some("ferry-syncer".into()),
        reporting_instance: Some(reporter.to_string()),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Default::default()
    };
    let api: Api<Event> = Api::namespaced(client, event.metadata.namespace.as_deref().unwrap_or("default"));
    crate::spawn(async move {
        if let Err(e) = api.create(&PostParams::default(), &event).await {
            tracing::warn!(object = %name, "could not post an Event: {e}");
        }
    });
}
