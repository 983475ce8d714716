//! CustomResourceDefinitions: validated as kube-apiserver does
//! ([`crate::validation::validate_crd`]) and established as soon as they
//! are stored — the hub serves a CRD's resources at once, so its status
//! (accepted names, stored versions, `NamesAccepted` and `Established`) is
//! set on every write.

use serde_json::{json, Value};

use crate::hub::Hub;
use crate::json;
use crate::propagation::{self, PropagationPolicy};
use crate::registry::ResourceInfo;
use crate::request::Request;
use crate::status::{ApiError, Cause};
use crate::strategy::Strategy;

pub struct CrdStrategy;

/// The binding in `cluster` that serves `group`/`resource`
/// ([`ResourceInfo::binding`]), if any: a CRD may not take a bound
/// resource's name.
fn bound_in(hub: &Hub, cluster: &str, group: &str, resource: &str) -> Option<String> {
    hub.registry
        .resources(Some(cluster))
        .into_iter()
        .find(|r| r.group == group && r.resource == resource && r.binding.is_some())
        .and_then(|r| r.binding)
}

/// The finalizer that holds a CRD being deleted until its custom resources
/// are gone (kube-apiserver adds it on delete; `controllers::crds` removes it).
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The condition a CRD being deleted carries while its custom resources go.
pub fn terminating_condition() -> Value {
    json!({
        "type": "Terminating", "status": "True",
        "lastTransitionTime": ferry_api::timestamp::now(),
        "reason": "InstanceDeletionInProgress",
        "message": "CustomResource deletion is in progress",
    })
}

fn established(obj: &mut Value) -> Result<(), ApiError> {
    let mut accepted = match obj.pointer("/spec/names") {
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
    let storage: Vec<Value> = obj
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
        obj,
        &["status"],
        json!({
            "acceptedNames": accepted,
            "storedVersions": storage,
            "conditions": [
                condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ],
        }),
    )?;
    Ok(())
}

impl Strategy for CrdStrategy {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        established(obj)
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        established(obj)
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        crate::validation::validate_crd(obj)
    }

    /// A resource an APIBinding serves here keeps its name: the CRD would
    /// silently take over the binding's objects.
    fn admit(&self, r: &Request, old: Option<&Value>, obj: &Value) -> Result<(), ApiError> {
        if old.is_some() {
            return Ok(());
        }
        let group = json::str_at(obj, "/spec/group");
        let plural = json::str_at(obj, "/spec/names/plural");
        match bound_in(&r.hub, &r.cluster()?.name, group, plural) {
            Some(binding) => Err(ApiError::conflict(
                "apiextensions.k8s.io",
                "customresourcedefinitions",
                json::str_at(obj, "/metadata/name"),
                &format!("{plural}.{group} is already served in this workspace by APIBinding {binding:?}; delete the binding first or pick another group"),
            )),
            None => Ok(()),
        }
    }

    /// A CRD is held until its custom resources are gone (kube-apiserver
    /// adds the clean-up finalizer when a CRD is deleted).
    fn finalizers_on_delete(
        &self,
        info: &ResourceInfo,
        current: &[String],
        deleting: bool,
        propagation: Option<PropagationPolicy>,
    ) -> Vec<String> {
        let mut finalizers =
            propagation::finalizers_on_delete(current, propagation, propagation::default_policy(info));
        if !deleting && !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_string());
        }
        finalizers
    }

    fn after_commit(&self, hub: &Hub, cluster: &str) {
        hub.refresh_crds(cluster);
    }

    fn prepare_for_delete(&self, obj: &mut Value) -> Result<(), ApiError> {
        let status = json::object_mut(obj, &["status"])?;
        let mut kept: Vec<Value> = match status.remove("conditions") {
            Some(Value::Array(c)) => c
                .into_iter()
                .filter(|c| c.get("type") != Some(&json!("Terminating")))
                .collect(),
            _ => Vec::new(),
        };
        kept.push(terminating_condition());
        status.insert("conditions".into(), json!(kept));
        Ok(())
    }
}
