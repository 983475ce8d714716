//! KubeStellar's edge service provider workspace (ESPW): `root:espw` holds
//! the KubeStellar API (edge and control) as kcp APIResourceSchemas and exports it as the
//! APIExport `edge.kubestellar.io`; workload management workspaces bind it as
//! `bind-espw`, inventory workspaces likewise, and mailbox workspaces as
//! `bind-edge` (the mailbox controller's name). These are the objects
//! `kubectl ferry kubestellar init` writes, as plain values.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{json, Value};

/// The ESPW's name under root.
pub const WORKSPACE: &str = "espw";
/// The ESPW's path.
pub const PATH: &str = "root:espw";
/// The APIExport of the KubeStellar API, in the ESPW.
pub const EXPORT: &str = "edge.kubestellar.io";
/// What a workload management (or inventory) workspace names its binding.
pub const WMW_BINDING: &str = "bind-espw";
/// What the mailbox controller names the binding in a mailbox workspace.
pub const MAILBOX_BINDING: &str = "bind-edge";
/// The inventory management workspace `kubestellar init` creates under root.
pub const DEFAULT_IMW: &str = "imw1";
/// The ClusterRole (and its binding) in the ESPW letting every
/// authenticated user bind the export.
pub const BIND_ROLE: &str = "edge.kubestellar.io:bind";
/// Prefix of the exported APIResourceSchemas' names (`<prefix>.<plural>.<group>`).
pub const SCHEMA_PREFIX: &str = "v2alpha1";

/// Groups the export carries: KubeStellar's edge API; its control API
/// (`control.kubestellar.io`: CustomTransform, StatusCollector and
/// CombinedStatus, which a KubeStellar user writes, and reads, in the
/// workload management workspace); and Ferry's PlacementSummary, which the
/// placement translator writes there.
const EXPORTED_GROUPS: &[&str] = &[super::GROUP, crate::control::GROUP, "edge.ferry.dev"];

/// The CRDs whose resources the export serves.
pub fn exported_crds() -> Vec<CustomResourceDefinition> {
    crate::all_crds()
        .into_iter()
        .filter(|crd| EXPORTED_GROUPS.contains(&crd.spec.group.as_str()))
        .collect()
}

/// Whether `group`/`resource` is one the export serves.
pub fn exports(group: &str, resource: &str) -> bool {
    exported_crds()
        .iter()
        .any(|crd| crd.spec.group == group && crd.spec.names.plural == resource)
}

/// The APIResourceSchema standing for `crd`: the same spec, each version's
/// `schema.openAPIV3Schema` as `schema`, named `<prefix>.<plural>.<group>`.
pub fn schema_of(crd: &CustomResourceDefinition) -> Value {
    let mut spec = serde_json::to_value(&crd.spec).unwrap_or_else(|_| json!({}));
    if let Some(versions) = spec.get_mut("versions").and_then(Value::as_array_mut) {
        for v in versions {
            if let Some(s) = v.pointer("/schema/openAPIV3Schema").cloned() {
                v["schema"] = s;
            }
        }
    }
    if let Some(m) = spec.as_object_mut() {
        // kcp's schemas have no conversion or preserveUnknownFields.
        m.remove("conversion");
        m.remove("preserveUnknownFields");
    }
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": format!("{SCHEMA_PREFIX}.{}.{}", crd.spec.names.plural, crd.spec.group)},
        "spec": spec,
    })
}

/// What the ESPW holds, in the order to create it: the schemas, the export
/// listing them, and the grant letting every authenticated user bind (and
/// read) the export — kcp's way of offering an API to every workspace. The
/// grant reaches nothing else: reading what tenants store through the
/// export's virtual workspace needs `apiexports/content`, which only the
/// ESPW's owner holds.
pub fn objects() -> Vec<Value> {
    let schemas: Vec<Value> = exported_crds().iter().map(schema_of).collect();
    let names: Vec<Value> = schemas.iter().map(|s| s["metadata"]["name"].clone()).collect();
    let mut out = schemas;
    out.push(json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport",
        "metadata": {"name": EXPORT},
        "spec": {"latestResourceSchemas": names},
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": BIND_ROLE},
        "rules": [
            {"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"], "resourceNames": [EXPORT], "verbs": ["bind", "get"]},
            // Entering the workspace at all (kcp's workspace access check).
            {"nonResourceURLs": ["/"], "verbs": ["access"]},
        ],
    }));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": BIND_ROLE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": BIND_ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}],
    }));
    out
}

/// An APIBinding named `name` of the ESPW's export.
pub fn binding(name: &str) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding",
        "metadata": {"name": name},
        "spec": {"reference": {"export": {"path": PATH, "name": EXPORT}}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_export_lists_a_schema_per_kubestellar_resource() {
        let objs = objects();
        let export = objs.iter().find(|o| o["kind"] == "APIExport").unwrap();
        let listed = export["spec"]["latestResourceSchemas"].as_array().unwrap();
        assert!(listed.contains(&json!("v2alpha1.edgeplacements.edge.kubestellar.io")));
        assert!(listed.contains(&json!("v2alpha1.syncerconfigs.edge.kubestellar.io")));
        assert!(listed.iter().any(|n| n
            .as_str()
            .unwrap()
            .ends_with(".placementsummaries.edge.ferry.dev")));
        // kcp's TMC and api-syncagent kinds are not KubeStellar's.
        assert!(!listed
            .iter()
            .any(|n| n.as_str().unwrap().ends_with("workload.kcp.io")));
        for control in ["statuscollectors", "combinedstatuses", "customtransforms"] {
            assert!(exports("control.kubestellar.io", control), "{control}");
        }
        assert!(exports("edge.kubestellar.io", "synctargets"));
        assert!(!exports("workload.kcp.io", "synctargets"));
    }

    #[test]
    fn a_schema_carries_the_crds_openapi_schema_unwrapped() {
        let crd = exported_crds().into_iter().next().unwrap();
        let schema = schema_of(&crd);
        let v = &schema["spec"]["versions"][0];
        assert!(v["schema"]["properties"].is_object(), "{v}");
        assert!(v["schema"].get("openAPIV3Schema").is_none());
    }

    #[test]
    fn the_grant_is_bind_and_get_on_the_export_only() {
        let objs = objects();
        let role = objs.iter().find(|o| o["kind"] == "ClusterRole").unwrap();
        assert_eq!(role["rules"][0]["resourceNames"], json!([EXPORT]));
        assert_eq!(role["rules"][0]["verbs"], json!(["bind", "get"]));
        assert_eq!(binding(WMW_BINDING)["spec"]["reference"]["export"]["path"], PATH);
    }
}
