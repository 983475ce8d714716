//! User transforms (KubeStellar's `CustomTransform`) applied to an object on
//! its way to workload clusters. Pure; shared by the two profiles that honour
//! them: the KubeStellar placement translator applies them once per WMW
//! object before copying it into mailboxes, and the kcp TMC syncer applies a
//! workload workspace's transforms to that workspace's objects as it copies
//! them down.
//!
//! The transforms applied to an object are always those of the object's own
//! workspace (logical cluster), written by its owners: nothing in one
//! workspace changes another's copies.
//!
//! What a transform does to a copy:
//! - each `spec.remove` path is removed;
//! - its `spec.ownedDownstream` entries join those of the object's own
//!   [`OWNED_DOWNSTREAM_ANNOTATION`] on the copy, for the syncer to honour;
//! - [`TRANSFORMED_BY_ANNOTATION`] names the transforms at the versions
//!   applied, so a changed or deleted transform rewrites the copies.

use serde_json::{json, Value};

use crate::control::{
    owned_downstream_annotation, owned_downstream_of, OwnedFields, OWNED_DOWNSTREAM_ANNOTATION,
};
use crate::field_path::FieldPath;

/// Annotation on a transformed copy (a KubeStellar mailbox copy, a kcp TMC
/// downstream copy): the CustomTransforms applied to it, as
/// `name@resourceVersion` joined by commas.
pub const TRANSFORMED_BY_ANNOTATION: &str = "ferry.dev/transformed-by";

/// One stored CustomTransform, parsed.
#[derive(Clone, Debug)]
pub struct Transform {
    name: String,
    rv: u64,
    group: String,
    resource: String,
    remove: Vec<FieldPath>,
    owned: Vec<OwnedFields>,
}

impl Transform {
    /// From a stored object; paths the hub refused on write cannot be here,
    /// but one an older hub stored is skipped rather than trusted.
    pub fn from_object(obj: &Value, rv: u64) -> Transform {
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let text = |key: &str| {
            spec.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let paths = |list: Option<&Value>| -> Vec<FieldPath> {
            list.and_then(Value::as_array)
                .into_iter()
                .flatten()
                .take(crate::field_path::MAX_PATHS)
                .filter_map(|p| p.as_str().and_then(|p| FieldPath::parse(p).ok()))
                .collect()
        };
        // The annotation reader applies the same limits to the same shape.
        let owned = owned_downstream_of(&json!({"metadata": {"annotations": {
            OWNED_DOWNSTREAM_ANNOTATION: spec.get("ownedDownstream").map(Value::to_string).unwrap_or_default()
        }}}));
        Transform {
            name: obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            rv,
            group: text("apiGroup"),
            resource: text("resource"),
            remove: paths(spec.get("remove")),
            owned,
        }
    }

    fn applies_to(&self, group: &str, resource: &str) -> bool {
        self.group == group && self.resource == resource
    }
}

/// `source` (an object of `group`/`resource`) as `transforms` (those of its
/// own workspace) make it; `None` when none applies.
pub fn transformed(source: &Value, group: &str, resource: &str, transforms: &[Transform]) -> Option<Value> {
    let mut matching: Vec<&Transform> = transforms
        .iter()
        .filter(|t| t.applies_to(group, resource))
        .collect();
    if matching.is_empty() {
        return None;
    }
    matching.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = source.clone();
    for t in &matching {
        for path in &t.remove {
            path.remove(&mut out);
        }
    }
    let mut owned = owned_downstream_of(source);
    owned.extend(matching.iter().flat_map(|t| t.owned.iter().cloned()));
    let applied: Vec<String> = matching.iter().map(|t| format!("{}@{}", t.name, t.rv)).collect();
    if let Some(meta) = out
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
    {
        if let Some(m) = meta.as_object_mut() {
            let annotations = m.entry("annotations").or_insert_with(|| json!({}));
            if let Some(a) = annotations.as_object_mut() {
                if !owned.is_empty() {
                    a.insert(
                        OWNED_DOWNSTREAM_ANNOTATION.into(),
                        owned_downstream_annotation(&owned).into(),
                    );
                }
                a.insert(TRANSFORMED_BY_ANNOTATION.into(), applied.join(",").into());
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transform(name: &str, rv: u64, spec: Value) -> Transform {
        Transform::from_object(&json!({"metadata": {"name": name}, "spec": spec}), rv)
    }

    fn deployment() -> Value {
        json!({"metadata": {"name": "d", "annotations": {"team.example/owner": "alice", "keep": "1",
                   OWNED_DOWNSTREAM_ANNOTATION: r#"[{"condition":"OnSpokeChange","jsonPaths":["$.spec.paused"]}]"#}},
               "spec": {"replicas": 3, "template": {"spec": {"nodeSelector": {"disk": "ssd"}, "containers": []}}}})
    }

    #[test]
    fn matching_transforms_remove_their_paths_and_add_their_owned_fields() {
        let transforms = [
            transform(
                "b-selector",
                7,
                json!({"apiGroup": "apps", "resource": "deployments",
                "remove": ["$.spec.template.spec.nodeSelector", "$.metadata.annotations['team.example/owner']"]}),
            ),
            transform(
                "a-hpa",
                5,
                json!({"apiGroup": "apps", "resource": "deployments",
                "ownedDownstream": [{"condition": "OnSpokePresent", "jsonPaths": ["$.spec.replicas"]}]}),
            ),
            transform(
                "other",
                9,
                json!({"apiGroup": "", "resource": "configmaps", "remove": ["$.data"]}),
            ),
        ];
        let out = transformed(&deployment(), "apps", "deployments", &transforms).unwrap();
        assert!(out.pointer("/spec/template/spec/nodeSelector").is_none());
        assert_eq!(out["spec"]["replicas"], 3);
        let a = &out["metadata"]["annotations"];
        assert!(a.get("team.example/owner").is_none());
        assert_eq!(a["keep"], "1");
        assert_eq!(a[TRANSFORMED_BY_ANNOTATION], "a-hpa@5,b-selector@7");
        let owned = owned_downstream_of(&out);
        assert_eq!(owned.len(), 2, "the object's own entry and the transform's");
        assert_eq!(owned[1].paths[0].to_string(), "$.spec.replicas");
        assert!(transformed(&deployment(), "apps", "statefulsets", &transforms).is_none());
        assert!(transformed(&deployment(), "", "deployments", &transforms).is_none());
    }

    #[test]
    fn a_malformed_stored_transform_is_read_without_what_is_wrong() {
        let t = transform(
            "odd",
            1,
            json!({"resource": "configmaps", "remove": ["$.kind", 5, "$.data.a"],
            "ownedDownstream": "nope"}),
        );
        let out = transformed(
            &json!({"kind": "ConfigMap", "data": {"a": "1", "b": "2"}}),
            "",
            "configmaps",
            &[t],
        )
        .unwrap();
        assert_eq!(out["kind"], "ConfigMap");
        assert_eq!(out["data"], json!({"b": "2"}));
        assert!(out["metadata"]["annotations"]
            .get(OWNED_DOWNSTREAM_ANNOTATION)
            .is_none());
        let garbage = Transform::from_object(&json!("not an object"), 1);
        assert!(transformed(&json!(null), "", "", &[garbage]).is_some());
    }
}
