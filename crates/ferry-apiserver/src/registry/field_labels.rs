//! Field labels: which fields a field selector may name for each resource,
//! and the value an object has for each, as kube-apiserver defines them
//! (its per-kind field label conversions and `GetAttrs`/`ToSelectableFields`).
//!
//! A field the object does not set compares as kube-apiserver's default for
//! it, since kube-apiserver always stores defaulted objects: a Node without
//! `spec.unschedulable` matches `spec.unschedulable=false`, a Pod without
//! `status.phase` matches `status.phase=Pending`. Custom resources support
//! their CRD version's `selectableFields`. Parsing stays in `crate::selector`.

use serde_json::Value;

use super::ResourceInfo;

/// Which of the two metadata field labels a kind supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Metadata {
    /// `metadata.name` and `metadata.namespace` (the default for every kind).
    NameAndNamespace,
    /// `metadata.name` only (kinds with their own conversion that leaves
    /// `metadata.namespace` out: namespaces, nodes, CSRs).
    NameOnly,
}

/// One kind-specific field label: where its value is, and its default.
#[derive(Debug)]
pub struct Field {
    label: &'static str,
    /// JSON pointers tried in order; the first one set gives the value.
    pointers: &'static [&'static str],
    default: &'static str,
}

const fn f(label: &'static str, pointers: &'static [&'static str], default: &'static str) -> Field {
    Field {
        label,
        pointers,
        default,
    }
}

#[derive(Debug)]
struct KindFields {
    group: &'static str,
    resource: &'static str,
    metadata: Metadata,
    fields: &'static [Field],
}

const POD_FIELDS: &[Field] = &[
    f("spec.nodeName", &["/spec/nodeName"], ""),
    f("spec.restartPolicy", &["/spec/restartPolicy"], "Always"),
    f(
        "spec.schedulerName",
        &["/spec/schedulerName"],
        "default-scheduler",
    ),
    // The ServiceAccount admission plugin sets `default`; the deprecated
    // `serviceAccount` is copied over by defaulting.
    f(
        "spec.serviceAccountName",
        &["/spec/serviceAccountName", "/spec/serviceAccount"],
        "default",
    ),
    f("spec.hostNetwork", &["/spec/hostNetwork"], "false"),
    f("status.phase", &["/status/phase"], "Pending"),
    f("status.podIP", &["/status/podIPs/0/ip", "/status/podIP"], ""),
    f("status.nominatedNodeName", &["/status/nominatedNodeName"], ""),
];

const CORE_EVENT_FIELDS: &[Field] = &[
    f("involvedObject.kind", &["/involvedObject/kind"], ""),
    f("involvedObject.namespace", &["/involvedObject/namespace"], ""),
    f("involvedObject.name", &["/involvedObject/name"], ""),
    f("involvedObject.uid", &["/involvedObject/uid"], ""),
    f("involvedObject.apiVersion", &["/involvedObject/apiVersion"], ""),
    f(
        "involvedObject.resourceVersion",
        &["/involvedObject/resourceVersion"],
        "",
    ),
    f("involvedObject.fieldPath", &["/involvedObject/fieldPath"], ""),
    f("reason", &["/reason"], ""),
    f("reportingComponent", &["/reportingComponent"], ""),
    f("source", &["/source/component", "/reportingComponent"], ""),
    f("type", &["/type"], ""),
];

/// events.k8s.io/v1 names the same fields after its own shape.
const EVENTS_V1_FIELDS: &[Field] = &[
    f("regarding.kind", &["/regarding/kind"], ""),
    f("regarding.namespace", &["/regarding/namespace"], ""),
    f("regarding.name", &["/regarding/name"], ""),
    f("regarding.uid", &["/regarding/uid"], ""),
    f("regarding.apiVersion", &["/regarding/apiVersion"], ""),
    f("regarding.resourceVersion", &["/regarding/resourceVersion"], ""),
    f("regarding.fieldPath", &["/regarding/fieldPath"], ""),
    f("reason", &["/reason"], ""),
    f("reportingController", &["/reportingController"], ""),
    f("type", &["/type"], ""),
];

const REPLICAS: &[Field] = &[f("status.replicas", &["/status/replicas"], "0")];

const KINDS: &[KindFields] = &[
    KindFields {
        group: "",
        resource: "pods",
        metadata: Metadata::NameAndNamespace,
        fields: POD_FIELDS,
    },
    KindFields {
        group: "",
        resource: "events",
        metadata: Metadata::NameAndNamespace,
        fields: CORE_EVENT_FIELDS,
    },
    KindFields {
        group: "events.k8s.io",
        resource: "events",
        metadata: Metadata::NameAndNamespace,
        fields: EVENTS_V1_FIELDS,
    },
    KindFields {
        group: "",
        resource: "secrets",
        metadata: Metadata::NameAndNamespace,
        fields: &[f("type", &["/type"], "Opaque")],
    },
    KindFields {
        group: "",
        resource: "namespaces",
        metadata: Metadata::NameOnly,
        fields: &[f("status.phase", &["/status/phase"], "Active")],
    },
    KindFields {
        group: "",
        resource: "nodes",
        metadata: Metadata::NameOnly,
        fields: &[f("spec.unschedulable", &["/spec/unschedulable"], "false")],
    },
    KindFields {
        group: "",
        resource: "services",
        metadata: Metadata::NameAndNamespace,
        fields: &[
            f("spec.clusterIP", &["/spec/clusterIP"], ""),
            f("spec.type", &["/spec/type"], "ClusterIP"),
        ],
    },
    KindFields {
        group: "batch",
        resource: "jobs",
        metadata: Metadata::NameAndNamespace,
        fields: &[f("status.successful", &["/status/succeeded"], "0")],
    },
    KindFields {
        group: "apps",
        resource: "replicasets",
        metadata: Metadata::NameAndNamespace,
        fields: REPLICAS,
    },
    KindFields {
        group: "",
        resource: "replicationcontrollers",
        metadata: Metadata::NameAndNamespace,
        fields: REPLICAS,
    },
    KindFields {
        group: "certificates.k8s.io",
        resource: "certificatesigningrequests",
        metadata: Metadata::NameOnly,
        fields: &[f("spec.signerName", &["/spec/signerName"], "")],
    },
];

/// The field labels one resource supports.
#[derive(Debug, Clone)]
pub enum FieldLabels {
    /// A built-in resource's labels (metadata only when it has none of its own).
    BuiltIn {
        metadata_namespace: bool,
        fields: &'static [Field],
    },
    /// A custom resource: metadata plus its version's `selectableFields`
    /// (as field labels, without the leading `.`).
    Custom(Vec<String>),
}

impl FieldLabels {
    /// The field labels `info` supports.
    pub fn of(info: &ResourceInfo) -> FieldLabels {
        if info.from_crd {
            return FieldLabels::Custom(info.selectable_fields.clone());
        }
        match KINDS
            .iter()
            .find(|k| k.group == info.group && k.resource == info.resource)
        {
            Some(k) => FieldLabels::BuiltIn {
                metadata_namespace: k.metadata == Metadata::NameAndNamespace,
                fields: k.fields,
            },
            None => FieldLabels::BuiltIn {
                metadata_namespace: true,
                fields: &[],
            },
        }
    }

    /// `Err` with kube-apiserver's message (`field label not supported:
    /// <label>`) when a selector may not name `label`.
    pub fn check(&self, label: &str) -> Result<(), String> {
        let supported = match (self, label) {
            (_, "metadata.name") => true,
            (
                FieldLabels::BuiltIn {
                    metadata_namespace, ..
                },
                "metadata.namespace",
            ) => *metadata_namespace,
            (FieldLabels::Custom(_), "metadata.namespace") => true,
            (FieldLabels::BuiltIn { fields, .. }, _) => fields.iter().any(|f| f.label == label),
            (FieldLabels::Custom(selectable), _) => selectable.iter().any(|s| s == label),
        };
        if supported {
            Ok(())
        } else {
            Err(format!("field label not supported: {label}"))
        }
    }

    /// The value `obj` has for the kind-specific field `label` (metadata
    /// labels are answered by the caller from the object's key), defaulted
    /// as kube-apiserver defaults it.
    pub fn value(&self, obj: &Value, label: &str) -> Option<String> {
        match self {
            FieldLabels::BuiltIn { fields, .. } => {
                let field = fields.iter().find(|f| f.label == label)?;
                let set = field
                    .pointers
                    .iter()
                    .find_map(|p| obj.pointer(p).and_then(scalar));
                Some(set.unwrap_or_else(|| field.default.to_string()))
            }
            FieldLabels::Custom(_) => {
                let mut cur = obj;
                for part in label.split('.') {
                    cur = cur.get(part)?;
                }
                scalar(cur)
            }
        }
    }
}

/// A field value as a selector compares it: strings as they are, numbers
/// and booleans in their JSON form; objects, lists and null are unset.
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::kubernetes_resources;
    use serde_json::json;

    fn labels(group: &str, resource: &str) -> FieldLabels {
        let info = kubernetes_resources()
            .into_iter()
            .find(|r| r.group == group && r.resource == resource)
            .expect("built in");
        FieldLabels::of(&info)
    }

    #[test]
    fn unset_fields_compare_as_their_kube_defaults() {
        let nodes = labels("", "nodes");
        assert_eq!(nodes.value(&json!({}), "spec.unschedulable").unwrap(), "false");
        assert_eq!(
            nodes
                .value(&json!({"spec": {"unschedulable": true}}), "spec.unschedulable")
                .unwrap(),
            "true"
        );
        let pods = labels("", "pods");
        let bare = json!({"spec": {"containers": []}});
        assert_eq!(pods.value(&bare, "status.phase").unwrap(), "Pending");
        assert_eq!(pods.value(&bare, "spec.restartPolicy").unwrap(), "Always");
        assert_eq!(
            pods.value(&bare, "spec.schedulerName").unwrap(),
            "default-scheduler"
        );
        assert_eq!(pods.value(&bare, "spec.hostNetwork").unwrap(), "false");
        assert_eq!(pods.value(&bare, "spec.nodeName").unwrap(), "");
        assert_eq!(labels("", "secrets").value(&json!({}), "type").unwrap(), "Opaque");
        assert_eq!(
            labels("", "services").value(&json!({}), "spec.type").unwrap(),
            "ClusterIP"
        );
        assert_eq!(
            labels("", "namespaces")
                .value(&json!({}), "status.phase")
                .unwrap(),
            "Active"
        );
        assert_eq!(
            labels("batch", "jobs")
                .value(&json!({}), "status.successful")
                .unwrap(),
            "0"
        );
    }

    #[test]
    fn values_are_read_from_the_kinds_own_fields() {
        let pods = labels("", "pods");
        let pod = json!({
            "spec": {"nodeName": "n1", "serviceAccount": "legacy"},
            "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.7"}], "podIP": "10.0.0.7"},
        });
        assert_eq!(pods.value(&pod, "spec.nodeName").unwrap(), "n1");
        assert_eq!(pods.value(&pod, "spec.serviceAccountName").unwrap(), "legacy");
        assert_eq!(pods.value(&pod, "status.podIP").unwrap(), "10.0.0.7");
        let events = labels("", "events");
        let event = json!({
            "involvedObject": {"kind": "Pod", "name": "p"},
            "reportingComponent": "kubelet",
            "type": "Warning",
        });
        assert_eq!(events.value(&event, "involvedObject.kind").unwrap(), "Pod");
        assert_eq!(events.value(&event, "source").unwrap(), "kubelet");
        assert_eq!(events.value(&event, "involvedObject.uid").unwrap(), "");
        let jobs = labels("batch", "jobs");
        assert_eq!(
            jobs.value(&json!({"status": {"succeeded": 3}}), "status.successful")
                .unwrap(),
            "3"
        );
        let rs = labels("apps", "replicasets");
        assert_eq!(
            rs.value(&json!({"status": {"replicas": 2}}), "status.replicas")
                .unwrap(),
            "2"
        );
        let v1_events = labels("events.k8s.io", "events");
        assert_eq!(
            v1_events
                .value(&json!({"regarding": {"kind": "Node"}}), "regarding.kind")
                .unwrap(),
            "Node"
        );
    }

    #[test]
    fn unsupported_labels_are_refused_with_kube_apiservers_message() {
        assert_eq!(
            labels("", "configmaps").check("data.x").unwrap_err(),
            "field label not supported: data.x"
        );
        assert!(labels("", "configmaps").check("metadata.namespace").is_ok());
        // Namespaces, nodes and CSRs only know metadata.name.
        assert_eq!(
            labels("", "nodes").check("metadata.namespace").unwrap_err(),
            "field label not supported: metadata.namespace"
        );
        assert!(labels("", "nodes").check("spec.unschedulable").is_ok());
        assert!(labels("", "pods").check("status.phase").is_ok());
        assert!(labels("", "pods").check("spec.containers").is_err());
        assert!(labels("events.k8s.io", "events")
            .check("involvedObject.kind")
            .is_err());
        let custom = FieldLabels::Custom(vec!["spec.color".into()]);
        assert!(custom.check("spec.color").is_ok());
        assert!(custom.check("metadata.namespace").is_ok());
        assert_eq!(
            custom.check("spec.size").unwrap_err(),
            "field label not supported: spec.size"
        );
        assert_eq!(
            custom
                .value(&json!({"spec": {"color": "red"}}), "spec.color")
                .unwrap(),
            "red"
        );
        assert_eq!(custom.value(&json!({"spec": {}}), "spec.color"), None);
    }
}
