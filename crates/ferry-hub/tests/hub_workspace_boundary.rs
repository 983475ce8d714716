//! The workspace boundary, tried from an attacker's side: certificates a
//! workspace admin can mint, `aggregationRule` escalation, a query read two
//! ways, what a non-member learns about a workspace, and that a refused
//! request makes nothing in another's (its APIServices). Plus a regression
//! matrix of what already held: credentials bound to one workspace tried on
//! others through every path trick, and Secrets through every representation.

mod common;
use base64::Engine;
use common::tenants::{
    bind_cluster_role, binding, cluster_role, ready_workspace, service_account_token,
    service_account_with_role, user, RBAC,
};
use common::{
    admin, call, client_as, create, eventually, expect_status, expect_status_because, get_ok, get_raw,
    post_created, rbac_path, token,
};
use ferry_hub::kubeconfig::AuthInfo;
use ferry_testkit::TestHub;
use http_body_util::BodyExt;
use serde_json::{json, Value};

/// mallory administers root:a only; alice administers root:b only; bob has
/// nothing anywhere; eve is a member of root:a with a few narrow rights.
const TOKENS: &str = "\
mallory-token,mallory,u-mallory
alice-token,alice,u-alice
bob-token,bob,u-bob
eve-token,eve,u-eve
";

/// A hub with [`TOKENS`], workspaces root:a and root:b (a Secret
/// `default/crown-jewels` in each), mallory cluster-admin of root:a and alice
/// of root:b.
async fn tenants() -> (TestHub, tempfile::TempDir) {
    let (hub, dir) = common::tenants::hub_with_tokens(TOKENS, |_| {}).await;
    for ws in ["a", "b"] {
        ready_workspace(&hub, ws).await;
        let path = format!("root:{ws}");
        create(
            &hub,
            &path,
            "/api/v1/namespaces/default/secrets",
            json!({"metadata": {"name": "crown-jewels"}, "stringData": {"key": "value"}}),
        )
        .await;
    }
    bind_cluster_role(&hub, "root:a", "mallory-admin", "cluster-admin", "mallory").await;
    bind_cluster_role(&hub, "root:b", "alice-admin", "cluster-admin", "alice").await;
    (hub, dir)
}

/// A PEM CSR for `CN=cn, O=groups...` and its key.
fn csr_for(cn: &str, groups: &[&str]) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    for g in groups {
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, *g);
    }
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    (pem, key.serialize_pem())
}

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/// As `client`: create CSR `name` for the client signer and approve it.
async fn request_and_approve(client: &kube::Client, name: &str, csr_pem: &str) {
    let csr = json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(csr_pem),
                 "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"]},
    });
    let mut created = post_created(client, CSRS, &csr).await;
    created["status"]["conditions"] = json!([{"type": "Approved", "status": "True",
        "reason": "Approved", "message": "approved by the workspace admin"}]);
    expect_status_because(
        client,
        "PUT",
        &format!("{CSRS}/{name}/approval"),
        Some(&created),
        200,
        format!("approving {name}"),
    )
    .await;
}

/// The CSR once the signer has acted: `Ok(certificate PEM)` or `Err(Failed message)`.
async fn signer_outcome(client: &kube::Client, name: &str) -> Result<String, String> {
    eventually(10, "the signer acts on the CSR", || async {
        let (_, csr) = call(client, "GET", &format!("{CSRS}/{name}"), None).await;
        if let Some(cert) = csr.pointer("/status/certificate").and_then(Value::as_str) {
            let pem = base64::engine::general_purpose::STANDARD.decode(cert).unwrap();
            return Some(Ok(String::from_utf8(pem).unwrap()));
        }
        let failed = csr
            .pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Failed")?;
        Some(Err(failed["message"].as_str().unwrap_or("").to_string()))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_admin_cannot_mint_a_system_masters_certificate() {
    let (hub, _dir) = tenants().await;
    let mallory = client_as(&hub, "root:a", token("mallory-token")).await;
    for (name, cn, groups) in [
        ("masters", "mallory", vec!["system:masters"]),
        ("nodes", "mallory", vec!["qa", "system:nodes"]),
        ("node-user", "system:node:worker-1", vec![]),
        ("sa-user", "system:serviceaccount:kube-system:default", vec![]),
    ] {
        let (pem, _) = csr_for(cn, &groups);
        request_and_approve(&mallory, name, &pem).await;
        let why = signer_outcome(&mallory, name)
            .await
            .expect_err("must not be signed");
        assert!(why.contains("reserved \"system:\""), "{name}: {why}");
    }
    // The same request approved by a hub-wide admin in root is refused too.
    let (pem, _) = csr_for("mallory", &["system:masters"]);
    let root_admin = admin(&hub, "root").await;
    request_and_approve(&root_admin, "masters-in-root", &pem).await;
    assert!(signer_outcome(&root_admin, "masters-in-root").await.is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_issued_through_a_workspace_is_good_only_there() {
    let (hub, _dir) = tenants().await;
    let mallory = client_as(&hub, "root:a", token("mallory-token")).await;
    // alice administers root:b; mallory asks root:a's signer for "alice".
    let (pem, key) = csr_for("alice", &["ops"]);
    request_and_approve(&mallory, "alice", &pem).await;
    let cert = signer_outcome(&mallory, "alice").await.expect("signed");
    let as_cert = |ws: &'static str| {
        let auth = AuthInfo::ClientCert {
            cert_pem: cert.clone(),
            key_pem: key.clone(),
        };
        let hub = &hub;
        async move { client_as(hub, ws, auth).await }
    };
    // In root:a the certificate is alice, bound to root:a.
    let in_a = as_cert("root:a").await;
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let who = post_created(
        &in_a,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &review,
    )
    .await;
    assert_eq!(who["status"]["userInfo"]["username"], "alice");
    assert!(who["status"]["userInfo"]["extra"]["authentication.kcp.io/cluster-name"].is_array());
    // Elsewhere it is nothing, although alice is cluster-admin of root:b.
    for ws in ["root:b", "root", "*"] {
        let elsewhere = as_cert(ws).await;
        for path in [
            "/api/v1/namespaces/default/secrets/crown-jewels",
            "/api/v1/secrets",
            "/api",
        ] {
            expect_status_because(&elsewhere, "GET", path, None, 403, format!("{path} in {ws}")).await;
        }
    }
    let (_, body) = call(&as_cert("root:b").await, "GET", "/api/v1/secrets", None).await;
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("valid only in its own workspace (root:a)"),
        "{body}"
    );
    // alice's own token still works in root:b.
    let alice = client_as(&hub, "root:b", token("alice-token")).await;
    get_ok(&alice, "/api/v1/secrets").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_aggregation_rule_takes_full_authority() {
    let (hub, _dir) = tenants().await;
    let ws = "root:a";
    // eve may get and patch her own ClusterRole, and is bound to it.
    cluster_role(
        &hub,
        ws,
        "eve-role",
        json!([{"verbs": ["get", "patch"], "apiGroups": [RBAC], "resources": ["clusterroles"],
            "resourceNames": ["eve-role"]}]),
    )
    .await;
    bind_cluster_role(&hub, ws, "eve-role", "eve-role", "eve").await;
    let eve = client_as(&hub, ws, token("eve-token")).await;
    let select_defaults = json!({"aggregationRule": {"clusterRoleSelectors": [
        {"matchLabels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}]}});
    let req = http::Request::builder()
        .method("PATCH")
        .uri(format!("{}/eve-role", rbac_path(None, "clusterroles")))
        .header("content-type", "application/merge-patch+json")
        .body(kube::client::Body::from(
            serde_json::to_vec(&select_defaults).unwrap(),
        ))
        .unwrap();
    let resp = eve.send(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&body));
    assert!(
        String::from_utf8_lossy(&body)
            .contains("must have cluster-admin privileges to use the aggregationRule"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    expect_status(&eve, "GET", "/api/v1/secrets", None, 403).await;

    // With create on ClusterRoles and bind on anything, a new aggregated
    // role with no rules of its own is refused too.
    cluster_role(
        &hub,
        ws,
        "role-maker",
        json!([{"verbs": ["create"], "apiGroups": [RBAC], "resources": ["clusterroles", "clusterrolebindings"]},
               {"verbs": ["bind"], "apiGroups": [RBAC], "resources": ["clusterroles"]}]),
    )
    .await;
    bind_cluster_role(&hub, ws, "role-maker", "role-maker", "eve").await;
    let mut sneaky = json!({"apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRole",
        "metadata": {"name": "sneaky"}, "rules": []});
    sneaky["aggregationRule"] = select_defaults["aggregationRule"].clone();
    expect_status(&eve, "POST", &rbac_path(None, "clusterroles"), Some(&sneaky), 403).await;
    // Not having it, eve cannot bind herself to it either.
    expect_status(&eve, "GET", "/api/v1/secrets", None, 403).await;

    // The workspace's admin may, and the role then aggregates as kube's does.
    let mallory = client_as(&hub, ws, token("mallory-token")).await;
    post_created(&mallory, &rbac_path(None, "clusterroles"), &sneaky).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_watch_parameter_is_authorized_as_it_is_served() {
    let (hub, _dir) = tenants().await;
    let ws = "root:a";
    // eve may watch Secrets but not list them.
    cluster_role(
        &hub,
        ws,
        "secret-watcher",
        json!([{"verbs": ["watch"], "apiGroups": [""], "resources": ["secrets"]}]),
    )
    .await;
    bind_cluster_role(&hub, ws, "secret-watcher", "secret-watcher", "eve").await;
    let eve = client_as(&hub, ws, token("eve-token")).await;
    let base = "/api/v1/namespaces/default/secrets";
    // First value wins: a watch, served as a watch (events, not a list).
    let (code, body) = get_raw(&eve, &format!("{base}?watch=true&watch=false&timeoutSeconds=1")).await;
    assert_eq!(code, 200, "{body}");
    assert!(!body.contains("\"kind\":\"SecretList\""), "{body}");
    assert!(body.contains("\"type\":\"ADDED\""), "{body}");
    // ... and a list, refused as a list.
    let (code, body) = get_raw(&eve, &format!("{base}?watch=false&watch=true")).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("cannot list resource \\\"secrets\\\""), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn non_members_learn_nothing_about_a_workspace() {
    let (hub, _dir) = tenants().await;
    // bob has no binding anywhere; alice is a member of root:b only.
    for (who, t) in [("bob", "bob-token"), ("alice", "alice-token")] {
        for path in [
            "/api",
            "/apis",
            "/api/v1",
            "/openapi/v3",
            "/openapi/v2",
            "/api/v1/namespaces",
            "/api/v1/namespaces/default/secrets/crown-jewels",
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            "/no/such/path",
        ] {
            let existing = client_as(&hub, "root:a", token(t)).await;
            let missing = client_as(&hub, "root:nope", token(t)).await;
            let (code_a, body_a) = call(&existing, "GET", path, None).await;
            let (code_m, body_m) = call(&missing, "GET", path, None).await;
            assert_eq!(code_a, 403, "{who} GET {path} in root:a: {body_a}");
            assert_eq!(code_m, 403, "{who} GET {path} in root:nope: {body_m}");
            let msg_a = body_a["message"].as_str().unwrap().replace("root:a", "WS");
            let msg_m = body_m["message"].as_str().unwrap().replace("root:nope", "WS");
            assert_eq!(
                msg_a, msg_m,
                "{who} {path}: the answers tell the workspaces apart"
            );
            assert!(msg_a.contains("not a member"), "{msg_a}");
        }
    }
    // A ServiceAccount of root:b gets its home-only answer for both, too.
    create(
        &hub,
        "root:b",
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "robot"}}),
    )
    .await;
    let body = post_created(
        &admin(&hub, "root:b").await,
        "/api/v1/namespaces/default/serviceaccounts/robot/token",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    let sa = body["status"]["token"].as_str().unwrap().to_string();
    for ws in ["root:a", "root:nope"] {
        let body = expect_status_because(
            &client_as(&hub, ws, token(&sa)).await,
            "GET",
            "/api",
            None,
            403,
            &ws,
        )
        .await;
        assert!(body["message"]
            .as_str()
            .unwrap()
            .contains("valid only in its own workspace (root:b)"));
    }
    // The hub-wide admin still tells them apart: 404 for a missing one.
    expect_status(&admin(&hub, "root:nope").await, "GET", "/api", None, 404).await;
    // /version and health say nothing about a workspace; any caller may read them.
    let bob_missing = client_as(&hub, "root:nope", token("bob-token")).await;
    get_ok(&bob_missing, "/version").await;

    // A binding of any kind in the workspace makes bob a member: discovery
    // then works, and RBAC decides the rest.
    create(
        &hub,
        "root:a",
        &rbac_path(Some("default"), "rolebindings"),
        json!({"apiVersion": format!("{RBAC}/v1"), "kind": "RoleBinding", "metadata": {"name": "bob-view"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view"}, "subjects": [user("bob")]}),
    )
    .await;
    let bob = client_as(&hub, "root:a", token("bob-token")).await;
    get_ok(&bob, "/apis").await;
    get_ok(&bob, "/api/v1/namespaces/default/configmaps").await;
    expect_status(&bob, "GET", "/api/v1/namespaces/default/secrets", None, 403).await;
    // kcp's way of opening a workspace to everyone: `access` on "/" for
    // system:authenticated.
    cluster_role(
        &hub,
        "root:b",
        "open-door",
        json!([{"verbs": ["access"], "nonResourceURLs": ["/"]}]),
    )
    .await;
    create(
        &hub,
        "root:b",
        &rbac_path(None, "clusterrolebindings"),
        json!({"apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRoleBinding", "metadata": {"name": "open-door"},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "open-door"},
            "subjects": [{"kind": "Group", "apiGroup": RBAC, "name": "system:authenticated"}]}),
    )
    .await;
    let bob_b = client_as(&hub, "root:b", token("bob-token")).await;
    get_ok(&bob_b, "/apis").await;
    expect_status(&bob_b, "GET", "/api/v1/secrets", None, 403).await;
}

/// Every credential bound to root:a, tried on root:b's Secret through every
/// way of writing the path: never a 200, never a Secret in the body.
#[tokio::test(flavor = "multi_thread")]
async fn credentials_of_one_workspace_reach_no_other_by_any_path() {
    let (hub, _dir) = tenants().await;
    // Three kinds of credential, each with cluster-admin in root:a only.
    service_account_with_role(&hub, "root:a", ("default", "god"), "god", "cluster-admin", false).await;
    let sa = service_account_token(&hub, "root:a", ("default", "god")).await;
    let mallory = client_as(&hub, "root:a", token("mallory-token")).await;
    let (pem, key) = csr_for("mallory", &["admins"]);
    request_and_approve(&mallory, "mallory-cert", &pem).await;
    let cert = signer_outcome(&mallory, "mallory-cert").await.expect("signed");
    bind_cluster_role(&hub, "root:a", "admins", "cluster-admin", "mallory").await;
    let credentials = [
        ("token-file user", token("mallory-token")),
        ("service account", token(&sa)),
        (
            "workspace certificate",
            AuthInfo::ClientCert {
                cert_pem: cert,
                key_pem: key,
            },
        ),
    ];
    let secret = "api/v1/namespaces/default/secrets/crown-jewels";
    let uris = [
        format!("/clusters/root:b/{secret}"),
        format!("/clusters/root%3Ab/{secret}"),
        format!("/clusters/root:a/../root:b/{secret}"),
        format!("/clusters/root:a/clusters/root:b/{secret}"),
        format!("//clusters/root:b/{secret}"),
        format!("/clusters/root:b//{secret}"),
        format!("/clusters/root:b/./{secret}"),
        format!("/clusters/*/{secret}"),
        "/clusters/*/api/v1/secrets".to_string(),
        format!("/clusters/root:b/{secret}?watch=true&watch=false"),
        format!("/{secret}"),
    ];
    // A kube client for the hub with no workspace in its URL, so that the
    // URIs above are sent as written.
    for (what, auth) in credentials {
        let yaml =
            ferry_hub::kubeconfig::kubeconfig("hub", hub.url(), &hub.running.ca_pem, auth, "user", None);
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        for uri in &uris {
            let (code, body) = get_raw(&client, uri).await;
            assert!(
                code == 403 || code == 404 || code == 400,
                "{what}: GET {uri} answered {code}: {body}"
            );
            assert!(
                !body.contains("crown-jewels\",\"namespace"),
                "{what}: GET {uri} leaked: {body}"
            );
            assert!(
                !body.contains("dmFsdWU="),
                "{what}: GET {uri} leaked the data: {body}"
            );
        }
    }
}

/// A member who may list ConfigMaps but not Secrets gets no Secret through
/// a Table, PartialObjectMetadata, a watch or a deletecollection dry run.
#[tokio::test(flavor = "multi_thread")]
async fn secrets_stay_hidden_in_every_representation() {
    let (hub, _dir) = tenants().await;
    cluster_role(
        &hub,
        "root:a",
        "cm-reader",
        json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["configmaps"]}]),
    )
    .await;
    bind_cluster_role(&hub, "root:a", "cm-reader", "cm-reader", "eve").await;
    let eve = client_as(&hub, "root:a", token("eve-token")).await;
    for (accept, query) in [
        ("application/json;as=Table;v=v1;g=meta.k8s.io", ""),
        (
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
            "",
        ),
        ("application/json", "?watch=true&timeoutSeconds=1"),
        ("application/json", "?watch=1&timeoutSeconds=1"),
        (
            "application/json",
            "?labelSelector=&fieldSelector=metadata.name%3Dcrown-jewels",
        ),
    ] {
        for path in [
            "/api/v1/namespaces/default/secrets",
            "/api/v1/secrets",
            "/api/v1/namespaces/default/secrets/crown-jewels",
        ] {
            let req = http::Request::builder()
                .uri(format!("{path}{query}"))
                .header("accept", accept)
                .body(kube::client::Body::empty())
                .unwrap();
            let resp = eve.send(req).await.unwrap();
            let code = resp.status().as_u16();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            let text = String::from_utf8_lossy(&body);
            assert_eq!(code, 403, "{accept} {path}{query}: {text}");
            assert!(!text.contains("dmFsdWU="), "{text}");
        }
    }
    expect_status(
        &eve,
        "DELETE",
        "/api/v1/namespaces/default/secrets?dryRun=All",
        None,
        403,
    )
    .await;
}

/// The `kcp.io/cluster` of each object a wildcard list of `path` shows:
/// the workspaces that store some.
async fn clusters_holding(hub: &TestHub, path: &str) -> std::collections::BTreeSet<String> {
    let everywhere = admin(hub, "*").await;
    let list = get_ok(&everywhere, path).await;
    list["items"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|a| {
            a.pointer("/metadata/annotations/kcp.io~1cluster")?
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";

/// A workspace's APIServices are made when a client first asks for them
/// there: a tenant refused in another workspace makes none in it, while a
/// member's first list gets every one, available.
#[tokio::test(flavor = "multi_thread")]
async fn a_workspaces_apiservices_are_made_on_its_own_members_request_only() {
    let (hub, _dir) = tenants().await;
    let before = clusters_holding(&hub, APISERVICES).await;

    let mallory_in_b = client_as(&hub, "root:b", token("mallory-token")).await;
    expect_status(&mallory_in_b, "GET", APISERVICES, None, 403).await;
    expect_status(&mallory_in_b, "GET", &format!("{APISERVICES}/v1.apps"), None, 403).await;
    assert_eq!(
        clusters_holding(&hub, APISERVICES).await,
        before,
        "a refused request made APIServices in root:b"
    );

    let mallory = client_as(&hub, "root:a", token("mallory-token")).await;
    let in_a = get_ok(&mallory, APISERVICES).await;
    let in_a = in_a["items"].as_array().expect("a list");
    assert!(
        in_a.iter().any(|a| a["metadata"]["name"] == "v1.apps"),
        "root:a's first list lacks v1.apps: {in_a:?}"
    );
    for a in in_a {
        assert_eq!(a["status"]["conditions"][0]["status"], "True", "{a}");
    }
    let after_a = clusters_holding(&hub, APISERVICES).await;
    assert_eq!(
        after_a.len(),
        before.len() + 1,
        "root:a's APIServices: {after_a:?}"
    );

    // The positive twin in root:b: its own admin's GET of one makes them all.
    let alice = client_as(&hub, "root:b", token("alice-token")).await;
    let apps = get_ok(&alice, &format!("{APISERVICES}/v1.apps")).await;
    assert_eq!(apps["status"]["conditions"][0]["status"], "True", "{apps}");
    assert_eq!(clusters_holding(&hub, APISERVICES).await.len(), before.len() + 2);
}

const CLUSTER_ROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";

/// A workspace is judged with the default ClusterRoles before they are
/// stored in it; they are stored when a member first asks for ClusterRoles
/// (a refused request stores nothing), and from then on what its admin does
/// to them holds: a deleted `view` grants nothing any more.
#[tokio::test(flavor = "multi_thread")]
async fn default_cluster_roles_hold_before_they_are_stored_and_an_admins_deletion_holds_after() {
    let (hub, _dir) = tenants().await;
    ready_workspace(&hub, "c").await;
    create(
        &hub,
        "root:c",
        &rbac_path(Some("default"), "rolebindings"),
        binding("RoleBinding", "eve-view", "ClusterRole", "view", user("eve")),
    )
    .await;
    let before = clusters_holding(&hub, CLUSTER_ROLES).await;
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let eve = client_as(&hub, "root:c", token("eve-token")).await;
    expect_status(&eve, "GET", configmaps, None, 200).await;
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "eve"}});
    expect_status(&eve, "POST", configmaps, Some(&cm), 403).await;

    let mallory_in_c = client_as(&hub, "root:c", token("mallory-token")).await;
    expect_status(&mallory_in_c, "GET", CLUSTER_ROLES, None, 403).await;
    expect_status(&mallory_in_c, "GET", &format!("{CLUSTER_ROLES}/view"), None, 403).await;
    assert_eq!(
        clusters_holding(&hub, CLUSTER_ROLES).await,
        before,
        "a refused request stored ClusterRoles in root:c"
    );

    let admin_c = admin(&hub, "root:c").await;
    let roles = get_ok(&admin_c, CLUSTER_ROLES).await;
    let names: Vec<&str> = roles["items"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|r| r["metadata"]["name"].as_str())
        .collect();
    for role in ["cluster-admin", "admin", "edit", "view"] {
        assert!(
            names.contains(&role),
            "root:c's first list lacks {role}: {names:?}"
        );
    }
    assert_eq!(
        clusters_holding(&hub, CLUSTER_ROLES).await.len(),
        before.len() + 1
    );

    expect_status(&admin_c, "DELETE", &format!("{CLUSTER_ROLES}/view"), None, 200).await;
    eventually(5, "eve's read refused once `view` is deleted", || async {
        (call(&eve, "GET", configmaps, None).await.0 == 403).then_some(())
    })
    .await;
}
