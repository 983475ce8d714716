//! Per-kind defaults and server-maintained fields (what kube-apiserver's
//! registry strategies do), for the kinds where clients rely on them.

use base64::Engine;
use serde_json::{json, Value};

use super::prepare::WriteKind;
use super::Request;
use crate::json::{self, PathError};
use crate::status::ApiError;
use crate::workspace::cluster_name_for;

pub fn mutate(s: &Request, kind: WriteKind, old: Option<&Value>, new: &mut Value) -> Result<(), ApiError> {
    match (s.info.group.as_str(), s.info.resource.as_str()) {
        ("", "namespaces") => namespace(kind, new)?,
        ("", "secrets") => secret(new)?,
        ("apps", "deployments" | "replicasets" | "statefulsets") | ("", "replicationcontrollers")
            if new.get("spec").is_some_and(Value::is_object) && new.pointer("/spec/replicas").is_none() =>
        {
            json::set(new, &["spec", "replicas"], json!(1))?;
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => crd(new)?,
        ("tenancy.kcp.io", "workspaces") => workspace(s, old, new)?,
        _ => {}
    }
    Ok(())
}

fn namespace(kind: WriteKind, new: &mut Value) -> Result<(), PathError> {
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    json::set(
        new,
        &["metadata", "labels", "kubernetes.io/metadata.name"],
        Value::String(name),
    )?;
    if kind == WriteKind::Create {
        if new.pointer("/spec/finalizers").is_none() {
            json::set(new, &["spec", "finalizers"], json!(["kubernetes"]))?;
        }
        json::set(new, &["status"], json!({"phase": "Active"}))?;
    }
    Ok(())
}

/// `stringData` is write-only: merged into `data` (base64) and dropped.
fn secret(new: &mut Value) -> Result<(), PathError> {
    if let Some(Value::Object(sd)) = json::remove(new, &["stringData"]) {
        let data = json::object_mut(new, &["data"])?;
        for (k, v) in sd {
            let text = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
            data.insert(
                k,
                Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
    if new.get("type").is_none() {
        json::set(new, &["type"], json!("Opaque"))?;
    }
    Ok(())
}

/// A CRD is established as soon as it is stored: the hub serves it at once.
fn crd(new: &mut Value) -> Result<(), PathError> {
    let mut accepted = match new.pointer("/spec/names") {
        Some(Value::Object(names)) => names.clone(),
        _ => serde_json::Map::new(),
    };
    if let Some(k) = accepted.get("kind").and_then(Value::as_str).map(String::from) {
        accepted
            .entry("singular")
            .or_insert_with(|| json!(k.to_ascii_lowercase()));
        accepted
            .entry("listKind")
            .or_insert_with(|| json!(format!("{k}List")));
    }
    let storage: Vec<Value> = new
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage") == Some(&json!(true)))
                .map(|v| v.get("name").cloned().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    let now = ferry_api::timestamp::now();
    let condition = |t: &str, reason: &str, message: &str| json!({"type": t, "status": "True", "lastTransitionTime": now, "reason": reason, "message": message});
    json::set(
        new,
        &["status"],
        json!({
            "acceptedNames": accepted,
            "storedVersions": storage,
            "conditions": [
                condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ],
        }),
    )
}

/// kcp's Workspace: the hub assigns the logical cluster and marks it Ready.
fn workspace(s: &Request, old: Option<&Value>, new: &mut Value) -> Result<(), PathError> {
    let Some(parent) = &s.cluster else { return Ok(()) };
    let name = new
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let path = format!("{}:{name}", parent.path);
    let cluster = match old
        .and_then(|o| o.pointer("/spec/cluster"))
        .and_then(Value::as_str)
    {
        Some(c) => c.to_string(),
        None => {
            let uid = new
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or_default();
            cluster_name_for(&path, uid)
        }
    };
    let spec = json::object_mut(new, &["spec"])?;
    spec.insert("cluster".into(), json!(cluster));
    spec.insert(
        "URL".into(),
        json!(format!("{}/clusters/{path}", s.hub.external_url())),
    );
    spec.entry("type")
        .or_insert_with(|| json!({"name": "universal", "path": "root"}));
    json::set(
        new,
        &["status"],
        json!({
            "phase": "Ready",
            "conditions": [{"type": "WorkspaceScheduled", "status": "True", "lastTransitionTime": ferry_api::timestamp::now()}],
        }),
    )
}
