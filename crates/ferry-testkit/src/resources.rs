//! The `ApiResource`s tests name, built once here.

use kube::core::{ApiResource, GroupVersionKind};

/// The resource `plural` of `kind` in `group`/`version` (`""` for the core group).
pub fn ar(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

pub fn namespaces() -> ApiResource {
    ar("", "v1", "Namespace", "namespaces")
}
pub fn configmaps() -> ApiResource {
    ar("", "v1", "ConfigMap", "configmaps")
}
pub fn secrets() -> ApiResource {
    ar("", "v1", "Secret", "secrets")
}
pub fn events() -> ApiResource {
    ar("", "v1", "Event", "events")
}
pub fn deployments() -> ApiResource {
    ar("apps", "v1", "Deployment", "deployments")
}
pub fn crds() -> ApiResource {
    ar(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
    )
}
pub fn workspaces() -> ApiResource {
    ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces")
}
pub fn syncer_configs() -> ApiResource {
    ar("edge.kubestellar.io", "v2alpha1", "SyncerConfig", "syncerconfigs")
}
/// The example kinds of [`crate::cluster::crd`] in group `example.com`.
pub fn widgets() -> ApiResource {
    ar("example.com", "v1", "Widget", "widgets")
}
pub fn reports() -> ApiResource {
    ar("example.com", "v1", "Report", "reports")
}
pub fn gadgets() -> ApiResource {
    ar("example.com", "v1", "Gadget", "gadgets")
}
pub fn pods() -> ApiResource {
    ar("", "v1", "Pod", "pods")
}
pub fn service_accounts() -> ApiResource {
    ar("", "v1", "ServiceAccount", "serviceaccounts")
}
pub fn cluster_roles() -> ApiResource {
    ar("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles")
}
pub fn cluster_role_bindings() -> ApiResource {
    ar(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
    )
}
/// kcp TMC's SyncTargets (`workload.kcp.io`; KubeStellar's are `edge.kubestellar.io`'s).
pub fn workload_sync_targets() -> ApiResource {
    ar("workload.kcp.io", "v1alpha1", "SyncTarget", "synctargets")
}
/// The kcp api-syncagent's PublishedResources.
pub fn published_resources() -> ApiResource {
    ar(
        "syncagent.kcp.io",
        "v1alpha1",
        "PublishedResource",
        "publishedresources",
    )
}
