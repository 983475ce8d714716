//! The built-in resources every workspace serves.

use std::sync::{Arc, LazyLock};

use serde_json::Value;

use super::{ResourceInfo, ScalePaths, ALL_VERBS};

/// Subresources of a built-in resource.
#[derive(Clone, Copy)]
enum Sub {
    None,
    Status,
    StatusScale,
}

struct Def {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    sub: Sub,
    categories: &'static [&'static str],
    /// Reviews (TokenReview, SubjectAccessReview, ...): not stored, `create` only.
    create_only: bool,
    /// Computed on read (ComponentStatus): `get` and `list` only.
    read_only: bool,
    /// Kept by the hub itself (LogicalCluster): `get`, `list` and `watch`.
    maintained: bool,
}

const fn d(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    sub: Sub,
) -> Def {
    Def {
        group,
        version,
        resource,
        kind,
        namespaced,
        short,
        sub,
        categories: &[],
        create_only: false,
        read_only: false,
        maintained: false,
    }
}

const fn create_only(mut def: Def) -> Def {
    def.create_only = true;
    def
}

const fn read_only(mut def: Def) -> Def {
    def.read_only = true;
    def
}

const fn maintained(mut def: Def) -> Def {
    def.maintained = true;
    def
}

/// kcp's own kinds are in its `kcp` category (`kubectl get kcp`).
const fn kcp(mut def: Def) -> Def {
    def.categories = &["kcp"];
    def
}

/// kube's `api-extensions` category: admission configuration.
const fn api_extensions(mut def: Def) -> Def {
    def.categories = &["api-extensions"];
    def
}

const fn all(mut def: Def) -> Def {
    def.categories = &["all"];
    def
}

const NS: bool = true;
const CL: bool = false;

const DEFS: &[Def] = &[
    // core/v1
    d("", "v1", "namespaces", "Namespace", CL, &["ns"], Sub::Status),
    d("", "v1", "configmaps", "ConfigMap", NS, &["cm"], Sub::None),
    d("", "v1", "secrets", "Secret", NS, &[], Sub::None),
    d(
        "",
        "v1",
        "serviceaccounts",
        "ServiceAccount",
        NS,
        &["sa"],
        Sub::None,
    ),
    all(d("", "v1", "services", "Service", NS, &["svc"], Sub::Status)),
    d("", "v1", "endpoints", "Endpoints", NS, &["ep"], Sub::None),
    all(d("", "v1", "pods", "Pod", NS, &["po"], Sub::Status)),
    d("", "v1", "podtemplates", "PodTemplate", NS, &[], Sub::None),
    all(d(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        NS,
        &["rc"],
        Sub::StatusScale,
    )),
    d("", "v1", "nodes", "Node", CL, &["no"], Sub::Status),
    d(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        CL,
        &["pv"],
        Sub::Status,
    ),
    d(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        NS,
        &["pvc"],
        Sub::Status,
    ),
    d("", "v1", "events", "Event", NS, &["ev"], Sub::None),
    d("", "v1", "limitranges", "LimitRange", NS, &["limits"], Sub::None),
    d(
        "",
        "v1",
        "resourcequotas",
        "ResourceQuota",
        NS,
        &["quota"],
        Sub::Status,
    ),
    // Deprecated since 1.19 but still served; answered by `api::component_status`.
    read_only(d(
        "",
        "v1",
        "componentstatuses",
        "ComponentStatus",
        CL,
        &["cs"],
        Sub::None,
    )),
    // apps/v1
    all(d(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        NS,
        &["deploy"],
        Sub::StatusScale,
    )),
    all(d(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        NS,
        &["rs"],
        Sub::StatusScale,
    )),
    all(d(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        NS,
        &["sts"],
        Sub::StatusScale,
    )),
    all(d(
        "apps",
        "v1",
        "daemonsets",
        "DaemonSet",
        NS,
        &["ds"],
        Sub::Status,
    )),
    d(
        "apps",
        "v1",
        "controllerrevisions",
        "ControllerRevision",
        NS,
        &[],
        Sub::None,
    ),
    // batch/v1
    all(d("batch", "v1", "jobs", "Job", NS, &[], Sub::Status)),
    all(d("batch", "v1", "cronjobs", "CronJob", NS, &["cj"], Sub::Status)),
    // autoscaling
    all(d(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
        NS,
        &["hpa"],
        Sub::Status,
    )),
    // networking
    d(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "Ingress",
        NS,
        &["ing"],
        Sub::Status,
    ),
    d(
        "networking.k8s.io",
        "v1",
        "ingressclasses",
        "IngressClass",
        CL,
        &[],
        Sub::None,
    ),
    d(
        "networking.k8s.io",
        "v1",
        "networkpolicies",
        "NetworkPolicy",
        NS,
        &["netpol"],
        Sub::None,
    ),
    d(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        NS,
        &["pdb"],
        Sub::Status,
    ),
    d(
        "discovery.k8s.io",
        "v1",
        "endpointslices",
        "EndpointSlice",
        NS,
        &[],
        Sub::None,
    ),
    d("coordination.k8s.io", "v1", "leases", "Lease", NS, &[], Sub::None),
    d("events.k8s.io", "v1", "events", "Event", NS, &["ev"], Sub::None),
    d(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        CL,
        &["sc"],
        Sub::None,
    ),
    // Kinds kube-apiserver serves for its own components (admission,
    // scheduling, storage, flow control, DRA, service IPs): stored,
    // defaulted and validated here, acted on by nothing in the hub.
    api_extensions(d(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        CL,
        &[],
        Sub::None,
    )),
    api_extensions(d(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        CL,
        &[],
        Sub::None,
    )),
    api_extensions(d(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
        CL,
        &[],
        Sub::Status,
    )),
    api_extensions(d(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
        CL,
        &[],
        Sub::None,
    )),
    api_extensions(d(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingadmissionpolicies",
        "MutatingAdmissionPolicy",
        CL,
        &[],
        Sub::None,
    )),
    api_extensions(d(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingadmissionpolicybindings",
        "MutatingAdmissionPolicyBinding",
        CL,
        &[],
        Sub::None,
    )),
    d(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "PriorityClass",
        CL,
        &["pc"],
        Sub::None,
    ),
    d(
        "node.k8s.io",
        "v1",
        "runtimeclasses",
        "RuntimeClass",
        CL,
        &[],
        Sub::None,
    ),
    d(
        "storage.k8s.io",
        "v1",
        "csidrivers",
        "CSIDriver",
        CL,
        &[],
        Sub::None,
    ),
    d("storage.k8s.io", "v1", "csinodes", "CSINode", CL, &[], Sub::None),
    d(
        "storage.k8s.io",
        "v1",
        "csistoragecapacities",
        "CSIStorageCapacity",
        NS,
        &[],
        Sub::None,
    ),
    d(
        "storage.k8s.io",
        "v1",
        "volumeattachments",
        "VolumeAttachment",
        CL,
        &[],
        Sub::Status,
    ),
    d(
        "storage.k8s.io",
        "v1",
        "volumeattributesclasses",
        "VolumeAttributesClass",
        CL,
        &["vac"],
        Sub::None,
    ),
    d(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "flowschemas",
        "FlowSchema",
        CL,
        &[],
        Sub::Status,
    ),
    d(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
        CL,
        &[],
        Sub::Status,
    ),
    d(
        "resource.k8s.io",
        "v1",
        "deviceclasses",
        "DeviceClass",
        CL,
        &[],
        Sub::None,
    ),
    d(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "ResourceClaim",
        NS,
        &[],
        Sub::Status,
    ),
    d(
        "resource.k8s.io",
        "v1",
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        NS,
        &[],
        Sub::None,
    ),
    d(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "ResourceSlice",
        CL,
        &[],
        Sub::None,
    ),
    d(
        "networking.k8s.io",
        "v1",
        "ipaddresses",
        "IPAddress",
        CL,
        &["ip"],
        Sub::None,
    ),
    d(
        "networking.k8s.io",
        "v1",
        "servicecidrs",
        "ServiceCIDR",
        CL,
        &[],
        Sub::Status,
    ),
    // RBAC
    d(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "Role",
        NS,
        &[],
        Sub::None,
    ),
    d(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "RoleBinding",
        NS,
        &[],
        Sub::None,
    ),
    d(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "ClusterRole",
        CL,
        &[],
        Sub::None,
    ),
    d(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
        CL,
        &[],
        Sub::None,
    ),
    // API machinery
    d(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        CL,
        &["crd", "crds"],
        Sub::Status,
    ),
    d(
        "apiregistration.k8s.io",
        "v1",
        "apiservices",
        "APIService",
        CL,
        &[],
        Sub::Status,
    ),
    d(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
        CL,
        &["csr"],
        Sub::Status,
    ),
    // Reviews: create-only, answered by `api::special`.
    create_only(d(
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "TokenReview",
        CL,
        &[],
        Sub::None,
    )),
    create_only(d(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
        CL,
        &[],
        Sub::None,
    )),
    create_only(d(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
        CL,
        &[],
        Sub::None,
    )),
    create_only(d(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
        CL,
        &[],
        Sub::None,
    )),
    create_only(d(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
        CL,
        &[],
        Sub::None,
    )),
    create_only(d(
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
        NS,
        &[],
        Sub::None,
    )),
    // kcp tenancy
    kcp(d(
        "tenancy.kcp.io",
        "v1alpha1",
        "workspaces",
        "Workspace",
        CL,
        &["ws"],
        Sub::Status,
    )),
    // kcp's API exports (served by `ferry-server`'s `apis`)
    kcp(d(
        "apis.kcp.io",
        "v1alpha1",
        "apiresourceschemas",
        "APIResourceSchema",
        CL,
        &[],
        Sub::None,
    )),
    kcp(d(
        "apis.kcp.io",
        "v1alpha1",
        "apiexports",
        "APIExport",
        CL,
        &[],
        Sub::Status,
    )),
    kcp(d(
        "apis.kcp.io",
        "v1alpha1",
        "apiexportendpointslices",
        "APIExportEndpointSlice",
        CL,
        &[],
        Sub::Status,
    )),
    kcp(d(
        "apis.kcp.io",
        "v1alpha1",
        "apibindings",
        "APIBinding",
        CL,
        &[],
        Sub::Status,
    )),
    // kcp TMC (see `crate::workload`): validated by the schemas of their
    // `ferry_api` types ([`typed_schema`]).
    kcp(d(
        "workload.kcp.io",
        "v1alpha1",
        "synctargets",
        "SyncTarget",
        CL,
        &[],
        Sub::Status,
    )),
    kcp(d(
        "scheduling.kcp.io",
        "v1alpha1",
        "locations",
        "Location",
        CL,
        &[],
        Sub::Status,
    )),
    kcp(d(
        "scheduling.kcp.io",
        "v1alpha1",
        "placements",
        "Placement",
        CL,
        &[],
        Sub::Status,
    )),
    kcp(d(
        "apiresource.kcp.io",
        "v1alpha1",
        "apiresourceimports",
        "APIResourceImport",
        CL,
        &[],
        Sub::Status,
    )),
    // kcp core: the `cluster` object describing each workspace, kept by
    // `controllers::logical_cluster`; clients read it, never write it.
    maintained(kcp(d(
        "core.kcp.io",
        "v1alpha1",
        "logicalclusters",
        "LogicalCluster",
        CL,
        &[],
        Sub::None,
    ))),
];

/// The `openAPIV3Schema` of a built-in kind whose type lives in `ferry_api`
/// (kcp's TMC kinds, which are CRDs in kcp): the hub validates and prunes
/// them as kcp's CRDs would, and publishes the schema in OpenAPI.
fn typed_schema(group: &str, resource: &str) -> Option<Arc<Value>> {
    use kube::CustomResourceExt;
    static SCHEMAS: LazyLock<Vec<(String, String, Arc<Value>)>> = LazyLock::new(|| {
        [
            ferry_api::workload::SyncTarget::crd(),
            ferry_api::scheduling::Location::crd(),
            ferry_api::scheduling::Placement::crd(),
            ferry_api::apiresource::ApiResourceImport::crd(),
        ]
        .into_iter()
        .filter_map(|crd| {
            let schema = crd
                .spec
                .versions
                .first()?
                .schema
                .as_ref()?
                .open_api_v3_schema
                .as_ref()?;
            let schema = serde_json::to_value(schema).ok()?;
            Some((crd.spec.group, crd.spec.names.plural, Arc::new(schema)))
        })
        .collect()
    });
    SCHEMAS
        .iter()
        .find(|(g, r, _)| g == group && r == resource)
        .map(|(_, _, s)| s.clone())
}

/// Built-in resources served in every workspace.
pub fn builtin_resources() -> Vec<ResourceInfo> {
    DEFS.iter().map(info).collect()
}

fn info(def: &Def) -> ResourceInfo {
    let scale = matches!(def.sub, Sub::StatusScale).then(|| ScalePaths {
        spec_replicas: ".spec.replicas".into(),
        status_replicas: ".status.replicas".into(),
        label_selector: Some(".status.selector".into()),
    });
    let mut extra = Vec::new();
    match (def.group, def.resource) {
        ("", "namespaces") => extra.push("finalize".to_string()),
        ("", "pods") => extra.push("ephemeralcontainers".to_string()),
        ("", "serviceaccounts") => extra.push("token".to_string()),
        ("certificates.k8s.io", "certificatesigningrequests") => extra.push("approval".to_string()),
        _ => {}
    }
    ResourceInfo {
        group: def.group.into(),
        version: def.version.into(),
        resource: def.resource.into(),
        singular: def.kind.to_ascii_lowercase(),
        kind: def.kind.into(),
        list_kind: format!("{}List", def.kind),
        namespaced: def.namespaced,
        short_names: def.short.iter().map(|s| s.to_string()).collect(),
        categories: def.categories.iter().map(|s| s.to_string()).collect(),
        verbs: if def.create_only {
            vec!["create".to_string()]
        } else if def.read_only {
            vec!["get".to_string(), "list".to_string()]
        } else if def.maintained {
            vec!["get".to_string(), "list".to_string(), "watch".to_string()]
        } else {
            ALL_VERBS.iter().map(|s| s.to_string()).collect()
        },
        status_subresource: !matches!(def.sub, Sub::None),
        scale_subresource: scale,
        extra_subresources: extra,
        // Built-in columns are computed by `table::builtin_columns` at render time.
        printer_columns: Vec::new(),
        schema: typed_schema(def.group, def.resource),
        selectable_fields: Vec::new(),
        storage_version: true,
        from_crd: false,
        binding: None,
        terminating: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_unique_per_group_version_resource() {
        let all = builtin_resources();
        let mut keys: Vec<_> = all
            .iter()
            .map(|r| (r.group.clone(), r.version.clone(), r.resource.clone()))
            .collect();
        keys.sort();
        let n = keys.len();
        keys.dedup();
        assert_eq!(n, keys.len());
        assert!(all
            .iter()
            .any(|r| r.kind == "Deployment" && r.scale_subresource.is_some()));
    }

    #[test]
    fn kcp_tmc_kinds_carry_their_types_schemas() {
        for (group, resource) in [
            ("workload.kcp.io", "synctargets"),
            ("scheduling.kcp.io", "locations"),
            ("scheduling.kcp.io", "placements"),
            ("apiresource.kcp.io", "apiresourceimports"),
        ] {
            let r = builtin_resources()
                .into_iter()
                .find(|r| r.group == group && r.resource == resource)
                .unwrap();
            let schema = r.schema.expect("schema");
            assert_eq!(schema["type"], "object", "{resource}");
            assert!(
                schema.pointer("/properties/spec/properties").is_some(),
                "{resource}"
            );
            assert!(r.status_subresource && !r.namespaced, "{resource}");
        }
        assert!(typed_schema("", "pods").is_none());
    }
}
