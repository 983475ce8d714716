//! kcp TMC's kinds: `workload.kcp.io` SyncTarget, `scheduling.kcp.io`
//! Location and Placement, `apiresource.kcp.io` APIResourceImport. Their
//! schemas (from `ferry_api`) check types; these strategies add kcp's
//! defaults and the rules a schema cannot say, naming the field and the fix.
//! SyncTarget status belongs to `controllers::synctarget` (and the syncer's
//! heartbeat).

use serde_json::{json, Value};

use crate::grants::tmc as grant;
use crate::json;
use crate::kinds::apis::valid_path;
use crate::request::Request;
use crate::selector::{LabelSelector, SelectorLimits};
use crate::status::{ApiError, Cause};
use crate::strategy::{ratchet, Strategy};
use crate::synctarget::default_supported_exports;
use crate::validation::names::{label_value_errors, qualified_name_errors};

fn is_empty_list(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_none_or(Vec::is_empty)
}

fn path_cause(field: &str, path: &str) -> Option<Cause> {
    (!path.is_empty() && !valid_path(path)).then(|| {
        Cause::invalid(
            field,
            format!(
                "{path:?} is not a workspace path: lowercase segments separated by ':' (e.g. root:compute)"
            ),
        )
    })
}

/// A label selector at `field`, if set, must parse.
fn selector_causes(field: &str, selector: Option<&Value>) -> Vec<Cause> {
    match selector {
        None | Some(Value::Null) => Vec::new(),
        Some(s) => match LabelSelector::from_label_selector_json(s) {
            Ok(_) => Vec::new(),
            Err(e) => vec![Cause::invalid(field, e.to_string())],
        },
    }
}

/// kcp v0.11 accepts only SyncTargets as a Location's instances.
fn instance_resource_causes(field: &str, gvr: Option<&Value>) -> Vec<Cause> {
    let s = |k: &str| {
        gvr.and_then(|g| g.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let mut causes = Vec::new();
    for k in ["version", "resource"] {
        if s(k).is_empty() {
            causes.push(Cause::required(format!("{field}.{k}")));
        }
    }
    if causes.is_empty()
        && (s("group"), s("version"), s("resource")) != ("workload.kcp.io", "v1alpha1", "synctargets")
    {
        causes.push(Cause::unsupported(
            field,
            format!(
                "unsupported value {}: the only supported resource is group \"workload.kcp.io\", version \"v1alpha1\", resource \"synctargets\"",
                gvr.cloned().unwrap_or(Value::Null)
            ),
        ));
    }
    causes
}

/// `workload.kcp.io/v1alpha1` SyncTarget.
pub struct SyncTargetStrategy;

impl SyncTargetStrategy {
    fn default(obj: &mut Value) -> Result<(), ApiError> {
        if is_empty_list(obj.pointer("/spec/supportedAPIExports")) {
            json::set(obj, &["spec", "supportedAPIExports"], default_supported_exports())?;
        }
        Ok(())
    }
}

impl Strategy for SyncTargetStrategy {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        Self::default(obj)
    }

    fn prepare_for_update(&self, r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        if r.subresource.is_some() {
            return Ok(());
        }
        Self::default(obj)
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        for (i, e) in obj
            .pointer("/spec/supportedAPIExports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("spec.supportedAPIExports[{i}]");
            if json::str_at(e, "/export").is_empty() {
                causes.push(Cause::required(format!("{at}.export")));
            }
            causes.extend(path_cause(&format!("{at}.path"), json::str_at(e, "/path")));
        }
        causes
    }
}

/// `scheduling.kcp.io/v1alpha1` Location.
pub struct LocationStrategy;

impl Strategy for LocationStrategy {
    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        let over = location_limit_causes(obj);
        if !over.is_empty() {
            return over;
        }
        location_causes(obj)
    }

    fn validate_update(&self, _r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        let over = ratchet(location_limit_causes(obj), &location_limit_causes(old));
        if !over.is_empty() {
            return over;
        }
        location_causes(obj)
    }
}

fn location_limit_causes(obj: &Value) -> Vec<Cause> {
    let mut limits = SelectorLimits::default();
    limits.one("spec.instanceSelector", obj.pointer("/spec/instanceSelector"));
    limits.finish()
}

/// A Location's rules but its size limits.
fn location_causes(obj: &Value) -> Vec<Cause> {
    let mut causes = instance_resource_causes("spec.resource", obj.pointer("/spec/resource"));
    causes.extend(selector_causes(
        "spec.instanceSelector",
        obj.pointer("/spec/instanceSelector"),
    ));
    for (i, l) in obj
        .pointer("/spec/availableSelectorLabels")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("spec.availableSelectorLabels[{i}]");
        let key = json::str_at(l, "/key");
        if key.is_empty() {
            causes.push(Cause::required(format!("{at}.key")));
        } else {
            causes.extend(
                qualified_name_errors(key)
                    .into_iter()
                    .map(|m| Cause::invalid(format!("{at}.key"), format!("{key:?}: {m}"))),
            );
        }
        let values = l.get("values").and_then(Value::as_array);
        if values.is_none_or(Vec::is_empty) {
            causes.push(Cause::required(format!("{at}.values")));
        }
        for (j, v) in values.into_iter().flatten().enumerate() {
            let v = v.as_str().unwrap_or_default();
            causes.extend(
                label_value_errors(v)
                    .into_iter()
                    .map(|m| Cause::invalid(format!("{at}.values[{j}]"), format!("{v:?}: {m}"))),
            );
        }
    }
    causes
}

/// `scheduling.kcp.io/v1alpha1` Placement.
pub struct PlacementStrategy;

impl PlacementStrategy {
    fn default(obj: &mut Value) -> Result<(), ApiError> {
        let unset = obj
            .pointer("/spec/locationResource")
            .is_none_or(|v| v.is_null() || v.as_object().is_some_and(|m| m.is_empty()));
        if unset {
            let gvr = serde_json::to_value(ferry_api::scheduling::sync_targets_resource())
                .map_err(|e| ApiError::internal(e.to_string()))?;
            json::set(obj, &["spec", "locationResource"], gvr)?;
        }
        Ok(())
    }
}

impl Strategy for PlacementStrategy {
    fn prepare_for_create(&self, r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        Self::default(obj)?;
        if obj.pointer("/status/phase").is_none() {
            json::set(obj, &["status", "phase"], json!("Pending"))?;
        }
        record_requester(r, None, obj)
    }

    fn prepare_for_update(&self, r: &Request, old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        if r.subresource.is_some() {
            return record_requester(r, Some(old), obj);
        }
        Self::default(obj)?;
        record_requester(r, Some(old), obj)
    }

    /// Using another workspace's Locations needs a grant there ([`grant`]);
    /// checked whenever the spec is written, for its writer.
    fn admit(&self, r: &Request, old: Option<&Value>, obj: &Value) -> Result<(), ApiError> {
        if !spec_written(r, old, obj) || r.user.is_superuser() {
            return Ok(());
        }
        let cluster = r.cluster()?;
        let path = json::str_at(obj, "/spec/locationWorkspace");
        if path.is_empty() {
            return Ok(());
        }
        let lc = r.hub().workspaces.resolve(path);
        if lc.as_ref().is_some_and(|lc| lc.name == cluster.name) {
            return Ok(());
        }
        let granted = lc.is_some_and(|lc| grant::bindable_locations(r.hub(), &r.user, &lc).is_some());
        if granted {
            return Ok(());
        }
        Err(ApiError::forbidden(format!(
            "placements.scheduling.kcp.io {:?} is forbidden: spec.locationWorkspace: {}",
            json::str_at(obj, "/metadata/name"),
            grant::not_usable(path, &r.user.name)
        )))
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        // Sizes first: what is over them is not worth parsing.
        let over = placement_limit_causes(obj);
        if !over.is_empty() {
            return over;
        }
        placement_causes(obj)
    }

    fn validate_update(&self, _r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        let over = ratchet(placement_limit_causes(obj), &placement_limit_causes(old));
        if !over.is_empty() {
            return over;
        }
        placement_causes(obj)
    }
}

fn placement_limit_causes(obj: &Value) -> Vec<Cause> {
    let mut limits = SelectorLimits::default();
    limits.list("spec.locationSelectors", obj.pointer("/spec/locationSelectors"));
    limits.one("spec.namespaceSelector", obj.pointer("/spec/namespaceSelector"));
    limits.finish()
}

/// A Placement's rules but its size limits.
fn placement_causes(obj: &Value) -> Vec<Cause> {
    let mut causes = instance_resource_causes("spec.locationResource", obj.pointer("/spec/locationResource"));
    for (i, s) in obj
        .pointer("/spec/locationSelectors")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        causes.extend(selector_causes(&format!("spec.locationSelectors[{i}]"), Some(s)));
    }
    causes.extend(selector_causes(
        "spec.namespaceSelector",
        obj.pointer("/spec/namespaceSelector"),
    ));
    causes.extend(path_cause(
        "spec.locationWorkspace",
        json::str_at(obj, "/spec/locationWorkspace"),
    ));
    if let Some(selected) = obj.pointer("/status/selectedLocation").filter(|v| !v.is_null()) {
        if json::str_at(selected, "/locationName").is_empty() {
            causes.push(Cause::required("status.selectedLocation.locationName"));
        }
        let path = json::str_at(selected, "/path");
        if path.is_empty() {
            causes.push(Cause::required("status.selectedLocation.path"));
        }
        causes.extend(path_cause("status.selectedLocation.path", path));
    }
    causes
}

/// Whether this write makes its writer the Placement's requester: a
/// create, an update that changes the spec, or any update of a Placement
/// stored before requesters were recorded (which uses nothing of another
/// workspace until then). What the grant is checked for.
fn spec_written(r: &Request, old: Option<&Value>, obj: &Value) -> bool {
    match old {
        None => true,
        Some(old) => {
            r.subresource.is_none() && (old.get("spec") != obj.get("spec") || grant::requester(old).is_none())
        }
    }
}

/// [`grant::REQUESTER_ANNOTATION`]: the writer of the spec; kept as it was
/// on any other write. Never the client's to choose.
fn record_requester(r: &Request, old: Option<&Value>, obj: &mut Value) -> Result<(), ApiError> {
    let value = if spec_written(r, old, obj) {
        Some(Value::String(grant::record(&r.user)))
    } else {
        old.and_then(|o| o.pointer("/metadata/annotations"))
            .and_then(|a| a.get(grant::REQUESTER_ANNOTATION))
            .cloned()
    };
    match value {
        Some(v) => json::set(obj, &["metadata", "annotations", grant::REQUESTER_ANNOTATION], v)?,
        None => {
            json::remove(obj, &["metadata", "annotations", grant::REQUESTER_ANNOTATION]);
        }
    }
    Ok(())
}

/// The schema update strategies kcp knows; `UpdateUnpublished` is the default.
const SCHEMA_UPDATE_STRATEGIES: &[&str] = &["UpdateNever", "UpdateUnpublished", "UpdatePublished"];

/// `apiresource.kcp.io/v1alpha1` APIResourceImport.
pub struct ApiResourceImportStrategy;

impl ApiResourceImportStrategy {
    fn default(obj: &mut Value) -> Result<(), ApiError> {
        if json::str_at(obj, "/spec/schemaUpdateStrategy").is_empty() {
            json::set(obj, &["spec", "schemaUpdateStrategy"], json!("UpdateUnpublished"))?;
        }
        Ok(())
    }
}

impl Strategy for ApiResourceImportStrategy {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        Self::default(obj)
    }

    fn prepare_for_update(&self, r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        if r.subresource.is_some() {
            return Ok(());
        }
        Self::default(obj)
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        let s = |p: &str| json::str_at(obj, p);
        for (pointer, field) in [
            ("/spec/location", "spec.location"),
            ("/spec/groupVersion/version", "spec.groupVersion.version"),
            ("/spec/plural", "spec.plural"),
            ("/spec/kind", "spec.kind"),
        ] {
            if s(pointer).is_empty() {
                causes.push(Cause::required(field));
            }
        }
        match s("/spec/scope") {
            "Cluster" | "Namespaced" => {}
            "" => causes.push(Cause::required("spec.scope")),
            other => causes.push(Cause::unsupported(
                "spec.scope",
                format!("unsupported value {other:?}: supported values: \"Cluster\", \"Namespaced\""),
            )),
        }
        let strategy = s("/spec/schemaUpdateStrategy");
        if !strategy.is_empty() && !SCHEMA_UPDATE_STRATEGIES.contains(&strategy) {
            causes.push(Cause::unsupported(
                "spec.schemaUpdateStrategy",
                format!(
                    "unsupported value {strategy:?}: supported values: \"UpdateNever\", \"UpdateUnpublished\", \"UpdatePublished\""
                ),
            ));
        }
        match obj.pointer("/spec/openAPIV3Schema") {
            Some(Value::Object(m)) if !m.is_empty() => {}
            _ => causes.push(Cause::required("spec.openAPIV3Schema")),
        }
        for (i, sub) in obj
            .pointer("/spec/subResources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = json::str_at(sub, "/name");
            if !matches!(name, "status" | "scale") {
                causes.push(Cause::unsupported(
                    format!("spec.subResources[{i}].name"),
                    format!("unsupported value {name:?}: supported values: \"status\", \"scale\""),
                ));
            }
        }
        causes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(causes: &[Cause]) -> Vec<&str> {
        causes.iter().map(|c| c.field.as_str()).collect()
    }

    #[test]
    fn locations_hold_sync_targets_only() {
        let ok = json!({"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"});
        assert!(instance_resource_causes("spec.resource", Some(&ok)).is_empty());
        let missing = instance_resource_causes("spec.resource", Some(&json!({"group": "x"})));
        assert_eq!(
            fields(&missing),
            ["spec.resource.version", "spec.resource.resource"]
        );
        let other = json!({"group": "", "version": "v1", "resource": "nodes"});
        let wrong = instance_resource_causes("spec.resource", Some(&other));
        assert_eq!(fields(&wrong), ["spec.resource"]);
        assert!(wrong[0].message.contains("synctargets"), "{}", wrong[0].message);
    }

    #[test]
    fn selectors_and_paths_must_parse() {
        let bad = json!({"matchExpressions": [{"key": "a", "operator": "Sideways"}]});
        assert_eq!(selector_causes("spec.namespaceSelector", Some(&bad)).len(), 1);
        assert!(selector_causes(
            "spec.namespaceSelector",
            Some(&json!({"matchLabels": {"a": "b"}}))
        )
        .is_empty());
        assert!(path_cause("spec.locationWorkspace", "root:org").is_none());
        assert!(path_cause("spec.locationWorkspace", "Root/org").is_some());
    }

    #[test]
    fn an_empty_export_list_means_the_local_kubernetes_export() {
        let mut st = json!({"metadata": {"name": "east"}, "spec": {"supportedAPIExports": []}});
        SyncTargetStrategy::default(&mut st).unwrap();
        assert_eq!(st["spec"]["supportedAPIExports"], default_supported_exports());
        let mut st = json!({"metadata": {"name": "east"}, "spec": {"supportedAPIExports": [{"export": "x", "path": "root:a"}]}});
        SyncTargetStrategy::default(&mut st).unwrap();
        assert_eq!(st["spec"]["supportedAPIExports"][0]["export"], "x");
    }
}
