//! admissionregistration.k8s.io/v1: webhook configurations and admission
//! policies with kube-apiserver's v1 defaults and the validation users hit.
//! The hub stores them and calls no webhook and evaluates no policy: they
//! are written into a workspace to be placed onto real clusters.

use serde_json::{json, Map, Value};

use crate::json::str_at;
use crate::request::Request;
use crate::status::{ApiError, Cause};
use crate::strategy::core::pod_spec::{default_field, object_at};
use crate::strategy::Strategy;
use crate::validation::names::dns1123_subdomain_errors;
use crate::validation::{duplicate, invalid_value, not_supported, required_because};

/// Which of the two webhook configuration kinds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Webhooks {
    Mutating,
    Validating,
}

pub static MUTATING_WEBHOOKS: Webhooks = Webhooks::Mutating;
pub static VALIDATING_WEBHOOKS: Webhooks = Webhooks::Validating;

const ADMISSION_REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];

/// kube's `SetDefaults_{Mutating,Validating}Webhook`, `SetDefaults_Rule`
/// and `SetDefaults_ServiceReference`.
fn default_webhook(hook: &mut Map<String, Value>, kind: Webhooks) {
    default_field(hook, "failurePolicy", json!("Fail"));
    default_field(hook, "matchPolicy", json!("Equivalent"));
    default_field(hook, "namespaceSelector", json!({}));
    default_field(hook, "objectSelector", json!({}));
    default_field(hook, "timeoutSeconds", json!(10));
    if kind == Webhooks::Mutating {
        default_field(hook, "reinvocationPolicy", json!("Never"));
    }
    if let Some(Value::Array(rules)) = hook.get_mut("rules") {
        for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
            default_field(rule, "scope", json!("*"));
        }
    }
    if let Some(service) = hook
        .get_mut("clientConfig")
        .and_then(|c| c.get_mut("service"))
        .and_then(Value::as_object_mut)
    {
        default_field(service, "port", json!(443));
    }
}

fn default_webhooks(obj: &mut Value, kind: Webhooks) {
    if let Some(Value::Array(hooks)) = obj.get_mut("webhooks") {
        for hook in hooks.iter_mut().filter_map(Value::as_object_mut) {
            default_webhook(hook, kind);
        }
    }
}

/// A value that, when set, must be one of `supported`.
fn one_of(obj: &Value, pointer: &str, field: &str, supported: &[&str]) -> Option<Cause> {
    let v = obj.pointer(pointer).filter(|v| !v.is_null())?;
    (!v.as_str().is_some_and(|s| supported.contains(&s))).then(|| not_supported(field, v, supported))
}

/// A list that must hold at least one item.
fn non_empty(obj: &Value, pointer: &str, field: &str) -> Option<Cause> {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
        .then(|| Cause::required(field))
}

/// kube's `IsFullyQualifiedName`: a webhook's name.
fn fully_qualified_name(name: &str, field: &str) -> Vec<Cause> {
    if name.is_empty() {
        return vec![Cause::required(field)];
    }
    let mut causes: Vec<Cause> = dns1123_subdomain_errors(&name.to_ascii_lowercase())
        .into_iter()
        .map(|e| Cause::invalid(field, invalid_value(&json!(name), &e)))
        .collect();
    if name.split('.').count() < 3 {
        causes.push(Cause::invalid(
            field,
            invalid_value(
                &json!(name),
                "should be a domain with at least three segments separated by dots",
            ),
        ));
    }
    causes
}

fn validate_rule(rule: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    match rule.get("operations").and_then(Value::as_array) {
        Some(ops) if !ops.is_empty() => {
            for (i, op) in ops.iter().enumerate() {
                let supported = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
                if !op.as_str().is_some_and(|s| supported.contains(&s)) {
                    causes.push(not_supported(&format!("{at}.operations[{i}]"), op, &supported));
                }
            }
        }
        _ => causes.push(Cause::required(format!("{at}.operations"))),
    }
    for list in ["apiGroups", "apiVersions", "resources"] {
        causes.extend(non_empty(rule, &format!("/{list}"), &format!("{at}.{list}")));
    }
    causes.extend(one_of(
        rule,
        "/scope",
        &format!("{at}.scope"),
        &["*", "Cluster", "Namespaced"],
    ));
    causes
}

fn validate_webhook(hook: &Value, at: &str, kind: Webhooks) -> Vec<Cause> {
    let mut causes = fully_qualified_name(str_at(hook, "/name"), &format!("{at}.name"));
    for (i, rule) in hook
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        causes.extend(validate_rule(rule, &format!("{at}.rules[{i}]")));
    }
    causes.extend(one_of(
        hook,
        "/failurePolicy",
        &format!("{at}.failurePolicy"),
        &["Fail", "Ignore"],
    ));
    causes.extend(one_of(
        hook,
        "/matchPolicy",
        &format!("{at}.matchPolicy"),
        &["Equivalent", "Exact"],
    ));
    // v1 accepts only webhooks without side effects (or that skip dry runs).
    let side_effects = ["None", "NoneOnDryRun"];
    match hook.get("sideEffects") {
        None | Some(Value::Null) => causes.push(required_because(
            &format!("{at}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        Some(_) => causes.extend(one_of(
            hook,
            "/sideEffects",
            &format!("{at}.sideEffects"),
            &side_effects,
        )),
    }
    if let Some(t) = hook.get("timeoutSeconds").filter(|t| !t.is_null()) {
        if !t.as_i64().is_some_and(|t| (1..=30).contains(&t)) {
            causes.push(Cause::invalid(
                format!("{at}.timeoutSeconds"),
                invalid_value(t, "the timeout value must be between 1 and 30 seconds"),
            ));
        }
    }
    if kind == Webhooks::Mutating {
        causes.extend(one_of(
            hook,
            "/reinvocationPolicy",
            &format!("{at}.reinvocationPolicy"),
            &["IfNeeded", "Never"],
        ));
    }
    let has = |p: &str| hook.pointer(p).is_some_and(|v| !v.is_null());
    if has("/clientConfig/url") == has("/clientConfig/service") {
        causes.push(required_because(
            &format!("{at}.clientConfig"),
            "exactly one of url or service is required",
        ));
    }
    causes.extend(admission_review_versions(
        hook.get("admissionReviewVersions"),
        &format!("{at}.admissionReviewVersions"),
    ));
    causes
}

/// A webhook must name at least one AdmissionReview version the API server
/// speaks, each once.
fn admission_review_versions(versions: Option<&Value>, field: &str) -> Vec<Cause> {
    let versions: Vec<&Value> = versions.and_then(Value::as_array).into_iter().flatten().collect();
    if versions.is_empty() {
        return vec![required_because(
            field,
            &format!("must specify one of {}", ADMISSION_REVIEW_VERSIONS.join(", ")),
        )];
    }
    let mut causes = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        if versions[..i].contains(v) {
            causes.push(Cause::invalid(
                format!("{field}[{i}]"),
                invalid_value(v, "duplicate version"),
            ));
        }
    }
    if !versions
        .iter()
        .any(|v| v.as_str().is_some_and(|s| ADMISSION_REVIEW_VERSIONS.contains(&s)))
    {
        let all = Value::Array(versions.into_iter().cloned().collect());
        causes.push(Cause::invalid(
            field,
            invalid_value(
                &all,
                &format!(
                    "must include at least one of {}",
                    ADMISSION_REVIEW_VERSIONS.join(", ")
                ),
            ),
        ));
    }
    causes
}

/// Every webhook of a configuration, and their names unique.
pub fn validate_webhooks(obj: &Value, kind: Webhooks) -> Vec<Cause> {
    let hooks: &[Value] = obj
        .get("webhooks")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let mut causes = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        causes.extend(validate_webhook(hook, &format!("webhooks[{i}]"), kind));
        let name = str_at(hook, "/name");
        if !name.is_empty() && hooks[..i].iter().any(|h| str_at(h, "/name") == name) {
            causes.push(duplicate(&format!("webhooks[{i}].name"), &json!(name)));
        }
    }
    causes
}

impl Strategy for Webhooks {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        default_webhooks(obj, *self);
        Ok(())
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        default_webhooks(obj, *self);
        Ok(())
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        validate_webhooks(obj, *self)
    }
}

/// Which admission policy kind.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Validating,
    Mutating,
}

pub static VALIDATING_POLICY: Policy = Policy::Validating;
pub static MUTATING_POLICY: Policy = Policy::Mutating;

/// kube's `SetDefaults_*AdmissionPolicySpec` and `SetDefaults_MatchResources`.
fn default_policy(obj: &mut Value) {
    let Some(spec) = object_at(obj, &["spec"]) else {
        return;
    };
    default_field(spec, "failurePolicy", json!("Fail"));
    if let Some(mc) = spec.get_mut("matchConstraints").and_then(Value::as_object_mut) {
        default_field(mc, "matchPolicy", json!("Equivalent"));
        default_field(mc, "namespaceSelector", json!({}));
        default_field(mc, "objectSelector", json!({}));
    }
}

/// The rules of an admission policy users hit: its failure policy, what it
/// matches, and that it says something to check or change.
pub fn validate_policy(obj: &Value, kind: Policy) -> Vec<Cause> {
    let mut causes = Vec::new();
    causes.extend(one_of(
        obj,
        "/spec/failurePolicy",
        "spec.failurePolicy",
        &["Fail", "Ignore"],
    ));
    match obj.pointer("/spec/matchConstraints") {
        None | Some(Value::Null) => causes.push(Cause::required("spec.matchConstraints")),
        Some(mc) => {
            causes.extend(non_empty(
                mc,
                "/resourceRules",
                "spec.matchConstraints.resourceRules",
            ));
            causes.extend(one_of(
                mc,
                "/matchPolicy",
                "spec.matchConstraints.matchPolicy",
                &["Equivalent", "Exact"],
            ));
        }
    }
    match kind {
        Policy::Validating => {
            let empty = |p: &str| obj.pointer(p).and_then(Value::as_array).is_none_or(Vec::is_empty);
            if empty("/spec/validations") && empty("/spec/auditAnnotations") {
                let why = "validations or auditAnnotations must contain at least one item";
                causes.push(required_because("spec.validations", why));
                causes.push(required_because("spec.auditAnnotations", why));
            }
        }
        Policy::Mutating => {
            causes.extend(non_empty(obj, "/spec/mutations", "spec.mutations"));
            causes.extend(one_of(
                obj,
                "/spec/reinvocationPolicy",
                "spec.reinvocationPolicy",
                &["IfNeeded", "Never"],
            ));
        }
    }
    causes
}

impl Strategy for Policy {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        default_policy(obj);
        Ok(())
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        default_policy(obj);
        Ok(())
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        validate_policy(obj, *self)
    }
}

/// Admission policy bindings (both kinds).
pub struct PolicyBindingStrategy;

/// A binding names its policy; a validating one says what a failure does.
pub fn validate_binding(obj: &Value, validating: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    if str_at(obj, "/spec/policyName").is_empty() {
        causes.push(Cause::required("spec.policyName"));
    }
    if validating {
        let actions = obj.pointer("/spec/validationActions").and_then(Value::as_array);
        match actions {
            Some(a) if !a.is_empty() => {
                for (i, action) in a.iter().enumerate() {
                    let supported = ["Audit", "Deny", "Warn"];
                    if !action.as_str().is_some_and(|s| supported.contains(&s)) {
                        causes.push(not_supported(
                            &format!("spec.validationActions[{i}]"),
                            action,
                            &supported,
                        ));
                    } else if a[..i].contains(action) {
                        causes.push(duplicate(&format!("spec.validationActions[{i}]"), action));
                    }
                }
            }
            _ => causes.push(required_because(
                "spec.validationActions",
                "at least one validation action is required",
            )),
        }
    }
    causes
}

impl Strategy for PolicyBindingStrategy {
    fn validate(&self, r: &Request, obj: &Value) -> Vec<Cause> {
        validate_binding(obj, r.info.resource == "validatingadmissionpolicybindings")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook() -> Value {
        json!({
            "name": "validate.cert-manager.io",
            "clientConfig": {"service": {"name": "cm", "namespace": "cm"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["cert-manager.io"],
                       "apiVersions": ["v1"], "resources": ["*/*"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    }

    #[test]
    fn webhooks_get_kubes_defaults() {
        let mut obj = json!({"webhooks": [hook()]});
        default_webhooks(&mut obj, Webhooks::Mutating);
        let h = &obj["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["namespaceSelector"], json!({}));
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        assert!(validate_webhooks(&obj, Webhooks::Mutating).is_empty());
    }

    #[test]
    fn a_webhook_without_side_effects_or_review_versions_is_refused() {
        let mut h = hook();
        h.as_object_mut().unwrap().remove("sideEffects");
        h.as_object_mut().unwrap().remove("admissionReviewVersions");
        h["timeoutSeconds"] = json!(31);
        let causes = validate_webhooks(&json!({"webhooks": [h.clone(), h]}), Webhooks::Validating);
        let described: Vec<String> = causes.iter().map(Cause::describe).collect();
        assert!(described.contains(
            &"webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun".to_string()
        ));
        assert!(described.contains(
            &"webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1"
                .to_string()
        ));
        assert!(described.contains(
            &"webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds"
                .to_string()
        ));
        assert!(described
            .contains(&"webhooks[1].name: Duplicate value: \"validate.cert-manager.io\"".to_string()));
    }

    #[test]
    fn webhook_names_and_enums_are_checked() {
        let mut h = hook();
        h["name"] = json!("short.name");
        h["failurePolicy"] = json!("Sometimes");
        h["clientConfig"] = json!({});
        let described: Vec<String> = validate_webhooks(&json!({"webhooks": [h]}), Webhooks::Validating)
            .iter()
            .map(Cause::describe)
            .collect();
        assert!(described
            .iter()
            .any(|d| d.ends_with("at least three segments separated by dots")));
        assert!(described.contains(
            &"webhooks[0].failurePolicy: Unsupported value: \"Sometimes\": supported values: \"Fail\", \"Ignore\""
                .to_string()
        ));
        assert!(described.contains(
            &"webhooks[0].clientConfig: Required value: exactly one of url or service is required"
                .to_string()
        ));
    }

    #[test]
    fn policies_and_bindings() {
        let mut vap = json!({"spec": {"matchConstraints": {"resourceRules": [{}]},
                                      "validations": [{"expression": "true"}]}});
        default_policy(&mut vap);
        assert_eq!(vap["spec"]["failurePolicy"], "Fail");
        assert_eq!(vap["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
        assert!(validate_policy(&vap, Policy::Validating).is_empty());
        assert_eq!(validate_policy(&json!({"spec": {}}), Policy::Validating).len(), 3);
        assert_eq!(
            validate_binding(&json!({"spec": {"policyName": "p"}}), true)[0].describe(),
            "spec.validationActions: Required value: at least one validation action is required"
        );
        assert!(validate_binding(&json!({"spec": {"policyName": "p"}}), false).is_empty());
    }
}
