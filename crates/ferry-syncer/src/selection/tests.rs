use serde_json::json;

use super::*;

fn config(name: &str, spec: serde_json::Value) -> SyncerConfig {
    serde_json::from_value(json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1",
        "kind": "SyncerConfig",
        "metadata": { "name": name },
        "spec": spec,
    }))
    .unwrap()
}

fn selection(configs: &[SyncerConfig]) -> SyncSelection {
    let (selection, errors) = SyncSelection::from_configs(configs);
    assert_eq!(errors, vec![]);
    selection
}

fn id(group: &str, version: &str, resource: &str, namespaced: bool) -> ResourceId {
    ResourceId::new(group, version, resource, namespaced)
}

fn discovered(
    group: &str,
    version: &str,
    resource: &str,
    kind: &str,
    namespaced: bool,
) -> DiscoveredResource {
    DiscoveredResource {
        group: group.into(),
        version: version.into(),
        resource: resource.into(),
        kind: kind.into(),
        namespaced,
        verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
            .map(String::from)
            .to_vec(),
        preferred: true,
    }
}

fn configmaps() -> ResourceId {
    id("", "v1", "configmaps", true)
}

#[test]
fn absent_objects_means_all_and_empty_means_none() {
    let s = selection(&[config(
        "c",
        json!({ "clusterScope": [
            { "group": "rbac.authorization.k8s.io", "apiVersion": "v1", "resource": "clusterroles" },
            { "group": "", "apiVersion": "v1", "resource": "persistentvolumes", "objects": [] },
            { "group": "kyverno.io", "apiVersion": "v1", "resource": "clusterpolicies", "objects": ["a", "b"] },
        ]}),
    )]);
    assert!(s.wants_downsync(
        &id("rbac.authorization.k8s.io", "v1", "clusterroles", false),
        None,
        "anything"
    ));
    assert!(!s.wants_downsync(&id("", "v1", "persistentvolumes", false), None, "pv1"));
    assert!(s.wants_downsync(&id("kyverno.io", "v1", "clusterpolicies", false), None, "a"));
    assert!(!s.wants_downsync(&id("kyverno.io", "v1", "clusterpolicies", false), None, "c"));
}

#[test]
fn star_in_objects_means_all() {
    let s = selection(&[config(
        "c",
        json!({ "clusterScope": [{ "group": "kyverno.io", "apiVersion": "v1", "resource": "clusterpolicies", "objects": ["*"] }]}),
    )]);
    assert!(s.wants_downsync(
        &id("kyverno.io", "v1", "clusterpolicies", false),
        None,
        "whatever"
    ));
}

#[test]
fn namespace_scope_is_namespaces_times_resources_of_the_same_config() {
    let s = selection(&[
        config(
            "a",
            json!({ "namespaceScope": { "namespaces": ["ns1"], "resources": [{ "group": "", "apiVersion": "v1", "resource": "configmaps" }] } }),
        ),
        config(
            "b",
            json!({ "namespaceScope": { "namespaces": ["ns2"], "resources": [{ "group": "apps", "apiVersion": "v1", "resource": "deployments" }] } }),
        ),
    ]);
    let deployments = id("apps", "v1", "deployments", true);
    assert!(s.wants_downsync(&configmaps(), Some("ns1"), "x"));
    assert!(s.wants_downsync(&deployments, Some("ns2"), "x"));
    assert!(
        !s.wants_downsync(&configmaps(), Some("ns2"), "x"),
        "configs must not cross-multiply"
    );
    assert!(!s.wants_downsync(&deployments, Some("ns1"), "x"));
    assert!(!s.wants_downsync(&configmaps(), Some("other"), "x"));
}

#[test]
fn listed_namespaces_are_downsynced_as_namespace_objects() {
    let s = selection(&[config(
        "a",
        json!({ "namespaceScope": { "namespaces": ["kyverno"], "resources": [{ "group": "", "apiVersion": "v1", "resource": "configmaps" }] } }),
    )]);
    let namespaces = id("", "v1", "namespaces", false);
    assert!(s.wants_downsync(&namespaces, None, "kyverno"));
    assert!(!s.wants_downsync(&namespaces, None, "default"));
    assert_eq!(s.downstream_namespaces(), BTreeSet::from(["kyverno".to_string()]));
    assert!(s.downsync_patterns().iter().any(|p| p.resource == "namespaces"));
}

#[test]
fn namespaced_objects_select_by_namespace_and_name() {
    let s = selection(&[config(
        "a",
        json!({ "namespacedObjects": [{ "group": "", "apiVersion": "v1", "resource": "configmaps",
            "objectsByNamespace": [{ "namespace": "test", "names": ["cm1"] }, { "namespace": "all", "names": ["*"] }] }] }),
    )]);
    assert!(s.wants_downsync(&configmaps(), Some("test"), "cm1"));
    assert!(!s.wants_downsync(&configmaps(), Some("test"), "cm2"));
    assert!(s.wants_downsync(&configmaps(), Some("all"), "cm2"));
    assert!(!s.wants_downsync(&configmaps(), Some("elsewhere"), "cm1"));
    assert!(!s.wants_downsync(&id("", "v1", "secrets", true), Some("test"), "cm1"));
}

#[test]
fn upsync_matches_group_resource_namespace_and_name_and_takes_precedence() {
    let s = selection(&[config(
        "a",
        json!({
            "namespaceScope": { "namespaces": ["policy"], "resources": [{ "group": "wgpolicyk8s.io", "apiVersion": "v1alpha2", "resource": "*" }] },
            "upsync": [{ "apiGroup": "wgpolicyk8s.io", "resources": ["policyreports", "clusterpolicyreports"], "namespaces": ["policy"], "names": ["*"] }],
        }),
    )]);
    let reports = id("wgpolicyk8s.io", "v1alpha2", "policyreports", true);
    let cluster_reports = id("wgpolicyk8s.io", "v1alpha2", "clusterpolicyreports", false);
    assert!(s.wants_upsync(&reports, Some("policy"), "r1"));
    assert!(!s.wants_upsync(&reports, Some("default"), "r1"));
    assert!(
        s.wants_upsync(&cluster_reports, None, "c1"),
        "namespaces do not apply to cluster-scoped objects"
    );
    assert!(
        !s.wants_downsync(&reports, Some("policy"), "r1"),
        "upsync wins over downsync"
    );
    assert_eq!(s.upstream_namespaces(), BTreeSet::from(["policy".to_string()]));
}

#[test]
fn merging_identical_configs_deduplicates() {
    let spec = json!({
        "namespaceScope": { "namespaces": ["ns"], "resources": [{ "group": "", "apiVersion": "v1", "resource": "configmaps" }] },
        "clusterScope": [{ "group": "", "apiVersion": "v1", "resource": "persistentvolumes", "objects": ["a"] }],
        "upsync": [{ "apiGroup": "x.io", "resources": ["things"], "names": ["*"] }],
    });
    let one = selection(&[config("a", spec.clone())]);
    let two = selection(&[config("a", spec.clone()), config("b", spec)]);
    assert_eq!(one, two);
    assert_eq!(two.downsync_patterns().len(), 3);
}

#[test]
fn merged_cluster_scope_names_are_the_union() {
    let s = selection(&[
        config(
            "a",
            json!({ "clusterScope": [{ "group": "", "apiVersion": "v1", "resource": "persistentvolumes", "objects": ["a"] }] }),
        ),
        config(
            "b",
            json!({ "clusterScope": [{ "group": "", "apiVersion": "v1", "resource": "persistentvolumes", "objects": ["b"] }] }),
        ),
    ]);
    let pvs = id("", "v1", "persistentvolumes", false);
    assert!(s.wants_downsync(&pvs, None, "a") && s.wants_downsync(&pvs, None, "b"));
    assert!(!s.wants_downsync(&pvs, None, "c"));
}

#[test]
fn invalid_entry_is_reported_and_skipped_while_the_rest_applies() {
    let (s, errors) = SyncSelection::from_configs(&[config(
        "a",
        json!({ "clusterScope": [
            { "group": "", "apiVersion": "v1", "resource": "" },
            { "group": "", "apiVersion": "v1", "resource": "persistentvolumes" },
        ]}),
    )]);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "spec.clusterScope[0].resource");
    assert!(s.wants_downsync(&id("", "v1", "persistentvolumes", false), None, "pv"));
    assert_eq!(s.downsync_patterns().len(), 1);
}

#[test]
fn wildcard_resources_expand_against_discovery_in_the_right_scope() {
    let s = selection(&[config(
        "a",
        json!({ "namespaceScope": { "namespaces": ["ns"], "resources": [{ "group": "", "apiVersion": "v1", "resource": "*" }] } }),
    )]);
    let mut not_watchable = discovered("", "v1", "bindings", "Binding", true);
    not_watchable.verbs = vec!["create".into()];
    let upstream = vec![
        discovered("", "v1", "configmaps", "ConfigMap", true),
        discovered("", "v1", "configmaps/status", "ConfigMap", true),
        discovered("", "v1", "secrets", "Secret", true),
        discovered("", "v1", "events", "Event", true),
        discovered("", "v1", "namespaces", "Namespace", false),
        discovered("", "v1", "persistentvolumes", "PersistentVolume", false),
        not_watchable,
    ];
    let resolution = s.resolve_downsync(&upstream);
    let resources: Vec<&str> = resolution
        .targets
        .iter()
        .map(|t| t.id.resource.as_str())
        .collect();
    // configmaps and secrets from `*`; namespaces because `ns` is listed.
    assert_eq!(resources, ["configmaps", "namespaces", "secrets"]);
    assert_eq!(resolution.unresolved, vec![]);
    assert!(resolution
        .targets
        .iter()
        .all(|t| t.direction == Direction::Downsync));
}

#[test]
fn unknown_or_wrongly_scoped_resources_are_reported_not_fatal() {
    let s = selection(&[config(
        "a",
        json!({
            "namespaceScope": { "namespaces": ["ns"], "resources": [
                { "group": "rbac.authorization.k8s.io", "apiVersion": "v1", "resource": "clusterroles" },
                { "group": "", "apiVersion": "v1", "resource": "configmaps" },
            ]},
            "clusterScope": [{ "group": "example.com", "apiVersion": "v1", "resource": "widgets" }],
        }),
    )]);
    let upstream = vec![
        discovered("", "v1", "configmaps", "ConfigMap", true),
        discovered("", "v1", "namespaces", "Namespace", false),
        discovered(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterroles",
            "ClusterRole",
            false,
        ),
    ];
    let resolution = s.resolve_downsync(&upstream);
    assert_eq!(
        resolution.targets.len(),
        2,
        "configmaps and namespaces still resolve"
    );
    let reasons: Vec<_> = resolution.unresolved.iter().map(|u| u.reason.clone()).collect();
    assert_eq!(
        reasons,
        vec![
            UnresolvedReason::WrongScope { namespaced: false },
            UnresolvedReason::NotServed
        ]
    );
    assert!(resolution.unresolved[0]
        .to_string()
        .contains("list it under clusterScope"));
    assert!(resolution.unresolved[1].to_string().contains("install its CRD"));
}

#[test]
fn upsync_uses_the_preferred_version_from_discovery() {
    let s = selection(&[config(
        "a",
        json!({ "upsync": [{ "apiGroup": "my.domain", "resources": ["*"], "names": ["*"] }] }),
    )]);
    let mut old = discovered("my.domain", "v1alpha1", "sampleupsyncs", "SampleUpsync", false);
    old.preferred = false;
    let downstream = vec![
        old,
        discovered("my.domain", "v1", "sampleupsyncs", "SampleUpsync", false),
    ];
    let resolution = s.resolve_upsync(&downstream);
    assert_eq!(resolution.targets.len(), 1);
    assert_eq!(
        resolution.targets[0].id,
        id("my.domain", "v1", "sampleupsyncs", false)
    );
    assert_eq!(resolution.targets[0].kind, "SampleUpsync");
    assert_eq!(resolution.targets[0].direction, Direction::Upsync);
}

#[test]
fn empty_configs_select_nothing() {
    let s = selection(&[config("the-one", json!({}))]);
    assert!(s.is_empty());
    assert!(!s.wants_downsync(&configmaps(), Some("default"), "x"));
    assert!(s.downsync_patterns().is_empty() && s.upsync_patterns().is_empty());
}

#[test]
fn cluster_local_objects_are_never_synced() {
    let none = serde_json::Value::Null;
    assert!(is_cluster_local(&configmaps(), "kube-root-ca.crt", &none));
    assert!(!is_cluster_local(&configmaps(), "settings", &none));
    assert!(is_cluster_local(
        &id("", "v1", "serviceaccounts", true),
        "default",
        &none
    ));
    let token = json!({ "type": "kubernetes.io/service-account-token" });
    assert!(is_cluster_local(
        &id("", "v1", "secrets", true),
        "default-token-x",
        &token
    ));
    assert!(!is_cluster_local(
        &id("", "v1", "secrets", true),
        "creds",
        &json!({ "type": "Opaque" })
    ));
    assert!(!is_cluster_local(
        &id("example.com", "v1", "configmaps", true),
        "kube-root-ca.crt",
        &none
    ));
}

#[test]
fn the_api_servers_own_kubernetes_service_is_never_synced() {
    let in_default = json!({ "metadata": { "namespace": "default", "name": "kubernetes" } });
    let elsewhere = json!({ "metadata": { "namespace": "apps", "name": "kubernetes" } });
    let services = id("", "v1", "services", true);
    assert!(is_cluster_local(&services, "kubernetes", &in_default));
    assert!(is_cluster_local(
        &id("", "v1", "endpoints", true),
        "kubernetes",
        &in_default
    ));
    assert!(is_cluster_local(
        &id("discovery.k8s.io", "v1", "endpointslices", true),
        "kubernetes",
        &in_default
    ));
    assert!(!is_cluster_local(&services, "kubernetes", &elsewhere));
    assert!(!is_cluster_local(&services, "web", &in_default));
    assert!(!is_cluster_local(
        &id("example.com", "v1", "services", true),
        "kubernetes",
        &in_default
    ));
}
