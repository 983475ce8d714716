//! Built-in kinds decoded as their k8s-openapi types: a value of the wrong
//! type anywhere in the object is kube-apiserver's 400 naming the Go field
//! (`json: cannot unmarshal string into Go struct field
//! DeploymentSpec.spec.replicas of type int32`), and the fields the type
//! does not know are reported for `fieldValidation`.
//!
//! The typed value is only a check: what is stored stays the JSON the
//! client sent, less the unknown fields (kube-apiserver drops them too, by
//! storing its typed object).

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::go_name;

/// One step of a path into a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// Why a built-in object does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeError {
    /// Go's words after `json: ` (or the decoder's own for other failures).
    pub message: String,
}

/// A path as kube-apiserver prints it in field errors: `spec.containers[0].name`.
pub fn field_path(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

type Decoder = fn(&Value) -> Result<Vec<Vec<Step>>, Failure>;

/// How one decode attempt failed.
#[derive(Debug)]
struct Failure {
    path: Vec<Step>,
    inner: String,
}

fn decode_as<T: DeserializeOwned>(v: &Value) -> Result<Vec<Vec<Step>>, Failure> {
    if let Err(e) = serde_path_to_error::deserialize::<_, T>(v) {
        let path = e
            .path()
            .iter()
            .filter_map(|s| match s {
                serde_path_to_error::Segment::Map { key } => Some(Step::Key(key.clone())),
                serde_path_to_error::Segment::Seq { index } => Some(Step::Index(*index)),
                _ => None,
            })
            .collect();
        return Err(Failure {
            path,
            inner: e.into_inner().to_string(),
        });
    }
    let mut unknown = Vec::new();
    let _: Result<T, _> = serde_ignored::deserialize(v, |p| unknown.push(steps(&p)));
    Ok(unknown)
}

/// [`decode_as`] for a kind served at a newer version than its
/// k8s-openapi type (same fields): the type insists on its own
/// `apiVersion`, so the check sees a copy that carries it.
fn decode_as_older<T: DeserializeOwned + k8s_openapi::Resource>(
    v: &Value,
) -> Result<Vec<Vec<Step>>, Failure> {
    let mut older = v.clone();
    if let Some(m) = older.as_object_mut() {
        m.insert("apiVersion".into(), Value::from(T::API_VERSION));
    }
    decode_as::<T>(&older)
}

fn steps(p: &serde_ignored::Path<'_>) -> Vec<Step> {
    use serde_ignored::Path;
    match p {
        Path::Root => Vec::new(),
        Path::Seq { parent, index } => {
            let mut v = steps(parent);
            v.push(Step::Index(*index));
            v
        }
        Path::Map { parent, key } => {
            let mut v = steps(parent);
            v.push(Step::Key(key.clone()));
            v
        }
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => {
            steps(parent)
        }
    }
}

/// The decoder of a built-in kind, `None` for kinds without a k8s-openapi
/// type (kcp's, the aggregator's) or not stored (reviews).
fn decoder(group: &str, kind: &str) -> Option<Decoder> {
    use k8s_openapi::api;
    macro_rules! d {
        ($t:ty) => {
            Some(decode_as::<$t> as Decoder)
        };
    }
    macro_rules! older {
        ($t:ty) => {
            Some(decode_as_older::<$t> as Decoder)
        };
    }
    match (group, kind) {
        ("", "Namespace") => d!(api::core::v1::Namespace),
        ("", "ConfigMap") => d!(api::core::v1::ConfigMap),
        ("", "Secret") => d!(api::core::v1::Secret),
        ("", "ServiceAccount") => d!(api::core::v1::ServiceAccount),
        ("", "Service") => d!(api::core::v1::Service),
        ("", "Endpoints") => d!(api::core::v1::Endpoints),
        ("", "Pod") => d!(api::core::v1::Pod),
        ("", "PodTemplate") => d!(api::core::v1::PodTemplate),
        ("", "ReplicationController") => d!(api::core::v1::ReplicationController),
        ("", "Node") => d!(api::core::v1::Node),
        ("", "PersistentVolume") => d!(api::core::v1::PersistentVolume),
        ("", "PersistentVolumeClaim") => d!(api::core::v1::PersistentVolumeClaim),
        ("", "Event") => d!(api::core::v1::Event),
        ("", "LimitRange") => d!(api::core::v1::LimitRange),
        ("", "ResourceQuota") => d!(api::core::v1::ResourceQuota),
        ("apps", "Deployment") => d!(api::apps::v1::Deployment),
        ("apps", "ReplicaSet") => d!(api::apps::v1::ReplicaSet),
        ("apps", "StatefulSet") => d!(api::apps::v1::StatefulSet),
        ("apps", "DaemonSet") => d!(api::apps::v1::DaemonSet),
        ("apps", "ControllerRevision") => d!(api::apps::v1::ControllerRevision),
        ("batch", "Job") => d!(api::batch::v1::Job),
        ("batch", "CronJob") => d!(api::batch::v1::CronJob),
        ("autoscaling", "HorizontalPodAutoscaler") => d!(api::autoscaling::v2::HorizontalPodAutoscaler),
        ("networking.k8s.io", "Ingress") => d!(api::networking::v1::Ingress),
        ("networking.k8s.io", "IngressClass") => d!(api::networking::v1::IngressClass),
        ("networking.k8s.io", "NetworkPolicy") => d!(api::networking::v1::NetworkPolicy),
        ("policy", "PodDisruptionBudget") => d!(api::policy::v1::PodDisruptionBudget),
        ("discovery.k8s.io", "EndpointSlice") => d!(api::discovery::v1::EndpointSlice),
        ("coordination.k8s.io", "Lease") => d!(api::coordination::v1::Lease),
        ("events.k8s.io", "Event") => d!(api::events::v1::Event),
        ("storage.k8s.io", "StorageClass") => d!(api::storage::v1::StorageClass),
        ("storage.k8s.io", "CSIDriver") => d!(api::storage::v1::CSIDriver),
        ("storage.k8s.io", "CSINode") => d!(api::storage::v1::CSINode),
        ("storage.k8s.io", "CSIStorageCapacity") => d!(api::storage::v1::CSIStorageCapacity),
        ("storage.k8s.io", "VolumeAttachment") => d!(api::storage::v1::VolumeAttachment),
        // v1 in 1.36 has v1beta1's fields (k8s-openapi's `v1_33` has no v1).
        ("storage.k8s.io", "VolumeAttributesClass") => older!(api::storage::v1beta1::VolumeAttributesClass),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            d!(api::admissionregistration::v1::MutatingWebhookConfiguration)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            d!(api::admissionregistration::v1::ValidatingWebhookConfiguration)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            d!(api::admissionregistration::v1::ValidatingAdmissionPolicy)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            d!(api::admissionregistration::v1::ValidatingAdmissionPolicyBinding)
        }
        // v1 in 1.36 has v1alpha1's fields.
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy") => {
            older!(api::admissionregistration::v1alpha1::MutatingAdmissionPolicy)
        }
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding") => {
            older!(api::admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding)
        }
        ("scheduling.k8s.io", "PriorityClass") => d!(api::scheduling::v1::PriorityClass),
        ("node.k8s.io", "RuntimeClass") => d!(api::node::v1::RuntimeClass),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => d!(api::flowcontrol::v1::FlowSchema),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            d!(api::flowcontrol::v1::PriorityLevelConfiguration)
        }
        ("networking.k8s.io", "IPAddress") => d!(api::networking::v1::IPAddress),
        ("networking.k8s.io", "ServiceCIDR") => d!(api::networking::v1::ServiceCIDR),
        // resource.k8s.io (DRA) has no decoder: its v1 gained fields in
        // every release since k8s-openapi's `v1_33` types, and a typed
        // decode would refuse them as unknown.
        ("rbac.authorization.k8s.io", "Role") => d!(api::rbac::v1::Role),
        ("rbac.authorization.k8s.io", "RoleBinding") => d!(api::rbac::v1::RoleBinding),
        ("rbac.authorization.k8s.io", "ClusterRole") => d!(api::rbac::v1::ClusterRole),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => d!(api::rbac::v1::ClusterRoleBinding),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            d!(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition)
        }
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            d!(api::certificates::v1::CertificateSigningRequest)
        }
        _ => None,
    }
}

/// Whether `group`/`kind` is decoded as a typed object here.
pub fn is_typed(group: &str, kind: &str) -> bool {
    decoder(group, kind).is_some()
}

/// Decode `obj` (with `apiVersion` and `kind` already checked) as the
/// built-in type of `group`/`kind`. `Ok` carries the paths of fields the
/// type does not know; kinds without a typed form always decode.
///
/// As Go's decoder does, `null` and absent fields are zero values: a
/// required field that is missing is validation's business (422 Required),
/// not a decode error.
pub fn decode(obj: &Value, group: &str, kind: &str, version: &str) -> Result<Vec<Vec<Step>>, TypeError> {
    let Some(decode) = decoder(group, kind) else {
        return Ok(Vec::new());
    };
    // A well-formed object decodes at once; only a failing one is copied,
    // and each round fills in one missing or null field of the copy (a type
    // has few required fields).
    let mut filled: Option<Value> = None;
    for _ in 0..64 {
        let failure = match decode(filled.as_ref().unwrap_or(obj)) {
            Ok(unknown) => return Ok(unknown),
            Err(f) => f,
        };
        let scratch = filled.get_or_insert_with(|| obj.clone());
        if let Some(field) = missing_field(&failure.inner) {
            let mut path = failure.path.clone();
            path.push(Step::Key(field.to_string()));
            if fill_zero(decode, scratch, &path) {
                continue;
            }
        } else if at(scratch, &failure.path).is_some_and(Value::is_null)
            && fill_zero(decode, scratch, &failure.path)
        {
            continue;
        }
        return Err(describe(decode, scratch, &failure, kind, version));
    }
    Err(TypeError {
        message: "the object has too many missing required fields".into(),
    })
}

fn missing_field(inner: &str) -> Option<&str> {
    inner.strip_prefix("missing field `")?.split('`').next()
}

/// Put the zero value of the type expected at `path` there.
fn fill_zero(decode: Decoder, scratch: &mut Value, path: &[Step]) -> bool {
    let Some(expected) = expected_at(decode, scratch, path, Value::Bool(true)) else {
        return false;
    };
    let zero = match expected.as_str() {
        "a string" | "Quantity" | "IntOrString" | "Time" | "MicroTime" => Value::String(String::new()),
        "a boolean" => Value::Bool(false),
        "a sequence" => Value::Array(Vec::new()),
        e if e.starts_with('i') || e.starts_with('u') || e.starts_with('f') => Value::from(0),
        _ => Value::Object(Default::default()),
    };
    set_at(scratch, path, zero)
}

/// What the type expects at `path`, learnt by putting `probe` there and
/// reading the decoder's `expected ...`.
fn expected_at(decode: Decoder, scratch: &Value, path: &[Step], probe: Value) -> Option<String> {
    let mut v = scratch.clone();
    if !set_at(&mut v, path, probe) {
        return None;
    }
    let failure = decode(&v).err()?;
    if failure.path != path {
        return None;
    }
    let expected = failure.inner.rsplit_once(", expected ")?.1;
    Some(expected.trim_start_matches("struct ").to_string())
}

/// Go's name of the type the decoder calls `expected` (`i32`, `a sequence`,
/// `DeploymentSpec`), looking inside sequences and maps with a probe.
fn go_type(
    decode: Decoder,
    scratch: &Value,
    path: &[Step],
    expected: &str,
    version: &str,
    depth: u8,
) -> String {
    let inner = |probe: Value, step: Step| {
        let mut p = path.to_vec();
        p.push(step);
        let mut v = scratch.clone();
        set_at(&mut v, path, probe);
        expected_at(decode, &v, &p, Value::Bool(true))
            .filter(|_| depth < 3)
            .map(|e| go_type(decode, &v, &p, &e, version, depth + 1))
    };
    match expected {
        "i32" => "int32".into(),
        "i64" => "int64".into(),
        "f64" => "float64".into(),
        "a string" => "string".into(),
        "a boolean" => "bool".into(),
        "a base64-encoded string" | "ByteString" => "[]uint8".into(),
        "IntOrString" => "intstr.IntOrString".into(),
        "Quantity" => "resource.Quantity".into(),
        "Time" => "v1.Time".into(),
        "MicroTime" => "v1.MicroTime".into(),
        "a sequence" => format!(
            "[]{}",
            inner(Value::Array(vec![Value::Bool(true)]), Step::Index(0))
                .unwrap_or_else(|| "interface {}".into())
        ),
        "a map" => format!(
            "map[string]{}",
            inner(serde_json::json!({"k": true}), Step::Key("k".into())).unwrap_or_else(|| "string".into())
        ),
        name if name.chars().next().is_some_and(char::is_uppercase) => format!("{version}.{name}"),
        other => other.to_string(),
    }
}

/// Go's `cannot unmarshal X into Go struct field Parent.path of type T`.
fn describe(decode: Decoder, scratch: &Value, failure: &Failure, kind: &str, version: &str) -> TypeError {
    let path = &failure.path;
    let found = at(scratch, path);
    let type_mismatch = failure.inner.starts_with("invalid type:");
    // The struct field is the last key that is not a map's; what follows
    // (indices, map keys) is inside its value.
    let field_end = (0..path.len()).rev().find(|&i| {
        matches!(path[i], Step::Key(_))
            && (i == 0
                || expected_at(decode, scratch, &path[..i], Value::Bool(true)).as_deref() != Some("a map"))
    });
    let (Some(field_end), true, Some(found)) = (field_end, type_mismatch, found) else {
        let at = field_path(path);
        return TypeError {
            message: if at.is_empty() {
                failure.inner.clone()
            } else {
                format!("{at}: {}", failure.inner)
            },
        };
    };
    let parent = &path[..field_end];
    let parent_name = if parent.is_empty() {
        kind.to_string()
    } else {
        expected_at(decode, scratch, parent, Value::Bool(true)).unwrap_or_else(|| kind.to_string())
    };
    let go_path: Vec<&str> = path[..=field_end]
        .iter()
        .filter_map(|s| match s {
            Step::Key(k) => Some(k.as_str()),
            Step::Index(_) => None,
        })
        .collect();
    let expected = failure
        .inner
        .rsplit_once(", expected ")
        .map(|(_, e)| e.trim_start_matches("struct ").to_string())
        .unwrap_or_default();
    let ty = go_type(decode, scratch, path, &expected, version, 0);
    TypeError {
        message: format!(
            "json: cannot unmarshal {} into Go struct field {parent_name}.{} of type {ty}",
            go_name(found),
            go_path.join(".")
        ),
    }
}

fn at<'a>(v: &'a Value, path: &[Step]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, step| match step {
        Step::Key(k) => cur.get(k.as_str()),
        Step::Index(i) => cur.get(*i),
    })
}

fn at_mut<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |cur, step| match step {
        Step::Key(k) => cur.get_mut(k.as_str()),
        Step::Index(i) => cur.get_mut(*i),
    })
}

/// Set the value at `path` (its parent must exist); whether it was set.
fn set_at(v: &mut Value, path: &[Step], value: Value) -> bool {
    let Some((last, parent)) = path.split_last() else {
        *v = value;
        return true;
    };
    match (at_mut(v, parent), last) {
        (Some(Value::Object(m)), Step::Key(k)) => {
            m.insert(k.clone(), value);
            true
        }
        (Some(Value::Array(a)), Step::Index(i)) if *i < a.len() => {
            a[*i] = value;
            true
        }
        _ => false,
    }
}

/// Remove the field at `path` (an unknown field being dropped).
pub fn remove_at(v: &mut Value, path: &[Step]) {
    let Some((last, parent)) = path.split_last() else {
        return;
    };
    if let (Some(Value::Object(m)), Step::Key(k)) = (at_mut(v, parent), last) {
        m.remove(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": spec})
    }

    fn error(obj: Value, group: &str, kind: &str) -> String {
        decode(&obj, group, kind, "v1").unwrap_err().message
    }

    #[test]
    fn wrong_types_name_the_go_struct_field_and_type() {
        let dep = |spec| error(deployment(spec), "apps", "Deployment");
        assert_eq!(
            dep(json!({"replicas": "lots"})),
            "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32"
        );
        assert_eq!(
            dep(json!({"template": 5})),
            "json: cannot unmarshal number into Go struct field DeploymentSpec.spec.template of type v1.PodTemplateSpec"
        );
        assert_eq!(
            dep(json!({"template": {"spec": {"containers": [{"name": "a", "image": 3}]}}})),
            "json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.image of type string"
        );
        assert_eq!(
            dep(json!({"template": {"spec": {"containers": "x"}}})),
            "json: cannot unmarshal string into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container"
        );
        assert_eq!(
            error(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": 1}}),
                "",
                "ConfigMap"
            ),
            "json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
        );
        assert_eq!(
            error(
                json!({"apiVersion": "v1", "kind": "ConfigMap", "data": []}),
                "",
                "ConfigMap"
            ),
            "json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string"
        );
    }

    #[test]
    fn missing_required_and_null_fields_are_not_decode_errors() {
        // Container.name is required in the typed form but Go decodes without it.
        let obj = deployment(
            json!({"replicas": null, "template": {"spec": {"containers": [{"image": "x", "name": null}]}}}),
        );
        assert_eq!(decode(&obj, "apps", "Deployment", "v1"), Ok(vec![]));
    }

    #[test]
    fn unknown_fields_are_reported_with_their_paths() {
        let obj = deployment(
            json!({"replicaz": 1, "template": {"spec": {"containers": [{"name": "a", "imagez": "x"}]}}}),
        );
        let unknown: Vec<String> = decode(&obj, "apps", "Deployment", "v1")
            .unwrap()
            .iter()
            .map(|p| field_path(p))
            .collect();
        assert_eq!(
            unknown,
            vec!["spec.replicaz", "spec.template.spec.containers[0].imagez"]
        );
        let mut cleaned = obj.clone();
        remove_at(
            &mut cleaned,
            &[Step::Key("spec".into()), Step::Key("replicaz".into())],
        );
        assert!(cleaned.pointer("/spec/replicaz").is_none());
    }

    #[test]
    fn kinds_without_a_type_always_decode() {
        assert_eq!(
            decode(&json!({"spec": 5}), "example.com", "Widget", "v1alpha1"),
            Ok(vec![])
        );
    }
}
