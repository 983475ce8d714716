//! kcp TMC's syncer and upsyncer virtual workspaces on a hub. A SyncTarget
//! `east`'s syncer, holding only `sync` on that target, sees through
//! `/services/syncer/<cluster>/east/<uid>/clusters/*` exactly the objects
//! scheduled to east, in every workspace: lists, a watch that sees objects
//! arrive and leave, gets, and writes of finalizers and status that reach
//! the real objects; creates and deletes are refused. Through the upsyncer
//! it writes pods only with its `Upsync` label. From the attacker's side:
//! another workspace's token, a user without `sync`, the wrong uid,
//! another target's name and path tricks learn nothing.

mod common;
use common::tmc::*;
use common::{
    admin, call, create, delete_ok, eventually, eventually_status, expect_status, expect_status_because,
    get_ok, post_created, rbac_path,
};
use ferry_api::workload::sync_target_key;
use ferry_testkit::TestHub;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, WatchEvent, WatchParams};
use serde_json::{json, Value};

const TOKENS: &str = "\
syncer-token,syncer-east,u-syncer
nobody-token,nobody,u-nobody
mal-token,mal,u-mal
";

struct World {
    hub: TestHub,
    _dir: tempfile::TempDir,
    loc: String,
    app1: String,
    app2: String,
    east_uid: String,
    west_uid: String,
    east: String,
}

impl World {
    fn syncer_url(&self, kind: &str, target: &str, uid: &str) -> String {
        format!("{}/services/{kind}/{}/{target}/{uid}", self.hub.url(), self.loc)
    }

    async fn client(&self, url: &str, bearer: &str) -> kube::Client {
        let mut config = self.hub.config("root").await;
        config.cluster_url = url.parse().expect("url");
        config.auth_info.token = Some(bearer.to_string().into());
        config.default_retry = false;
        kube::Client::try_from(config).expect("client")
    }

    /// East's syncer at `clusters/<c>` of its syncer (or upsyncer) view.
    async fn east(&self, kind: &str, cluster: &str) -> kube::Client {
        let url = format!(
            "{}/clusters/{cluster}",
            self.syncer_url(kind, "east", &self.east_uid)
        );
        self.client(&url, "syncer-token").await
    }
}

/// root:loc with SyncTargets east and west (each its own Location);
/// root:app1 and root:app2 placed on east, root:app3 on west; user
/// `syncer-east` may `sync` east only. Each app workspace has namespace
/// `work` (placed) with ConfigMap `cm-<ws>`, and namespace `private`
/// (not placed) with ConfigMap and Secret `hidden`.
async fn world() -> World {
    let (hub, dir) = common::tenants::hub_with_tokens(TOKENS, |o| o.compute_workspace = true).await;
    let loc = workspace(&hub, "loc").await;
    location(
        &hub,
        "root:loc",
        "east",
        json!({"region": "east"}),
        json!({"matchLabels": {"region": "east"}}),
    )
    .await;
    location(
        &hub,
        "root:loc",
        "west",
        json!({"region": "west"}),
        json!({"matchLabels": {"region": "west"}}),
    )
    .await;
    let mut uids = Vec::new();
    for name in ["east", "west"] {
        let st = create(
            &hub,
            "root:loc",
            &format!("{WORKLOAD}/synctargets"),
            json!({"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
                   "metadata": {"name": name, "labels": {"region": name}},
                   "spec": {"supportedAPIExports": [{"export": "kubernetes", "path": "root:compute"}]}}),
        )
        .await;
        uids.push(st["metadata"]["uid"].as_str().unwrap().to_string());
    }
    let (east_uid, west_uid) = (uids[0].clone(), uids[1].clone());
    // East's syncer imports the Deployment schema its cluster serves (the
    // export's own): deployments become Accepted on east.
    accept_deployments(&hub, "east").await;
    create(
        &hub,
        "root:loc",
        &rbac_path(None, "clusterroles"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "east-syncer"},
               "rules": [{"apiGroups": ["workload.kcp.io"], "resources": ["synctargets"],
                          "resourceNames": ["east"], "verbs": ["sync"]},
                         {"apiGroups": ["workload.kcp.io"], "resources": ["synctargets"],
                          "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    create(
        &hub,
        "root:loc",
        &rbac_path(None, "clusterrolebindings"),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "east-syncer"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "east-syncer"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "syncer-east"}]}),
    )
    .await;
    let mut clusters = Vec::new();
    for (ws, region) in [("app1", "east"), ("app2", "east"), ("app3", "west")] {
        clusters.push(workspace(&hub, ws).await);
        let path = format!("root:{ws}");
        placement(
            &hub,
            &path,
            "compute",
            "root:loc",
            json!([{"matchLabels": {"region": region}}]),
            json!({"matchLabels": {"purpose": "workload"}}),
        )
        .await;
        namespace(&hub, &path, "work", json!({"purpose": "workload"})).await;
        configmap(&hub, &path, "work", &format!("cm-{ws}")).await;
        namespace(&hub, &path, "private", json!({})).await;
        configmap(&hub, &path, "private", "hidden").await;
        create(
            &hub,
            &path,
            "/api/v1/namespaces/private/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hidden"},
                   "stringData": {"password": "hunter2"}}),
        )
        .await;
        wait_for(
            &hub,
            &path,
            &format!("/api/v1/namespaces/work/configmaps/cm-{ws}"),
            "cm scheduled",
            |o| !states(o).is_empty(),
        )
        .await;
    }
    World {
        east: sync_target_key(&loc, "east"),
        app1: clusters[0].clone(),
        app2: clusters[1].clone(),
        hub,
        _dir: dir,
        loc,
        east_uid,
        west_uid,
    }
}

/// What east's syncer would do: import the cluster's Deployment schema
/// (here: root:compute's, the same one), so the SyncTarget controller
/// accepts deployments for `target`.
async fn accept_deployments(hub: &TestHub, target: &str) {
    let export = wait_for(
        hub,
        "root:compute",
        "/apis/apis.kcp.io/v1alpha1/apiexports/kubernetes",
        "root:compute exports kubernetes",
        |o| o["spec"]["latestResourceSchemas"].is_array(),
    )
    .await;
    let schema_name = export["spec"]["latestResourceSchemas"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|n| n.ends_with(".deployments.apps"))
        .expect("a deployments schema")
        .to_string();
    let schema = get(
        hub,
        "root:compute",
        &format!("/apis/apis.kcp.io/v1alpha1/apiresourceschemas/{schema_name}"),
    )
    .await;
    create(
        hub,
        "root:loc",
        "/apis/apiresource.kcp.io/v1alpha1/apiresourceimports",
        json!({"apiVersion": "apiresource.kcp.io/v1alpha1", "kind": "APIResourceImport",
               "metadata": {"name": format!("deployments.{target}.v1.apps")},
               "spec": {"location": target, "groupVersion": {"group": "apps", "version": "v1"},
                        "scope": "Namespaced", "plural": "deployments", "kind": "Deployment",
                        "openAPIV3Schema": schema["spec"]["versions"][0]["schema"]}}),
    )
    .await;
    wait_for(
        hub,
        "root:loc",
        &format!("{WORKLOAD}/synctargets/{target}"),
        "deployments Accepted",
        |o| {
            o["status"]["syncedResources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| r["resource"] == "deployments" && r["state"] == "Accepted")
        },
    )
    .await;
}

/// The next event of a watch of the syncer's view; the watch must not end,
/// nor show ConfigMap `never` (never scheduled).
async fn next_event<S>(stream: &mut S) -> WatchEvent<ConfigMap>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<ConfigMap>>> + Unpin,
{
    loop {
        match stream.next().await {
            Some(Ok(event)) => {
                if let WatchEvent::Added(cm) = &event {
                    assert_ne!(
                        cm.metadata.name.as_deref(),
                        Some("never"),
                        "an unscheduled object"
                    );
                }
                return event;
            }
            None => panic!("the watch ended"),
            Some(Err(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_syncer_sees_and_writes_only_what_is_scheduled_to_its_target() {
    let w = world().await;
    let hub = &w.hub;
    let all = w.east("syncer", "*").await;

    // Discovery: what a syncer syncs, and only the verbs it needs (also at
    // the URL's root, before a workspace is named).
    let root = w
        .client(&w.syncer_url("syncer", "east", &w.east_uid), "syncer-token")
        .await;
    let apis = get_ok(&root, "/apis").await;
    assert!(apis.to_string().contains("\"apps\""), "{apis}");
    expect_status_because(
        &root,
        "GET",
        "/api/v1/configmaps",
        None,
        404,
        "resources need clusters/<workspace|*>",
    )
    .await;
    let core = get_ok(&all, "/api/v1").await;
    let served: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for r in ["namespaces", "configmaps", "secrets"] {
        assert!(served.contains(&r), "{r} in {served:?}");
    }
    assert!(
        !served.contains(&"pods") && !served.contains(&"services"),
        "{served:?}"
    );
    let cms = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "configmaps")
        .unwrap();
    assert_eq!(cms["verbs"], json!(["get", "list", "watch", "update", "patch"]));

    // Lists across workspaces: east's objects only.
    let list = get_ok(&all, "/api/v1/configmaps").await;
    let listed = item_names(&list);
    assert!(
        listed.contains(&"cm-app1".to_string()) && listed.contains(&"cm-app2".to_string()),
        "{listed:?}"
    );
    assert!(
        !listed.contains(&"cm-app3".to_string()),
        "west's object: {listed:?}"
    );
    assert!(!listed.contains(&"hidden".to_string()), "unscheduled: {listed:?}");
    let (_, secrets) = call(&all, "GET", "/api/v1/secrets", None).await;
    assert!(!item_names(&secrets).contains(&"hidden".to_string()), "{secrets}");
    let (_, nss) = call(&all, "GET", "/api/v1/namespaces", None).await;
    let ns_names = item_names(&nss);
    assert!(
        ns_names.contains(&"work".to_string()) && !ns_names.contains(&"private".to_string()),
        "{ns_names:?}"
    );
    for item in list["items"].as_array().unwrap() {
        let cluster = item["metadata"]["annotations"]["kcp.io/cluster"]
            .as_str()
            .unwrap();
        assert!(cluster == w.app1 || cluster == w.app2, "{item}");
        assert_eq!(states(item).get(&w.east).map(String::as_str), Some("Sync"));
    }

    // One workspace: gets of what is hidden answer as if it did not exist.
    let one = w.east("syncer", &w.app1).await;
    get_ok(&one, "/api/v1/namespaces/work/configmaps/cm-app1").await;
    for path in [
        "/api/v1/namespaces/private/configmaps/hidden",
        "/api/v1/namespaces/private/secrets/hidden",
        "/api/v1/namespaces/private/configmaps/nothing",
    ] {
        let body = expect_status_because(&one, "GET", path, None, 404, &path).await;
        assert!(!body.to_string().contains("hunter2"));
    }

    // kubectl through the view.
    let out = hub.kubectl(&[
        "--server",
        &format!("{}/clusters/*", w.syncer_url("syncer", "east", &w.east_uid)),
        "--token",
        "syncer-token",
        "get",
        "configmaps",
        "-A",
        "-o",
        "name",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("configmap/cm-app1") && !text.contains("cm-app3"),
        "{text}"
    );

    // A watch on clusters/*: objects arrive as they are scheduled, and
    // leave (DELETED) when their label goes.
    let api: Api<ConfigMap> = Api::all(all.clone());
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut stream = api
        .watch(&WatchParams::default().timeout(60), &rv)
        .await
        .expect("watch")
        .boxed();
    configmap(hub, "root:app2", "work", "arrives").await;
    configmap(hub, "root:app2", "private", "never").await;
    let within = std::time::Duration::from_secs(20);
    let added = tokio::time::timeout(within, async {
        loop {
            match next_event(&mut stream).await {
                WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("arrives") => return cm,
                _ => {}
            }
        }
    })
    .await
    .expect("ADDED arrives in time");
    assert_eq!(
        added.metadata.annotations.unwrap().get("kcp.io/cluster"),
        Some(&w.app2)
    );
    // The namespace leaves the Placement: its objects leave the view.
    admin_patch(
        hub,
        "root:app2",
        "/api/v1/namespaces/work",
        json!({"metadata": {"labels": {"purpose": "done"}}}),
    )
    .await;
    let mut gone = std::collections::BTreeSet::new();
    tokio::time::timeout(within, async {
        while !(gone.contains("arrives") && gone.contains("cm-app2")) {
            if let WatchEvent::Deleted(cm) = next_event(&mut stream).await {
                gone.insert(cm.metadata.name.unwrap_or_default());
            }
        }
    })
    .await
    .expect("both configmaps of app2 leave the watch in time");
    assert!(!gone.contains("cm-app1"), "{gone:?}");
    get_ok(&all, "/api/v1/configmaps").await;

    // Writes: the syncer's finalizer and status reach the real object.
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    create(
        hub,
        "root:app1",
        "/apis/apps/v1/namespaces/work/deployments",
        deploy,
    )
    .await;
    let path = "/apis/apps/v1/namespaces/work/deployments/web";
    eventually_status(20, "the deployment is visible to the syncer", &one, path, 200).await;
    let finalizer = format!("workload.kcp.io/syncer-{}", w.east);
    expect_merge_patch(
        &one,
        path,
        &json!({"metadata": {"finalizers": [finalizer]}}),
        200,
        "",
    )
    .await;
    expect_merge_patch(
        &one,
        &format!("{path}/status"),
        &json!({"status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2}}),
        200,
        "",
    )
    .await;
    let real = get(hub, "root:app1", path).await;
    assert_eq!(real["status"]["readyReplicas"], 2, "{real}");
    assert_eq!(real["metadata"]["finalizers"], json!([finalizer]));

    // Refused: create, delete, and touching another target's label.
    expect_status(
        &one,
        "POST",
        "/api/v1/namespaces/work/configmaps",
        Some(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "new"}})),
        405,
    )
    .await;
    expect_status(
        &one,
        "DELETE",
        "/api/v1/namespaces/work/configmaps/cm-app1",
        None,
        405,
    )
    .await;
    // Not even by a server-side apply of an object that does not exist.
    let req = http::Request::builder()
        .method("PATCH")
        .uri("/api/v1/namespaces/work/configmaps/applied?fieldManager=syncer&force=true")
        .header(http::header::CONTENT_TYPE, "application/apply-patch+yaml")
        .body(kube::client::Body::from(
            serde_json::to_vec(
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}}),
            )
            .unwrap(),
        ))
        .unwrap();
    let resp = one.send(req).await.expect("response");
    assert_eq!(resp.status().as_u16(), 405);
    assert!(
        try_get(hub, "root:app1", "/api/v1/namespaces/work/configmaps/applied")
            .await
            .is_none()
    );
    let west_label = format!("{STATE_PREFIX}{}", sync_target_key(&w.loc, "west"));
    expect_merge_patch(
        &one,
        "/api/v1/namespaces/work/configmaps/cm-app1",
        &json!({"metadata": {"labels": {west_label: "Sync"}}}),
        403,
        "",
    )
    .await;
    // Writes to what the view hides are not found.
    expect_merge_patch(
        &one,
        "/api/v1/namespaces/private/configmaps/hidden",
        &json!({"data": {"k": "owned"}}),
        404,
        "",
    )
    .await;
    assert_eq!(
        get(hub, "root:app1", "/api/v1/namespaces/private/configmaps/hidden").await["data"]["k"],
        "hidden"
    );
}

/// With a hundred SyncTargets each object changes a hundred times for other targets'
/// bookkeeping (each syncer's finalizer and status annotation). East's syncer is not
/// sent those changes as they happen — it sees them with the next change it is sent,
/// or with the object's state a second later — and is sent every change of the object
/// itself or of its own bookkeeping at once. Events keep their order, so a change not
/// sent is proved by the next one sent being the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn east_hears_of_every_change_but_other_targets_bookkeeping() {
    let w = world().await;
    let hub = &w.hub;
    let one = w.east("syncer", &w.app1).await;
    let path = "/api/v1/namespaces/work/configmaps/cm-app1";
    let rv = get_ok(&one, path).await["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let api: Api<ConfigMap> = Api::namespaced(one.clone(), "work");
    let mut stream = api
        .watch(&WatchParams::default().timeout(60), &rv)
        .await
        .expect("watch")
        .boxed();
    let mut next_change = async || {
        tokio::time::timeout(std::time::Duration::from_secs(20), async {
            loop {
                if let WatchEvent::Modified(cm) = next_event(&mut stream).await {
                    if cm.metadata.name.as_deref() == Some("cm-app1") {
                        return cm;
                    }
                }
            }
        })
        .await
        .expect("a change of cm-app1 heard in time")
    };
    let west = sync_target_key(&w.loc, "west");
    let west_finalizer = format!("workload.kcp.io/syncer-{west}");
    let west_status = format!("experimental.status.workload.kcp.io/{west}");
    // West's bookkeeping (as the hub's admin may write it), then a change of the data.
    // The object's first finalizer is heard of (a syncer adds its own one way to an
    // object without a list, another way to one with): there is one already.
    admin_patch(
        hub,
        "root:app1",
        path,
        json!({"metadata": {"finalizers": ["example.com/first"]}}),
    )
    .await;
    next_change().await;
    admin_patch(
        hub,
        "root:app1",
        path,
        json!({"metadata": {"finalizers": ["example.com/first", west_finalizer]}}),
    )
    .await;
    admin_patch(
        hub,
        "root:app1",
        path,
        json!({"metadata": {"annotations": {west_status.clone(): "{}"}}}),
    )
    .await;
    admin_patch(hub, "root:app1", path, json!({"data": {"k": "changed"}})).await;
    // Both of west's changes are not sent; should a write take over a second on a
    // busy machine, the state a second after one of them is.
    let mut before = Vec::new();
    let heard = loop {
        let cm = next_change().await;
        if cm.data.as_ref().and_then(|d| d.get("k")).map(String::as_str) == Some("changed") {
            break cm;
        }
        before.push(cm);
    };
    assert!(
        before.len() <= 1,
        "the first change east hears of is the data's, not west's two: {before:?}"
    );
    assert_eq!(
        heard.metadata.finalizers,
        Some(vec!["example.com/first".to_string(), west_finalizer.clone()])
    );
    assert!(heard
        .metadata
        .annotations
        .unwrap_or_default()
        .contains_key(&west_status));
    // West lets go of the object, and nothing else changes: east is sent the
    // object's state a second later, so no cache of the object stays behind.
    let let_go = admin_patch(
        hub,
        "root:app1",
        path,
        json!({"metadata": {"finalizers": ["example.com/first"], "annotations": {west_status: null}}}),
    )
    .await;
    let caught_up = next_change().await;
    assert_eq!(
        caught_up.metadata.resource_version.as_deref(),
        let_go["metadata"]["resourceVersion"].as_str(),
        "east catches up with west letting go: {caught_up:?}"
    );
    assert_eq!(
        caught_up.metadata.finalizers,
        Some(vec!["example.com/first".to_string()])
    );
    // Then east's syncer puts its finalizer on it.
    let east_finalizer = format!("workload.kcp.io/syncer-{}", w.east);
    expect_merge_patch(
        &one,
        path,
        &json!({"metadata": {"finalizers": ["example.com/first", east_finalizer]}}),
        200,
        "east's finalizer",
    )
    .await;
    let heard = next_change().await;
    assert_eq!(
        heard.metadata.finalizers,
        Some(vec!["example.com/first".to_string(), east_finalizer.clone()]),
        "the next change east hears of is its own finalizer: {heard:?}"
    );
    // A change of the object that also touches west's bookkeeping is heard of.
    admin_patch(
        hub,
        "root:app1",
        path,
        json!({"metadata": {"annotations": {format!("deletion.internal.workload.kcp.io/{west}"): "2026-01-01T00:00:00Z", "note": "x"}}}),
    )
    .await;
    let heard = next_change().await;
    assert_eq!(
        heard
            .metadata
            .annotations
            .unwrap_or_default()
            .get("note")
            .map(String::as_str),
        Some("x")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upsyncer_takes_only_objects_labelled_upsync_for_its_target() {
    let w = world().await;
    let up = w.east("upsyncer", &w.app1).await;
    let label = format!("{STATE_PREFIX}{}", w.east);
    let pod = |name: &str, labels: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    };
    let body = expect_status(
        &up,
        "POST",
        "/api/v1/namespaces/work/pods",
        Some(&pod("bare", json!({}))),
        400,
    )
    .await;
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(msg.contains(&label) && msg.contains("Upsync"), "{msg}");
    expect_status(
        &up,
        "POST",
        "/api/v1/namespaces/work/pods",
        Some(&pod("sync", json!({label.clone(): "Sync"}))),
        400,
    )
    .await;
    post_created(
        &up,
        "/api/v1/namespaces/work/pods",
        &pod("up", json!({label.clone(): "Upsync"})),
    )
    .await;
    // It is upstream, and the upsyncer sees it; removing the label is refused.
    get(&w.hub, "root:app1", "/api/v1/namespaces/work/pods/up").await;
    let all = w.east("upsyncer", "*").await;
    let list = get_ok(&all, "/api/v1/pods").await;
    assert_eq!(item_names(&list), vec!["up".to_string()]);
    expect_merge_patch(
        &up,
        "/api/v1/namespaces/work/pods/up",
        &json!({"metadata": {"labels": {label.clone(): null}}}),
        400,
        "",
    )
    .await;
    // The syncer view does not serve pods; the upsyncer serves no configmaps.
    expect_status(&w.east("syncer", "*").await, "GET", "/api/v1/pods", None, 404).await;
    expect_status(&all, "GET", "/api/v1/configmaps", None, 404).await;
    // A pod nobody labelled is not the upsyncer's to see or delete.
    create(
        &w.hub,
        "root:app1",
        "/api/v1/namespaces/work/pods",
        pod("users", json!({})),
    )
    .await;
    expect_status(&up, "DELETE", "/api/v1/namespaces/work/pods/users", None, 404).await;
    delete_ok(&up, "/api/v1/namespaces/work/pods/up").await;
}

/// What a view serves is kept between requests while its SyncTarget stays as
/// it was: a resource the target accepts is served at once, and the kept view
/// never answers for another uid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syncer_view_serves_what_its_target_accepts_as_soon_as_it_does() {
    let w = world().await;
    let hub = &w.hub;
    let admin_token = hub.running.admin_token.clone();
    let west = w
        .client(
            &format!("{}/clusters/*", w.syncer_url("syncer", "west", &w.west_uid)),
            &admin_token,
        )
        .await;
    get_ok(&west, "/api/v1/configmaps").await;
    expect_status_because(
        &west,
        "GET",
        "/apis/apps/v1/deployments",
        None,
        404,
        "west accepts no Deployments yet",
    )
    .await;
    // The same target with another uid: not found, though its view is kept.
    let wrong_uid = w
        .client(
            &format!("{}/clusters/*", w.syncer_url("syncer", "west", &w.east_uid)),
            &admin_token,
        )
        .await;
    expect_status(&wrong_uid, "GET", "/api/v1/configmaps", None, 404).await;

    accept_deployments(hub, "west").await;
    get_ok(&west, "/apis/apps/v1/deployments").await;
    expect_status(&wrong_uid, "GET", "/apis/apps/v1/deployments", None, 404).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_and_tricks_get_nothing_from_the_syncer_views() {
    let w = world().await;
    let hub = &w.hub;
    let configmaps = "/api/v1/configmaps";

    // A ServiceAccount token of a workspace whose objects east syncs.
    let sa = post_created(
        &admin(hub, "root:app1").await,
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    let sa_token = sa["status"]["token"].as_str().unwrap().to_string();

    let east = w.syncer_url("syncer", "east", &w.east_uid);
    let ghost = w.syncer_url("syncer", "ghost", &w.east_uid);
    let mut refusals = Vec::new();
    for (who, token) in [
        ("a workspace's ServiceAccount", sa_token.as_str()),
        ("a user without sync", "nobody-token"),
    ] {
        for kind in ["syncer", "upsyncer"] {
            for (url, what) in [
                (east.replace("/syncer/", &format!("/{kind}/")), "east"),
                (ghost.replace("/syncer/", &format!("/{kind}/")), "ghost"),
            ] {
                let c = w.client(&format!("{url}/clusters/*"), token).await;
                let body = expect_status_because(
                    &c,
                    "GET",
                    configmaps,
                    None,
                    403,
                    format!("{who} on {kind} {what}"),
                )
                .await;
                assert!(!body.to_string().contains("cm-app1"));
                refusals.push((
                    who,
                    kind,
                    body["message"].as_str().unwrap_or_default().replace(what, "X"),
                ));
            }
        }
    }
    // The same answer whether the SyncTarget exists or not.
    for pair in refusals.chunks(2) {
        assert_eq!(pair[0].2, pair[1].2, "{pair:?}");
    }

    // East's syncer: not west's view, not east's with the wrong uid.
    let c = w
        .client(
            &format!("{}/clusters/*", w.syncer_url("syncer", "west", &w.west_uid)),
            "syncer-token",
        )
        .await;
    expect_status_because(&c, "GET", configmaps, None, 403, "another target's view").await;
    let c = w
        .client(
            &format!("{}/clusters/*", w.syncer_url("syncer", "east", &w.west_uid)),
            "syncer-token",
        )
        .await;
    let body = expect_status(&c, "GET", configmaps, None, 404).await;
    assert!(
        !body.to_string().contains(&w.east_uid),
        "the real uid is not told: {body}"
    );
    // Unauthenticated.
    let c = w.client(&format!("{east}/clusters/*"), "no-such-token").await;
    expect_status(&c, "GET", configmaps, None, 401).await;

    // Path tricks, as east's own syncer and as a stranger.
    let base = format!("/services/syncer/{}/east/{}", w.loc, w.east_uid);
    let tricks = [
        format!("{base}/clusters/*/../../../../api/v1/secrets"),
        format!("{base}/../west/{}/clusters/*/api/v1/configmaps", w.west_uid),
        format!(
            "/services/syncer/{}/east/%2e%2e/clusters/*/api/v1/configmaps",
            w.loc
        ),
        format!(
            "/services/syncer/{}%2Feast/{}/clusters/*/api/v1/configmaps",
            w.loc, w.east_uid
        ),
        format!(
            "/services/syncer/{}/east%2F..%2Fwest/{}/clusters/*/api/v1/configmaps",
            w.loc, w.west_uid
        ),
        format!("{base}/clusters/{}%2F..%2F{}/api/v1/configmaps", w.app1, w.app2),
        format!("{base}/api/v1/secrets"),
        format!("{base}/clusters/*/api/v1/namespaces/private/secrets/hidden"),
        "/services/syncer".to_string(),
        format!("/services/syncer/{}", w.loc),
    ];
    for token in ["syncer-token", "nobody-token"] {
        let c = w.client(hub.url(), token).await;
        for trick in &tricks {
            let (code, body) = common::get_raw(&c, trick).await;
            assert!(
                code == 400 || code == 403 || code == 404 || code == 405,
                "{trick} as {token}: {code} {body}"
            );
            assert!(
                !body.contains("hunter2") && !body.contains("cm-app3"),
                "{trick}: {body}"
            );
        }
    }
}

/// A syncer may post an Event through its view about an object scheduled
/// to its SyncTarget (how a copy its cluster refuses shows on the object for
/// `kubectl describe`), and about nothing else: not about an unscheduled
/// object or one that does not exist (the same answer), not in another
/// target's workspace; and no Event is readable or rewritable through the view.
#[tokio::test(flavor = "multi_thread")]
async fn a_syncer_posts_events_only_about_objects_scheduled_to_its_target() {
    let w = world().await;
    let event = |ns: &str, kind: &str, name: &str| {
        json!({"apiVersion": "v1", "kind": "Event",
               "metadata": {"generateName": "refused-", "namespace": ns},
               "involvedObject": {"apiVersion": "v1", "kind": kind, "name": name, "namespace": ns},
               "reason": "CopyRefused", "type": "Warning",
               "message": "ConfigMap \"cm-app1\" is invalid: metadata.annotations: Too long"})
    };
    let app1 = w.east("syncer", &w.app1).await;
    let posted = expect_status_because(
        &app1,
        "POST",
        "/api/v1/namespaces/work/events",
        Some(&event("work", "ConfigMap", "cm-app1")),
        201,
        "about a scheduled object",
    )
    .await;
    // The owner sees it in their workspace.
    let name = posted["metadata"]["name"].as_str().unwrap();
    let seen = get(
        &w.hub,
        "root:app1",
        &format!("/api/v1/namespaces/work/events/{name}"),
    )
    .await;
    assert_eq!(seen["reason"], "CopyRefused", "{seen}");

    // The attacker side: an unscheduled object, a missing one, another
    // namespace's, another target's workspace.
    for (ns, kind, object) in [
        ("private", "ConfigMap", "hidden"),
        ("private", "Secret", "hidden"),
        ("work", "ConfigMap", "no-such"),
    ] {
        let answer = expect_status_because(
            &app1,
            "POST",
            &format!("/api/v1/namespaces/{ns}/events"),
            Some(&event(ns, kind, object)),
            403,
            format!("{ns}/{object}"),
        )
        .await;
        assert!(
            answer["message"]
                .as_str()
                .unwrap()
                .contains("scheduled to this SyncTarget"),
            "{answer}"
        );
    }
    // In namespace private, about work's scheduled ConfigMap.
    let mut elsewhere = event("private", "ConfigMap", "cm-app1");
    elsewhere["involvedObject"]["namespace"] = json!("work");
    expect_status_because(
        &app1,
        "POST",
        "/api/v1/namespaces/private/events",
        Some(&elsewhere),
        403,
        "an Event about another namespace's object",
    )
    .await;
    // root:app3's objects are west's: its workspace may use root:loc, but
    // nothing there is scheduled to east.
    let app3 = w.east("syncer", "root:app3").await;
    expect_status_because(
        &app3,
        "POST",
        "/api/v1/namespaces/work/events",
        Some(&event("work", "ConfigMap", "cm-app3")),
        403,
        "an Event about west's object",
    )
    .await;

    // Nothing is readable or rewritable through the view: create is its one
    // verb, and no Event is visible there, not even the one just posted.
    expect_status_because(
        &app1,
        "GET",
        "/api/v1/namespaces/work/events",
        None,
        405,
        "a list",
    )
    .await;
    let path = format!("/api/v1/namespaces/work/events/{name}");
    for (method, body) in [("GET", None), ("PUT", Some(&posted)), ("DELETE", None)] {
        expect_status_because(&app1, method, &path, body, 404, format!("{method} {path}")).await;
    }
}

/// What east's syncer started with `--resources roles.rbac.authorization.k8s.io`
/// does: import the cluster's Role schema, so the SyncTarget controller accepts
/// the workspaces' own Roles for `target` (a built-in of every workspace, no
/// export's).
async fn import_roles(hub: &TestHub, target: &str) {
    create(
        hub,
        "root:loc",
        "/apis/apiresource.kcp.io/v1alpha1/apiresourceimports",
        json!({"apiVersion": "apiresource.kcp.io/v1alpha1", "kind": "APIResourceImport",
               "metadata": {"name": format!("roles.{target}.v1.rbac.authorization.k8s.io")},
               "spec": {"location": target,
                        "groupVersion": {"group": "rbac.authorization.k8s.io", "version": "v1"},
                        "scope": "Namespaced", "plural": "roles", "kind": "Role",
                        "openAPIV3Schema": {"type": "object"}}}),
    )
    .await;
    wait_for(
        hub,
        "root:loc",
        &format!("{WORKLOAD}/synctargets/{target}"),
        "roles Accepted",
        |o| {
            o["status"]["syncedResources"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|r| {
                    r["group"] == "rbac.authorization.k8s.io"
                        && r["resource"] == "roles"
                        && r["state"] == "Accepted"
                })
        },
    )
    .await;
}

/// A Role `name` in `ns` of workspace `ws`, written by `c`.
async fn role(c: &kube::Client, ns: &str, name: &str) {
    expect_status_because(
        c,
        "POST",
        &rbac_path(Some(ns), "roles"),
        Some(
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                     "metadata": {"name": name},
                     "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
        ),
        201,
        format!("Role {ns}/{name}"),
    )
    .await;
}

/// CustomTransform `name` (dropping Deployments' `spec.paused`), written by `c`
/// in its workspace after installing the CRDs there.
async fn custom_transform(c: &kube::Client, name: &str) {
    common::tenants::install_ferry_crds(c).await;
    expect_status_because(
        c,
        "POST",
        "/apis/control.kubestellar.io/v1alpha1/customtransforms",
        Some(
            &json!({"apiVersion": "control.kubestellar.io/v1alpha1", "kind": "CustomTransform",
                     "metadata": {"name": name},
                     "spec": {"apiGroup": "apps", "resource": "deployments", "remove": ["$.spec.paused"]}}),
        ),
        201,
        format!("CustomTransform {name}"),
    )
    .await;
}

/// The world, plus: east's syncer imported Roles; root:app1 (placed on east) has
/// Role `app1-role` in `work` (placed) and `app1-private` in `private`, and
/// CustomTransform `app1-transform`; root:app3 (placed on west) Role `app3-role`
/// in `work`; the attacker `mal`, cluster-admin of root:mal only, wrote a
/// Placement there naming root:loc, a `work` namespace like the others, Role
/// `mal-role` and CustomTransform `mal-transform`.
async fn rbac_world() -> (World, String) {
    let w = world().await;
    let hub = &w.hub;
    import_roles(hub, "east").await;
    let app1 = admin(hub, "root:app1").await;
    role(&app1, "work", "app1-role").await;
    role(&app1, "private", "app1-private").await;
    custom_transform(&app1, "app1-transform").await;
    role(&admin(hub, "root:app3").await, "work", "app3-role").await;

    let mal_cluster = workspace(hub, "mal").await;
    common::tenants::bind_cluster_role(hub, "root:mal", "mal-admin", "cluster-admin", "mal").await;
    let mal = common::client_as(hub, "root:mal", common::token("mal-token")).await;
    let (code, body) = call(
        &mal,
        "POST",
        "/apis/scheduling.kcp.io/v1alpha1/placements",
        Some(&json!({"apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
                     "metadata": {"name": "steal"},
                     "spec": {"locationWorkspace": "root:loc", "locationResource": {"group": "workload.kcp.io", "resource": "synctargets", "version": "v1alpha1"},
                              "locationSelectors": [{"matchLabels": {"region": "east"}}],
                              "namespaceSelector": {"matchLabels": {"purpose": "workload"}}}})),
    )
    .await;
    assert!(code == 201 || code == 403, "{body}");
    let (code, body) = workload_namespace_as(&mal, "work").await;
    assert_eq!(code, 201, "{body}");
    role(&mal, "work", "mal-role").await;
    custom_transform(&mal, "mal-transform").await;
    // Scheduled where it may be: app1's Role on east.
    wait_for(
        hub,
        "root:app1",
        &rbac_path(Some("work"), "roles/app1-role"),
        "app1-role scheduled",
        |o| !states(o).is_empty(),
    )
    .await;
    (w, mal_cluster)
}

/// Names of what east's syncer lists at `path` across every workspace.
async fn east_lists(w: &World, path: &str) -> Vec<String> {
    let list = expect_status_because(&w.east("syncer", "*").await, "GET", path, None, 200, &path).await;
    item_names(&list)
}

/// Positive twin of the next test: a syncer whose cluster imported Roles reads
/// the Roles scheduled to its target from each workspace's own built-in
/// resource (no APIExport serves them), and the CustomTransforms of the
/// workspaces placed on it, read-only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_syncer_that_imported_roles_reads_the_scheduled_roles_and_transforms_of_its_workspaces() {
    let (w, _) = rbac_world().await;
    let roles = "/apis/rbac.authorization.k8s.io/v1/roles";
    let listed = eventually(20, "app1-role served to east", || {
        let w = &w;
        async move {
            let names = east_lists(w, roles).await;
            names.contains(&"app1-role".to_string()).then_some(names)
        }
    })
    .await;
    assert!(!listed.contains(&"app1-private".to_string()), "{listed:?}");
    let one = w.east("syncer", &w.app1).await;
    let body = get_ok(&one, &rbac_path(Some("work"), "roles/app1-role")).await;
    assert_eq!(states(&body).get(&w.east).map(String::as_str), Some("Sync"));

    let transforms = "/apis/control.kubestellar.io/v1alpha1/customtransforms";
    let listed = eventually(20, "app1's transform served to east", || {
        let w = &w;
        async move {
            let names = east_lists(w, transforms).await;
            names.contains(&"app1-transform".to_string()).then_some(names)
        }
    })
    .await;
    assert_eq!(listed, ["app1-transform"]);
    let (code, body) = call(&one, "DELETE", &format!("{transforms}/app1-transform"), None).await;
    assert!(
        code == 403 || code == 405,
        "the view only reads transforms: {code} {body}"
    );
    let (code, body) = call(
        &one,
        "PATCH",
        &format!("{transforms}/app1-transform"),
        Some(&json!({"spec": {"remove": []}})),
    )
    .await;
    assert!(code >= 400, "the view only reads transforms: {code} {body}");
    let (_, still) = call(
        &admin(&w.hub, "root:app1").await,
        "GET",
        &format!("{transforms}/app1-transform"),
        None,
    )
    .await;
    assert_eq!(still["spec"]["remove"], json!(["$.spec.paused"]));
}

/// The attacker's side: the syncer view of east never serves a Role or a
/// CustomTransform of a workspace not placed on east (root:mal, whose owner
/// named root:loc without any grant there; root:app3, placed on west), nor an
/// unscheduled Role of a placed workspace; and importing Roles made no
/// APIExport serve them (the export guard holds: no schema for Roles).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_syncer_view_never_serves_roles_or_transforms_of_workspaces_not_placed_on_its_target() {
    let (w, mal) = rbac_world().await;
    let hub = &w.hub;
    let roles = "/apis/rbac.authorization.k8s.io/v1/roles";
    let transforms = "/apis/control.kubestellar.io/v1alpha1/customtransforms";
    // Wait for what east does see, so the absences below are not early.
    eventually(20, "east's own Role and transform served", || {
        let w = &w;
        async move {
            let r = east_lists(w, roles).await;
            let t = east_lists(w, transforms).await;
            (r.contains(&"app1-role".to_string()) && t.contains(&"app1-transform".to_string())).then_some(())
        }
    })
    .await;
    let listed = east_lists(&w, roles).await;
    for hidden in ["mal-role", "app3-role", "app1-private"] {
        assert!(!listed.contains(&hidden.to_string()), "{hidden}: {listed:?}");
    }
    assert!(!east_lists(&w, transforms)
        .await
        .contains(&"mal-transform".to_string()));
    // Named directly, in mal's workspace: as if nothing were there.
    let in_mal = w.east("syncer", &mal).await;
    for path in [
        rbac_path(Some("work"), "roles/mal-role"),
        format!("{transforms}/mal-transform"),
    ] {
        let (code, body) = call(&in_mal, "GET", &path, None).await;
        assert!(code == 403 || code == 404, "{path}: {code} {body}");
        assert!(!body.to_string().contains("\"rules\""), "{body}");
    }
    // mal's objects carry no state label for east (mal may not write one).
    let (_, mal_role) = call(
        &admin(hub, "root:mal").await,
        "GET",
        &rbac_path(Some("work"), "roles/mal-role"),
        None,
    )
    .await;
    assert!(states(&mal_role).is_empty(), "{mal_role}");
    // The guard on exports holds: no schema stands for the workspaces' Roles.
    let (_, schemas) = call(
        &admin(hub, "root:loc").await,
        "GET",
        "/apis/apis.kcp.io/v1alpha1/apiresourceschemas",
        None,
    )
    .await;
    assert!(
        !item_names(&schemas).iter().any(|n| n.contains(".roles.")),
        "{}",
        item_names(&schemas).join(", ")
    );
}

/// A write through the syncer view whose resourceVersion is stale is a
/// conflict (409), as kube-apiserver answers: the store's precondition is
/// checked before the rules on what a syncer may change (reserved labels,
/// the view's write rules), which act as validation and admission. With the
/// current resourceVersion the same change meets those rules (403).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_write_through_the_syncer_view_conflicts_before_the_write_rules_apply() {
    let w = world().await;
    let path = "/api/v1/namespaces/work/configmaps/cm-app1";
    let one = w.east("syncer", &w.app1).await;
    let seen = get_ok(&one, path).await;
    // The owner changes the object: what the syncer read is now stale.
    admin_patch(
        &w.hub,
        "root:app1",
        path,
        json!({"data": {"changed": "by its owner"}}),
    )
    .await;
    // A change the rules refuse: another SyncTarget's state label.
    let west = format!("{STATE_PREFIX}{}", sync_target_key(&w.loc, "west"));
    let refused = |mut obj: Value| {
        obj["metadata"]["labels"][&west] = json!("Sync");
        obj
    };
    let body = expect_status_because(
        &one,
        "PUT",
        path,
        Some(&refused(seen)),
        409,
        "a stale write is a conflict first",
    )
    .await;
    assert_eq!(body["reason"], "Conflict", "{body}");

    let (_, fresh) = call(&one, "GET", path, None).await;
    let body = expect_status_because(
        &one,
        "PUT",
        path,
        Some(&refused(fresh)),
        403,
        "a current write meets the rules",
    )
    .await;
    assert_eq!(body["reason"], "Forbidden", "{body}");
}
