//! Component schemas of the built-in kinds, as kube-apiserver publishes them
//! in `/openapi/v3`: generated once per process from k8s-openapi's
//! `schemars` schemas (which carry the upstream field descriptions), named
//! as upstream names them (`io.k8s.api.apps.v1.Deployment`), references in
//! kube's shape (`{"allOf": [{"$ref": ...}], "description": ...}`) and
//! `x-kubernetes-group-version-kind` on the top-level kinds.
//!
//! What the generated schemas lack is the strategic-merge patch metadata
//! (`x-kubernetes-patch-merge-key`/`-strategy`); see the `openapi` module
//! docs for why kubectl never computes patches from them.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use k8s_openapi::api::{
    admissionregistration, apps, authentication, authorization, autoscaling, batch, certificates,
    coordination, core, discovery, events, flowcontrol, networking, node, policy, rbac, resource, scheduling,
    storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

/// `#/components/schemas/` references.
const REF_PREFIX: &str = "#/components/schemas/";

/// Schema-name prefixes of kinds whose Kubernetes 1.36 version (the one the
/// hub serves) is newer than the k8s-openapi types it is generated from
/// (feature `v1_33`): the same fields the hub publishes under the served
/// version's name.
const RENAMED: &[(&str, &str)] = &[
    ("io.k8s.api.storage.v1beta1.", "io.k8s.api.storage.v1."),
    (
        "io.k8s.api.admissionregistration.v1alpha1.",
        "io.k8s.api.admissionregistration.v1.",
    ),
    ("io.k8s.api.resource.v1beta2.", "io.k8s.api.resource.v1."),
];

/// The name a schema is published under (see [`RENAMED`]).
fn served_name(name: &str) -> String {
    RENAMED
        .iter()
        .find_map(|(from, to)| name.strip_prefix(from).map(|rest| format!("{to}{rest}")))
        .unwrap_or_else(|| name.to_string())
}

/// `schemas` with every name and reference in its served form; a renamed
/// schema never replaces one generated under the served name.
fn with_served_names(schemas: Map<String, Value>) -> Map<String, Value> {
    fn rename_refs(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get_mut("$ref") {
                    if let Some(name) = r.strip_prefix(REF_PREFIX) {
                        *r = format!("{REF_PREFIX}{}", served_name(name));
                    }
                }
                m.values_mut().for_each(rename_refs);
            }
            Value::Array(a) => a.iter_mut().for_each(rename_refs),
            _ => {}
        }
    }
    let mut out = Map::new();
    for (name, mut schema) in schemas {
        rename_refs(&mut schema);
        let served = served_name(&name);
        if served == name || !out.contains_key(&served) {
            out.insert(served, schema);
        }
    }
    out
}

/// A built-in kind: `(group, version, kind)` and how to generate its schema.
struct Kind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    name: fn() -> std::borrow::Cow<'static, str>,
    generate: fn(&mut SchemaGenerator) -> schemars::Schema,
}

macro_rules! kinds {
    ($(($group:literal, $version:literal, $kind:literal, $ty:ty)),* $(,)?) => {
        &[$(Kind {
            group: $group,
            version: $version,
            kind: $kind,
            name: <$ty as JsonSchema>::schema_name,
            generate: |g| g.subschema_for::<$ty>(),
        }),*]
    };
}

/// Every built-in kind the hub serves (and the subresource kinds its
/// documents reference), by group, version and kind.
const KINDS: &[Kind] = kinds![
    ("", "v1", "Namespace", core::v1::Namespace),
    ("", "v1", "ConfigMap", core::v1::ConfigMap),
    ("", "v1", "Secret", core::v1::Secret),
    ("", "v1", "ServiceAccount", core::v1::ServiceAccount),
    ("", "v1", "Service", core::v1::Service),
    ("", "v1", "Endpoints", core::v1::Endpoints),
    ("", "v1", "Pod", core::v1::Pod),
    ("", "v1", "PodTemplate", core::v1::PodTemplate),
    ("", "v1", "ReplicationController", core::v1::ReplicationController),
    ("", "v1", "Node", core::v1::Node),
    ("", "v1", "PersistentVolume", core::v1::PersistentVolume),
    ("", "v1", "PersistentVolumeClaim", core::v1::PersistentVolumeClaim),
    ("", "v1", "Event", core::v1::Event),
    ("", "v1", "LimitRange", core::v1::LimitRange),
    ("", "v1", "ResourceQuota", core::v1::ResourceQuota),
    ("", "v1", "ComponentStatus", core::v1::ComponentStatus),
    ("apps", "v1", "Deployment", apps::v1::Deployment),
    ("apps", "v1", "ReplicaSet", apps::v1::ReplicaSet),
    ("apps", "v1", "StatefulSet", apps::v1::StatefulSet),
    ("apps", "v1", "DaemonSet", apps::v1::DaemonSet),
    ("apps", "v1", "ControllerRevision", apps::v1::ControllerRevision),
    ("batch", "v1", "Job", batch::v1::Job),
    ("batch", "v1", "CronJob", batch::v1::CronJob),
    ("autoscaling", "v1", "Scale", autoscaling::v1::Scale),
    (
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        autoscaling::v2::HorizontalPodAutoscaler
    ),
    ("networking.k8s.io", "v1", "Ingress", networking::v1::Ingress),
    (
        "networking.k8s.io",
        "v1",
        "IngressClass",
        networking::v1::IngressClass
    ),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        networking::v1::NetworkPolicy
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        policy::v1::PodDisruptionBudget
    ),
    (
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        discovery::v1::EndpointSlice
    ),
    ("coordination.k8s.io", "v1", "Lease", coordination::v1::Lease),
    ("events.k8s.io", "v1", "Event", events::v1::Event),
    ("storage.k8s.io", "v1", "StorageClass", storage::v1::StorageClass),
    ("storage.k8s.io", "v1", "CSIDriver", storage::v1::CSIDriver),
    ("storage.k8s.io", "v1", "CSINode", storage::v1::CSINode),
    (
        "storage.k8s.io",
        "v1",
        "CSIStorageCapacity",
        storage::v1::CSIStorageCapacity
    ),
    (
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        storage::v1::VolumeAttachment
    ),
    (
        "storage.k8s.io",
        "v1",
        "VolumeAttributesClass",
        storage::v1beta1::VolumeAttributesClass
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        admissionregistration::v1::MutatingWebhookConfiguration
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        admissionregistration::v1::ValidatingWebhookConfiguration
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        admissionregistration::v1::ValidatingAdmissionPolicy
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        admissionregistration::v1::ValidatingAdmissionPolicyBinding
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingAdmissionPolicy",
        admissionregistration::v1alpha1::MutatingAdmissionPolicy
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingAdmissionPolicyBinding",
        admissionregistration::v1alpha1::MutatingAdmissionPolicyBinding
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        scheduling::v1::PriorityClass
    ),
    ("node.k8s.io", "v1", "RuntimeClass", node::v1::RuntimeClass),
    (
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "FlowSchema",
        flowcontrol::v1::FlowSchema
    ),
    (
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "PriorityLevelConfiguration",
        flowcontrol::v1::PriorityLevelConfiguration
    ),
    (
        "resource.k8s.io",
        "v1",
        "DeviceClass",
        resource::v1beta2::DeviceClass
    ),
    (
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        resource::v1beta2::ResourceClaim
    ),
    (
        "resource.k8s.io",
        "v1",
        "ResourceClaimTemplate",
        resource::v1beta2::ResourceClaimTemplate
    ),
    (
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        resource::v1beta2::ResourceSlice
    ),
    ("networking.k8s.io", "v1", "IPAddress", networking::v1::IPAddress),
    (
        "networking.k8s.io",
        "v1",
        "ServiceCIDR",
        networking::v1::ServiceCIDR
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", rbac::v1::Role),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        rbac::v1::RoleBinding
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        rbac::v1::ClusterRole
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        rbac::v1::ClusterRoleBinding
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        apiextensions::v1::CustomResourceDefinition
    ),
    (
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        apiregistration::v1::APIService
    ),
    (
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        certificates::v1::CertificateSigningRequest
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        authentication::v1::TokenReview
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenRequest",
        authentication::v1::TokenRequest
    ),
    (
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        authentication::v1::SelfSubjectReview
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        authorization::v1::SelfSubjectAccessReview
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        authorization::v1::SelfSubjectRulesReview
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        authorization::v1::SubjectAccessReview
    ),
    (
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        authorization::v1::LocalSubjectAccessReview
    ),
];

/// The generated component schemas of every kind above and everything they
/// reference, keyed by schema name.
static SCHEMAS: LazyLock<Map<String, Value>> = LazyLock::new(generate);

fn generate() -> Map<String, Value> {
    let mut generator = SchemaSettings::openapi3()
        .with(|s| s.meta_schema = None)
        .into_generator();
    for k in KINDS {
        (k.generate)(&mut generator);
    }
    // Shared meta.k8s.io schemas every document references.
    generator.subschema_for::<meta::ObjectMeta>();
    generator.subschema_for::<meta::ListMeta>();
    generator.subschema_for::<meta::Status>();
    generator.subschema_for::<meta::DeleteOptions>();
    let mut schemas = with_served_names(generator.take_definitions(true));
    for k in KINDS {
        if let Some(schema) = schemas.get_mut(&served_name(&(k.name)())) {
            schema["x-kubernetes-group-version-kind"] =
                json!([{"group": k.group, "version": k.version, "kind": k.kind}]);
        }
    }
    // ObjectMeta's lists carry their upstream patch metadata, so the
    // schema is right even for a client that computes patches from it.
    if let Some(Value::Object(props)) = schemas
        .get_mut("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        .and_then(|m| m.get_mut("properties"))
    {
        if let Some(Value::Object(f)) = props.get_mut("finalizers") {
            f.insert("x-kubernetes-list-type".into(), json!("set"));
            f.insert("x-kubernetes-patch-strategy".into(), json!("merge"));
        }
        if let Some(Value::Object(o)) = props.get_mut("ownerReferences") {
            o.insert("x-kubernetes-list-map-keys".into(), json!(["uid"]));
            o.insert("x-kubernetes-list-type".into(), json!("map"));
            o.insert("x-kubernetes-patch-merge-key".into(), json!("uid"));
            o.insert("x-kubernetes-patch-strategy".into(), json!("merge"));
        }
    }
    schemas
}

/// The component schema name of a built-in kind (`io.k8s.api.apps.v1.Deployment`),
/// or `None` when the hub has no generated schema for it.
pub fn schema_name(group: &str, version: &str, kind: &str) -> Option<String> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.kind == kind)
        .map(|k| served_name(&(k.name)()))
}

/// The schemas named in `roots` and every schema they reference, directly
/// or not, ready to go into a document's `components.schemas`.
pub fn schemas_with_references<'a>(roots: impl IntoIterator<Item = &'a str>) -> Map<String, Value> {
    let schemas = &*SCHEMAS;
    let mut out = Map::new();
    let mut pending: Vec<String> = roots.into_iter().map(String::from).collect();
    let mut seen = BTreeSet::new();
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(schema) = schemas.get(&name) else {
            continue;
        };
        collect_refs(schema, &mut pending);
        out.insert(name, schema.clone());
    }
    out
}

/// The schema of a built-in kind as one self-contained `openAPIV3Schema`,
/// the shape an APIResourceSchema or a CRD carries: references inlined,
/// descriptions dropped (the hub's OpenAPI documents keep them), and
/// `metadata` a plain object, as in a CRD. `None` for kinds the hub has no
/// generated schema for.
pub fn self_contained(group: &str, version: &str, kind: &str) -> Option<Value> {
    let name = schema_name(group, version, kind)?;
    let schemas = schemas_with_references([name.as_str()]);
    let mut schema = schemas.get(&name)?.clone();
    inline(&mut schema, &schemas, 0);
    if let Some(m) = schema.as_object_mut() {
        m.remove("x-kubernetes-group-version-kind");
        if let Some(Value::Object(props)) = m.get_mut("properties") {
            props.insert("metadata".into(), json!({"type": "object"}));
        }
    }
    Some(schema)
}

/// Replace every reference in `v` by the schema it names, and drop
/// descriptions. Built-in kinds do not nest themselves; the depth bound is
/// a guard, not a limit any of them reaches.
fn inline(v: &mut Value, schemas: &Map<String, Value>, depth: usize) {
    if depth > 64 {
        return;
    }
    match v {
        Value::Object(m) => {
            m.remove("description");
            // `{"allOf": [{"$ref": X}], ...}` (kube's reference with siblings) or `{"$ref": X}`.
            let target = match m.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
                Some([single]) => single.get("$ref").and_then(Value::as_str).map(String::from),
                _ => m.get("$ref").and_then(Value::as_str).map(String::from),
            };
            if let Some(target) = target {
                m.remove("allOf");
                m.remove("$ref");
                if let Some(Value::Object(referenced)) =
                    target.strip_prefix(REF_PREFIX).and_then(|n| schemas.get(n))
                {
                    for (k, val) in referenced {
                        m.entry(k.clone()).or_insert_with(|| val.clone());
                    }
                }
                m.remove("description");
                m.remove("x-kubernetes-group-version-kind");
            }
            for child in m.values_mut() {
                inline(child, schemas, depth + 1);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| inline(x, schemas, depth + 1)),
        _ => {}
    }
}

fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                if let Some(name) = r.strip_prefix(REF_PREFIX) {
                    out.push(name.to_string());
                }
            }
            m.values().for_each(|x| collect_refs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deployment_schema_describes_every_field_through_references() {
        let name = schema_name("apps", "v1", "Deployment").unwrap();
        assert_eq!(name, "io.k8s.api.apps.v1.Deployment");
        let all = schemas_with_references([name.as_str()]);
        let deployment = &all[&name];
        assert_eq!(
            deployment["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
        );
        // References with a description are wrapped in allOf, as kube does.
        assert_eq!(
            deployment["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        let spec = &all["io.k8s.api.apps.v1.DeploymentSpec"];
        assert!(spec["properties"]["replicas"]["description"]
            .as_str()
            .unwrap()
            .contains("Number of desired pods"));
        assert!(all.contains_key("io.k8s.api.core.v1.Container"));
        assert!(all.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        // Only top-level kinds carry a GVK.
        assert!(spec.get("x-kubernetes-group-version-kind").is_none());
    }

    #[test]
    fn a_self_contained_schema_has_no_references_left() {
        let s = self_contained("apps", "v1", "Deployment").unwrap();
        let text = s.to_string();
        assert!(!text.contains("$ref"), "references left");
        assert_eq!(s["properties"]["metadata"], json!({"type": "object"}));
        assert_eq!(
            s["properties"]["spec"]["properties"]["replicas"]["type"],
            "integer"
        );
        let containers = &s["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
            ["properties"]["containers"];
        assert_eq!(containers["items"]["properties"]["image"]["type"], "string");
        assert!(text.len() < 400_000, "{} bytes", text.len());
        assert!(self_contained("example.io", "v1", "Widget").is_none());
    }

    #[test]
    fn kinds_resolve_to_upstream_names() {
        assert_eq!(
            schema_name("apiextensions.k8s.io", "v1", "CustomResourceDefinition").unwrap(),
            "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"
        );
        assert_eq!(schema_name("", "v1", "Pod").unwrap(), "io.k8s.api.core.v1.Pod");
        assert!(schema_name("example.com", "v1alpha1", "Widget").is_none());
        let meta = schemas_with_references(["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]);
        let owners =
            &meta["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]["ownerReferences"];
        assert_eq!(owners["x-kubernetes-patch-merge-key"], "uid");
    }
}
