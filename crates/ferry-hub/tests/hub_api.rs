//! The hub's API machinery, driven over HTTPS with kube-rs.

mod common;

use std::collections::BTreeMap;

use common::{client, eventually, list_version, names_of};
use ferry_testkit::TestHub;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{reflector, watcher, WatchStreamExt};
use serde_json::json;

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

fn status_code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other}"),
    }
}

#[tokio::test]
async fn fresh_hub_has_default_namespaces_and_service_accounts() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let names: Vec<String> = Api::<Namespace>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for ns in ["default", "kube-system", "kube-public"] {
        assert!(names.contains(&ns.to_string()), "{ns} missing from {names:?}");
        Api::<ServiceAccount>::namespaced(c.clone(), ns)
            .get("default")
            .await
            .unwrap();
    }
}

/// A workspace's default objects are written together when it is created: once
/// the create answers, each of several workspaces made at once has all of them.
#[tokio::test]
async fn new_workspaces_have_what_a_fresh_cluster_has_when_their_create_answers() {
    let hub = TestHub::start().await;
    let root = client(&hub, "root").await;
    let names: Vec<String> = (0..4).map(|i| format!("fresh-{i}")).collect();
    futures::future::join_all(names.iter().map(|name| {
        let ws =
            json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}});
        let root = root.clone();
        async move { common::post_created(&root, "/apis/tenancy.kcp.io/v1alpha1/workspaces", &ws).await }
    }))
    .await;
    let apiservices_path = "/apis/apiregistration.k8s.io/v1/apiservices";
    let item_names = |list: &serde_json::Value| -> Vec<String> {
        let items = list["items"].as_array().expect("a list");
        items
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let in_root = item_names(&common::get_ok(&root, apiservices_path).await);
    for name in &names {
        let c = client(&hub, &format!("root:{name}")).await;
        for ns in ["default", "kube-system", "kube-public"] {
            common::get_ok(&c, &format!("/api/v1/namespaces/{ns}")).await;
            common::get_ok(&c, &format!("/api/v1/namespaces/{ns}/serviceaccounts/default")).await;
        }
        common::get_ok(&c, "/api/v1/namespaces/default/services/kubernetes").await;
        for role in ["cluster-admin", "admin", "edit", "view"] {
            common::get_ok(
                &c,
                &format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}"),
            )
            .await;
        }
        common::get_ok(
            &c,
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-admin",
        )
        .await;
        let apiservices = common::get_ok(&c, apiservices_path).await;
        assert_eq!(item_names(&apiservices), in_root, "APIServices of root:{name}");
        for a in apiservices["items"].as_array().unwrap() {
            assert_eq!(
                a["status"]["conditions"][0]["status"], "True",
                "in root:{name}: {a}"
            );
        }
    }
}

#[tokio::test]
async fn create_get_update_conflict_delete() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    let created = api
        .create(&PostParams::default(), &cm("a", &[("k", "v")]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some());
    let rv1: u64 = meta.resource_version.as_ref().unwrap().parse().unwrap();
    assert_eq!(
        status_code(
            api.create(&PostParams::default(), &cm("a", &[]))
                .await
                .unwrap_err()
        ),
        409
    );

    let mut updated = created.clone();
    updated.data = Some(BTreeMap::from([("k".into(), "w".into())]));
    let updated = api.replace("a", &PostParams::default(), &updated).await.unwrap();
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_ref()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1);
    // Stale resourceVersion: 409 Conflict.
    assert_eq!(
        status_code(
            api.replace("a", &PostParams::default(), &created)
                .await
                .unwrap_err()
        ),
        409
    );
    // No change: no write, same resourceVersion.
    let same = api.replace("a", &PostParams::default(), &updated).await.unwrap();
    assert_eq!(same.metadata.resource_version, updated.metadata.resource_version);

    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert_eq!(status_code(api.get("a").await.unwrap_err()), 404);
}

/// kube-apiserver's NamespaceLifecycle admission: nothing new is created in a namespace
/// that is being deleted (403, its message), while a live namespace accepts, including
/// one whose annotations merely spell `deletionTimestamp`.
#[tokio::test]
async fn a_terminating_namespace_takes_no_new_objects() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let namespaces: Api<Namespace> = Api::all(c.clone());
    let namespace = |name: &str, annotations: serde_json::Value| -> Namespace {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations,
                         "finalizers": ["example.com/hold"]}
        }))
        .unwrap()
    };
    for (name, annotations) in [
        ("leaving", json!({})),
        ("look-alike", json!({"example.com/note": "deletionTimestamp"})),
    ] {
        namespaces
            .create(&PostParams::default(), &namespace(name, annotations))
            .await
            .unwrap();
    }
    namespaces
        .delete("leaving", &DeleteParams::default())
        .await
        .unwrap();

    let in_ns = |ns: &str| Api::<ConfigMap>::namespaced(c.clone(), ns);
    let err = in_ns("leaving")
        .create(&PostParams::default(), &cm("late", &[]))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("unable to create new content in namespace leaving because it is being terminated"),
        "kube-apiserver's words: {message}"
    );
    assert_eq!(status_code(err), 403);
    for ns in ["look-alike", "default"] {
        in_ns(ns)
            .create(&PostParams::default(), &cm("welcome", &[]))
            .await
            .unwrap_or_else(|e| panic!("a live namespace {ns} takes new objects: {e}"));
    }

    // Let the held namespace go.
    let release = json!({"metadata": {"finalizers": null}});
    namespaces
        .patch("leaving", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .unwrap();
}

#[tokio::test]
async fn generate_name_dry_run_and_pagination() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    let mut gen = cm("", &[]);
    gen.metadata.name = None;
    gen.metadata.generate_name = Some("gen-".into());
    let made = api.create(&PostParams::default(), &gen).await.unwrap();
    assert!(made.metadata.name.unwrap().starts_with("gen-"));

    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    api.create(&dry, &cm("dry", &[])).await.unwrap();
    assert_eq!(
        status_code(api.get("dry").await.unwrap_err()),
        404,
        "dry run must not persist"
    );
    api.create(&PostParams::default(), &cm("real", &[]))
        .await
        .unwrap();
    assert_eq!(
        status_code(api.create(&dry, &cm("real", &[])).await.unwrap_err()),
        409,
        "a dry-run create of an existing object is AlreadyExists"
    );

    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("p{i}"), &[]))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3).labels("");
    loop {
        let page = api.list(&lp).await.unwrap();
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(seen.iter().filter(|n| n.starts_with('p')).count(), 7);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "pages are in name order without repeats: {seen:?}"
    );
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    for (name, env, tier) in [
        ("a", "prod", Some("web")),
        ("b", "dev", Some("web")),
        ("c", "prod", None),
    ] {
        let mut c = cm(name, &[]);
        let mut labels = BTreeMap::from([("env".to_string(), env.to_string())]);
        if let Some(t) = tier {
            labels.insert("tier".into(), t.into());
        }
        c.metadata.labels = Some(labels);
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    let names = |lp: ListParams| {
        let api = api.clone();
        async move {
            let mut n: Vec<String> = api
                .list(&lp)
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect();
            n.sort();
            n
        }
    };
    assert_eq!(names(ListParams::default().labels("env=prod")).await, ["a", "c"]);
    assert_eq!(names(ListParams::default().labels("env!=prod,tier")).await, ["b"]);
    assert_eq!(
        names(ListParams::default().labels("env in (dev,qa)")).await,
        ["b"]
    );
    assert_eq!(names(ListParams::default().labels("!tier")).await, ["c"]);
    assert_eq!(
        names(ListParams::default().labels("tier notin (web)")).await,
        ["c"]
    );
    assert_eq!(
        names(ListParams::default().fields("metadata.name=b")).await,
        ["b"]
    );
    assert_eq!(
        status_code(
            api.list(&ListParams::default().labels("env in ("))
                .await
                .unwrap_err()
        ),
        400
    );
}

#[tokio::test]
async fn workspaces_isolate_objects_and_wildcard_sees_all() {
    let hub = TestHub::start().await;
    let root = client(&hub, "root").await;
    let ws_api = Api::<DynamicObject>::all_with(root.clone(), &workspace_resource());
    for name in ["a", "b"] {
        let ws: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}
        }))
        .unwrap();
        let made = ws_api.create(&PostParams::default(), &ws).await.unwrap();
        assert_eq!(made.data["status"]["phase"], "Ready");
        assert!(made.data["spec"]["URL"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/clusters/root:{name}")));
    }
    let a: Api<ConfigMap> = Api::namespaced(client(&hub, "root:a").await, "default");
    let b: Api<ConfigMap> = Api::namespaced(client(&hub, "root:b").await, "default");
    let made = a
        .create(&PostParams::default(), &cm("only-in-a", &[]))
        .await
        .unwrap();
    let cluster = made.metadata.annotations.unwrap()["kcp.io/cluster"].clone();
    assert_ne!(cluster, "root");
    assert_eq!(status_code(b.get("only-in-a").await.unwrap_err()), 404);
    // The logical cluster name addresses the same workspace as its path.
    let by_name: Api<ConfigMap> = Api::namespaced(client(&hub, &cluster).await, "default");
    by_name.get("only-in-a").await.unwrap();
    // Nested workspaces.
    let nested_api = Api::<DynamicObject>::all_with(client(&hub, "root:a").await, &workspace_resource());
    let ws: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "inner"}}),
    )
    .unwrap();
    nested_api.create(&PostParams::default(), &ws).await.unwrap();
    Api::<Namespace>::all(client(&hub, "root:a:inner").await)
        .get("default")
        .await
        .unwrap();

    let all: Api<ConfigMap> = Api::all(client(&hub, "*").await);
    let names: Vec<String> = names_of(&all).await;
    assert!(names.contains(&"only-in-a".to_string()));
    // Unknown workspace: 404 naming it.
    let nowhere: Api<ConfigMap> = Api::namespaced(client(&hub, "root:nowhere").await, "default");
    let err = nowhere.get("x").await.unwrap_err();
    assert!(err.to_string().contains("root:nowhere"), "{err}");
    // Deleting a workspace removes its logical cluster.
    ws_api.delete("b", &DeleteParams::default()).await.unwrap();
    assert_eq!(
        status_code(b.list(&ListParams::default()).await.unwrap_err()),
        404
    );
}

fn workspace_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
        "workspaces",
    )
}

#[tokio::test]
async fn watch_streams_changes_and_selector_transitions() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    let start = list_version(&api).await;
    let mut stream = api
        .watch(&WatchParams::default().labels("app=x"), &start)
        .await
        .unwrap()
        .boxed();
    let mut c = cm("w", &[]);
    c.metadata.labels = Some(BTreeMap::from([("app".into(), "x".into())]));
    api.create(&PostParams::default(), &c).await.unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "1"}})),
    )
    .await
    .unwrap();
    api.patch(
        "w",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "y"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match tokio::time::timeout(std::time::Duration::from_secs(10), stream.try_next())
            .await
            .expect("event in time")
            .unwrap()
        {
            Some(WatchEvent::Added(_)) => kinds.push("ADDED"),
            Some(WatchEvent::Modified(_)) => kinds.push("MODIFIED"),
            Some(WatchEvent::Deleted(_)) => kinds.push("DELETED"),
            Some(WatchEvent::Bookmark(_)) => {}
            Some(WatchEvent::Error(e)) => panic!("watch error {e:?}"),
            None => panic!("watch ended"),
        }
    }
    assert_eq!(
        kinds,
        ["ADDED", "MODIFIED", "DELETED"],
        "leaving the selector is a DELETED event"
    );
}

#[tokio::test]
async fn reflector_recovers_through_expired_watch_by_relisting() {
    // Keep only 5 events, so a watch resuming from an old version expires.
    let hub = TestHub::start_with(|o| o.watch_history = 5).await;
    let c = client(&hub, "root").await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let old_rv = list_version(&api).await;
    for i in 0..10 {
        api.create(&PostParams::default(), &cm(&format!("e{i}"), &[]))
            .await
            .unwrap();
    }
    // Raw watch from the expired version: HTTP 200 with an in-stream 410 ERROR.
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &old_rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => assert_eq!(e.code, 410),
        other => panic!("expected an in-stream 410, got {other:?}"),
    }
    // A reflector started now, then fed more changes than the history holds, stays correct.
    let (reader, writer) = reflector::store::<ConfigMap>();
    let rf = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .applied_objects()
        .for_each(|_| async {});
    let task = tokio::spawn(rf);
    reader.wait_until_ready().await.unwrap();
    for i in 10..30 {
        api.create(&PostParams::default(), &cm(&format!("e{i}"), &[]))
            .await
            .unwrap();
    }
    api.delete("e0", &DeleteParams::default()).await.unwrap();
    eventually(10, "reflector to hold e1..e29", || {
        let reader = reader.clone();
        async move {
            let names: Vec<String> = reader
                .state()
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect();
            (names.iter().filter(|n| n.starts_with('e')).count() == 29 && !names.contains(&"e0".to_string()))
                .then_some(())
        }
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn streaming_list_ends_with_initial_events_bookmark() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    api.create(&PostParams::default(), &cm("s1", &[])).await.unwrap();
    let cfg = watcher::Config::default().streaming_lists();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let task = tokio::spawn(
        reflector(writer, watcher(api.clone(), cfg))
            .applied_objects()
            .for_each(|_| async {}),
    );
    reader.wait_until_ready().await.unwrap();
    assert!(reader
        .state()
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some("s1")));
    task.abort();
}

#[tokio::test]
async fn metadata_only_list_and_watch() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    api.create(&PostParams::default(), &cm("m", &[("secret-ish", "value")]))
        .await
        .unwrap();
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    let m = list
        .items
        .iter()
        .find(|m| m.metadata.name.as_deref() == Some("m"))
        .expect("listed");
    assert!(m.metadata.uid.is_some());
    let rv = list.metadata.resource_version.unwrap();
    let mut stream = api
        .watch_metadata(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    api.delete("m", &DeleteParams::default()).await.unwrap();
    loop {
        match stream.try_next().await.unwrap() {
            Some(WatchEvent::Deleted(m)) => {
                assert_eq!(m.metadata.name.as_deref(), Some("m"));
                break;
            }
            Some(WatchEvent::Bookmark(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    let mut c = cm("f", &[]);
    c.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &c).await.unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let held = api.get("f").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    // No new finalizers while deleting.
    let add = Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}));
    assert_eq!(
        status_code(api.patch("f", &PatchParams::default(), &add).await.unwrap_err()),
        422
    );
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(status_code(api.get("f").await.unwrap_err()), 404);
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let nss: Api<Namespace> = Api::all(c.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "doomed");
    api.create(&PostParams::default(), &cm("x", &[])).await.unwrap();
    nss.delete("doomed", &DeleteParams::default()).await.unwrap();
    eventually(10, "namespace doomed to disappear", || {
        let nss = nss.clone();
        async move { nss.get_opt("doomed").await.unwrap().is_none().then_some(()) }
    })
    .await;
    let all: Api<ConfigMap> = Api::all(c.clone());
    let left = all
        .list(&ListParams::default().fields("metadata.namespace=doomed"))
        .await
        .unwrap();
    assert!(left.items.is_empty());
    // Creating in a missing namespace: 404 naming it.
    let err = api
        .create(&PostParams::default(), &cm("y", &[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("doomed"), "{err}");
}

fn deployment(name: &str, image: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}, {"name": "side", "image": "busybox"}]}}
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn status_subresource_and_generation() {
    let hub = TestHub::start().await;
    let api: Api<Deployment> = Api::namespaced(client(&hub, "root").await, "default");
    let d = api
        .create(&PostParams::default(), &deployment("web", "nginx:1"))
        .await
        .unwrap();
    assert_eq!(d.metadata.generation, Some(1));
    // Writing status through the main resource is ignored.
    let mut with_status = d.clone();
    with_status.status = Some(serde_json::from_value(json!({"replicas": 5})).unwrap());
    let after = api
        .replace("web", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert!(after.status.as_ref().and_then(|s| s.replicas).is_none());
    // Writing /status changes only status, and does not bump generation.
    let st = api
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"availableReplicas": 2}, "spec": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(st.status.unwrap().available_replicas, Some(2));
    assert_eq!(st.spec.as_ref().unwrap().replicas, Some(2));
    assert_eq!(st.metadata.generation, Some(1));
    // A spec change bumps generation.
    let bumped = api
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(bumped.metadata.generation, Some(2));
    // Scale subresource.
    let scale = api.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    api.patch_scale(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    assert_eq!(api.get("web").await.unwrap().spec.unwrap().replicas, Some(4));
}

/// kube-apiserver serves `/status` only for kinds with a status
/// subresource: for a ConfigMap, or a CRD without one, a write there is a
/// 404 and changes nothing (a client that relies on it must find out here,
/// not on a real cluster).
#[tokio::test]
async fn status_writes_to_a_kind_without_a_status_subresource_are_not_found() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let configmaps: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    configmaps
        .create(&PostParams::default(), &cm("plain", &[("a", "1")]))
        .await
        .unwrap();
    let mut crd = serde_json::to_value(widget_crd()).unwrap();
    crd["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("subresources");
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.create(&PostParams::default(), &serde_json::from_value(crd).unwrap())
        .await
        .unwrap();
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
    let widget: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}
    }))
    .unwrap();
    eventually(10, "widgets served", || {
        let (widgets, widget) = (widgets.clone(), widget.clone());
        async move { widgets.create(&PostParams::default(), &widget).await.ok() }
    })
    .await;

    let patch = Patch::Merge(json!({"data": {"a": "2"}}));
    let err = configmaps
        .patch_status("plain", &PatchParams::default(), &patch)
        .await
        .unwrap_err();
    assert_eq!(status_code(err), 404);
    let current = configmaps.get("plain").await.unwrap();
    let err = configmaps
        .replace_status("plain", &PostParams::default(), &current)
        .await
        .unwrap_err();
    assert_eq!(status_code(err), 404);
    assert_eq!(configmaps.get("plain").await.unwrap().data.unwrap()["a"], "1");

    let patch = Patch::Merge(json!({"status": {"ready": true}, "spec": {"size": 2}}));
    let err = widgets
        .patch_status("w", &PatchParams::default(), &patch)
        .await
        .unwrap_err();
    assert_eq!(status_code(err), 404);
    assert_eq!(widgets.get("w").await.unwrap().data["spec"]["size"], 1);
}

#[tokio::test]
async fn all_patch_types() {
    let hub = TestHub::start().await;
    let api: Api<Deployment> = Api::namespaced(client(&hub, "root").await, "default");
    api.create(&PostParams::default(), &deployment("p", "nginx:1"))
        .await
        .unwrap();
    // Strategic merge: containers merge by name.
    let smp = json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}});
    let d = api
        .patch("p", &PatchParams::default(), &Patch::Strategic(smp))
        .await
        .unwrap();
    let containers = d.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(containers.len(), 2, "strategic merge keeps the other container");
    assert_eq!(containers[0].image.as_deref(), Some("nginx:2"));
    // Merge patch replaces the list.
    let mp = json!({"spec": {"template": {"spec": {"containers": [{"name": "only", "image": "x"}]}}}});
    let d = api
        .patch("p", &PatchParams::default(), &Patch::Merge(mp))
        .await
        .unwrap();
    assert_eq!(d.spec.unwrap().template.spec.unwrap().containers.len(), 1);
    // JSON patch with a failing test: rejected, nothing changes.
    let jp: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/replicas", "value": 99},
        {"op": "replace", "path": "/spec/replicas", "value": 1}
    ]))
    .unwrap();
    let err = api
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap_err();
    assert_eq!(status_code(err), 422);
    let jp: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/spec/replicas", "value": 2},
        {"op": "replace", "path": "/spec/replicas", "value": 1}
    ]))
    .unwrap();
    let d = api
        .patch("p", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(1));
}

#[tokio::test]
async fn server_side_apply_tracks_owners_and_conflicts() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "1", "b": "2"}});
    let made = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    let mf = made.metadata.managed_fields.clone().unwrap();
    assert_eq!(mf[0].manager.as_deref(), Some("alice"));
    assert_eq!(mf[0].operation.as_deref(), Some("Apply"));
    // Same apply twice: no change.
    let again = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version, made.metadata.resource_version);
    // Bob sets a field alice owns to another value: conflict, unless forced.
    let bob =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"a": "9"}});
    let err = api
        .patch("ssa", &PatchParams::apply("bob"), &Patch::Apply(&bob))
        .await
        .unwrap_err();
    assert_eq!(status_code(err), 409);
    let forced = api
        .patch("ssa", &PatchParams::apply("bob").force(), &Patch::Apply(&bob))
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "9");
    // Alice drops b from her config: b is removed.
    let alice2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {}});
    let after = api
        .patch("ssa", &PatchParams::apply("alice"), &Patch::Apply(&alice2))
        .await
        .unwrap();
    let data = after.data.unwrap_or_default();
    assert!(!data.contains_key("b"));
    assert_eq!(data["a"], "9");
}

#[tokio::test]
async fn crd_serves_custom_resources_with_validation() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    create_established(&crds, &widget_crd()).await;

    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("example.com", "v1", "Widget"), "widgets");
    let widgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
    let good: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"size": 3, "unknown": "pruned"}
    }))
    .unwrap();
    let made = widgets.create(&PostParams::default(), &good).await.unwrap();
    assert_eq!(made.data["spec"]["size"], 3);
    assert!(
        made.data["spec"].get("unknown").is_none(),
        "unknown fields are pruned"
    );
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": "big"}
    }))
    .unwrap();
    let err = widgets.create(&PostParams::default(), &bad).await.unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("spec.size"), "the error names the field: {msg}");
    assert_eq!(status_code(err), 422);
    // Status subresource.
    let st = widgets
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(st.data["status"]["ready"], true);
    // Deleting the CRD removes the resource and its objects.
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually(10, "widgets to stop being served", || {
        let widgets = widgets.clone();
        async move { widgets.list(&ListParams::default()).await.is_err().then_some(()) }
    })
    .await;
}

/// Lists and watches send a custom resource's stored JSON as it is when it is stored
/// at the version asked for; asked at another served version, the object must still
/// say that version, first key or not.
#[tokio::test]
async fn custom_resources_list_and_watch_at_each_served_version() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let mut crd = widget_crd();
    let mut v2 = crd.spec.versions[0].clone();
    v2.name = "v2".into();
    v2.storage = false;
    crd.spec.versions.push(v2);
    create_established(&crds, &crd).await;
    let at = |version: &str| {
        let gvk = GroupVersionKind::gvk("example.com", version, "Widget");
        Api::<DynamicObject>::namespaced_with(
            c.clone(),
            "default",
            &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
        )
    };
    let (v1, v2) = (at("v1"), at("v2"));
    let mut watch_v2 = v2.watch(&WatchParams::default(), "0").await.unwrap().boxed();

    // apiVersion first, as kube-rs sends it, stored at v1.
    let first: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "first"}, "spec": {"size": 1}
    }))
    .unwrap();
    v1.create(&PostParams::default(), &first).await.unwrap();
    // apiVersion last, as a hand-written body may put it.
    let body =
        br#"{"kind":"Widget","metadata":{"name":"last"},"spec":{"size":2},"apiVersion":"example.com/v1"}"#;
    let request = http::Request::post("/apis/example.com/v1/namespaces/default/widgets")
        .header("content-type", "application/json")
        .body(body.to_vec())
        .unwrap();
    c.request_text(request).await.unwrap();

    for (api, want) in [(&v1, "example.com/v1"), (&v2, "example.com/v2")] {
        let list = api.list(&ListParams::default()).await.unwrap();
        let names: Vec<_> = list
            .items
            .iter()
            .filter_map(|o| o.metadata.name.as_deref())
            .collect();
        assert_eq!(names, ["first", "last"]);
        for item in &list.items {
            let got = item.types.as_ref().map(|t| t.api_version.as_str());
            assert_eq!(got, Some(want), "{:?} listed at {want}", item.metadata.name);
        }
    }
    let mut seen = vec![];
    while seen.len() < 2 {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), watch_v2.next())
            .await
            .expect("a watch event in time")
            .expect("the watch goes on")
            .unwrap();
        if let WatchEvent::Added(o) = event {
            let got = o.types.as_ref().map(|t| t.api_version.clone());
            assert_eq!(
                got.as_deref(),
                Some("example.com/v2"),
                "{:?} watched at v2",
                o.metadata.name
            );
            seen.push(o.metadata.name.unwrap_or_default());
        }
    }
    assert_eq!(seen, ["first", "last"]);
}

/// Creates `crd` and waits (10 s at most) until it is Established.
async fn create_established(crds: &Api<CustomResourceDefinition>, crd: &CustomResourceDefinition) {
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.create(&PostParams::default(), crd).await.unwrap();
    let established = kube::runtime::wait::await_condition(
        crds.clone(),
        &name,
        kube::runtime::conditions::is_crd_established(),
    );
    tokio::time::timeout(std::time::Duration::from_secs(10), established)
        .await
        .unwrap()
        .unwrap();
}

pub fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}}
            }]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn bad_input_gets_clear_client_errors() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let send = |method: &str, path: &str, body: Vec<u8>| {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body)
            .unwrap();
        let c = c.clone();
        async move {
            match c.request_text(req).await {
                Ok(_) => 200,
                Err(kube::Error::Api(s)) => s.code,
                Err(e) => panic!("{e}"),
            }
        }
    };
    let cms = "/api/v1/namespaces/default/configmaps";
    assert_eq!(send("POST", cms, b"{not json".to_vec()).await, 400);
    assert_eq!(
        send(
            "POST",
            cms,
            br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}"#.to_vec()
        )
        .await,
        400
    );
    assert_eq!(
        send(
            "POST",
            cms,
            br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}"#.to_vec()
        )
        .await,
        422
    );
    let big = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"big"}},"data":{{"k":"{}"}}}}"#,
        "x".repeat(4 << 20)
    );
    assert_eq!(send("POST", cms, big.into_bytes()).await, 413);
    assert_eq!(send("GET", "/apis/example.com/v1/nothings", vec![]).await, 404);
    assert_eq!(
        send("GET", "/clusters/root:missing/api/v1/namespaces", vec![]).await,
        404
    );
    // The hub is still fine.
    assert_eq!(send("GET", cms, vec![]).await, 200);
}

#[tokio::test]
async fn deletecollection_removes_only_what_the_selector_matches() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    for (name, app) in [("d1", "x"), ("d2", "x"), ("keep", "y")] {
        let mut c = cm(name, &[]);
        c.metadata.labels = Some(BTreeMap::from([("app".to_string(), app.to_string())]));
        api.create(&PostParams::default(), &c).await.unwrap();
    }
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=x"))
        .await
        .unwrap();
    let left: Vec<String> = names_of(&api).await;
    assert_eq!(left, ["keep"]);
}

#[tokio::test]
async fn watch_sends_bookmarks_and_ends_at_timeout_seconds() {
    let hub = TestHub::start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&hub, "root").await, "default");
    api.create(&PostParams::default(), &cm("b", &[])).await.unwrap();
    let rv = list_version(&api).await;
    let started = std::time::Instant::now();
    let wp = WatchParams::default().timeout(7); // bookmarks are on by default in kube-rs
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    let mut bookmarks = 0;
    while let Some(event) = tokio::time::timeout(std::time::Duration::from_secs(20), stream.try_next())
        .await
        .expect("the watch ends by itself at timeoutSeconds")
        .unwrap()
    {
        if let WatchEvent::Bookmark(b) = event {
            if ferry_testkit::etcd_requested() {
                // Other writes (the controllers' Lease renewals) move the
                // hub on: the bookmark may carry a newer version, never an older.
                let at = |v: &str| v.parse::<u64>().expect("numeric resourceVersion");
                assert!(
                    at(&b.metadata.resource_version) >= at(&rv),
                    "a bookmark never goes back"
                );
            } else {
                assert_eq!(
                    b.metadata.resource_version, rv,
                    "a quiet watch's bookmark carries its version"
                );
            }
            bookmarks += 1;
        }
    }
    let lasted = started.elapsed().as_secs_f64();
    assert!(bookmarks >= 1, "no bookmark in {lasted:.1}s");
    assert!(
        (6.0..15.0).contains(&lasted),
        "the watch lasted {lasted:.1}s, asked for 7s"
    );
}

#[tokio::test]
async fn apiservices_describe_what_is_served_including_crd_groups() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
        "apiservices",
    );
    let apiservices: Api<DynamicObject> = Api::all_with(c.clone(), &ar);
    let names = || {
        let apiservices = apiservices.clone();
        async move {
            apiservices
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|a| a.metadata.name)
                .collect::<Vec<_>>()
        }
    };
    let served = names().await;
    for n in [
        "v1.",
        "v1.apps",
        "v1.rbac.authorization.k8s.io",
        "v1alpha1.tenancy.kcp.io",
    ] {
        assert!(served.contains(&n.to_string()), "{n} missing from {served:?}");
    }
    let apps = apiservices.get("v1.apps").await.unwrap();
    assert_eq!(apps.data["status"]["conditions"][0]["reason"], "Local");

    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    assert!(names().await.contains(&"v1.example.com".to_string()));
    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    eventually(10, "v1.example.com to go with its CRD", || {
        let names = names();
        async move { (!names.await.contains(&"v1.example.com".to_string())).then_some(()) }
    })
    .await;
}

/// A DELETE answers as kube-apiserver does: an object removed at once is a
/// `Success` Status naming it (kube-rs's `Right`, "deleted now") for most
/// kinds, custom resources included; the kinds whose kube storage returns the
/// deleted object (Services, Pods, ServiceAccounts, ...) return it; an object
/// a finalizer holds is returned, marked.
#[tokio::test]
async fn delete_answers_a_status_or_the_object_as_kube_apiserver_does() {
    let hub = TestHub::start().await;
    let c = client(&hub, "root").await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    cms.create(&PostParams::default(), &cm("gone", &[]))
        .await
        .unwrap();
    let status = cms
        .delete("gone", &DeleteParams::default())
        .await
        .unwrap()
        .right()
        .expect("a ConfigMap removed at once answers a Status");
    assert_eq!(status.status, Some(kube::core::response::StatusSummary::Success));
    let details = status.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("gone", "configmaps")
    );
    assert!(!details.uid.is_empty());

    let mut held = cm("held", &[]);
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();
    let left = cms
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("an object a finalizer holds is returned");
    assert!(left.metadata.deletion_timestamp.is_some());

    let sas: Api<ServiceAccount> = Api::namespaced(c.clone(), "default");
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "robot"}})).unwrap();
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let deleted = sas.delete("robot", &DeleteParams::default()).await.unwrap();
    assert!(
        deleted.is_left(),
        "ServiceAccounts return the deleted object, as in kube"
    );
}
