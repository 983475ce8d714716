//! The kinds of kcp the hub serves built in, in every workspace, after
//! Kubernetes' own ([`BuiltinResources`]): its tenancy (Workspaces), its
//! APIs (APIExports, APIBindings, ...), its core LogicalCluster, and kcp
//! TMC's (SyncTargets, Locations, Placements, APIResourceImports). All are
//! in kcp's `kcp` category (`kubectl get kcp`), and each has the `kubectl
//! get` columns kcp prints for it ([`columns`]).

use std::sync::{Arc, LazyLock};

use ferry_apiserver::registry::{BuiltinKind, BuiltinResources, ResourceInfo};

use super::columns;
use serde_json::Value;

const fn kcp(group: &'static str, resource: &'static str, kind: &'static str) -> BuiltinKind {
    BuiltinKind::new(group, "v1alpha1", resource, kind).in_categories(&["kcp"])
}

const KINDS: &[BuiltinKind] = &[
    // kcp tenancy
    kcp("tenancy.kcp.io", "workspaces", "Workspace")
        .short_names(&["ws"])
        .with_status()
        .with_columns(columns::workspaces),
    // kcp's API exports (served by `crate::apis`)
    kcp("apis.kcp.io", "apiresourceschemas", "APIResourceSchema"),
    kcp("apis.kcp.io", "apiexports", "APIExport").with_status(),
    kcp("apis.kcp.io", "apiexportendpointslices", "APIExportEndpointSlice")
        .with_status()
        .with_columns(columns::api_export_endpoint_slices),
    kcp("apis.kcp.io", "apibindings", "APIBinding")
        .with_status()
        .with_columns(columns::api_bindings),
    // kcp TMC (see `crate::synctarget`): validated by the schemas of their
    // `ferry_api` types ([`typed_schemas`]). KubeStellar reuses their plurals
    // (`synctargets`, `locations`), which a workspace's own groups take.
    kcp("workload.kcp.io", "synctargets", "SyncTarget")
        .with_status()
        .yields_plural()
        .with_columns(columns::sync_targets),
    kcp("scheduling.kcp.io", "locations", "Location")
        .with_status()
        .yields_plural()
        .with_columns(columns::locations),
    kcp("scheduling.kcp.io", "placements", "Placement")
        .with_status()
        .yields_plural()
        .with_columns(columns::placements),
    kcp("apiresource.kcp.io", "apiresourceimports", "APIResourceImport")
        .with_status()
        .with_columns(columns::api_resource_imports),
    // kcp core: the `cluster` object describing each workspace, kept by the
    // logical cluster controller; clients read it, never write it.
    kcp("core.kcp.io", "logicalclusters", "LogicalCluster")
        .maintained()
        .with_columns(columns::logical_clusters),
];

/// kcp's kinds as the hub serves them, for the hub's extensions.
pub fn resources() -> BuiltinResources {
    static RESOURCES: LazyLock<Vec<ResourceInfo>> = LazyLock::new(|| {
        let schemas = typed_schemas();
        KINDS
            .iter()
            .map(|kind| {
                let info = kind.info();
                let schema = schemas
                    .iter()
                    .find(|(group, plural, _)| *group == info.group && *plural == info.resource)
                    .map(|(_, _, schema)| schema.clone());
                ResourceInfo { schema, ..info }
            })
            .collect()
    });
    BuiltinResources(RESOURCES.clone())
}

/// The `openAPIV3Schema`s of the kinds whose types live in `ferry_api`
/// (kcp's TMC kinds, which are CRDs in kcp), by group and plural: the hub
/// validates and prunes them as kcp's CRDs would, and publishes the schema
/// in OpenAPI.
fn typed_schemas() -> Vec<(String, String, Arc<Value>)> {
    use kube::CustomResourceExt;
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_apiserver::discovery::api_group_list;
    use ferry_apiserver::registry::{resources_from_crd, Registry};
    use kube::CustomResourceExt;
    use serde_json::json;

    #[test]
    fn kcps_kinds_are_served_once_each_and_none_as_kubernetes_own() {
        let kubernetes = Registry::default();
        let mut seen = std::collections::HashSet::new();
        for r in resources().0 {
            assert!(!kubernetes.is_builtin(&r.group, &r.resource), "{}", r.resource);
            assert!(
                seen.insert((r.group.clone(), r.resource.clone())),
                "{} twice",
                r.resource
            );
        }
        let hub = Registry::with_builtins(&resources().0);
        let workspaces = hub.lookup(Some("root"), "tenancy.kcp.io", "v1alpha1", "workspaces");
        assert_eq!(workspaces.map(|w| w.short_names), Some(vec!["ws".to_string()]));
    }

    #[test]
    fn kcps_kinds_carry_the_columns_kcp_prints() {
        let columns_of = |resource: &str| -> Vec<String> {
            let info = resources()
                .0
                .into_iter()
                .find(|r| r.resource == resource)
                .unwrap();
            info.printer_columns.into_iter().map(|c| c.name).collect()
        };
        assert_eq!(
            columns_of("synctargets"),
            [
                "Ready",
                "Heartbeat",
                "Schedulable",
                "Cluster",
                "Resources",
                "Capabilities",
                "Age"
            ]
        );
        assert_eq!(columns_of("workspaces")[0], "Type");
        assert_eq!(columns_of("apibindings"), ["Age", "Ready"]);
        // Those kcp gives no columns print Kubernetes' default, Age.
        assert!(columns_of("apiexports").is_empty());
    }

    #[test]
    fn kcp_tmc_kinds_carry_their_types_schemas() {
        let schema_of = |group: &str, resource: &str| {
            resources()
                .0
                .into_iter()
                .find(|r| r.group == group && r.resource == resource)
                .unwrap()
        };
        for (group, resource) in [
            ("workload.kcp.io", "synctargets"),
            ("scheduling.kcp.io", "locations"),
            ("scheduling.kcp.io", "placements"),
            ("apiresource.kcp.io", "apiresourceimports"),
        ] {
            let r = schema_of(group, resource);
            let schema = r.schema.expect("schema");
            assert_eq!(schema["type"], "object", "{resource}");
            assert!(
                schema.pointer("/properties/spec/properties").is_some(),
                "{resource}"
            );
            assert!(r.status_subresource && !r.namespaced, "{resource}");
        }
        assert!(schema_of("tenancy.kcp.io", "workspaces").schema.is_none());
    }

    #[test]
    fn kcps_kinds_decode_as_sent_and_have_no_kubernetes_schema() {
        use ferry_apiserver::decode::typed::decode;
        use ferry_apiserver::openapi::self_contained_builtin_schema;
        assert_eq!(
            decode(&json!({"spec": 5}), "tenancy.kcp.io", "Workspace", "v1alpha1"),
            Ok(vec![])
        );
        for r in resources().0 {
            assert_eq!(
                decode(&json!({"spec": 5}), &r.group, &r.kind, &r.version),
                Ok(vec![])
            );
            assert!(
                self_contained_builtin_schema(&r.group, &r.version, &r.kind).is_none(),
                "{}",
                r.kind
            );
        }
    }

    #[test]
    fn a_workspaces_own_group_comes_before_kcps_with_the_same_plural() {
        let served = |crd: Value| resources_from_crd(&crd).expect("a servable CRD");
        let json_of = |crd| serde_json::to_value(crd).expect("a CRD");
        let widgets = served(json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]},
        }));
        let kubestellar = [
            served(json_of(ferry_api::edge::Location::crd())),
            served(json_of(ferry_api::edge::SyncTarget::crd())),
        ]
        .concat();
        let groups = |own: &[ResourceInfo]| -> Vec<String> {
            let registry = Registry::with_builtins(&resources().0);
            registry.set_crd_resources("ws", own.to_vec());
            let list = api_group_list(&registry.resources(Some("ws")));
            list["groups"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|g| g["name"].as_str())
                .filter(|g| {
                    [
                        "workload.kcp.io",
                        "scheduling.kcp.io",
                        "edge.kubestellar.io",
                        "example.com",
                    ]
                    .contains(g)
                })
                .map(String::from)
                .collect()
        };
        // Only kcp's: as listed.
        assert_eq!(
            groups(&widgets),
            ["workload.kcp.io", "scheduling.kcp.io", "example.com"]
        );
        // KubeStellar's CRDs in the workspace: their group ahead of kcp's; others stay.
        assert_eq!(
            groups(&[widgets, kubestellar].concat()),
            [
                "edge.kubestellar.io",
                "workload.kcp.io",
                "scheduling.kcp.io",
                "example.com"
            ]
        );
    }
}
