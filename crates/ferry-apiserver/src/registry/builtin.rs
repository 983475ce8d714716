//! Kubernetes' own built-in resources, served in every logical cluster, and
//! how a layer above writes down its own ([`BuiltinKind`]).

use super::{ResourceInfo, ScalePaths, ALL_VERBS};

/// The subresources a built-in resource serves beyond its main one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresources {
    None,
    /// `status`: writes to the main resource leave `.status` alone.
    Status,
    /// `status` and `scale` (at `.spec.replicas`, `.status.replicas` and
    /// `.status.selector`).
    StatusScale,
}

/// Which verbs a built-in resource serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verbs {
    All,
    /// Reviews (TokenReview, SubjectAccessReview, ...): not stored, `create` only.
    CreateOnly,
    /// Computed on read (ComponentStatus): `get` and `list` only.
    ReadOnly,
    /// Kept by the server itself: `get`, `list` and `watch`.
    Maintained,
}

/// A resource served built in, in every logical cluster, as whoever serves
/// it writes it down: Kubernetes' own in this module's table, a layer
/// above's in the [`super::BuiltinResources`] it gives the hub.
#[derive(Clone, Copy, Debug)]
pub struct BuiltinKind {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    sub: Subresources,
    categories: &'static [&'static str],
    verbs: Verbs,
    yields_plural: bool,
}

impl BuiltinKind {
    /// The fully served resource `group/version/resource` of `kind`, with its
    /// short names and subresources; its singular is the kind in lower case.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        resource: &'static str,
        kind: &'static str,
        namespaced: bool,
        short: &'static [&'static str],
        sub: Subresources,
    ) -> BuiltinKind {
        BuiltinKind {
            group,
            version,
            resource,
            kind,
            namespaced,
            short,
            sub,
            categories: &[],
            verbs: Verbs::All,
            yields_plural: false,
        }
    }

    /// In `categories` (`kubectl get all`).
    pub const fn in_categories(mut self, categories: &'static [&'static str]) -> BuiltinKind {
        self.categories = categories;
        self
    }

    /// Not stored, answered on `create` only (reviews).
    pub const fn create_only(mut self) -> BuiltinKind {
        self.verbs = Verbs::CreateOnly;
        self
    }

    /// Computed on read: `get` and `list` only.
    pub const fn read_only(mut self) -> BuiltinKind {
        self.verbs = Verbs::ReadOnly;
        self
    }

    /// Kept by the server itself; clients `get`, `list` and `watch` it.
    pub const fn maintained(mut self) -> BuiltinKind {
        self.verbs = Verbs::Maintained;
        self
    }

    /// Yields its plural to a logical cluster's own groups (see
    /// [`ResourceInfo::yields_plural`]).
    pub const fn yields_plural(mut self) -> BuiltinKind {
        self.yields_plural = true;
        self
    }

    /// How the hub serves it.
    pub fn info(&self) -> ResourceInfo {
        info(self)
    }
}

type Def = BuiltinKind;

const fn d(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    sub: Sub,
) -> Def {
    BuiltinKind::new(group, version, resource, kind, namespaced, short, sub)
}

type Sub = Subresources;

const fn create_only(def: Def) -> Def {
    def.create_only()
}

const fn read_only(def: Def) -> Def {
    def.read_only()
}

/// kube's `api-extensions` category: admission configuration.
const fn api_extensions(def: Def) -> Def {
    def.in_categories(&["api-extensions"])
}

const fn all(def: Def) -> Def {
    def.in_categories(&["all"])
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
];

/// Kubernetes' own built-in resources, served in every logical cluster.
pub fn kubernetes_resources() -> Vec<ResourceInfo> {
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
        verbs: match def.verbs {
            Verbs::CreateOnly => vec!["create".to_string()],
            Verbs::ReadOnly => vec!["get".to_string(), "list".to_string()],
            Verbs::Maintained => vec!["get".to_string(), "list".to_string(), "watch".to_string()],
            Verbs::All => ALL_VERBS.iter().map(|s| s.to_string()).collect(),
        },
        status_subresource: !matches!(def.sub, Sub::None),
        scale_subresource: scale,
        extra_subresources: extra,
        // Built-in columns are computed by `table::builtin_columns` at render time.
        printer_columns: Vec::new(),
        schema: None,
        selectable_fields: Vec::new(),
        storage_version: true,
        from_crd: false,
        binding: None,
        terminating: false,
        yields_plural: def.yields_plural,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_unique_per_group_version_resource() {
        let all = kubernetes_resources();
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
}
