//! The TMC profile's pure parts: keys, namespaces, marks, selection.

use serde_json::json;

use super::*;
use crate::transform::desired_copy_with;

fn tmc() -> Arc<Tmc> {
    let target = SyncTargetLocator {
        cluster: "root-org".into(),
        name: "east".into(),
        uid: "uid-1".into(),
        ..Default::default()
    };
    // A client is only built here (never used): it needs a runtime to exist in.
    let runtime = Box::leak(Box::new(tokio::runtime::Runtime::new().unwrap()));
    let _entered = runtime.enter();
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    Tmc::new(target, TmcOptions::new("uid-1"), client)
}

fn target(group: &str, resource: &str, kind: &str, namespaced: bool, direction: Direction) -> WatchTarget {
    WatchTarget {
        id: ResourceId::new(group, "v1", resource, namespaced),
        kind: kind.into(),
        direction,
    }
}

fn upstream(cluster: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        cluster: Some(Arc::from(cluster)),
        namespace: namespace.map(str::to_owned),
        name: name.into(),
    }
}

#[test]
fn the_key_is_kcps_sync_target_key() {
    let tmc = tmc();
    assert_eq!(
        tmc.key(),
        ferry_api::workload::sync_target_key("root-org", "east")
    );
    assert_eq!(
        tmc.copy_selector(Side::Downstream),
        format!("internal.workload.kcp.io/cluster={}", tmc.key())
    );
    assert_eq!(
        tmc.copy_selector(Side::Upstream),
        format!("state.workload.kcp.io/{}=Upsync", tmc.key())
    );
    assert_eq!(
        tmc.finalizer(),
        Some(format!("workload.kcp.io/syncer-{}", tmc.key()))
    );
}

#[test]
fn upstream_namespaces_map_to_kcp_hash_namespaces_and_back() {
    let tmc = tmc();
    let cms = target("", "configmaps", "ConfigMap", true, Direction::Downsync);
    let source = upstream("ws1", Some("app"), "settings");
    let dest = tmc.dest_ref(&cms, &source);
    let expected = NamespaceLocator::new(tmc.target(), "ws1", "app").downstream_namespace();
    assert_eq!(dest.namespace.as_deref(), Some(expected.as_str()));
    assert_eq!(dest.cluster, None);
    assert_eq!(dest.name, "settings");
    assert_eq!(tmc.source_ref(&cms, &dest), Some(source));
    // The same namespace name in another workspace lands elsewhere.
    let other = tmc.dest_ref(&cms, &upstream("ws2", Some("app"), "settings"));
    assert_ne!(other.namespace, dest.namespace);
    // A Namespace maps to the same name its objects land in.
    let nss = target("", "namespaces", "Namespace", false, Direction::Downsync);
    let ns = tmc.dest_ref(&nss, &upstream("ws1", None, "app"));
    assert_eq!(Some(ns.name.clone()), dest.namespace);
    assert_eq!(tmc.source_ref(&nss, &ns), Some(upstream("ws1", None, "app")));
    // A copy in a namespace nobody maps to has no source.
    assert_eq!(
        tmc.source_ref(&cms, &ObjectRef::new(Some("kcp-unknown"), "x")),
        None
    );
}

#[test]
fn the_root_ca_is_renamed_on_the_way_down() {
    let tmc = tmc();
    let cms = target("", "configmaps", "ConfigMap", true, Direction::Downsync);
    let source = upstream("ws1", Some("app"), "kube-root-ca.crt");
    let dest = tmc.dest_ref(&cms, &source);
    assert_eq!(dest.name, "kcp-root-ca.crt");
    assert_eq!(tmc.source_ref(&cms, &dest), Some(source));
    let obj = json!({ "metadata": { "name": "kube-root-ca.crt", "namespace": "app" } });
    assert!(!tmc.is_cluster_local(&cms.id, "kube-root-ca.crt", &obj));
}

#[test]
fn objects_labelled_sync_go_down_until_the_deletion_handshake() {
    let tmc = tmc();
    let cms = target("", "configmaps", "ConfigMap", true, Direction::Downsync);
    let key = upstream("ws1", Some("app"), "a");
    let label = workload_state_label(tmc.key());
    let mut obj =
        json!({ "metadata": { "name": "a", "namespace": "app", "labels": { label.as_str(): "Sync" } } });
    assert!(tmc.wants(&cms, &key, &obj));
    obj["metadata"]["labels"][label.as_str()] = json!("");
    assert!(!tmc.wants(&cms, &key, &obj), "pending");
    obj["metadata"]["labels"][label.as_str()] = json!("Sync");
    let deletion = workload_deletion_annotation(tmc.key());
    let soft = workload_soft_finalizers_annotation(tmc.key());
    obj["metadata"]["annotations"] =
        json!({ deletion.as_str(): "2024-01-01T00:00:00Z", soft.as_str(): "[\"x\"]" });
    assert!(tmc.wants(&cms, &key, &obj), "a soft finalizer holds it");
    obj["metadata"]["annotations"][soft.as_str()] = json!("[]");
    assert!(!tmc.wants(&cms, &key, &obj), "no soft finalizer left");
}

#[test]
fn a_copy_is_labelled_stripped_and_carries_the_locator_on_its_namespace() {
    let tmc = tmc();
    let label = workload_state_label(tmc.key());
    let deployments = target("apps", "deployments", "Deployment", true, Direction::Downsync);
    let source_key = upstream("ws1", Some("app"), "web");
    let source = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "web", "namespace": "app", "uid": "u", "resourceVersion": "9",
            "labels": { label.as_str(): "Sync", "app": "web" },
            "annotations": { "kcp.io/cluster": "ws1",
                // Another SyncTarget's bookkeeping, set while it is drained.
                "deletion.internal.workload.kcp.io/other": "2024-05-01T11:58:56Z",
                "finalizers.workload.kcp.io/other": "",
                "experimental.status.workload.kcp.io/other": "{}" },
            "finalizers": [tmc.finalizer().unwrap()],
            "ownerReferences": [{ "apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "x" }],
            "managedFields": [{}] },
        "spec": { "template": { "spec": { "serviceAccountName": "sa", "containers": [] } } },
        "status": { "readyReplicas": 1 }
    });
    let dest = tmc.dest_ref(&deployments, &source_key);
    let ty = crate::transform::ObjectType::new("apps/v1", "Deployment");
    let copy = desired_copy_with(&source, Direction::Downsync, &dest, &ty, &*tmc, |copy| {
        tmc.transform(&deployments, &source_key, &source, copy)
    });
    let meta = &copy["metadata"];
    assert_eq!(meta["namespace"].as_str(), dest.namespace.as_deref());
    assert_eq!(meta["labels"][WORKLOAD_CLUSTER_LABEL], tmc.key());
    assert!(
        meta["labels"].get(&label).is_none(),
        "the state label is replaced"
    );
    assert_eq!(meta["labels"]["app"], "web");
    for gone in [
        "uid",
        "resourceVersion",
        "finalizers",
        "ownerReferences",
        "managedFields",
    ] {
        assert!(meta.get(gone).is_none(), "{gone}: {copy}");
    }
    for gone in [
        "kcp.io/cluster",
        "deletion.internal.workload.kcp.io/other",
        "finalizers.workload.kcp.io/other",
        "experimental.status.workload.kcp.io/other",
    ] {
        assert!(meta["annotations"].get(gone).is_none(), "{gone}: {copy}");
    }
    assert!(copy.get("status").is_none());
    assert_eq!(
        copy["spec"]["template"]["spec"]["automountServiceAccountToken"],
        false
    );
    assert!(tmc.is_own_copy(&copy));
    assert!(tmc.is_orphaned_copy(&copy, Side::Downstream));
    assert!(!tmc.is_orphaned_copy(&copy, Side::Upstream));

    let nss = target("", "namespaces", "Namespace", false, Direction::Downsync);
    let ns_key = upstream("ws1", None, "app");
    let mut ns_copy = json!({ "metadata": { "name": dest.namespace } });
    tmc.transform(&nss, &ns_key, &json!({}), &mut ns_copy);
    let locator = NamespaceLocator::parse(
        ns_copy["metadata"]["annotations"][NAMESPACE_LOCATOR_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(locator, NamespaceLocator::new(tmc.target(), "ws1", "app"));
    let wanted = tmc
        .dest_namespace(&deployments, &source_key, dest.namespace.as_deref().unwrap())
        .unwrap();
    assert_eq!(
        wanted["metadata"]["annotations"][NAMESPACE_LOCATOR_ANNOTATION],
        ns_copy["metadata"]["annotations"][NAMESPACE_LOCATOR_ANNOTATION]
    );
}

#[test]
fn releasing_a_source_drops_the_finalizer_the_deletion_annotation_and_the_state_label() {
    let tmc = tmc();
    let patch = tmc.release_source_patch(vec![json!("other")]);
    assert_eq!(patch["metadata"]["finalizers"], json!(["other"]));
    assert!(patch["metadata"]["labels"][workload_state_label(tmc.key())].is_null());
    let annotations = patch["metadata"]["annotations"].as_object().unwrap();
    assert!(annotations.contains_key(&workload_deletion_annotation(tmc.key())));
    assert!(annotations.contains_key(&workload_status_annotation(tmc.key())));
    assert_eq!(tmc.apply_manager(), Some("syncer"));
}

#[test]
fn status_goes_into_this_targets_annotation_only_while_another_target_syncs_the_object() {
    let tmc = tmc();
    let deployments = target("apps", "deployments", "Deployment", true, Direction::Downsync);
    let mine = workload_state_label(tmc.key());
    let alone = json!({ "metadata": { "labels": { mine.as_str(): "Sync" } } });
    assert_eq!(tmc.status_annotation(&deployments, &alone), None);
    let shared =
        json!({ "metadata": { "labels": { mine.as_str(): "Sync", "state.workload.kcp.io/other": "Sync" } } });
    assert_eq!(
        tmc.status_annotation(&deployments, &shared),
        Some(workload_status_annotation(tmc.key()))
    );
    let pods = target("", "pods", "Pod", true, Direction::Upsync);
    assert_eq!(tmc.status_annotation(&pods, &shared), None);
}

#[test]
fn pods_labelled_upsync_go_up_once_their_namespace_is_known() {
    let tmc = tmc();
    let pods = target("", "pods", "Pod", true, Direction::Upsync);
    let label = workload_state_label(tmc.key());
    let pod = json!({ "metadata": { "name": "p", "labels": { label.as_str(): "Upsync" } } });
    let known = tmc.downstream_namespace(&Arc::from("ws1"), "app");
    let source = ObjectRef::new(Some(&known), "p");
    assert!(tmc.wants(&pods, &source, &pod));
    assert!(!tmc.is_own_copy(&pod), "a downstream source, not a copy");
    assert!(!tmc.wants(&pods, &ObjectRef::new(Some("kcp-unknown"), "p"), &pod));
    let dest = tmc.dest_ref(&pods, &source);
    assert_eq!(dest, upstream("ws1", Some("app"), "p"));
    assert_eq!(tmc.source_ref(&pods, &dest), Some(source));
    let mut copy = pod.clone();
    tmc.transform(
        &pods,
        &dest,
        &json!({ "metadata": { "resourceVersion": "42" } }),
        &mut copy,
    );
    tmc.mark(&mut copy, Direction::Upsync);
    assert_eq!(copy["metadata"]["annotations"][WORKLOAD_RV_ANNOTATION], "42");
    assert_eq!(copy["metadata"]["finalizers"], json!([tmc.finalizer().unwrap()]));
    assert!(tmc.is_own_copy(&copy));
}

#[test]
fn synced_types_are_the_fixed_ones_plus_accepted_synced_resources() {
    let st = json!({ "status": { "syncedResources": [
        { "group": "apps", "resource": "deployments", "versions": ["v1"], "state": "Accepted" },
        { "group": "example.com", "resource": "widgets", "versions": ["v1"], "state": "Incompatible" },
        { "group": "", "resource": "services", "versions": ["v1"], "state": "Pending" },
    ] } });
    let names: Vec<String> = config::synced_types(&st)
        .iter()
        .map(SyncedType::group_resource)
        .collect();
    assert_eq!(
        names,
        [
            "namespaces",
            "configmaps",
            "secrets",
            "serviceaccounts",
            "deployments.apps"
        ]
    );
}

#[test]
fn resolving_keeps_what_both_sides_serve_and_the_cluster_allows() {
    let tmc = tmc();
    tmc.set_synced(config::synced_types(&json!({ "status": { "syncedResources": [
        { "group": "apps", "resource": "deployments", "versions": ["v1"], "state": "Accepted" }] } })));
    let d = |group: &str, resource: &str, kind: &str, namespaced: bool| DiscoveredResource {
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        kind: kind.into(),
        namespaced,
        verbs: vec!["list".into(), "watch".into()],
        preferred: true,
    };
    let up = vec![
        d("", "namespaces", "Namespace", false),
        d("", "configmaps", "ConfigMap", true),
        d("", "secrets", "Secret", true),
        d("apps", "deployments", "Deployment", true),
    ];
    let down = vec![d("", "pods", "Pod", true)];
    let plan = tmc.resolve(&up, &down);
    let names: Vec<&str> = plan
        .downsync
        .targets
        .iter()
        .map(|t| t.id.resource.as_str())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(plan.upsync.targets.len(), 1);
    tmc.set_denied(["deployments.apps".to_string()].into());
    let plan = tmc.resolve(&up, &down);
    assert!(!plan
        .downsync
        .targets
        .iter()
        .any(|t| t.id.resource == "deployments"));
}

#[test]
fn volumes_keep_their_name_and_map_back_through_what_their_locator_or_claim_says() {
    let tmc = tmc();
    let down = target(
        "",
        "persistentvolumes",
        "PersistentVolume",
        false,
        Direction::Downsync,
    );
    // Down: the workspace is learnt from the source's key, so the copy maps back.
    let source = upstream("ws1", None, "vol-a");
    let dest = tmc.dest_ref(&down, &source);
    assert_eq!(dest, ObjectRef::new(None, "vol-a"));
    assert_eq!(tmc.source_ref(&down, &dest), Some(source.clone()));
    // A copy nobody learnt about (the syncer restarted) has no source until its
    // locator is seen.
    let unknown = ObjectRef::new(None, "vol-b");
    assert_eq!(tmc.source_ref(&down, &unknown), None);
    let locator = NamespaceLocator::new(tmc.target(), "ws2", "").to_json();
    let copy = json!({ "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": { "name": "vol-b", "annotations": { NAMESPACE_LOCATOR_ANNOTATION: locator } } });
    tmc.learn(
        &down,
        Side::Downstream,
        &unknown,
        &RawObject::from_value(&copy).unwrap(),
    );
    assert_eq!(
        tmc.source_ref(&down, &unknown),
        Some(upstream("ws2", None, "vol-b"))
    );
    // The claim an existing copy must carry is the locator of its workspace.
    let claim = tmc.dest_claim(&down, &source).unwrap();
    let claimed = claim["metadata"]["annotations"][NAMESPACE_LOCATOR_ANNOTATION]
        .as_str()
        .unwrap();
    assert_eq!(
        NamespaceLocator::parse(claimed),
        Some(NamespaceLocator::new(tmc.target(), "ws1", ""))
    );
    // Another target's locator says nothing.
    let foreign = NamespaceLocator::new(
        &SyncTargetLocator {
            uid: "other".into(),
            ..tmc.target().clone()
        },
        "ws3",
        "",
    );
    let stranger = json!({ "metadata": { "name": "vol-c",
        "annotations": { NAMESPACE_LOCATOR_ANNOTATION: foreign.to_json() } } });
    assert_eq!(tmc.volume_cluster_of(&stranger), None);

    // Up: a volume bound to a claim in one of this syncer's namespaces belongs to that
    // namespace's workspace; its claim's namespace is mapped back.
    let up = target(
        "",
        "persistentvolumes",
        "PersistentVolume",
        false,
        Direction::Upsync,
    );
    let kcp_ns = tmc.downstream_namespace(&Arc::from("ws1"), "app");
    let provisioned = json!({ "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": { "name": "pvc-1", "labels": { tmc.state_label.as_str(): "Upsync" } },
        "spec": { "claimRef": { "namespace": kcp_ns, "name": "data", "uid": "down-uid" } } });
    let key = ObjectRef::new(None, "pvc-1");
    assert!(tmc.wants(&up, &key, &provisioned));
    tmc.learn(
        &up,
        Side::Downstream,
        &key,
        &RawObject::from_value(&provisioned).unwrap(),
    );
    let dest = tmc.dest_ref(&up, &key);
    assert_eq!(dest, upstream("ws1", None, "pvc-1"));
    assert_eq!(tmc.source_ref(&up, &dest), Some(key.clone()));
    let mut copy = provisioned.clone();
    tmc.transform(&up, &key, &provisioned, &mut copy);
    assert_eq!(
        copy["spec"]["claimRef"],
        json!({ "namespace": "app", "name": "data" })
    );
    // Bound to a claim in a namespace that is not this syncer's: stays down.
    let mut elsewhere = provisioned.clone();
    elsewhere["spec"]["claimRef"]["namespace"] = json!("default");
    assert!(!tmc.wants(&up, &ObjectRef::new(None, "pvc-1"), &elsewhere));
}

#[test]
fn the_virtual_workspaces_are_read_from_the_status_with_the_upsyncer_defaulting_to_the_syncer() {
    use config::VirtualWorkspaces;
    assert_eq!(VirtualWorkspaces::advertised(&json!({})), None);
    assert_eq!(
        VirtualWorkspaces::advertised(&json!({ "status": { "virtualWorkspaces": [{ "syncerURL": "" }] } })),
        None,
        "an empty URL is none yet"
    );
    let both = json!({ "status": { "virtualWorkspaces": [
        { "syncerURL": "https://a:1/services/syncer/c/east/u", "upsyncerURL": "https://a:1/services/upsyncer/c/east/u" }
    ] } });
    assert_eq!(
        VirtualWorkspaces::advertised(&both),
        Some(VirtualWorkspaces {
            syncer: "https://a:1/services/syncer/c/east/u".into(),
            upsyncer: "https://a:1/services/upsyncer/c/east/u".into(),
        })
    );
    let syncer_only = json!({ "status": { "virtualWorkspaces": [{ "syncerURL": "https://a:1/s" }] } });
    let only = VirtualWorkspaces::advertised(&syncer_only).unwrap();
    assert_eq!(only.upsyncer, "https://a:1/s");
}

#[test]
fn a_move_is_said_from_where_to_where_and_only_for_what_moved() {
    use config::VirtualWorkspaces;
    let at = |port: u16, up_port: u16| VirtualWorkspaces {
        syncer: format!("https://127.0.0.1:{port}/services/syncer/c/east/u"),
        upsyncer: format!("https://127.0.0.1:{up_port}/services/upsyncer/c/east/u"),
    };
    assert_eq!(at(1, 1).moved_from(&at(1, 1)), None);
    assert_eq!(
        at(2, 1).moved_from(&at(1, 1)).as_deref(),
        Some(
            "its syncer virtual workspace moved from https://127.0.0.1:1/services/syncer/c/east/u \
             to https://127.0.0.1:2/services/syncer/c/east/u"
        )
    );
    let both = at(2, 2).moved_from(&at(1, 1)).unwrap();
    assert!(
        both.contains("syncer virtual workspace moved from https://127.0.0.1:1/")
            && both.contains(
                "; its upsyncer virtual workspace moved from https://127.0.0.1:1/services/upsyncer"
            ),
        "{both}"
    );
}
