//! Kubernetes' own built-in resources, served in every logical cluster, and
//! how a layer above writes down its own ([`BuiltinKind`]).

use super::{ResourceInfo, ScalePaths, ALL_VERBS};
use crate::table::PrinterColumn;

/// The subresources a built-in resource serves beyond its main one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subresources {
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
    columns: Option<fn() -> Vec<PrinterColumn>>,
}

impl BuiltinKind {
    /// The cluster-scoped resource `group/version/resource` of `kind`, fully
    /// served, with no short names nor subresources; its singular is the
    /// kind in lower case.
    pub const fn new(
        group: &'static str,
        version: &'static str,
        resource: &'static str,
        kind: &'static str,
    ) -> BuiltinKind {
        BuiltinKind {
            group,
            version,
            resource,
            kind,
            namespaced: false,
            short: &[],
            sub: Subresources::None,
            categories: &[],
            verbs: Verbs::All,
            yields_plural: false,
            columns: None,
        }
    }

    /// Namespaced.
    pub const fn namespaced(mut self) -> BuiltinKind {
        self.namespaced = true;
        self
    }

    /// With `short` names (`kubectl get deploy`).
    pub const fn short_names(mut self, short: &'static [&'static str]) -> BuiltinKind {
        self.short = short;
        self
    }

    /// With a `status` subresource.
    pub const fn with_status(mut self) -> BuiltinKind {
        self.sub = Subresources::Status;
        self
    }

    /// With `status` and `scale` subresources.
    pub const fn with_status_scale(mut self) -> BuiltinKind {
        self.sub = Subresources::StatusScale;
        self
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

    /// With the `kubectl get` columns `columns` gives, after `Name` (for a
    /// layer above's kinds; Kubernetes' own have theirs in
    /// [`crate::table::builtin_columns`]).
    pub const fn with_columns(mut self, columns: fn() -> Vec<PrinterColumn>) -> BuiltinKind {
        self.columns = Some(columns);
        self
    }

    /// How the hub serves it.
    pub fn info(&self) -> ResourceInfo {
        info(self)
    }
}

const DEFS: &[BuiltinKind] = &[
    // core/v1
    BuiltinKind::new("", "v1", "namespaces", "Namespace")
        .short_names(&["ns"])
        .with_status(),
    BuiltinKind::new("", "v1", "configmaps", "ConfigMap")
        .namespaced()
        .short_names(&["cm"]),
    BuiltinKind::new("", "v1", "secrets", "Secret").namespaced(),
    BuiltinKind::new("", "v1", "serviceaccounts", "ServiceAccount")
        .namespaced()
        .short_names(&["sa"]),
    BuiltinKind::new("", "v1", "services", "Service")
        .namespaced()
        .short_names(&["svc"])
        .with_status()
        .in_categories(&["all"]),
    BuiltinKind::new("", "v1", "endpoints", "Endpoints")
        .namespaced()
        .short_names(&["ep"]),
    BuiltinKind::new("", "v1", "pods", "Pod")
        .namespaced()
        .short_names(&["po"])
        .with_status()
        .in_categories(&["all"]),
    BuiltinKind::new("", "v1", "podtemplates", "PodTemplate").namespaced(),
    BuiltinKind::new("", "v1", "replicationcontrollers", "ReplicationController")
        .namespaced()
        .short_names(&["rc"])
        .with_status_scale()
        .in_categories(&["all"]),
    BuiltinKind::new("", "v1", "nodes", "Node")
        .short_names(&["no"])
        .with_status(),
    BuiltinKind::new("", "v1", "persistentvolumes", "PersistentVolume")
        .short_names(&["pv"])
        .with_status(),
    BuiltinKind::new("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
        .namespaced()
        .short_names(&["pvc"])
        .with_status(),
    BuiltinKind::new("", "v1", "events", "Event")
        .namespaced()
        .short_names(&["ev"]),
    BuiltinKind::new("", "v1", "limitranges", "LimitRange")
        .namespaced()
        .short_names(&["limits"]),
    BuiltinKind::new("", "v1", "resourcequotas", "ResourceQuota")
        .namespaced()
        .short_names(&["quota"])
        .with_status(),
    // Deprecated since 1.19 but still served; answered by `api::component_status`.
    BuiltinKind::new("", "v1", "componentstatuses", "ComponentStatus")
        .short_names(&["cs"])
        .read_only(),
    // apps/v1
    BuiltinKind::new("apps", "v1", "deployments", "Deployment")
        .namespaced()
        .short_names(&["deploy"])
        .with_status_scale()
        .in_categories(&["all"]),
    BuiltinKind::new("apps", "v1", "replicasets", "ReplicaSet")
        .namespaced()
        .short_names(&["rs"])
        .with_status_scale()
        .in_categories(&["all"]),
    BuiltinKind::new("apps", "v1", "statefulsets", "StatefulSet")
        .namespaced()
        .short_names(&["sts"])
        .with_status_scale()
        .in_categories(&["all"]),
    BuiltinKind::new("apps", "v1", "daemonsets", "DaemonSet")
        .namespaced()
        .short_names(&["ds"])
        .with_status()
        .in_categories(&["all"]),
    BuiltinKind::new("apps", "v1", "controllerrevisions", "ControllerRevision").namespaced(),
    // batch/v1
    BuiltinKind::new("batch", "v1", "jobs", "Job")
        .namespaced()
        .with_status()
        .in_categories(&["all"]),
    BuiltinKind::new("batch", "v1", "cronjobs", "CronJob")
        .namespaced()
        .short_names(&["cj"])
        .with_status()
        .in_categories(&["all"]),
    // autoscaling
    BuiltinKind::new(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "HorizontalPodAutoscaler",
    )
    .namespaced()
    .short_names(&["hpa"])
    .with_status()
    .in_categories(&["all"]),
    // networking
    BuiltinKind::new("networking.k8s.io", "v1", "ingresses", "Ingress")
        .namespaced()
        .short_names(&["ing"])
        .with_status(),
    BuiltinKind::new("networking.k8s.io", "v1", "ingressclasses", "IngressClass"),
    BuiltinKind::new("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy")
        .namespaced()
        .short_names(&["netpol"]),
    BuiltinKind::new("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
        .namespaced()
        .short_names(&["pdb"])
        .with_status(),
    BuiltinKind::new("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice").namespaced(),
    BuiltinKind::new("coordination.k8s.io", "v1", "leases", "Lease").namespaced(),
    BuiltinKind::new("events.k8s.io", "v1", "events", "Event")
        .namespaced()
        .short_names(&["ev"]),
    BuiltinKind::new("storage.k8s.io", "v1", "storageclasses", "StorageClass").short_names(&["sc"]),
    // Kinds kube-apiserver serves for its own components (admission,
    // scheduling, storage, flow control, DRA, service IPs): stored,
    // defaulted and validated here, acted on by nothing in the hub.
    BuiltinKind::new(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
    )
    .in_categories(&["api-extensions"]),
    BuiltinKind::new(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
    )
    .in_categories(&["api-extensions"]),
    BuiltinKind::new(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicies",
        "ValidatingAdmissionPolicy",
    )
    .with_status()
    .in_categories(&["api-extensions"]),
    BuiltinKind::new(
        "admissionregistration.k8s.io",
        "v1",
        "validatingadmissionpolicybindings",
        "ValidatingAdmissionPolicyBinding",
    )
    .in_categories(&["api-extensions"]),
    BuiltinKind::new(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingadmissionpolicies",
        "MutatingAdmissionPolicy",
    )
    .in_categories(&["api-extensions"]),
    BuiltinKind::new(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingadmissionpolicybindings",
        "MutatingAdmissionPolicyBinding",
    )
    .in_categories(&["api-extensions"]),
    BuiltinKind::new("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass").short_names(&["pc"]),
    BuiltinKind::new("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass"),
    BuiltinKind::new("storage.k8s.io", "v1", "csidrivers", "CSIDriver"),
    BuiltinKind::new("storage.k8s.io", "v1", "csinodes", "CSINode"),
    BuiltinKind::new(
        "storage.k8s.io",
        "v1",
        "csistoragecapacities",
        "CSIStorageCapacity",
    )
    .namespaced(),
    BuiltinKind::new("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment").with_status(),
    BuiltinKind::new(
        "storage.k8s.io",
        "v1",
        "volumeattributesclasses",
        "VolumeAttributesClass",
    )
    .short_names(&["vac"]),
    BuiltinKind::new("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema").with_status(),
    BuiltinKind::new(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "prioritylevelconfigurations",
        "PriorityLevelConfiguration",
    )
    .with_status(),
    BuiltinKind::new("resource.k8s.io", "v1", "deviceclasses", "DeviceClass"),
    BuiltinKind::new("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
        .namespaced()
        .with_status(),
    BuiltinKind::new(
        "resource.k8s.io",
        "v1",
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
    )
    .namespaced(),
    BuiltinKind::new("resource.k8s.io", "v1", "resourceslices", "ResourceSlice"),
    BuiltinKind::new("networking.k8s.io", "v1", "ipaddresses", "IPAddress").short_names(&["ip"]),
    BuiltinKind::new("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR").with_status(),
    // RBAC
    BuiltinKind::new("rbac.authorization.k8s.io", "v1", "roles", "Role").namespaced(),
    BuiltinKind::new("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding").namespaced(),
    BuiltinKind::new("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole"),
    BuiltinKind::new(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "ClusterRoleBinding",
    ),
    // API machinery
    BuiltinKind::new(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
    )
    .short_names(&["crd", "crds"])
    .with_status(),
    BuiltinKind::new("apiregistration.k8s.io", "v1", "apiservices", "APIService").with_status(),
    BuiltinKind::new(
        "certificates.k8s.io",
        "v1",
        "certificatesigningrequests",
        "CertificateSigningRequest",
    )
    .short_names(&["csr"])
    .with_status(),
    // Reviews: create-only, answered by `api::special`.
    BuiltinKind::new("authentication.k8s.io", "v1", "tokenreviews", "TokenReview").create_only(),
    BuiltinKind::new(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "SelfSubjectReview",
    )
    .create_only(),
    BuiltinKind::new(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "SelfSubjectAccessReview",
    )
    .create_only(),
    BuiltinKind::new(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "SelfSubjectRulesReview",
    )
    .create_only(),
    BuiltinKind::new(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "SubjectAccessReview",
    )
    .create_only(),
    BuiltinKind::new(
        "authorization.k8s.io",
        "v1",
        "localsubjectaccessreviews",
        "LocalSubjectAccessReview",
    )
    .namespaced()
    .create_only(),
];

/// Kubernetes' own built-in resources, served in every logical cluster.
pub fn kubernetes_resources() -> Vec<ResourceInfo> {
    DEFS.iter().map(info).collect()
}

fn info(def: &BuiltinKind) -> ResourceInfo {
    let scale = matches!(def.sub, Subresources::StatusScale).then(|| ScalePaths {
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
        status_subresource: !matches!(def.sub, Subresources::None),
        scale_subresource: scale,
        extra_subresources: extra,
        // Without its own, a kind's columns are Kubernetes' for it
        // (`table::builtin_columns`), computed at render time.
        printer_columns: def.columns.map(|columns| columns()).unwrap_or_default(),
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
