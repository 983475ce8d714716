//! What an update or patch makes of the current object: the four patch
//! types, server-side apply, and the scale subresource's view.

use bytes::Bytes;
use serde_json::{json, Value};

use super::prepare::{prepare_with, WriteKind};
use super::Request;
use crate::hub::Hub;
use crate::json;
use crate::patch;
use crate::registry::ResourceInfo;
use crate::status::{ApiError, Cause};

/// The patch formats of `PATCH` (their media types are the HTTP side's business).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// RFC 6902 (`application/json-patch+json`).
    Json,
    /// RFC 7386 (`application/merge-patch+json`).
    Merge,
    /// Kubernetes' strategic merge patch; built-in kinds only.
    StrategicMerge,
    /// Server-side apply (`application/apply-patch+yaml`).
    Apply,
}

/// How an update or patch turns the current object into the new one.
pub enum Change {
    Replace(Value),
    Patch { patch_type: PatchType, body: Bytes },
}

/// The result of applying an update or patch to the current object.
pub enum Outcome {
    /// Nothing would change: no write, the current object is returned.
    Unchanged(Value),
    /// Server-side apply of an object that does not exist yet.
    Create(Value),
    /// Write `new`; `client_rv` is the resourceVersion the client required
    /// (when it is not the current one, `new` is left unprepared: the write
    /// is a conflict).
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
    let mut meta = serde_json::Map::new();
    for f in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(x) = v.get("metadata").and_then(|m| m.get(f)) {
            meta.insert(f.into(), x.clone());
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
    let mut status = serde_json::Map::new();
    status.insert("replicas".into(), at(&paths.status_replicas).unwrap_or(json!(0)));
    if let Some(sel) = paths
        .label_selector
        .as_deref()
        .and_then(at)
        .or(selector.map(Value::String))
    {
        status.insert("selector".into(), sel);
    }
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta,
        "spec": { "replicas": at(&paths.spec_replicas).unwrap_or(json!(0)) },
        "status": status,
    })
}

fn with_scale(info: &ResourceInfo, cur: &Value, scale: &Value) -> Result<Value, ApiError> {
    let path = info
        .scale_subresource
        .as_ref()
        .map(|p| p.spec_replicas.clone())
        .unwrap_or(".spec.replicas".into());
    let mut new = cur.clone();
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    let replicas = scale.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
    json::set(&mut new, &parts, replicas).map_err(|e| ApiError::unprocessable_patch(e.to_string()))?;
    Ok(new)
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
pub fn compute_update(s: &Request, current: Option<&Value>, change: &Change) -> Result<Outcome, ApiError> {
    let info = &s.info;
    let name = s.name.as_deref().unwrap_or_default();
    let not_found = || ApiError::not_found(&info.group, &info.resource, name);
    let scale = s.subresource.as_deref() == Some("scale");
    let (new, client_rv, tracked) = match change {
        Change::Replace(obj) => {
            let cur = current.ok_or_else(not_found)?;
            let client_rv = parse_rv(obj)?;
            let obj = if scale {
                with_scale(info, cur, obj)?
            } else {
                obj.clone()
            };
            (obj, client_rv, true)
        }
        Change::Patch {
            patch_type: PatchType::Apply,
            body,
        } => {
            if s.subresource.is_some() && s.subresource.as_deref() != Some("status") {
                return Err(ApiError::unsupported_media_type(
                    "apply patches are not supported on this subresource",
                ));
            }
            let mut applied = crate::decode::object_from_bytes(body, true)?;
            crate::decode::check_metadata(&applied, &info.kind, &info.version)?;
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
            json::remove(&mut applied, &["metadata", "managedFields"]);
            if s.info.namespaced {
                if let Some(ns) = &s.namespace {
                    json::set(
                        &mut applied,
                        &["metadata", "namespace"],
                        Value::String(ns.clone()),
                    )?;
                }
            }
            json::set(
                &mut applied,
                &["metadata", "name"],
                Value::String(name.to_string()),
            )?;
            json::set(&mut applied, &["apiVersion"], Value::String(info.api_version()))?;
            let client_rv = parse_rv(&applied)?;
            let result = patch::server_side_apply(
                current,
                &applied,
                &s.manager(),
                s.options.force,
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
        Change::Patch { patch_type, body } => {
            let cur = current.ok_or_else(not_found)?;
            let base = if scale { scale_of(info, cur) } else { cur.clone() };
            let patched = match patch_type {
                PatchType::Json => patch::json_patch(&base, body).map_err(patch_error)?,
                PatchType::Merge => patch::merge_patch(&base, body).map_err(patch_error)?,
                PatchType::StrategicMerge if !info.from_crd => {
                    patch::strategic_merge_patch(&base, body, &info.group, &info.kind).map_err(patch_error)?
                }
                PatchType::StrategicMerge | PatchType::Apply => {
                    return Err(unsupported_patch(info, "application/strategic-merge-patch+json"))
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
                with_scale(info, cur, &patched)?
            } else {
                let mut patched = patched;
                let aside = crate::decode::UncheckedManagedFields::set_aside(&mut patched, Some(cur));
                crate::decode::check_metadata(&patched, &info.kind, &info.version)?;
                aside.put_back(&mut patched);
                patched
            };
            (obj, None, true)
        }
    };
    let cur = current.ok_or_else(not_found)?;
    if client_rv.is_some() && client_rv != parse_rv(cur)? {
        // Stale: a conflict before anything judges the content, as in kube,
        // where GuaranteedUpdate's precondition precedes the strategy and
        // validating admission. The caller refuses it (catching up first
        // with a shared store).
        return Ok(Outcome::Update { new, client_rv });
    }
    let new = prepare_with(s, WriteKind::Update, Some(cur), new, tracked)?;
    if without_volatile(&new) == without_volatile(cur) {
        return Ok(Outcome::Unchanged(cur.clone()));
    }
    Ok(Outcome::Update { new, client_rv })
}

/// kube-apiserver's 415 for a patch format the resource does not take.
pub fn unsupported_patch(info: &ResourceInfo, media_type: &str) -> ApiError {
    ApiError::unsupported_media_type(format!(
        "the body of the request was in an unknown format ({media_type}) - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml{}",
        if info.from_crd {
            ""
        } else {
            ", application/strategic-merge-patch+json"
        }
    ))
}

fn apply_error(s: &Request, name: &str, e: patch::ApplyError) -> ApiError {
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
/// then removed from storage instead of written. Its strategy may still
/// hold it (a namespace's `spec.finalizers`).
pub fn is_finalized(hub: &Hub, info: &ResourceInfo, v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp").is_some()
        && v.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|f| f.is_empty())
        && !crate::strategy::for_resource(hub, info).held_after_finalizers(v)
}
