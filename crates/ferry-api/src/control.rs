//! `control.kubestellar.io/v1alpha1`: KubeStellar's `CustomTransform`
//! (cluster-scoped, in the workload description space: a WMW). It names a
//! resource (`spec.apiGroup`, `spec.resource`) and the fields every copy of
//! that resource's objects loses on its way to every workload cluster
//! (`spec.remove`). Ferry adds `spec.ownedDownstream`, OCM's
//! `ignoreFields`: fields the workload cluster's own controllers and webhooks
//! set, which the syncer leaves alone on the copy, so the two never fight.
//! Paths use the syntax of [`crate::field_path`].
//!
//! `ownedDownstream` travels with each copy as the annotation
//! [`OWNED_DOWNSTREAM_ANNOTATION`], which a user may also put on a single
//! object (the only way in the kcp TMC profile).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::field_path::{self, FieldPath, MAX_PATHS, MAX_PATH_BYTES};

/// The API group.
pub const GROUP: &str = "control.kubestellar.io";
/// The API version.
pub const VERSION: &str = "v1alpha1";

pub use crate::well_known::OWNED_DOWNSTREAM_ANNOTATION;

/// Most `ownedDownstream` entries.
pub const MAX_OWNED_RULES: usize = 8;

/// A user transform: what copies of one resource's objects lose, and what
/// the workload cluster owns on them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CustomTransform {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: CustomTransformSpec,
}

/// What a [`CustomTransform`] applies to and does.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CustomTransformSpec {
    /// The API group of the resource (`""` for the core group).
    #[serde(default)]
    pub api_group: String,
    /// The resource, as its plural lowercase name (`deployments`).
    #[serde(default)]
    pub resource: String,
    /// Fields every copy loses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// Fields the workload cluster owns once it has them or changes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned_downstream: Vec<OwnedDownstream>,
}

/// Fields the syncer leaves alone on a copy, and when (OCM's `ignoreFields`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct OwnedDownstream {
    /// `OnSpokePresent`: once the copy has the field, it is the cluster's for
    /// good (a value changed at the source no longer goes down either).
    /// `OnSpokeChange`: a change made on the copy stays until the source
    /// object changes, whose next copy carries the source's value again.
    pub condition: OwnedCondition,
    /// The fields.
    pub json_paths: Vec<String>,
}

/// When a field is the workload cluster's.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OwnedCondition {
    #[default]
    OnSpokePresent,
    OnSpokeChange,
}

/// [`OwnedDownstream`] with its paths parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnedFields {
    pub condition: OwnedCondition,
    pub paths: Vec<FieldPath>,
}

/// Reads [`OWNED_DOWNSTREAM_ANNOTATION`] of `obj`, keeping what is valid:
/// a malformed entry or path is skipped (the object's owner wrote it; a copy
/// is never held up by it), and at most [`MAX_OWNED_RULES`] entries of
/// [`MAX_PATHS`] paths count.
pub fn owned_downstream_of(obj: &Value) -> Vec<OwnedFields> {
    let Some(text) = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(OWNED_DOWNSTREAM_ANNOTATION))
        .and_then(Value::as_str)
    else {
        return Vec::new();
    };
    let Ok(Value::Array(entries)) = serde_json::from_str::<Value>(text) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .take(MAX_OWNED_RULES)
        .filter_map(|e| serde_json::from_value::<OwnedDownstream>(e).ok())
        .map(|rule| OwnedFields {
            condition: rule.condition,
            paths: rule
                .json_paths
                .iter()
                .take(MAX_PATHS)
                .filter_map(|p| FieldPath::parse(p).ok())
                .collect(),
        })
        .filter(|r| !r.paths.is_empty())
        .collect()
}

/// The annotation value for `rules` (paths printed in their normal form).
pub fn owned_downstream_annotation(rules: &[OwnedFields]) -> String {
    let entries: Vec<Value> = rules
        .iter()
        .map(|r| {
            let paths: Vec<String> = r.paths.iter().map(ToString::to_string).collect();
            json!({"condition": r.condition, "jsonPaths": paths})
        })
        .collect();
    Value::Array(entries).to_string()
}

/// What is wrong with a CustomTransform's spec: `(field, message)` pairs, each
/// naming the entry and the fix. Empty when it may be stored.
pub fn spec_problems(spec: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let strings = |v: Option<&Value>| -> Option<Vec<String>> {
        v.and_then(Value::as_array).map(|items| {
            items
                .iter()
                .map(|i| i.as_str().unwrap_or("").to_string())
                .collect()
        })
    };
    if spec
        .get("resource")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        out.push((
            "spec.resource".into(),
            "name the resource by its plural lowercase name, e.g. deployments".into(),
        ));
    }
    if let Some(remove) = strings(spec.get("remove")) {
        if let Err((field, e)) = field_path::parse_list("spec.remove", &remove) {
            out.push((field, e.0));
        }
    }
    if let Some(rules) = spec.get("ownedDownstream").and_then(Value::as_array) {
        if rules.len() > MAX_OWNED_RULES {
            out.push((
                "spec.ownedDownstream".into(),
                format!("{} entries, the limit is {MAX_OWNED_RULES}", rules.len()),
            ));
            return out;
        }
        for (i, rule) in rules.iter().enumerate() {
            let field = format!("spec.ownedDownstream[{i}]");
            match rule.get("condition").and_then(Value::as_str) {
                Some("OnSpokePresent" | "OnSpokeChange") => {}
                _ => out.push((
                    format!("{field}.condition"),
                    "supported values: \"OnSpokePresent\", \"OnSpokeChange\"".into(),
                )),
            }
            let paths = strings(rule.get("jsonPaths")).unwrap_or_default();
            if paths.is_empty() {
                out.push((format!("{field}.jsonPaths"), "list at least one path".into()));
            } else if let Err((f, e)) = field_path::parse_list(&format!("{field}.jsonPaths"), &paths) {
                out.push((f, e.0));
            }
        }
    }
    out
}

impl CustomTransform {
    pub const KIND: &'static str = "CustomTransform";
    pub const GROUP: &'static str = GROUP;
    pub const VERSION: &'static str = VERSION;
    pub const PLURAL: &'static str = "customtransforms";

    /// The CRD (cluster-scoped). Its schema bounds the lists and checks the
    /// path syntax, so a kcp or Kubernetes API server refuses what the hub
    /// refuses by syntax.
    pub fn crd() -> CustomResourceDefinition {
        let path = json!({
            "type": "string",
            "maxLength": MAX_PATH_BYTES,
            "pattern": r#"^\$?(\.[^.\[\]]+|\['[^']+'\]|\["[^"]+"\]|\[[0-9]+\]|\[\*\])+$"#,
        });
        let owned = json!({
            "type": "array", "maxItems": MAX_OWNED_RULES,
            "description": "Fields the syncer leaves alone on a copy: OnSpokePresent once the copy has them, OnSpokeChange once changed on the copy (until the source changes).",
            "items": {
                "type": "object",
                "required": ["condition", "jsonPaths"],
                "properties": {
                    "condition": {"type": "string", "enum": ["OnSpokePresent", "OnSpokeChange"]},
                    "jsonPaths": {"type": "array", "minItems": 1, "maxItems": MAX_PATHS, "items": path},
                },
            },
        });
        let spec = json!({
            "type": "object",
            "required": ["resource"],
            "properties": {
                "apiGroup": {"type": "string", "description": "API group of the resource; empty for the core group."},
                "resource": {"type": "string", "description": "The resource, by its plural lowercase name (deployments)."},
                "remove": {
                    "type": "array", "maxItems": MAX_PATHS, "items": path,
                    "description": "Paths removed from every copy: $ then .name, ['name'], [N] or [*] steps, e.g. $.spec.template.spec.nodeSelector.",
                },
                "ownedDownstream": owned,
            },
        });
        crate::crd_builder::hand_written_crd(
            (Self::GROUP, Self::VERSION, Self::KIND, Self::PLURAL),
            "Cluster",
            json!({
                "type": "object",
                "description": "KubeStellar's CustomTransform: fields removed from every copy of one resource's objects on their way to workload clusters, and (Ferry's addition, OCM's ignoreFields) fields the workload clusters own.",
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    "spec": spec,
                },
            }),
            json!([
                {"name": "Group", "type": "string", "jsonPath": ".spec.apiGroup"},
                {"name": "Resource", "type": "string", "jsonPath": ".spec.resource"},
                {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            ]),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_annotation_reads_back_what_was_written_and_skips_what_is_malformed() {
        let rules = vec![OwnedFields {
            condition: OwnedCondition::OnSpokeChange,
            paths: vec![FieldPath::parse("$.spec.replicas").unwrap()],
        }];
        let obj = json!({"metadata": {"annotations": {OWNED_DOWNSTREAM_ANNOTATION: owned_downstream_annotation(&rules)}}});
        assert_eq!(owned_downstream_of(&obj), rules);
        let odd = json!({"metadata": {"annotations": {OWNED_DOWNSTREAM_ANNOTATION:
            r#"[{"condition":"Sometimes","jsonPaths":["$.a"]},{"condition":"OnSpokePresent","jsonPaths":["$.kind","$.spec.x"]},7]"#}}});
        let read = owned_downstream_of(&odd);
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].paths, vec![FieldPath::parse("$.spec.x").unwrap()]);
        for text in ["", "{", "null", "{\"a\":1}"] {
            let obj = json!({"metadata": {"annotations": {OWNED_DOWNSTREAM_ANNOTATION: text}}});
            assert!(owned_downstream_of(&obj).is_empty(), "{text}");
        }
    }

    #[test]
    fn spec_problems_name_the_entry_and_the_fix() {
        assert!(
            spec_problems(&json!({"apiGroup": "apps", "resource": "deployments",
            "remove": ["$.spec.template.spec.nodeSelector"],
            "ownedDownstream": [{"condition": "OnSpokePresent", "jsonPaths": ["$.spec.replicas"]}]}))
            .is_empty()
        );
        let problems = spec_problems(&json!({"apiGroup": "apps",
            "remove": ["$.spec.ok", "$.spec[x]"],
            "ownedDownstream": [{"condition": "Never", "jsonPaths": []}]}));
        let fields: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.resource",
                "spec.remove[1]",
                "spec.ownedDownstream[0].condition",
                "spec.ownedDownstream[0].jsonPaths"
            ]
        );
    }
}
