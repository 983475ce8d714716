//! The order of a built-in object's top-level keys as kube-apiserver writes
//! them (its Go structs' field order): `kind`, `apiVersion`, `metadata`,
//! then the kind's own fields (`spec` for most), `status` last; inside
//! `metadata`, ObjectMeta's field order. Clients that
//! compare bytes or print objects as served see what a real cluster returns.
//!
//! Custom resources are left alone (kube-apiserver serves them from
//! unstructured maps).

use serde_json::{Map, Value};

/// The kind's own top-level fields, in kube's order, for kinds without the
/// plain `spec`/`status` shape.
fn own_fields(group: &str, kind: &str) -> &'static [&'static str] {
    match (group, kind) {
        ("", "ConfigMap") => &["immutable", "data", "binaryData"],
        ("", "Secret") => &["immutable", "data", "stringData", "type"],
        ("", "ServiceAccount") => &["secrets", "imagePullSecrets", "automountServiceAccountToken"],
        ("", "Endpoints") => &["subsets"],
        ("", "PodTemplate") => &["template"],
        ("", "Event") => &[
            "involvedObject",
            "reason",
            "message",
            "source",
            "firstTimestamp",
            "lastTimestamp",
            "count",
            "type",
            "eventTime",
            "series",
            "action",
            "related",
            "reportingComponent",
            "reportingInstance",
        ],
        ("events.k8s.io", "Event") => &[
            "eventTime",
            "series",
            "reportingController",
            "reportingInstance",
            "action",
            "reason",
            "regarding",
            "related",
            "note",
            "type",
            "deprecatedSource",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        ],
        ("discovery.k8s.io", "EndpointSlice") => &["addressType", "endpoints", "ports"],
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => &["rules", "aggregationRule"],
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => &["subjects", "roleRef"],
        ("apps", "ControllerRevision") => &["data", "revision"],
        ("storage.k8s.io", "StorageClass") => &[
            "provisioner",
            "parameters",
            "reclaimPolicy",
            "mountOptions",
            "allowVolumeExpansion",
            "volumeBindingMode",
            "allowedTopologies",
        ],
        _ => &["spec"],
    }
}

/// Put `obj`'s top-level keys in kube-apiserver's order for `group`/`kind`;
/// keys the hub does not know keep their relative order, before `status`.
pub fn canonicalize(group: &str, kind: &str, obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    let mut rest = std::mem::take(map);
    let mut ordered = Map::with_capacity(rest.len());
    let leading = ["kind", "apiVersion", "metadata"];
    for key in leading.iter().chain(own_fields(group, kind)) {
        if let Some(v) = rest.shift_remove(*key) {
            ordered.insert((*key).to_string(), v);
        }
    }
    let status = rest.shift_remove("status");
    ordered.extend(rest);
    if let Some(status) = status {
        ordered.insert("status".into(), status);
    }
    *map = ordered;
    if let Some(Value::Object(meta)) = map.get_mut("metadata") {
        order_metadata(meta);
    }
}

/// ObjectMeta's fields in kube's order; unknown ones keep theirs, at the end.
fn order_metadata(meta: &mut Map<String, Value>) {
    const ORDER: &[&str] = &[
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ];
    let mut rest = std::mem::take(meta);
    for key in ORDER {
        if let Some(v) = rest.shift_remove(*key) {
            meta.insert((*key).to_string(), v);
        }
    }
    meta.extend(rest);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(v: &Value) -> Vec<&str> {
        v.as_object().unwrap().keys().map(String::as_str).collect()
    }

    #[test]
    fn objects_lead_with_type_and_metadata_and_end_with_status() {
        let mut d =
            json!({"status": {}, "spec": {}, "metadata": {}, "apiVersion": "apps/v1", "kind": "Deployment"});
        canonicalize("apps", "Deployment", &mut d);
        assert_eq!(keys(&d), ["kind", "apiVersion", "metadata", "spec", "status"]);
        let mut cm = json!({"data": {}, "apiVersion": "v1", "binaryData": {}, "kind": "ConfigMap", "metadata": {}, "immutable": true});
        canonicalize("", "ConfigMap", &mut cm);
        assert_eq!(
            keys(&cm),
            [
                "kind",
                "apiVersion",
                "metadata",
                "immutable",
                "data",
                "binaryData"
            ]
        );
        let mut rb =
            json!({"roleRef": {}, "subjects": [], "metadata": {}, "kind": "RoleBinding", "apiVersion": "x"});
        canonicalize("rbac.authorization.k8s.io", "RoleBinding", &mut rb);
        assert_eq!(
            keys(&rb),
            ["kind", "apiVersion", "metadata", "subjects", "roleRef"]
        );
    }

    #[test]
    fn metadata_follows_object_metas_order() {
        let mut v = json!({"kind": "ConfigMap", "metadata": {
            "managedFields": [], "labels": {}, "uid": "u", "namespace": "n", "name": "x", "extra": 1
        }});
        canonicalize("", "ConfigMap", &mut v);
        assert_eq!(
            keys(&v["metadata"]),
            ["name", "namespace", "uid", "labels", "managedFields", "extra"]
        );
    }

    #[test]
    fn unknown_keys_keep_their_order_before_status() {
        let mut v = json!({"status": 1, "b": 2, "a": 3, "metadata": {}, "kind": "Widget"});
        canonicalize("", "Pod", &mut v);
        assert_eq!(keys(&v), ["kind", "metadata", "b", "a", "status"]);
    }
}
