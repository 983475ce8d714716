//! The generic write sequence every kind goes through, as kube-apiserver's
//! generic registry store runs it: server-set metadata, the status/spec
//! split of the status subresource, generation, per-kind defaults (the
//! resource's strategy), validation, the RBAC escalation check and
//! managedFields.

use serde_json::{json, Value};

use super::reserved::ReservedMetadata;
use super::Request;
use crate::json;
use crate::patch;
use crate::status::{ApiError, Cause};
use crate::strategy::{self, Strategy};
use crate::validation::{self, NameRule};

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

fn meta_mut(v: &mut Value) -> Result<&mut serde_json::Map<String, Value>, ApiError> {
    Ok(json::object_mut(v, &["metadata"])?)
}

/// Turn what the client sent into what will be stored.
pub fn prepare(s: &Request, kind: WriteKind, old: Option<&Value>, new: Value) -> Result<Value, ApiError> {
    prepare_with(s, kind, old, new, true)
}

pub(super) fn prepare_with(
    s: &Request,
    kind: WriteKind,
    old: Option<&Value>,
    mut new: Value,
    track_update: bool,
) -> Result<Value, ApiError> {
    let info = &s.info;
    let strategy = strategy::for_resource(&s.hub, info);
    let sub = s.subresource.as_deref();
    if !info.from_crd {
        // Typed before anything else reads it; unknown fields are dropped (or refused).
        let aside = crate::decode::UncheckedManagedFields::set_aside(&mut new, old);
        let warnings = crate::decode::decode_typed(
            &mut new,
            &info.group,
            &info.kind,
            &info.version,
            s.options.field_validation,
            &s.options.duplicate_fields,
        )?;
        aside.put_back(&mut new);
        s.warnings.lock().extend(warnings);
    } else {
        let warnings = crate::decode::field_report(
            Vec::new(),
            &s.options.duplicate_fields,
            s.options.field_validation,
        )
        .map_err(ApiError::bad_request)?;
        s.warnings.lock().extend(warnings);
    }
    let now = ferry_api::timestamp::now();
    match (kind, old) {
        (WriteKind::Update, Some(old)) => {
            let by_strategy = sub.and_then(|sub| strategy.merge_subresource(sub, old, &new));
            match sub {
                _ if by_strategy.is_some() => {
                    if let Some(merged) = by_strategy {
                        new = merged?;
                    }
                }
                Some("status") => {
                    let mut merged = old.clone();
                    match new.get("status") {
                        Some(st) => json::set(&mut merged, &["status"], st.clone())?,
                        None => {
                            json::remove(&mut merged, &["status"]);
                        }
                    }
                    new = merged;
                }
                _ if info.status_subresource => match old.get("status") {
                    Some(st) => json::set(&mut new, &["status"], st.clone())?,
                    None => {
                        json::remove(&mut new, &["status"]);
                    }
                },
                _ => {}
            }
            let old_meta = old.get("metadata").cloned().unwrap_or_default();
            let deleting = old_meta.get("deletionTimestamp").is_some();
            let m = meta_mut(&mut new)?;
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
                    meta_mut(&mut new)?.insert("generation".into(), json!(g + 1));
                }
            }
        }
        _ => {
            if info.status_subresource {
                new.as_object_mut().map(|m| m.remove("status"));
            }
            let has_spec = new.get("spec").is_some() || info.from_crd;
            let m = meta_mut(&mut new)?;
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
    let annotation = s.hub.logical_cluster_objects().map(|o| o.annotation);
    if let (Some(cluster), Some(annotation)) = (&s.cluster, annotation) {
        let m = meta_mut(&mut new)?;
        let ann = m.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = ann.as_object_mut() {
            a.insert(annotation.into(), Value::String(cluster.name.clone()));
        }
    }
    // What the client changed, before the strategy adds the server's own.
    let reserved = s
        .hub
        .extensions
        .get::<ReservedMetadata>()
        .map_or(&[][..], |r| r.0);
    if let Some(refused) = super::reserved::refusal(reserved, super::reserved::Writer::of(s), old, &new) {
        let name = new
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return Err(ApiError::forbidden(format!(
            "{} {name:?} is forbidden: {}: reserved: {}; User {:?} may not add, change or remove it: leave it as it is",
            crate::auth::authorize::qualified(&info.group, &info.resource),
            refused.field,
            refused.owner,
            s.user.name
        )));
    }
    match (kind, old) {
        (WriteKind::Update, Some(old)) => strategy.prepare_for_update(s, old, &mut new)?,
        _ => strategy.prepare_for_create(s, &mut new)?,
    }
    validate(s, strategy, old, &mut new)?;
    // After validation, so a malformed object is told which field is wrong.
    strategy.admit(s, old, &new)?;
    strategy.canonicalize(&mut new);
    if track_update {
        let op_sub = sub.filter(|x| *x == "status");
        patch::record_update(old, &mut new, &s.manager(), "Update", op_sub, &now);
    }
    if !info.from_crd {
        // kube-apiserver's field order: kind, apiVersion, metadata, spec, status.
        crate::registry::key_order::canonicalize(&info.group, &info.kind, &mut new);
    }
    Ok(new)
}

/// Metadata, the schema (custom resources, which prunes unknown fields)
/// and the strategy's own rules; all failures answered at once.
fn validate(
    s: &Request,
    strategy: &dyn Strategy,
    old: Option<&Value>,
    new: &mut Value,
) -> Result<(), ApiError> {
    let info = &s.info;
    let mut causes = validation::validate_metadata(
        new,
        NameRule::for_resource(&info.group, &info.resource),
        info.namespaced,
    );
    if let Some(schema) = &info.schema {
        // Validate and prune a copy without metadata, so metadata is judged only once.
        let (schema_causes, pruned) = validation::validate_and_prune_reporting(schema, new);
        causes.extend(schema_causes);
        // Pruned fields are the unknown fields of a custom resource.
        if !pruned.is_empty() {
            let unknown = pruned.iter().map(|p| format!("unknown field {p:?}")).collect();
            let warnings = crate::decode::field_report(unknown, &[], s.options.field_validation)
                .map_err(ApiError::bad_request)?;
            s.warnings.lock().extend(warnings);
        }
        // CEL rules see the pruned, defaulted object, as in kube-apiserver;
        // only a structurally valid one, so rules need not guard types.
        if causes.is_empty() {
            causes.extend(validation::cel::validate(schema, new, old));
        }
    }
    causes.extend(match old {
        Some(old) => strategy.validate_update(s, old, new),
        None => strategy.validate(s, new),
    });
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
