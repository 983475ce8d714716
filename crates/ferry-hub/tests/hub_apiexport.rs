//! kcp's API-export machinery end to end: a provider exports an API from its
//! workspace, consumers bind it, the resource is served (and validated) in
//! each consumer, and the provider sees every consumer at once through the
//! APIExport virtual workspace — lists, a kube-rs watcher on `clusters/*`,
//! writes in one workspace, and permission claims. Plus what goes wrong:
//! no `bind` permission, a missing export or schema, name clashes, schema
//! immutability, and the virtual workspace tried from an attacker's side.

mod common;
use common::tenants::{self, Tenants};
use common::{
    admin, call, client_as, create, delete_ok, eventually, eventually_status, expect_status,
    expect_status_because, get_ok, ok, post_created, put_ok, rbac_path, token,
};
use ferry_testkit::exports;
use ferry_testkit::TestHub;
use futures::StreamExt;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{json, Value};

const APIS: &str = "/apis/apis.kcp.io/v1alpha1";
const RBAC: &str = "rbac.authorization.k8s.io";
const TOKENS: &str = "\
agent-token,agent,u-agent
alice-token,alice,u-alice
mallory-token,mallory,u-mallory
";

fn widgets_schema(prefix: &str) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": format!("{prefix}.widgets.example.io")},
        "spec": {
            "group": "example.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                "schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}},
                    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
                }}
            }]
        }
    })
}

fn gadgets_schema() -> Value {
    let mut s = widgets_schema("v1");
    s["metadata"]["name"] = json!("v1.gadgets.example.io");
    s["spec"]["names"] =
        json!({"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"});
    s["spec"]["scope"] = json!("Cluster");
    s
}

fn export(schemas: &[&str]) -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport",
        "metadata": {"name": "widgets.example.io"},
        "spec": {"latestResourceSchemas": schemas,
                 "permissionClaims": [{"group": "", "resource": "configmaps", "all": true}]}
    })
}

fn binding(name: &str, path: &str, accept_configmaps: bool) -> Value {
    let mut b = json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding",
        "metadata": {"name": name},
        "spec": {"reference": {"export": {"path": path, "name": "widgets.example.io"}}}
    });
    if accept_configmaps {
        b["spec"]["permissionClaims"] =
            json!([{"group": "", "resource": "configmaps", "all": true, "state": "Accepted"}]);
    }
    b
}

async fn workspace(hub: &TestHub, name: &str) -> String {
    tenants::ready_workspace(hub, name).await
}

async fn wait_condition(hub: &TestHub, ws: &str, path: &str, type_: &str, status: &str) -> Value {
    eventually(15, &format!("{path} {type_}={status}"), || async {
        let (code, obj) = call(&admin(hub, ws).await, "GET", path, None).await;
        let conditions = obj["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let found = conditions
            .iter()
            .any(|c| c["type"] == type_ && c["status"] == status);
        (code == 200 && found).then_some(obj)
    })
    .await
}

/// Wait until the binding is Ready and what it binds is served: the
/// registry catches up with a Bound status just after the status is
/// committed, so a reader can see Bound a moment before the resource.
async fn bound(hub: &TestHub, ws: &str, name: &str) -> Value {
    let b = wait_condition(hub, ws, &format!("{APIS}/apibindings/{name}"), "Ready", "True").await;
    assert_eq!(b["status"]["phase"], "Bound", "{b}");
    for r in b["status"]["boundResources"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        let group = r["group"].as_str().unwrap_or_default().to_string();
        if group.is_empty() {
            continue;
        }
        eventually_status(
            10,
            &format!("{group} served in {ws}"),
            &admin(hub, ws).await,
            &format!("/apis/{group}"),
            200,
        )
        .await;
    }
    b
}

/// A provider (`root:provider`, the export and its schema) and `consumers`
/// workspaces bound to it; the first two accept the ConfigMap claim.
struct World {
    hub: TestHub,
    _dir: tempfile::TempDir,
    provider: String,
    consumers: Vec<(String, String)>, // (path, logical cluster)
}

/// A hub that knows the users of [`TOKENS`] (the directory holds the file).
async fn hub_with_users() -> (TestHub, tempfile::TempDir) {
    let (hub, dir) = common::tenants::hub_with_tokens(TOKENS, |_| {}).await;
    (hub, dir)
}

/// The widgets schema and an export of `schemas` in root:provider.
async fn publish(hub: &TestHub, schemas: &[&str]) {
    create(
        hub,
        "root:provider",
        &format!("{APIS}/apiresourceschemas"),
        widgets_schema("v1"),
    )
    .await;
    create(
        hub,
        "root:provider",
        &format!("{APIS}/apiexports"),
        export(schemas),
    )
    .await;
}

async fn world(consumers: usize) -> World {
    let (hub, dir) = hub_with_users().await;
    let provider = workspace(&hub, "provider").await;
    publish(&hub, &["v1.widgets.example.io"]).await;
    let mut cs = Vec::new();
    for i in 0..consumers {
        let name = format!("c{i}");
        let cluster = workspace(&hub, &name).await;
        let path = format!("root:{name}");
        create(
            &hub,
            &path,
            &format!("{APIS}/apibindings"),
            binding("widgets", "root:provider", i < 2),
        )
        .await;
        bound(&hub, &path, "widgets").await;
        cs.push((path, cluster));
    }
    World {
        hub,
        _dir: dir,
        provider,
        consumers: cs,
    }
}

fn widget_resource() -> ApiResource {
    ApiResource {
        group: "example.io".into(),
        version: "v1".into(),
        api_version: "example.io/v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

/// A kube-rs client whose base URL is `url` (a virtual-workspace URL plus
/// `/clusters/<c>`), authenticating with `bearer`.
async fn client_at(hub: &TestHub, url: &str, bearer: &str) -> kube::Client {
    let mut config = hub.config("root").await;
    config.cluster_url = url.parse().expect("url");
    config.auth_info.token = Some(bearer.to_string().into());
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

async fn slice_url(hub: &TestHub) -> String {
    let slice = eventually(15, "the export's endpoint slice has a URL", || async {
        let (code, s) = call(
            &admin(hub, "root:provider").await,
            "GET",
            &format!("{APIS}/apiexportendpointslices/widgets.example.io"),
            None,
        )
        .await;
        (code == 200 && s["status"]["endpoints"][0]["url"].is_string()).then_some(s)
    })
    .await;
    slice["status"]["endpoints"][0]["url"]
        .as_str()
        .unwrap()
        .to_string()
}

fn cluster_of(o: &Value) -> String {
    o["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exported_api_is_served_where_bound_and_seen_everywhere_through_the_virtual_workspace() {
    let w = world(3).await;
    let hub = &w.hub;

    // The export has an identity and a virtual-workspace URL; its slice too.
    let exp = wait_condition(
        hub,
        "root:provider",
        &format!("{APIS}/apiexports/widgets.example.io"),
        "VirtualWorkspaceURLsReady",
        "True",
    )
    .await;
    assert_eq!(exp["status"]["identityHash"].as_str().unwrap().len(), 64, "{exp}");
    let url = slice_url(hub).await;
    assert_eq!(
        url,
        format!(
            "{}/services/apiexport/{}/widgets.example.io",
            hub.url(),
            w.provider
        )
    );

    // The binding records what it bound.
    let b = bound(hub, "root:c0", "widgets").await;
    assert_eq!(b["status"]["apiExportClusterName"], json!(w.provider));
    let br = &b["status"]["boundResources"][0];
    assert_eq!(
        (br["group"].as_str(), br["resource"].as_str()),
        (Some("example.io"), Some("widgets"))
    );
    assert_eq!(br["schema"]["name"], "v1.widgets.example.io");
    assert_eq!(br["schema"]["identityHash"], exp["status"]["identityHash"]);
    for c in [
        "APIExportValid",
        "InitialBindingCompleted",
        "PermissionClaimsApplied",
        "BindingUpToDate",
    ] {
        assert!(
            b["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|x| x["type"] == c && x["status"] == "True"),
            "{c}: {b}"
        );
    }
    assert_eq!(
        b["status"]["appliedPermissionClaims"][0]["resource"],
        "configmaps"
    );

    // Served in each consumer: discovery, CRUD, defaulting and validation from the schema.
    for (i, (path, _)) in w.consumers.iter().enumerate() {
        let client = admin(hub, path).await;
        let list = get_ok(&client, "/apis/example.io/v1").await;
        assert_eq!(list["resources"][0]["name"], "widgets");
        let made = post_created(
            &client,
            "/apis/example.io/v1/namespaces/default/widgets",
            &json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": format!("w{i}")}, "spec": {}}),
        )
        .await;
        assert_eq!(made["spec"]["size"], 1, "defaulted from the schema: {made}");
        expect_status_because(
            &client,
            "POST",
            "/apis/example.io/v1/namespaces/default/widgets",
            Some(&json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "bad"}, "spec": {"size": "big"}})),
            422,
            "schema-validated",
        )
        .await;
        // A ConfigMap in every consumer; only c0 and c1 accepted the claim.
        create(
            hub,
            path,
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"name": format!("cm{i}")}}),
        )
        .await;
    }
    // kubectl in a consumer: printer columns from the schema.
    let stdout = ok(
        hub.kubectl_in("root:c0", &["get", "widgets"], None),
        "kubectl get widgets",
    );
    assert!(stdout.contains("SIZE") && stdout.contains("w0"), "{stdout}");
    // OpenAPI from the schema: kubectl explain knows the bound resource's fields.
    let stdout = ok(
        hub.kubectl_in("root:c0", &["explain", "widgets.spec"], None),
        "kubectl explain widgets.spec",
    );
    assert!(
        stdout.contains("size") && stdout.contains("<integer>"),
        "{stdout}"
    );
    // Not served in a workspace that did not bind it.
    let other = workspace(hub, "other").await;
    expect_status(
        &admin(hub, "root:other").await,
        "GET",
        "/apis/example.io/v1/namespaces/default/widgets",
        None,
        404,
    )
    .await;

    // The provider lists every consumer's widgets through the virtual workspace.
    let admin_token = hub.running.admin_token.clone();
    let everywhere = client_at(hub, &format!("{url}/clusters/*"), &admin_token).await;
    let widgets: Api<DynamicObject> = Api::all_with(everywhere.clone(), &widget_resource());
    let listed = widgets
        .list(&ListParams::default())
        .await
        .expect("list through the virtual workspace");
    let mut clusters: Vec<String> = listed
        .items
        .iter()
        .map(|o| cluster_of(&serde_json::to_value(o).unwrap()))
        .collect();
    clusters.sort();
    let mut want: Vec<String> = w.consumers.iter().map(|(_, c)| c.clone()).collect();
    want.sort();
    assert_eq!(clusters, want);
    assert!(!clusters.contains(&other));

    // kubectl pointed at the virtual workspace, as the README shows.
    let out = hub.kubectl(&["--server", &format!("{url}/clusters/*"), "get", "widgets", "-A"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for i in 0..3 {
        assert!(stdout.contains(&format!("w{i} ")), "{stdout}");
    }

    // Claimed ConfigMaps: only where the claim was accepted.
    let cms = get_ok(&everywhere, "/api/v1/configmaps").await;
    let mut cm_clusters: Vec<String> = cms["items"].as_array().unwrap().iter().map(cluster_of).collect();
    cm_clusters.sort();
    cm_clusters.dedup();
    let mut accepted = vec![w.consumers[0].1.clone(), w.consumers[1].1.clone()];
    accepted.sort();
    assert_eq!(cm_clusters, accepted, "{cms}");
    assert!(cms["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["metadata"]["name"] != "cm2"));

    // Discovery is served there.
    let disc = get_ok(&everywhere, "/apis/example.io/v1").await;
    assert_eq!(disc["resources"][0]["name"], "widgets");

    // A kube-rs watcher on clusters/* sees creates, updates and deletes in every consumer.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let watch_api = widgets.clone();
    let task = tokio::spawn(async move {
        let mut stream = kube::runtime::watcher(watch_api, kube::runtime::watcher::Config::default()).boxed();
        while let Some(ev) = stream.next().await {
            if let Ok(ev) = ev {
                let _ = tx.send(ev);
            }
        }
    });
    let mut seen_init = false;
    while !seen_init {
        if let kube::runtime::watcher::Event::InitDone = rx.recv().await.unwrap() {
            seen_init = true;
        }
    }
    for (i, (path, _)) in w.consumers.iter().enumerate() {
        let api: Api<DynamicObject> =
            Api::namespaced_with(admin(hub, path).await, "default", &widget_resource());
        let obj: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": format!("live{i}")}, "spec": {"size": 5}}),
        )
        .unwrap();
        api.create(&PostParams::default(), &obj).await.expect("create");
        api.patch(
            &format!("live{i}"),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"size": 6}})),
        )
        .await
        .expect("update");
        api.delete(&format!("live{i}"), &Default::default())
            .await
            .expect("delete");
    }
    let mut applied: Vec<(String, i64)> = Vec::new();
    let mut deleted: Vec<String> = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while deleted.len() < w.consumers.len() {
        let ev = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("the watcher sees every change in time")
            .unwrap();
        match ev {
            kube::runtime::watcher::Event::Apply(o)
                if o.metadata.name.as_deref().unwrap_or("").starts_with("live") =>
            {
                let v = serde_json::to_value(&o).unwrap();
                applied.push((cluster_of(&v), v["spec"]["size"].as_i64().unwrap_or(0)));
            }
            kube::runtime::watcher::Event::Delete(o)
                if o.metadata.name.as_deref().unwrap_or("").starts_with("live") =>
            {
                deleted.push(cluster_of(&serde_json::to_value(&o).unwrap()));
            }
            _ => {}
        }
    }
    task.abort();
    deleted.sort();
    assert_eq!(deleted, want, "deletes from every consumer");
    for (_, c) in &w.consumers {
        assert!(
            applied.iter().any(|(cl, s)| cl == c && *s == 5),
            "create in {c}: {applied:?}"
        );
        assert!(
            applied.iter().any(|(cl, s)| cl == c && *s == 6),
            "update in {c}: {applied:?}"
        );
    }

    // Writes in one workspace through the virtual workspace land there.
    let c1 = &w.consumers[1].1;
    let in_c1 = client_at(hub, &format!("{url}/clusters/{c1}"), &admin_token).await;
    post_created(
        &in_c1,
        "/apis/example.io/v1/namespaces/default/widgets",
        &json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "from-provider"}, "spec": {"size": 3}}),
    )
    .await;
    get_ok(
        &admin(hub, "root:c1").await,
        "/apis/example.io/v1/namespaces/default/widgets/from-provider",
    )
    .await;
    // Status through the virtual workspace (the provider's controller reports back).
    let in_c1_api: Api<DynamicObject> = Api::namespaced_with(in_c1, "default", &widget_resource());
    in_c1_api
        .patch_status(
            "from-provider",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .expect("status through the virtual workspace");
    let (_, seen) = call(
        &admin(hub, "root:c1").await,
        "GET",
        "/apis/example.io/v1/namespaces/default/widgets/from-provider",
        None,
    )
    .await;
    assert_eq!(seen["status"]["ready"], true, "{seen}");
}

/// The virtual workspace tried from every side: who may enter, which
/// workspaces and objects are reachable, path tricks.
#[tokio::test]
async fn the_virtual_workspace_lets_in_only_content_readers_and_shows_only_bound_workspaces() {
    let w = world(3).await;
    let hub = &w.hub;
    let url = slice_url(hub).await;
    let c2 = w.consumers[2].1.clone();
    let other = workspace(hub, "other").await;
    create(
        hub,
        "root:other",
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "secret-plans"}}),
    )
    .await;

    // agent: list/watch on apiexports/content of this export only, in the provider.
    tenants::cluster_role(
        hub,
        "root:provider",
        "widgets-content",
        json!([{"apiGroups": ["apis.kcp.io"], "resources": ["apiexports/content"],
                "resourceNames": ["widgets.example.io"], "verbs": ["get", "list", "watch"]}]),
    )
    .await;
    tenants::bind_cluster_role(hub, "root:provider", "agent-content", "widgets-content", "agent").await;
    // alice administers consumer c0 (not the provider); mallory nothing.
    tenants::bind_cluster_role(hub, "root:c0", "alice-admin", "cluster-admin", "alice").await;

    let widgets = "/apis/example.io/v1/widgets";
    let agent = client_at(hub, &format!("{url}/clusters/*"), "agent-token").await;
    expect_status_because(&agent, "GET", widgets, None, 200, "the agent lists").await;
    // ... but may not write (only get/list/watch granted).
    let in_c0 = client_at(
        hub,
        &format!("{url}/clusters/{}", w.consumers[0].1),
        "agent-token",
    )
    .await;
    expect_status_because(
        &in_c0,
        "POST",
        "/apis/example.io/v1/namespaces/default/widgets",
        Some(&json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "x"}})),
        403,
        "create needs create on apiexports/content",
    )
    .await;

    // A consumer's admin and a stranger get 403, with the same message whether the export exists or not.
    for who in ["alice-token", "mallory-token"] {
        let c = client_at(hub, &format!("{url}/clusters/*"), who).await;
        let body = expect_status_because(&c, "GET", widgets, None, 403, &who).await;
        assert!(
            !body.to_string().contains(&c2),
            "leaks nothing about consumers: {body}"
        );
        let missing = url.replace("widgets.example.io", "nothing.example.io");
        let c = client_at(hub, &format!("{missing}/clusters/*"), who).await;
        expect_status(&c, "GET", widgets, None, 403).await;
        let c = client_at(
            hub,
            &format!(
                "{}/services/apiexport/nowhere/widgets.example.io/clusters/*",
                hub.url()
            ),
            who,
        )
        .await;
        expect_status(&c, "GET", widgets, None, 403).await;
    }
    // Another workspace's credentials: a ServiceAccount token of a consumer.
    let sa = post_created(
        &admin(hub, "root:c0").await,
        "/api/v1/namespaces/default/serviceaccounts/default/token",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    let sa_token = sa["status"]["token"].as_str().unwrap();
    let c = client_at(hub, &format!("{url}/clusters/*"), sa_token).await;
    expect_status_because(
        &c,
        "GET",
        widgets,
        None,
        403,
        "a consumer's ServiceAccount cannot read the export's content",
    )
    .await;

    // Unbound workspaces and unaccepted claims are not reachable, by path or by cluster name.
    for ws in [other.as_str(), "root:other", c2.as_str(), "root:c2", "nowhere"] {
        let c = client_at(hub, &format!("{url}/clusters/{ws}"), &hub.running.admin_token).await;
        expect_status_because(&c, "GET", "/api/v1/configmaps", None, 404, &ws).await;
        expect_status_because(
            &c,
            "GET",
            "/api/v1/namespaces/default/configmaps/secret-plans",
            None,
            404,
            &ws,
        )
        .await;
    }
    let c = client_at(
        hub,
        &format!("{url}/clusters/root:other"),
        &hub.running.admin_token,
    )
    .await;
    expect_status_because(&c, "GET", widgets, None, 404, "widgets of an unbound workspace").await;
    // Resources neither exported nor claimed are not served at all (but for
    // the export's own APIBindings, read-only, as in kcp).
    let all = client_at(hub, &format!("{url}/clusters/*"), &hub.running.admin_token).await;
    for path in [
        "/api/v1/secrets",
        "/apis/apps/v1/deployments",
        "/apis/apis.kcp.io/v1alpha1/apiexports",
    ] {
        expect_status_because(&all, "GET", path, None, 404, &path).await;
    }
    // Path tricks.
    let admin_root = admin(hub, "root").await;
    for trick in [
        "/services/apiexport/../../api/v1/secrets".to_string(),
        format!(
            "/services/apiexport/{}/widgets.example.io/../../../api/v1/secrets",
            w.provider
        ),
        format!(
            "/services/apiexport/{}/widgets.example.io/api/v1/configmaps",
            w.provider
        ),
        format!("/services/apiexport/{}/widgets.example.io/clusters/", w.provider),
        "/services/apiexport".to_string(),
        "/services/nosuchkind/a/b/clusters/*/api/v1/configmaps".to_string(),
        format!(
            "/services/apiexport/{}/%2e%2e/clusters/*/api/v1/configmaps",
            w.provider
        ),
    ] {
        let uri = format!("{}{trick}", hub.url());
        let req = http::Request::builder()
            .uri(&trick)
            .body(kube::client::Body::empty())
            .unwrap();
        let resp = admin_root.send(req).await.expect("response");
        let code = resp.status().as_u16();
        assert!(code == 404 || code == 403 || code == 400, "{uri}: {code}");
    }
}

#[tokio::test]
async fn binding_needs_bind_on_the_export_and_says_what_is_wrong() {
    let (hub, _dir) = hub_with_users().await;
    workspace(&hub, "provider").await;
    workspace(&hub, "consumer").await;
    publish(&hub, &["v1.widgets.example.io", "v1.missing.example.io"]).await;
    // The export names the schema it lacks.
    let exp = wait_condition(
        &hub,
        "root:provider",
        &format!("{APIS}/apiexports/widgets.example.io"),
        "APIResourceSchemasValid",
        "False",
    )
    .await;
    assert!(exp.to_string().contains("v1.missing.example.io"), "{exp}");

    // alice administers the consumer but may not bind the provider's export.
    tenants::bind_cluster_role(&hub, "root:consumer", "alice-admin", "cluster-admin", "alice").await;
    let alice = client_as(&hub, "root:consumer", token("alice-token")).await;
    let (code, body) = post(
        &alice,
        &format!("{APIS}/apibindings"),
        binding("widgets", "root:provider", false),
    )
    .await;
    assert_eq!(code, 403, "{body}");
    assert!(body["message"].as_str().unwrap().contains("bind"), "{body}");
    // An export in a workspace that does not exist: the same 403.
    let (code, _) = post(
        &alice,
        &format!("{APIS}/apibindings"),
        binding("w2", "root:nowhere", false),
    )
    .await;
    assert_eq!(code, 403);
    // Granted `bind` in the provider (and membership there), the binding is created.
    tenants::cluster_role(&hub, "root:provider", "bind-widgets", json!([{"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"], "resourceNames": ["widgets.example.io"], "verbs": ["bind"]}])).await;
    tenants::bind_cluster_role(&hub, "root:provider", "alice-binds", "bind-widgets", "alice").await;
    let (code, body) = post(
        &alice,
        &format!("{APIS}/apibindings"),
        binding("widgets", "root:provider", false),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    // It waits for the missing schema, saying so.
    let b = wait_condition(
        &hub,
        "root:consumer",
        &format!("{APIS}/apibindings/widgets"),
        "BindingUpToDate",
        "False",
    )
    .await;
    assert_eq!(b["status"]["phase"], "Binding", "{b}");
    assert!(b.to_string().contains("v1.missing.example.io"), "{b}");
    // Fixing the export binds it.
    put_ok(
        &admin(&hub, "root:provider").await,
        &format!("{APIS}/apiexports/widgets.example.io"),
        &{
            let (_, mut e) = call(
                &admin(&hub, "root:provider").await,
                "GET",
                &format!("{APIS}/apiexports/widgets.example.io"),
                None,
            )
            .await;
            e["spec"]["latestResourceSchemas"] = json!(["v1.widgets.example.io"]);
            e
        },
    )
    .await;
    bound(&hub, "root:consumer", "widgets").await;
    // The reference cannot change.
    let (_, mut b) = call(&alice, "GET", &format!("{APIS}/apibindings/widgets"), None).await;
    b["spec"]["reference"]["export"]["name"] = json!("other");
    expect_status(
        &alice,
        "PUT",
        &format!("{APIS}/apibindings/widgets"),
        Some(&b),
        422,
    )
    .await;

    // A binding to an export that does not exist in its own workspace: unbound, with the reason.
    post_created(
        &admin(&hub, "root:consumer").await,
        &format!("{APIS}/apibindings"),
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": "ghost"},
                     "spec": {"reference": {"export": {"name": "ghost.example.io"}}}}),
    )
    .await;
    let g = wait_condition(
        &hub,
        "root:consumer",
        &format!("{APIS}/apibindings/ghost"),
        "APIExportValid",
        "False",
    )
    .await;
    assert!(g.to_string().contains("APIExportNotFound"), "{g}");

    // A schema never changes.
    let (_, mut s) = call(
        &admin(&hub, "root:provider").await,
        "GET",
        &format!("{APIS}/apiresourceschemas/v1.widgets.example.io"),
        None,
    )
    .await;
    s["spec"]["scope"] = json!("Cluster");
    let body = expect_status(
        &admin(&hub, "root:provider").await,
        "PUT",
        &format!("{APIS}/apiresourceschemas/v1.widgets.example.io"),
        Some(&s),
        422,
    )
    .await;
    assert!(body["message"].as_str().unwrap().contains("immutable"), "{body}");
    // A badly named schema is refused with the expected form.
    let mut bad = widgets_schema("v1");
    bad["metadata"]["name"] = json!("widgets");
    expect_status(
        &admin(&hub, "root:provider").await,
        "POST",
        &format!("{APIS}/apiresourceschemas"),
        Some(&bad),
        422,
    )
    .await;

    // A CRD may not take the bound resource's name; a binding may not take a CRD's.
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.io"},
        "spec": {"group": "example.io", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    expect_status(
        &admin(&hub, "root:consumer").await,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
        409,
    )
    .await;
    workspace(&hub, "crdland").await;
    create(
        &hub,
        "root:crdland",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        crd,
    )
    .await;
    create(
        &hub,
        "root:crdland",
        &format!("{APIS}/apibindings"),
        binding("widgets", "root:provider", false),
    )
    .await;
    let c = wait_condition(
        &hub,
        "root:crdland",
        &format!("{APIS}/apibindings/widgets"),
        "BindingUpToDate",
        "False",
    )
    .await;
    assert!(c.to_string().contains("NamingConflicts"), "{c}");
    assert_eq!(c["status"]["phase"], "Binding");
}

#[tokio::test]
async fn new_schemas_reach_existing_bindings_and_unbinding_keeps_the_objects() {
    let w = world(1).await;
    let hub = &w.hub;
    let (path, _) = w.consumers[0].clone();
    create(
        hub,
        &path,
        "/apis/example.io/v1/namespaces/default/widgets",
        json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "keep-me"}}),
    )
    .await;
    // The provider's view serves the export's resources as they are now: the
    // hub keeps what a view serves between requests while the export and its
    // schemas stay as they were.
    let url = slice_url(hub).await;
    let view = client_at(hub, &format!("{url}/clusters/*"), &hub.running.admin_token).await;
    get_ok(&view, "/apis/example.io/v1/widgets").await;
    expect_status(&view, "GET", "/apis/example.io/v1/gadgets", None, 404).await;
    // A second schema added to the export is served by the existing binding.
    let schemas = format!("{APIS}/apiresourceschemas");
    let make_gadgets_schema = || create(hub, "root:provider", &schemas, gadgets_schema());
    make_gadgets_schema().await;
    let provider = admin(hub, "root:provider").await;
    let (_, mut e) = call(
        &provider,
        "GET",
        &format!("{APIS}/apiexports/widgets.example.io"),
        None,
    )
    .await;
    e["spec"]["latestResourceSchemas"] = json!(["v1.widgets.example.io", "v1.gadgets.example.io"]);
    put_ok(&provider, &format!("{APIS}/apiexports/widgets.example.io"), &e).await;
    eventually_status(
        15,
        "gadgets served in the consumer",
        &admin(hub, &path).await,
        "/apis/example.io/v1/gadgets",
        200,
    )
    .await;
    // In the provider's view at once: the export changed.
    get_ok(&view, "/apis/example.io/v1/gadgets").await;
    // A schema the export lists that goes is no longer served there, though
    // the export itself did not change.
    let gadgets_schema_name = gadgets_schema()["metadata"]["name"].as_str().unwrap().to_string();
    delete_ok(
        &provider,
        &format!("{APIS}/apiresourceschemas/{gadgets_schema_name}"),
    )
    .await;
    expect_status(&view, "GET", "/apis/example.io/v1/gadgets", None, 404).await;
    get_ok(&view, "/apis/example.io/v1/widgets").await;
    // And served again once it is back.
    make_gadgets_schema().await;
    get_ok(&view, "/apis/example.io/v1/gadgets").await;

    // Deleting the binding stops serving; the objects stay, and come back with a new binding.
    let consumer = admin(hub, &path).await;
    delete_ok(&consumer, &format!("{APIS}/apibindings/widgets")).await;
    eventually_status(
        15,
        "widgets no longer served",
        &admin(hub, &path).await,
        "/apis/example.io/v1/namespaces/default/widgets",
        404,
    )
    .await;
    create(
        hub,
        &path,
        &format!("{APIS}/apibindings"),
        binding("widgets-again", "root:provider", false),
    )
    .await;
    bound(hub, &path, "widgets-again").await;
    get_ok(
        &consumer,
        "/apis/example.io/v1/namespaces/default/widgets/keep-me",
    )
    .await;
}

#[tokio::test]
async fn exports_and_bindings_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let provider;
    let consumer;
    {
        let hub = TestHub::start_in(dir.path()).await;
        provider = workspace(&hub, "provider").await;
        consumer = workspace(&hub, "consumer").await;
        publish(&hub, &["v1.widgets.example.io"]).await;
        create(
            &hub,
            "root:consumer",
            &format!("{APIS}/apibindings"),
            binding("widgets", "root:provider", true),
        )
        .await;
        bound(&hub, "root:consumer", "widgets").await;
        create(
            &hub,
            "root:consumer",
            "/apis/example.io/v1/namespaces/default/widgets",
            json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": "durable"}}),
        )
        .await;
    }
    let hub = TestHub::start_in(dir.path()).await;
    expect_status_because(
        &admin(&hub, "root:consumer").await,
        "GET",
        "/apis/example.io/v1/namespaces/default/widgets/durable",
        None,
        200,
        "served again at once after a restart",
    )
    .await;
    let url = format!(
        "{}/services/apiexport/{provider}/widgets.example.io/clusters/*",
        hub.url()
    );
    let c = client_at(&hub, &url, &hub.running.admin_token).await;
    let list = get_ok(&c, "/apis/example.io/v1/widgets").await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1);
    assert_eq!(cluster_of(&list["items"][0]), consumer);
}

/// kcp's `kubernetes` export in `root:compute`: a built-in resource binds as
/// a no-op (every workspace serves Deployments already) and reports Bound,
/// and stays the workspace's own: it is no bound resource, and the export's
/// virtual workspace does not serve it.
#[tokio::test]
async fn an_exported_built_in_resource_binds_as_a_no_op_and_stays_the_consumers_own() {
    let hub = TestHub::start().await;
    let compute = workspace(&hub, "compute").await;
    workspace(&hub, "app").await;
    create(
        &hub,
        "root:compute",
        &format!("{APIS}/apiresourceschemas"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
               "metadata": {"name": "today.deployments.apps"},
               "spec": {"group": "apps", "scope": "Namespaced",
                        "names": {"plural": "deployments", "singular": "deployment", "kind": "Deployment", "listKind": "DeploymentList"},
                        "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                                      "schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}]}}),
    )
    .await;
    create(
        &hub,
        "root:compute",
        &format!("{APIS}/apiexports"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "kubernetes"},
               "spec": {"latestResourceSchemas": ["today.deployments.apps"]}}),
    )
    .await;
    create(
        &hub,
        "root:app",
        &format!("{APIS}/apibindings"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": "kubernetes"},
               "spec": {"reference": {"export": {"path": "root:compute", "name": "kubernetes"}}}}),
    )
    .await;
    let b = bound(&hub, "root:app", "kubernetes").await;
    assert_eq!(b["status"]["boundResources"], json!([]), "{b}");
    // Still the built-in Deployment: defaulted and validated as one.
    let made = create(
        &hub,
        "root:app",
        "/apis/apps/v1/namespaces/default/deployments",
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    )
    .await;
    assert_eq!(made["spec"]["revisionHistoryLimit"], 10, "{made}");
    let url = format!("{}/services/apiexport/{compute}/kubernetes/clusters/*", hub.url());
    let c = client_at(&hub, &url, &hub.running.admin_token).await;
    expect_status_because(
        &c,
        "GET",
        "/apis/apps/v1/deployments",
        None,
        404,
        "the export never serves a workspace's own Deployments",
    )
    .await;
    // kubectl in the consumer lists the binding as Ready.
    let out = tokio::task::spawn_blocking({
        let kc = hub.kubeconfig().to_path_buf();
        let server = format!("{}/clusters/root:app", hub.url());
        move || {
            std::process::Command::new("kubectl")
                .args([
                    "--kubeconfig",
                    kc.to_str().unwrap(),
                    "--server",
                    &server,
                    "get",
                    "apibindings",
                ])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("READY") && stdout.contains("True"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn certificates_schema() -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": "v1.certificates.cert-manager.io"},
        "spec": {"group": "cert-manager.io", "scope": "Namespaced",
                 "names": {"plural": "certificates", "singular": "certificate", "kind": "Certificate", "listKind": "CertificateList"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                               "schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}]}
    })
}

/// An export named `name` in `ws` with `schemas` and `claims`; returns its
/// identity hash once the hub has given it one.
async fn export_with(hub: &TestHub, ws: &str, name: &str, schemas: &[&str], claims: Value) -> String {
    create(
        hub,
        ws,
        &format!("{APIS}/apiexports"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": name},
               "spec": {"latestResourceSchemas": schemas, "permissionClaims": claims}}),
    )
    .await;
    eventually(15, &format!("APIExport {name}'s identity"), || async {
        let (_, e) = call(
            &admin(hub, ws).await,
            "GET",
            &format!("{APIS}/apiexports/{name}"),
            None,
        )
        .await;
        e["status"]["identityHash"].as_str().map(str::to_string)
    })
    .await
}

/// Binds `ws:name` in `consumer` as binding `binding`, deciding the claims `claims`.
async fn bind_export(hub: &TestHub, consumer: &str, binding: &str, ws: &str, name: &str, claims: Value) {
    create(
        hub,
        consumer,
        &format!("{APIS}/apibindings"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": binding},
               "spec": {"reference": {"export": {"path": ws, "name": name}}, "permissionClaims": claims}}),
    )
    .await;
    bound(hub, consumer, binding).await;
}

/// kcp's claims on another export's resource: the claim names that export's
/// identity, the virtual workspace serves the resource with that export's
/// schema, and shows it only in workspaces that bind it from that export and
/// accepted the claim. A claim naming a look-alike export's identity, or one no
/// export has, sees nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_on_another_exports_resource_needs_its_identity_and_acceptance() {
    let hub = TestHub::start().await;
    let mut clusters = std::collections::HashMap::new();
    for ws in ["certs", "provider", "decoy", "mallory", "c0", "c1"] {
        clusters.insert(ws, workspace(&hub, ws).await);
    }
    for ws in ["root:certs", "root:decoy"] {
        create(
            &hub,
            ws,
            &format!("{APIS}/apiresourceschemas"),
            certificates_schema(),
        )
        .await;
    }
    let certs = export_with(
        &hub,
        "root:certs",
        "cert-manager",
        &["v1.certificates.cert-manager.io"],
        json!([]),
    )
    .await;
    // The look-alike: the same group and resource, another owner.
    let decoy = export_with(
        &hub,
        "root:decoy",
        "cert-manager",
        &["v1.certificates.cert-manager.io"],
        json!([]),
    )
    .await;
    assert_ne!(certs, decoy);
    let claim = |identity: &str| json!({"group": "cert-manager.io", "resource": "certificates", "identityHash": identity, "all": true});
    let accepted = |identity: &str| {
        let mut c = claim(identity);
        c["state"] = json!("Accepted");
        json!([c])
    };
    create(
        &hub,
        "root:provider",
        &format!("{APIS}/apiresourceschemas"),
        widgets_schema("v1"),
    )
    .await;
    export_with(
        &hub,
        "root:provider",
        "widgets.example.io",
        &["v1.widgets.example.io"],
        json!([claim(&certs)]),
    )
    .await;
    export_with(&hub, "root:mallory", "lookalike", &[], json!([claim(&decoy)])).await;
    // As kcp's admission: a claim on a resource that is not built in must
    // name the identity of the export serving it; a built-in one need not.
    let status = expect_status_because(
        &admin(&hub, "root:mallory").await,
        "POST",
        &format!("{APIS}/apiexports"),
        Some(
            &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "anyone"},
            "spec": {"permissionClaims": [
                {"group": "", "resource": "configmaps", "all": true},
                {"group": "cert-manager.io", "resource": "certificates", "all": true}]}}),
        ),
        422,
        "a claim without identityHash on another export's resource",
    )
    .await;
    let causes = status["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        causes.len(),
        1,
        "only the non-built-in claim is refused: {status}"
    );
    assert_eq!(
        causes[0]["field"], "spec.permissionClaims[1].identityHash",
        "{status}"
    );
    let made_up = "0".repeat(64);
    export_with(&hub, "root:mallory", "made-up", &[], json!([claim(&made_up)])).await;

    // c0 binds cert-manager and accepts every claim (also mallory's); c1 binds
    // both but does not accept the provider's claim.
    for consumer in ["root:c0", "root:c1"] {
        bind_export(
            &hub,
            consumer,
            "cert-manager",
            "root:certs",
            "cert-manager",
            json!([]),
        )
        .await;
        let decision = if consumer == "root:c0" {
            accepted(&certs)
        } else {
            json!([])
        };
        bind_export(
            &hub,
            consumer,
            "widgets",
            "root:provider",
            "widgets.example.io",
            decision,
        )
        .await;
        create(
            &hub,
            consumer,
            "/apis/cert-manager.io/v1/namespaces/default/certificates",
            json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                   "metadata": {"name": "web"}, "spec": {"secretName": "web-tls"}}),
        )
        .await;
    }
    bind_export(
        &hub,
        "root:c0",
        "lookalike",
        "root:mallory",
        "lookalike",
        accepted(&decoy),
    )
    .await;
    bind_export(
        &hub,
        "root:c0",
        "made-up",
        "root:mallory",
        "made-up",
        accepted(&made_up),
    )
    .await;

    let vw = |ws: &str, name: &str, cluster: &str| {
        format!(
            "{}/services/apiexport/{}/{name}/clusters/{cluster}",
            hub.url(),
            clusters[ws]
        )
    };
    let certificates = "/apis/cert-manager.io/v1/certificates";
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{}/{}",
                    cluster_of(c),
                    c["metadata"]["name"].as_str().unwrap_or_default()
                )
            })
            .collect()
    };
    let token = &hub.running.admin_token;
    // The provider sees c0's Certificate (which accepted), not c1's.
    let all = client_at(&hub, &vw("provider", "widgets.example.io", "*"), token).await;
    let list = get_ok(&all, certificates).await;
    assert_eq!(names(&list), [format!("{}/web", clusters["c0"])], "{list}");
    let in_c0 = client_at(
        &hub,
        &vw("provider", "widgets.example.io", &clusters["c0"]),
        token,
    )
    .await;
    let got = get_ok(
        &in_c0,
        "/apis/cert-manager.io/v1/namespaces/default/certificates/web",
    )
    .await;
    assert_eq!(got["spec"]["secretName"], "web-tls");
    // Writes too, as for any accepted claim.
    post_created(
        &in_c0,
        "/apis/cert-manager.io/v1/namespaces/default/certificates",
        &json!({"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "api"}}),
    )
    .await;
    let in_c1 = client_at(
        &hub,
        &vw("provider", "widgets.example.io", &clusters["c1"]),
        token,
    )
    .await;
    expect_status_because(
        &in_c1,
        "GET",
        "/apis/cert-manager.io/v1/namespaces/default/certificates/web",
        None,
        404,
        "a consumer that did not accept the claim",
    )
    .await;
    // The look-alike's identity: served (its schema exists) but nothing shows.
    let look = client_at(&hub, &vw("mallory", "lookalike", "*"), token).await;
    let list = get_ok(&look, certificates).await;
    assert!(names(&list).is_empty(), "{list}");
    let look_c0 = client_at(&hub, &vw("mallory", "lookalike", &clusters["c0"]), token).await;
    expect_status(
        &look_c0,
        "GET",
        "/apis/cert-manager.io/v1/namespaces/default/certificates/web",
        None,
        404,
    )
    .await;
    // An identity no export has: not served at all.
    let made_up_vw = client_at(&hub, &vw("mallory", "made-up", "*"), token).await;
    expect_status(&made_up_vw, "GET", certificates, None, 404).await;
}

// ---------------------------------------------------------------------------
// From a tenant's side: `mal` is cluster-admin of root:mal and nothing else;
// `alice` owns root:alice and binds mal's exports. An export reaches alice's
// objects only through a schema of a custom resource she bound, or a claim
// she accepted exactly as it is.

/// The tenants, with mal letting alice bind any export of root:mal (what a
/// provider does for its consumers). Returns mal's and alice's logical clusters.
async fn mal_exports_to_alice() -> (Tenants, String, String) {
    let t = Tenants::start().await;
    let mal = t.workspace("mal", Some("mal")).await;
    let alice = t.workspace("alice", Some("alice")).await;
    let m = t.client_as("mal", "root:mal").await;
    for (path, obj) in [
        (
            rbac_path(None, "clusterroles"),
            json!({"apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRole", "metadata": {"name": "bind-exports"},
                   "rules": [{"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"], "verbs": ["bind"]}]}),
        ),
        (
            rbac_path(None, "clusterrolebindings"),
            json!({"apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRoleBinding", "metadata": {"name": "alice-binds"},
                   "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "bind-exports"},
                   "subjects": [tenants::user("alice")]}),
        ),
    ] {
        post_created(&m, &path, &obj).await;
    }
    (t, mal, alice)
}

/// POST `obj` to `path` through `client`; returns the status and body.
async fn post(client: &kube::Client, path: &str, obj: Value) -> (u16, Value) {
    call(client, "POST", path, Some(&obj)).await
}

/// Replace the spec of mal's export `name` with `spec`, as mal.
async fn respec_export(t: &Tenants, name: &str, spec: Value) -> (u16, Value) {
    let m = t.client_as("mal", "root:mal").await;
    let path = format!("{APIS}/apiexports/{name}");
    let (_, mut export) = call(&m, "GET", &path, None).await;
    export["spec"] = spec;
    call(&m, "PUT", &path, Some(&export)).await
}

/// alice binds mal's export `name`, deciding `claims`, and waits until Bound.
async fn alice_binds(t: &Tenants, name: &str, claims: Value) -> Value {
    let a = t.client_as("alice", "root:alice").await;
    post_created(
        &a,
        &format!("{APIS}/apibindings"),
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": name},
               "spec": {"reference": {"export": {"path": "root:mal", "name": name}}, "permissionClaims": claims}}),
    ).await;
    bound(&t.hub, "root:alice", name).await
}

/// mal's client in the virtual workspace of export `name`, at `clusters/<cluster>`.
async fn mal_in_view(t: &Tenants, mal: &str, name: &str, cluster: &str) -> kube::Client {
    let url = format!(
        "{}/services/apiexport/{mal}/{name}/clusters/{cluster}",
        t.hub.url()
    );
    client_at(&t.hub, &url, "mal-token").await
}

fn schema(name: &str, group: &str, plural: &str, kind: &str) -> Value {
    let mut s = widgets_schema("v1");
    s["metadata"]["name"] = json!(name);
    s["spec"]["group"] = json!(group);
    s["spec"]["names"] = json!({"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")});
    s
}

fn causes(status: &Value) -> Vec<&str> {
    status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["field"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_export_a_built_in_resource_to_reach_a_consumers_secrets_or_deployments() {
    let (t, mal, alice) = mal_exports_to_alice().await;
    let m = t.client_as("mal", "root:mal").await;
    let schemas = format!("{APIS}/apiresourceschemas");
    // Core Secrets and RBAC: refused when written, naming spec.group.
    for s in [
        schema("v1.secrets.core", "", "secrets", "Secret"),
        schema(
            "v1.clusterrolebindings.rbac.authorization.k8s.io",
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "ClusterRoleBinding",
        ),
        schema(
            "v1.workspaces.tenancy.kcp.io",
            "tenancy.kcp.io",
            "workspaces",
            "Workspace",
        ),
    ] {
        let (code, status) = post(&m, &schemas, s.clone()).await;
        assert_eq!(code, 422, "{} must be refused: {status}", s["metadata"]["name"]);
        assert_eq!(causes(&status), vec!["spec.group"], "{status}");
        assert!(
            status["message"].as_str().unwrap().contains("permissionClaims"),
            "the message says what to do instead: {status}"
        );
    }
    // An export cannot list one either (a schema's name says what it defines).
    let (code, status) = post(
        &m,
        &format!("{APIS}/apiexports"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "takeover"},
               "spec": {"latestResourceSchemas": ["v1.secrets.core"]}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status), vec!["spec.latestResourceSchemas[0]"], "{status}");
    // A workload kind (kcp's TMC exports list Deployments) may be described,
    // but binds as a no-op: alice's Deployments stay hers.
    post_created(
        &m,
        &schemas,
        &schema("v1.deployments.apps", "apps", "deployments", "Deployment"),
    )
    .await;
    post_created(
        &m,
        &format!("{APIS}/apiexports"),
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "takeover"},
               "spec": {"latestResourceSchemas": ["v1.deployments.apps"]}}),
    )
    .await;
    let b = alice_binds(&t, "takeover", json!([])).await;
    assert_eq!(
        b["status"]["boundResources"],
        json!([]),
        "nothing of alice's is bound: {b}"
    );
    let a = t.client_as("alice", "root:alice").await;
    post_created(
        &a,
        "/apis/apps/v1/namespaces/default/deployments",
        &json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}),
    ).await;
    for cluster in [alice.as_str(), "*"] {
        let view = mal_in_view(&t, &mal, "takeover", cluster).await;
        for path in [
            "/apis/apps/v1/deployments",
            "/api/v1/secrets",
            "/api/v1/serviceaccounts",
        ] {
            expect_status_because(
                &view,
                "GET",
                path,
                None,
                404,
                format!("mal reads {path} in {cluster}"),
            )
            .await;
        }
    }
    // No service-account token for mal: the Secret cannot be made through the view.
    let view = mal_in_view(&t, &mal, "takeover", &alice).await;
    let (code, body) = post(
        &view,
        "/api/v1/namespaces/default/secrets",
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mal-token",
               "annotations": {"kubernetes.io/service-account.name": "default"}},
               "type": "kubernetes.io/service-account-token"}),
    )
    .await;
    assert_eq!(code, 404, "{body}");
    expect_status_because(
        &a,
        "GET",
        "/api/v1/namespaces/default/secrets/mal-token",
        None,
        404,
        "no token was made in alice's workspace",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_added_to_a_bound_export_reaches_only_new_custom_resources() {
    let (t, mal, alice) = mal_exports_to_alice().await;
    let m = t.client_as("mal", "root:mal").await;
    let schemas = format!("{APIS}/apiresourceschemas");
    for s in [
        widgets_schema("v1"),
        schema("v1.sprockets.example.io", "example.io", "sprockets", "Sprocket"),
        schema("v1.gadgets.example.io", "example.io", "gadgets", "Gadget"),
        schema("v1.deployments.apps", "apps", "deployments", "Deployment"),
    ] {
        post_created(&m, &schemas, &s).await;
    }
    post_created(
        &m,
        &format!("{APIS}/apiexports"),
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "tools"},
               "spec": {"latestResourceSchemas": ["v1.widgets.example.io"]}}),
    )
    .await;
    alice_binds(&t, "tools", json!([])).await;
    // alice has gadgets of her own (a CRD) and Deployments (built in).
    let a = t.client_as("alice", "root:alice").await;
    post_created(
        &a,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": "gadgets.example.io"},
               "spec": {"group": "example.io", "scope": "Namespaced",
                        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                                      "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    ).await;
    // A new custom resource reaches the binding, as in kcp.
    let (code, status) = respec_export(
        &t,
        "tools",
        json!({"latestResourceSchemas": ["v1.widgets.example.io", "v1.sprockets.example.io"]}),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    let view = mal_in_view(&t, &mal, "tools", &alice).await;
    eventually_status(
        15,
        "sprockets reach alice's binding",
        &view,
        "/apis/example.io/v1/sprockets",
        200,
    )
    .await;
    // Secrets cannot be added at all; alice's gadgets and Deployments are hers.
    let (code, status) = respec_export(
        &t,
        "tools",
        json!({"latestResourceSchemas": ["v1.widgets.example.io", "v1.sprockets.example.io", "v1.secrets.core"]}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    let (code, status) = respec_export(
        &t,
        "tools",
        json!({"latestResourceSchemas": ["v1.widgets.example.io", "v1.sprockets.example.io", "v1.gadgets.example.io", "v1.deployments.apps"]}),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    let b = wait_condition(
        &t.hub,
        "root:alice",
        &format!("{APIS}/apibindings/tools"),
        "BindingUpToDate",
        "False",
    )
    .await;
    let up_to_date = b["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "BindingUpToDate")
        .unwrap()
        .clone();
    assert_eq!(up_to_date["reason"], "NamingConflicts", "{b}");
    assert!(
        up_to_date["message"]
            .as_str()
            .unwrap()
            .contains("gadgets.example.io"),
        "{b}"
    );
    post_created(
        &a,
        "/apis/example.io/v1/namespaces/default/gadgets",
        &json!({"apiVersion": "example.io/v1", "kind": "Gadget", "metadata": {"name": "mine"}}),
    )
    .await;
    for cluster in [alice.as_str(), "*"] {
        let view = mal_in_view(&t, &mal, "tools", cluster).await;
        for path in ["/apis/apps/v1/deployments", "/apis/example.io/v1/gadgets"] {
            let (code, body) = call(&view, "GET", path, None).await;
            let seen = body["items"].as_array().map_or(0, Vec::len);
            assert!(
                code == 404 || seen == 0,
                "mal must not see alice's {path} in {cluster}: {code} {body}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_applied_only_as_the_consumer_accepted_it() {
    let (t, mal, alice) = mal_exports_to_alice().await;
    let m = t.client_as("mal", "root:mal").await;
    let shared_only =
        json!({"group": "", "resource": "configmaps", "resourceSelector": [{"namespace": "shared"}]});
    post_created(
        &m,
        &format!("{APIS}/apiexports"),
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "reader"},
               "spec": {"permissionClaims": [shared_only]}}),
    )
    .await;
    let mut accepted = shared_only.clone();
    accepted["state"] = json!("Accepted");
    alice_binds(&t, "reader", json!([accepted])).await;
    let a = t.client_as("alice", "root:alice").await;
    post_created(
        &a,
        "/api/v1/namespaces",
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shared"}}),
    )
    .await;
    for ns in ["shared", "default"] {
        post_created(
            &a,
            &format!("/api/v1/namespaces/{ns}/configmaps"),
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("in-{ns}")}}),
        )
        .await;
    }
    let view = mal_in_view(&t, &mal, "reader", &alice).await;
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
            .collect()
    };
    // What alice accepted: the ConfigMaps of `shared`.
    let list = eventually(15, "mal sees what alice accepted", || async {
        let (code, list) = call(&view, "GET", "/api/v1/configmaps", None).await;
        (code == 200 && names(&list).contains(&"in-shared".to_string())).then_some(list)
    })
    .await;
    assert!(!names(&list).contains(&"in-default".to_string()), "{list}");
    // Writes too: in `shared`, not elsewhere.
    let cm = |name: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    post_created(&view, "/api/v1/namespaces/shared/configmaps", &cm("from-mal")).await;
    let (code, status) = post(&view, "/api/v1/namespaces/default/configmaps", cm("from-mal")).await;
    assert_eq!(code, 403, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("does not cover it in namespace \"default\""),
        "{status}"
    );
    expect_status_because(
        &a,
        "GET",
        "/api/v1/namespaces/default/configmaps/from-mal",
        None,
        404,
        "nothing was written outside the claim",
    )
    .await;
    // mal asks for more: every ConfigMap, and Secrets. Nothing more is applied.
    let (code, status) = respec_export(
        &t,
        "reader",
        json!({"permissionClaims": [
            {"group": "", "resource": "configmaps", "all": true},
            {"group": "", "resource": "secrets", "all": true},
        ]}),
    )
    .await;
    assert_eq!(code, 200, "{status}");
    let b = wait_condition(
        &t.hub,
        "root:alice",
        &format!("{APIS}/apibindings/reader"),
        "PermissionClaimsApplied",
        "False",
    )
    .await;
    assert!(
        b["status"]["appliedPermissionClaims"].is_null(),
        "the widened claim is not applied: {b}"
    );
    for path in [
        "/api/v1/configmaps",
        "/api/v1/namespaces/default/configmaps/in-default",
        "/api/v1/secrets",
    ] {
        let (code, body) = call(&view, "GET", path, None).await;
        assert!(
            code == 404 || (code == 200 && names(&body).is_empty()),
            "mal reads {path} that alice never accepted: {code} {body}"
        );
    }
}

/// The twins: a tenant's export of a custom resource is read and written
/// through its virtual workspace once a consumer binds it, and a claim on
/// ConfigMaps the consumer accepted reaches them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_export_of_a_custom_resource_and_an_accepted_claim_work_through_the_virtual_workspace() {
    let (t, mal, alice) = mal_exports_to_alice().await;
    let m = t.client_as("mal", "root:mal").await;
    post_created(&m, &format!("{APIS}/apiresourceschemas"), &widgets_schema("v1")).await;
    let claim = json!({"group": "", "resource": "configmaps", "all": true});
    post_created(
        &m,
        &format!("{APIS}/apiexports"),
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "widgets"},
               "spec": {"latestResourceSchemas": ["v1.widgets.example.io"], "permissionClaims": [claim]}}),
    )
    .await;
    let mut accepted = claim.clone();
    accepted["state"] = json!("Accepted");
    let b = alice_binds(&t, "widgets", json!([accepted])).await;
    assert_eq!(b["status"]["boundResources"][0]["resource"], "widgets", "{b}");
    let a = t.client_as("alice", "root:alice").await;
    let widget = |name: &str| json!({"apiVersion": "example.io/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {}});
    post_created(
        &a,
        "/apis/example.io/v1/namespaces/default/widgets",
        &widget("hers"),
    )
    .await;
    post_created(
        &a,
        "/api/v1/namespaces/default/configmaps",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}}),
    )
    .await;
    let everywhere = mal_in_view(&t, &mal, "widgets", "*").await;
    eventually(15, "mal lists alice's widget and ConfigMap", || async {
        let (w, widgets) = call(&everywhere, "GET", "/apis/example.io/v1/widgets", None).await;
        let (c, cms) = call(&everywhere, "GET", "/api/v1/configmaps", None).await;
        let has = |l: &Value, n: &str| {
            l["items"]
                .as_array()
                .is_some_and(|i| i.iter().any(|o| o["metadata"]["name"] == n))
        };
        (w == 200 && c == 200 && has(&widgets, "hers") && has(&cms, "settings")).then_some(())
    })
    .await;
    let view = mal_in_view(&t, &mal, "widgets", &alice).await;
    post_created(
        &view,
        "/apis/example.io/v1/namespaces/default/widgets",
        &widget("from-mal"),
    )
    .await;
    let body = get_ok(&a, "/apis/example.io/v1/namespaces/default/widgets/from-mal").await;
    assert_eq!(body["spec"]["size"], 1, "defaulted from the schema: {body}");
    post_created(
        &view,
        "/api/v1/namespaces/default/configmaps",
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-mal"}}),
    )
    .await;
}

/// Impersonation lends nothing across workspaces: mal, cluster-admin of
/// root:mal, may act as `system:masters` there (kube's rules let an admin
/// impersonate any group), but that identity is bound to root:mal, so it
/// cannot bind an export whose workspace never granted mal `bind`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonating_system_masters_in_ones_own_workspace_lends_no_bind_elsewhere() {
    let (t, _mal, _alice) = mal_exports_to_alice().await;
    let a = t.client_as("alice", "root:alice").await;
    post_created(
        &a,
        &format!("{APIS}/apiexports"),
        &json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "private"},
               "spec": {"permissionClaims": [{"group": "", "resource": "configmaps", "all": true}]}}),
    )
    .await;
    let as_masters = |method: &str, path: &str, body: Option<&Value>| {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("Impersonate-User", "mal")
            .header("Impersonate-Group", "system:masters");
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        req.body(body.map(|b| serde_json::to_vec(b).unwrap()).unwrap_or_default())
            .unwrap()
    };
    let send = |req: http::Request<Vec<u8>>| async {
        let m = t.client_as("mal", "root:mal").await;
        let resp = m.send(req.map(kube::client::Body::from)).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = resp.into_body().collect_bytes().await.unwrap();
        (
            code,
            serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
        )
    };
    // Within root:mal the impersonation works.
    let (code, body) = send(as_masters("GET", "/api/v1/namespaces/default/secrets", None)).await;
    assert_eq!(code, 200, "{body}");
    // It does not reach alice's export.
    let steal = json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": "steal"},
                       "spec": {"reference": {"export": {"path": "root:alice", "name": "private"}},
                                "permissionClaims": [{"group": "", "resource": "configmaps", "all": true, "state": "Accepted"}]}});
    let (code, body) = send(as_masters("POST", &format!("{APIS}/apibindings"), Some(&steal))).await;
    assert_eq!(code, 403, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("needs \"bind\""),
        "{body}"
    );
}

/// Binding an export that does not exist (yet: kcp's `imported-apis` before the
/// syncer has imported anything) says so, naming the export and the workspace,
/// to whoever may read exports there; anyone else gets the same 403 as for an
/// export that exists or a workspace that does not, so nothing leaks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_a_missing_export_says_not_found_only_to_who_may_read_that_workspace() {
    let t = Tenants::start().await;
    t.workspace("alice", Some("alice")).await;
    t.workspace("alice-apps", Some("alice")).await;
    t.workspace("mal", Some("mal")).await;
    create(
        &t.hub,
        "root:alice",
        &format!("{APIS}/apiexports"),
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport", "metadata": {"name": "widgets"}, "spec": {}}),
    )
    .await;
    let bind = |name: &str, path: &str, export: &str| {
        json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding", "metadata": {"name": name},
               "spec": {"reference": {"export": {"path": path, "name": export}}}})
    };

    // alice, who reads root:alice, is told what is missing and where.
    let alice = t.client_as("alice", "root:alice-apps").await;
    let body = expect_status(
        &alice,
        "POST",
        &format!("{APIS}/apibindings"),
        Some(&bind("early", "root:alice", "imported-apis")),
        404,
    )
    .await;
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("apiexports.apis.kcp.io \"imported-apis\" not found in workspace \"root:alice\"")
            && message.contains("then bind again")
            && !message.contains("needs \"bind\""),
        "{message}"
    );
    assert_eq!(body["reason"], "NotFound", "{body}");

    // mal, who reads nothing there, gets the same words for a missing export, an
    // existing one and a workspace that does not exist: only the names differ.
    let mal = t.client_as("mal", "root:mal").await;
    let mut answers = Vec::new();
    for (path, export) in [
        ("root:alice", "imported-apis"),
        ("root:alice", "widgets"),
        ("root:nowhere", "imported-apis"),
    ] {
        let body = expect_status_because(
            &mal,
            "POST",
            &format!("{APIS}/apibindings"),
            Some(&bind("probe", path, export)),
            403,
            format!("{path}:{export}"),
        )
        .await;
        let message = body["message"]
            .as_str()
            .unwrap()
            .replace(&format!("{path}:{export}"), "<export>")
            .replace(&format!("{export:?}"), "<name>");
        answers.push(message);
    }
    assert!(answers[0].contains("needs \"bind\""), "{}", answers[0]);
    assert_eq!(answers[0], answers[1]);
    assert_eq!(answers[0], answers[2]);
}

/// The kit's alice and bob ([`exports::bob_binds_alices_widgets`]), and bob
/// also binding gadgets from `root:tools`. Returns bob's logical cluster.
async fn bob_binds_alices_export(t: &Tenants) -> String {
    let bob = exports::bob_binds_alices_widgets(t).await;
    t.workspace("tools", None).await;
    let gadgets = "gadgets.example.io";
    exports::export(&t.hub, "root:tools", gadgets, gadgets_schema(), json!([])).await;
    exports::bind(&t.hub, "root:bob", "gadgets", "root:tools", gadgets, json!([])).await;
    bob
}

/// `user`'s client in the virtual workspace of `export` in `ws`, at `clusters/<cluster>`.
async fn in_export_view(t: &Tenants, user: &str, ws: &str, export: &str, cluster: &str) -> kube::Client {
    let url = format!(
        "{}/services/apiexport/{ws}/{export}/clusters/{cluster}",
        t.hub.url()
    );
    client_at(&t.hub, &url, &format!("{user}-token")).await
}

/// As in kcp, an export's owner sees through its virtual workspace which
/// workspaces bind the export, by logical-cluster name, and each binding's
/// state; it may not change them there, and learns nothing of the
/// consumers' other bindings or of workspaces that do not bind its export.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_export_owner_sees_which_workspaces_bind_its_export_and_their_state_read_only() {
    let t = Tenants::start().await;
    let bob = bob_binds_alices_export(&t).await;
    let bindings = format!("{APIS}/apibindings");
    let alice = in_export_view(&t, "alice", "root:alice", "widgets.example.io", "*").await;
    let list = get_ok(&alice, &bindings).await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "bob's binding of widgets only: {list}");
    assert_eq!(items[0]["metadata"]["name"], "widgets");
    assert_eq!(cluster_of(&items[0]), bob, "the consumer's logical cluster");
    assert_eq!(items[0]["status"]["phase"], "Bound", "{list}");
    assert_eq!(
        items[0]["spec"]["permissionClaims"][0]["state"], "Accepted",
        "the claims bob accepted: {list}"
    );
    assert!(
        !list.to_string().contains("root:bob"),
        "the consumer's path stays its own: {list}"
    );

    let in_bob = in_export_view(&t, "alice", "root:alice", "widgets.example.io", &bob).await;
    let (code, one) = call(&in_bob, "GET", &format!("{bindings}/widgets"), None).await;
    assert_eq!(
        (code, one["status"]["phase"].as_str()),
        (200, Some("Bound")),
        "{one}"
    );
    expect_status_because(
        &in_bob,
        "GET",
        &format!("{bindings}/gadgets"),
        None,
        404,
        "bob's binding of another export",
    )
    .await;
    for (method, patch) in [
        ("DELETE", None),
        ("PATCH", Some(json!({"metadata": {"labels": {"x": "y"}}}))),
    ] {
        let body = expect_status_because(
            &in_bob,
            method,
            &format!("{bindings}/widgets"),
            patch.as_ref(),
            403,
            &method,
        )
        .await;
        assert!(body["message"].as_str().unwrap().contains("read-only"), "{body}");
    }
    // A workspace that binds nothing of alice's is as unknown as one that does not exist.
    let tools = in_export_view(&t, "alice", "root:alice", "widgets.example.io", "root:tools").await;
    expect_status(&tools, "GET", &bindings, None, 404).await;
    expect_status_because(
        &admin(&t.hub, "root:bob").await,
        "GET",
        &format!("{bindings}/widgets"),
        None,
        200,
        "the binding is still there",
    )
    .await;
}

/// The attacker's side: mal, with rights only in root:mal, reads neither the
/// bindings of alice's export nor who made them, and his own export of the
/// same name shows him no one else's binding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sees_no_bindings_of_an_export_it_does_not_own_nor_the_consumers_names() {
    let t = Tenants::start().await;
    let bob = bob_binds_alices_export(&t).await;
    let bindings = format!("{APIS}/apibindings");
    for cluster in ["*", bob.as_str()] {
        let mal = in_export_view(&t, "mal", "root:alice", "widgets.example.io", cluster).await;
        let body = expect_status_because(&mal, "GET", &bindings, None, 403, &cluster).await;
        assert!(!body.to_string().contains(&bob), "{body}");
    }
    expect_status(&t.client_as("mal", "root:bob").await, "GET", &bindings, None, 403).await;

    // mal's own export, named like alice's: he owns it, and sees only its consumers (none).
    let m = t.client_as("mal", "root:mal").await;
    post_created(&m, &format!("{APIS}/apiresourceschemas"), &widgets_schema("v1")).await;
    post_created(
        &m,
        &format!("{APIS}/apiexports"),
        &export(&["v1.widgets.example.io"]),
    )
    .await;
    let own = in_export_view(&t, "mal", "root:mal", "widgets.example.io", "*").await;
    let list = get_ok(&own, &bindings).await;
    assert_eq!(list["items"], json!([]), "{list}");
    let at_bob = in_export_view(&t, "mal", "root:mal", "widgets.example.io", &bob).await;
    expect_status_because(&at_bob, "GET", &bindings, None, 404, "bob binds nothing of mal's").await;
}
