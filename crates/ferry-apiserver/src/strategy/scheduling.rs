//! scheduling.k8s.io/v1 PriorityClasses: kube-apiserver's default
//! (`preemptionPolicy: PreemptLowerPriority`), validation, immutable
//! `value` and `preemptionPolicy`, and its `Priority` admission plugin's
//! rule that one PriorityClass at most is the global default, and that a new
//! Pod sets no `priority` or `preemptionPolicy` other than its class gives.

use serde_json::{json, Value};

use crate::json::str_at;
use crate::request::Request;
use crate::status::{ApiError, Cause};
use crate::strategy::core::pod_spec::{default_field, object_at};
use crate::strategy::workload::immutable;
use crate::strategy::Strategy;
use crate::validation::not_supported;

pub struct PriorityClassStrategy;

/// The highest value a user's PriorityClass may have; higher ones are the
/// system's.
const HIGHEST_USER_DEFINABLE: i64 = 1_000_000_000;

/// The system PriorityClasses kube-apiserver creates: name and value.
const SYSTEM_CLASSES: &[(&str, i64)] = &[
    ("system-node-critical", 2_000_001_000),
    ("system-cluster-critical", 2_000_000_000),
];

fn defaults(obj: &mut Value) {
    if let Some(o) = object_at(obj, &[]) {
        default_field(o, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
}

/// Why a `system-` name is not one of the system's classes, if it is not.
fn unknown_system_class(name: &str, value: i64, global_default: bool) -> Option<String> {
    match SYSTEM_CLASSES.iter().find(|(n, _)| *n == name) {
        None => Some(format!("{name} is not a known system priority class")),
        Some((_, v)) if *v != value => Some(format!("value of {name} PriorityClass must be {v}")),
        Some(_) if global_default => Some(format!("globalDefault of {name} PriorityClass must be false")),
        Some(_) => None,
    }
}

pub fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = str_at(obj, "/metadata/name");
    let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
    let global_default = obj.get("globalDefault").and_then(Value::as_bool).unwrap_or(false);
    if name.starts_with("system-") {
        if let Some(why) = unknown_system_class(name, value, global_default) {
            causes.push(Cause::forbidden(
                "metadata.name",
                format!(
                    "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: {why}"
                ),
            ));
        }
    } else if value > HIGHEST_USER_DEFINABLE {
        causes.push(Cause::forbidden(
            "value",
            format!(
                "Forbidden: maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}"
            ),
        ));
    }
    if let Some(p) = obj.get("preemptionPolicy").filter(|p| !p.is_null()) {
        let supported = ["Never", "PreemptLowerPriority"];
        if !p.as_str().is_some_and(|s| supported.contains(&s)) {
            causes.push(not_supported("preemptionPolicy", p, &supported));
        }
    }
    causes
}

pub fn validate_update(old: &Value, obj: &Value) -> Vec<Cause> {
    let mut causes = validate(obj);
    if old.get("value") != obj.get("value") {
        causes.push(Cause::forbidden(
            "value",
            "Forbidden: may not be changed in an update.",
        ));
    }
    causes.extend(immutable(old, obj, "/preemptionPolicy", "preemptionPolicy"));
    causes
}

impl Strategy for PriorityClassStrategy {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        defaults(obj);
        Ok(())
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        defaults(obj);
        Ok(())
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        validate(obj)
    }

    fn validate_update(&self, _r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        validate_update(old, obj)
    }

    /// kube's `Priority` admission plugin: a second global default is
    /// forbidden (403, as the plugin answers), in one workspace.
    fn admit(&self, r: &Request, _old: Option<&Value>, obj: &Value) -> Result<(), ApiError> {
        if !obj.get("globalDefault").and_then(Value::as_bool).unwrap_or(false) {
            return Ok(());
        }
        let Some(cluster) = &r.cluster else {
            return Ok(());
        };
        let name = str_at(obj, "/metadata/name");
        let scope = crate::storage::ClusterScope::One(cluster.name.clone());
        let (objects, _) = r.hub.store.list(&scope, &r.info.storage_key(), None, None);
        let existing = objects.into_iter().find(|(key, o)| {
            key.name != name
                && o.value()
                    .get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
        });
        match existing {
            Some((key, _)) => Err(ApiError::forbidden(format!(
                "priorityclasses.scheduling.k8s.io {name:?} is forbidden: PriorityClass {} is already marked as default. Only one default can exist",
                key.name
            ))),
            None => Ok(()),
        }
    }
}

/// The storage key of PriorityClasses.
const PRIORITY_CLASSES: &str = "scheduling.k8s.io/priorityclasses";

/// kube's `Priority` admission plugin on a new Pod (403, as the plugin
/// answers): a `spec.priority` or `spec.preemptionPolicy` other than what the
/// pod's PriorityClass (or the workspace's global default class, or none)
/// gives is refused, so a copy carrying another cluster's is refused here too.
/// A class the workspace does not hold is left to the scheduler.
pub fn admit_pod(r: &Request, pod: &Value) -> Result<(), ApiError> {
    let Some(cluster) = &r.cluster else {
        return Ok(());
    };
    let class_name = str_at(pod, "/spec/priorityClassName");
    let class = if class_name.is_empty() {
        let scope = crate::storage::ClusterScope::One(cluster.name.clone());
        let (classes, _) = r.hub.store.list(&scope, PRIORITY_CLASSES, None, None);
        classes
            .into_iter()
            .map(|(_, o)| o.value())
            .filter(|c| c.get("globalDefault").and_then(Value::as_bool) == Some(true))
            .min_by_key(|c| c.get("value").and_then(Value::as_i64).unwrap_or(0))
    } else {
        let key = crate::storage::ObjectKey {
            cluster: cluster.name.clone(),
            resource: PRIORITY_CLASSES.into(),
            namespace: String::new(),
            name: class_name.into(),
        };
        match r.hub.store.get(&key) {
            Some(o) => Some(o.value()),
            None => match SYSTEM_CLASSES.iter().find(|(n, _)| *n == class_name) {
                Some((_, value)) => Some(json!({"value": value})),
                None => return Ok(()),
            },
        }
    };
    match pod_priority_refusal(pod, class.as_ref()) {
        None => Ok(()),
        Some(why) => Err(ApiError::forbidden(format!(
            "pods {:?} is forbidden: {why}",
            str_at(pod, "/metadata/name")
        ))),
    }
}

/// Why kube's `Priority` admission plugin refuses new pod `pod` whose class
/// resolves to `class` (`None`: no class and no global default, priority 0),
/// in the plugin's words; `None` when it admits it.
pub fn pod_priority_refusal(pod: &Value, class: Option<&Value>) -> Option<String> {
    let computed = class
        .and_then(|c| c.get("value"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let policy = class
        .and_then(|c| c.get("preemptionPolicy"))
        .and_then(Value::as_str)
        .unwrap_or("PreemptLowerPriority");
    let spec = pod.get("spec")?;
    if let Some(priority) = spec.get("priority").filter(|p| !p.is_null()) {
        if priority.as_i64() != Some(computed) {
            return Some(format!(
                "the integer value of priority ({priority}) must not be provided in pod spec; priority admission controller computed {computed} from the given PriorityClass name"
            ));
        }
    }
    match spec.get("preemptionPolicy").and_then(Value::as_str) {
        Some(sent) if sent != policy => Some(format!(
            "the string value of PreemptionPolicy ({sent}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_limits() {
        let mut pc = json!({"metadata": {"name": "high"}, "value": 1000});
        defaults(&mut pc);
        assert_eq!(pc["preemptionPolicy"], "PreemptLowerPriority");
        assert!(validate(&pc).is_empty());
        pc["value"] = json!(HIGHEST_USER_DEFINABLE + 1);
        assert_eq!(
            validate(&pc)[0].describe(),
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        );
        let system = json!({"metadata": {"name": "system-node-critical"}, "value": 2_000_001_000});
        assert!(validate(&system).is_empty());
        let fake = json!({"metadata": {"name": "system-mine"}, "value": 1});
        assert!(validate(&fake)[0]
            .message
            .ends_with("system-mine is not a known system priority class"));
    }

    #[test]
    fn a_pod_may_carry_only_the_priority_its_class_gives() {
        let pod = |spec: Value| json!({"metadata": {"name": "p"}, "spec": spec});
        let high = json!({"value": 1000, "preemptionPolicy": "Never"});
        assert_eq!(
            pod_priority_refusal(&pod(json!({"containers": []})), Some(&high)),
            None
        );
        assert_eq!(
            pod_priority_refusal(
                &pod(json!({"priority": 1000, "preemptionPolicy": "Never"})),
                Some(&high)
            ),
            None
        );
        assert_eq!(
            pod_priority_refusal(&pod(json!({"priority": 7})), Some(&high)).unwrap(),
            "the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name"
        );
        assert_eq!(
            pod_priority_refusal(&pod(json!({"preemptionPolicy": "PreemptLowerPriority"})), Some(&high)).unwrap(),
            "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; priority admission controller computed Never from the given PriorityClass name"
        );
        // No class and no global default: priority 0.
        assert_eq!(pod_priority_refusal(&pod(json!({"priority": 0})), None), None);
        assert!(pod_priority_refusal(&pod(json!({"priority": 2000000000})), None).is_some());
    }

    #[test]
    fn value_and_preemption_policy_are_immutable() {
        let old = json!({"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"});
        let new =
            json!({"metadata": {"name": "high"}, "value": 2000, "preemptionPolicy": "PreemptLowerPriority"});
        let described: Vec<String> = validate_update(&old, &new).iter().map(Cause::describe).collect();
        assert_eq!(
            described,
            [
                "value: Forbidden: may not be changed in an update.",
                "preemptionPolicy: Invalid value: \"PreemptLowerPriority\": field is immutable"
            ]
        );
    }
}
