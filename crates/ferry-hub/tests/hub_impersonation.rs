//! User impersonation end to end (`kubectl --as`, `--as-group`, `--as-uid`),
//! as kube-apiserver does it: the caller needs `impersonate` on the user (or
//! ServiceAccount), each group, the uid and each extra, in the workspace the
//! request addresses; the request then runs as the impersonated identity.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::tenants::{
    bind_cluster_role, binding, cluster_role, hub_with_tokens, ready_workspace, service_account_with_role,
    user, RBAC,
};
use common::{client_as, create, kubeconfig_file, ok, rbac_path};
use ferry_hub::kubeconfig::AuthInfo;
use ferry_testkit::TestHub;
use serde_json::{json, Value};

const WS: &str = "root:a";

/// alice and carol have no permissions of their own; bob is the one who
/// gets (or lacks) the `impersonate` verb.
const TOKENS: &str = "\
alice-token,alice,u-alice
bob-token,bob,u-bob
carol-token,carol,u-carol
";

/// A hub with the users of [`TOKENS`], workspaces root:a (namespace dev,
/// ConfigMap dev/cfg, ServiceAccount dev/builder with `edit` in dev) and
/// root:b. Every user is a member of both workspaces (kcp's `access` verb on
/// `/`) and holds nothing else there.
async fn hub_with_users() -> (TestHub, tempfile::TempDir) {
    let (hub, dir) = hub_with_tokens(TOKENS, |_| {}).await;
    for ws in ["a", "b"] {
        ready_workspace(&hub, ws).await;
        let ws = format!("root:{ws}");
        cluster_role(
            &hub,
            &ws,
            "members",
            json!([{"verbs": ["access"], "nonResourceURLs": ["/"]}]),
        )
        .await;
        let mut members = binding(
            "ClusterRoleBinding",
            "members",
            "ClusterRole",
            "members",
            user("alice"),
        );
        members["subjects"] = json!([user("alice"), user("bob"), user("carol")]);
        create(&hub, &ws, &rbac_path(None, "clusterrolebindings"), members).await;
    }
    create(
        &hub,
        WS,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "dev"}}),
    )
    .await;
    create(
        &hub,
        WS,
        "/api/v1/namespaces/dev/configmaps",
        json!({"metadata": {"name": "cfg"}}),
    )
    .await;
    service_account_with_role(&hub, WS, ("dev", "builder"), "builder-edit", "edit", true).await;
    (hub, dir)
}

/// `impersonate` on `resources` of `group`, limited to `names` when given.
fn impersonate(group: &str, resources: &[&str], names: &[&str]) -> Value {
    let mut rule = json!({"verbs": ["impersonate"], "apiGroups": [group], "resources": resources});
    if !names.is_empty() {
        rule["resourceNames"] = json!(names);
    }
    rule
}

/// A ClusterRole `name` with `rules`, bound to `who` in the whole of root:a.
async fn grant_cluster_role(hub: &TestHub, name: &str, who: &str, rules: Value) {
    cluster_role(hub, WS, name, rules).await;
    bind_cluster_role(hub, WS, name, name, who).await;
}

/// A Role `name` in dev with `rules`, bound to `who` there.
async fn grant_role_in_dev(hub: &TestHub, name: &str, who: &str, rules: Value) {
    create(
        hub,
        WS,
        &rbac_path(Some("dev"), "roles"),
        json!({"apiVersion": format!("{RBAC}/v1"), "kind": "Role", "metadata": {"name": name}, "rules": rules}),
    )
    .await;
    create(
        hub,
        WS,
        &rbac_path(Some("dev"), "rolebindings"),
        binding("RoleBinding", name, "Role", name, user(who)),
    )
    .await;
}

/// A kubeconfig at `workspace` authenticating with bearer `token`.
fn kubeconfig(hub: &TestHub, name: &str, workspace: &str, token: &str) -> PathBuf {
    kubeconfig_file(hub, name, workspace, AuthInfo::Token(token.to_string()))
}

fn admin_kubeconfig(hub: &TestHub, workspace: &str) -> PathBuf {
    kubeconfig(
        hub,
        &format!("admin-{workspace}"),
        workspace,
        &hub.running.admin_token,
    )
}

/// Fill kubectl's discovery cache for `kubeconfig` as its own user. Like
/// kube-apiserver's, a refused discovery request reaches kubectl as
/// "Forbidden: unknown"; with discovery cached, kubectl shows the 403 of
/// the request itself.
fn cache_discovery(hub: &TestHub, kubeconfig: &Path) {
    kubectl_ok(hub, kubeconfig, &["api-resources"], "kubectl api-resources");
}

fn kubectl(hub: &TestHub, kubeconfig: &Path, args: &[&str]) -> Output {
    hub.kubectl_as(kubeconfig, args, None)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

/// `kubectl ARGS`'s output; it must succeed.
fn kubectl_ok(hub: &TestHub, kubeconfig: &Path, args: &[&str], what: &str) -> String {
    ok(kubectl(hub, kubeconfig, args), what)
}

/// `kubectl ARGS`'s stderr; it must be refused.
fn kubectl_refused(hub: &TestHub, kubeconfig: &Path, args: &[&str], what: &str) -> String {
    refused(kubectl(hub, kubeconfig, args), what)
}

/// kubectl's stderr; it must have failed.
fn refused(out: Output, what: &str) -> String {
    assert!(
        !out.status.success(),
        "{what} should have been refused; stdout: {}",
        stdout(&out)
    );
    stderr(&out)
}

/// `kubectl auth can-i ARGS`: true for "yes", false for "no".
fn can_i(hub: &TestHub, kubeconfig: &Path, args: &[&str]) -> bool {
    let out = kubectl(hub, kubeconfig, &[&["auth", "can-i"], args].concat());
    match stdout(&out).as_str() {
        "yes" => true,
        "no" => false,
        other => panic!("can-i {args:?}: {other:?} ({})", stderr(&out)),
    }
}

/// `status.userInfo` of `kubectl auth whoami -o json ARGS`.
fn whoami(hub: &TestHub, kubeconfig: &Path, args: &[&str]) -> Value {
    let out = kubectl_ok(
        hub,
        kubeconfig,
        &[&["auth", "whoami", "-o", "json"], args].concat(),
        "kubectl auth whoami",
    );
    let review: Value = serde_json::from_str(&out).expect("whoami prints JSON");
    review["status"]["userInfo"].clone()
}

/// Send `method path` in `ws` as `token` with extra request `headers`.
async fn call_with_headers(
    hub: &TestHub,
    ws: &str,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (u16, Value) {
    let client = client_as(hub, ws, AuthInfo::Token(token.to_string())).await;
    let mut req = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if body.is_some() {
        req = req.header(http::header::CONTENT_TYPE, "application/json");
    }
    let bytes = body.map(|b| serde_json::to_vec(b).unwrap()).unwrap_or_default();
    let resp = client
        .send(req.body(kube::client::Body::from(bytes)).unwrap())
        .await
        .expect("response");
    let code = resp.status().as_u16();
    let bytes = resp.into_body().collect_bytes().await.unwrap_or_default();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn self_subject_review() -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
}

/// A SelfSubjectReview in `ws` as `token`, impersonating with `headers`.
async fn review_as(hub: &TestHub, ws: &str, token: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    call_with_headers(
        hub,
        ws,
        token,
        "POST",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        headers,
        Some(&self_subject_review()),
    )
    .await
}

/// `method path` in root:a as bob, impersonating with `headers`.
async fn as_bob(
    hub: &TestHub,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (u16, Value) {
    call_with_headers(hub, WS, "bob-token", method, path, headers, body).await
}

/// bob's kubeconfig at root:a, with kubectl's discovery cache filled.
fn bob_kubeconfig(hub: &TestHub) -> PathBuf {
    let bob = kubeconfig(hub, "bob", WS, "bob-token");
    cache_discovery(hub, &bob);
    bob
}

/// bob may impersonate alice (and no one else) in root:a.
async fn bob_may_impersonate_alice(hub: &TestHub) {
    grant_cluster_role(
        hub,
        "impersonate-alice",
        "bob",
        json!([impersonate("", &["users"], &["alice"])]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn admin_can_i_as_alice_answers_for_alice() {
    let (hub, _dir) = hub_with_users().await;
    let admin = admin_kubeconfig(&hub, WS);
    assert!(can_i(&hub, &admin, &["get", "secrets", "-n", "dev"]));
    assert!(!can_i(
        &hub,
        &admin,
        &["get", "secrets", "-n", "dev", "--as", "alice"]
    ));
    grant_role_in_dev(
        &hub,
        "secret-reader",
        "alice",
        json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]),
    )
    .await;
    assert!(can_i(
        &hub,
        &admin,
        &["get", "secrets", "-n", "dev", "--as", "alice"]
    ));
    assert!(!can_i(
        &hub,
        &admin,
        &["get", "secrets", "-n", "prod", "--as", "alice"]
    ));
    let rules = kubectl_ok(
        &hub,
        &admin,
        &["auth", "can-i", "--list", "-n", "dev", "--as", "alice"],
        "can-i --list as alice",
    );
    assert!(rules.contains("secrets"), "{rules}");
    assert!(
        !rules.contains("configmaps"),
        "only alice's rules are listed: {rules}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_as_alice_are_refused_naming_alice() {
    let (hub, _dir) = hub_with_users().await;
    let admin = admin_kubeconfig(&hub, WS);
    let err = kubectl_refused(
        &hub,
        &admin,
        &["get", "configmaps", "-n", "dev", "--as", "alice"],
        "get configmaps as alice",
    );
    assert!(
        err.contains("configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"dev\" in workspace \"root:a\""),
        "{err}"
    );
    // The admin's own request still works.
    kubectl_ok(
        &hub,
        &admin,
        &["get", "configmaps", "-n", "dev"],
        "get configmaps as admin",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn whoami_reports_the_impersonated_user_groups_uid_and_extra() {
    let (hub, _dir) = hub_with_users().await;
    let admin = admin_kubeconfig(&hub, WS);
    let me = whoami(&hub, &admin, &["--as", "alice", "--as-group", "devs"]);
    assert_eq!(me["username"], "alice", "{me}");
    assert_eq!(me["groups"], json!(["devs", "system:authenticated"]), "{me}");
    let me = whoami(&hub, &admin, &["--as", "alice", "--as-uid", "u-1"]);
    assert_eq!(me["uid"], "u-1", "{me}");
    assert_eq!(me["groups"], json!(["system:authenticated"]), "{me}");
    // Extras (no kubectl flag): the key is percent-decoded and lower-cased.
    let (code, review) = review_as(
        &hub,
        WS,
        &hub.running.admin_token,
        &[
            ("Impersonate-User", "alice"),
            ("Impersonate-Extra-Example.com%2FScopes", "view"),
            ("Impersonate-Extra-Example.com%2FScopes", "edit"),
        ],
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(
        review["status"]["userInfo"]["extra"],
        json!({"example.com/scopes": ["view", "edit"]}),
        "{review}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn users_without_impersonate_get_403_naming_themselves() {
    let (hub, _dir) = hub_with_users().await;
    let bob = bob_kubeconfig(&hub);
    let err = kubectl_refused(
        &hub,
        &bob,
        &["get", "configmaps", "-n", "dev", "--as", "alice"],
        "bob as alice",
    );
    assert!(
        err.contains("users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope in workspace \"root:a\""),
        "{err}"
    );
    // The same, over the API: a 403 Status with details.
    let (code, status) = as_bob(
        &hub,
        "GET",
        "/api/v1/namespaces/dev/configmaps",
        &[("Impersonate-User", "alice")],
        None,
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(status["reason"], "Forbidden");
    assert_eq!(status["details"], json!({"name": "alice", "kind": "users"}));
    // Unknown paths are no way around it.
    let (code, status) = as_bob(
        &hub,
        "GET",
        "/no/such/path",
        &[("Impersonate-User", "alice")],
        None,
    )
    .await;
    assert_eq!(code, 403, "{status}");
}

#[tokio::test(flavor = "multi_thread")]
async fn impersonate_on_named_users_allows_those_users_only() {
    let (hub, _dir) = hub_with_users().await;
    bob_may_impersonate_alice(&hub).await;
    // Users are cluster-scoped: a Role in dev cannot grant impersonating them.
    grant_role_in_dev(
        &hub,
        "impersonate-carol",
        "bob",
        json!([impersonate("", &["users"], &["carol"])]),
    )
    .await;
    create(
        &hub,
        WS,
        &rbac_path(Some("dev"), "rolebindings"),
        binding("RoleBinding", "alice-view", "ClusterRole", "view", user("alice")),
    )
    .await;
    let bob = bob_kubeconfig(&hub);
    // bob cannot read ConfigMaps himself; as alice he can.
    kubectl_refused(
        &hub,
        &bob,
        &["get", "configmaps", "-n", "dev"],
        "bob reads configmaps",
    );
    let listed = kubectl_ok(
        &hub,
        &bob,
        &["get", "configmaps", "-n", "dev", "--as", "alice"],
        "bob as alice reads configmaps",
    );
    assert!(listed.contains("cfg"), "{listed}");
    assert_eq!(whoami(&hub, &bob, &["--as", "alice"])["username"], "alice");
    // The request runs as alice: what she may not do is refused naming her.
    let err = kubectl_refused(
        &hub,
        &bob,
        &["create", "configmap", "x", "-n", "dev", "--as", "alice"],
        "bob as alice creates a configmap",
    );
    assert!(
        err.contains("User \"alice\" cannot create resource \"configmaps\""),
        "{err}"
    );
    let err = kubectl_refused(
        &hub,
        &bob,
        &["get", "configmaps", "-n", "dev", "--as", "carol"],
        "bob as carol",
    );
    assert!(
        err.contains("users \"carol\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope in workspace \"root:a\""),
        "{err}"
    );
    // A uid needs its own permission (`kubectl auth whoami` hides a 403
    // behind "not enabled or no permission", so ask the API).
    let (code, status) = review_as(
        &hub,
        WS,
        "bob-token",
        &[("Impersonate-User", "alice"), ("Impersonate-Uid", "u-1")],
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "uids.authentication.k8s.io \"u-1\" is forbidden: User \"bob\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope in workspace \"root:a\""
    );
    // The permission holds in root:a only.
    let (code, status) = review_as(&hub, "root:b", "bob-token", &[("Impersonate-User", "alice")]).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope in workspace \"root:b\""
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn impersonating_a_service_account_needs_impersonate_on_serviceaccounts() {
    let (hub, _dir) = hub_with_users().await;
    // Impersonating any *user* does not cover ServiceAccounts.
    grant_cluster_role(
        &hub,
        "impersonate-users",
        "bob",
        json!([impersonate("", &["users"], &[])]),
    )
    .await;
    let bob = bob_kubeconfig(&hub);
    let builder = "system:serviceaccount:dev:builder";
    let err = kubectl_refused(
        &hub,
        &bob,
        &["get", "configmaps", "-n", "dev", "--as", builder],
        "bob as builder",
    );
    assert!(
        err.contains("serviceaccounts \"builder\" is forbidden: User \"bob\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"dev\" in workspace \"root:a\""),
        "{err}"
    );
    grant_role_in_dev(
        &hub,
        "impersonate-builder",
        "bob",
        json!([impersonate("", &["serviceaccounts"], &["builder"])]),
    )
    .await;
    let me = whoami(&hub, &bob, &["--as", builder]);
    assert_eq!(me["username"], builder);
    assert_eq!(
        me["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:dev",
            "system:authenticated"
        ])
    );
    // builder has `edit` in dev, bob has not.
    assert!(can_i(
        &hub,
        &bob,
        &["create", "deployments", "-n", "dev", "--as", builder]
    ));
    assert!(!can_i(&hub, &bob, &["create", "deployments", "-n", "dev"]));
    kubectl_ok(
        &hub,
        &bob,
        &[
            "create",
            "configmap",
            "made-by-builder",
            "-n",
            "dev",
            "--as",
            builder,
        ],
        "bob as builder creates a configmap",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn groups_without_a_user_are_a_bad_request() {
    let (hub, _dir) = hub_with_users().await;
    for headers in [
        vec![("Impersonate-Group", "devs")],
        vec![("Impersonate-Uid", "u-1")],
        vec![("Impersonate-Extra-Scopes", "view")],
    ] {
        let (code, status) = call_with_headers(
            &hub,
            WS,
            &hub.running.admin_token,
            "GET",
            "/api/v1/namespaces/dev/configmaps",
            &headers,
            None,
        )
        .await;
        assert_eq!(code, 400, "{headers:?}: {status}");
        assert_eq!(status["reason"], "BadRequest");
        let message = status["message"].as_str().unwrap();
        assert!(message.contains("without impersonating a user"), "{message}");
    }
    // kubectl (client-go) refuses `--as-group` without `--as` itself, in
    // the same words.
    let admin = admin_kubeconfig(&hub, WS);
    let err = kubectl_refused(
        &hub,
        &admin,
        &["get", "configmaps", "-n", "dev", "--as-group", "devs"],
        "--as-group without --as",
    );
    assert!(err.contains("without impersonating a user"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn impersonating_system_masters_needs_the_groups_permission() {
    let (hub, _dir) = hub_with_users().await;
    bob_may_impersonate_alice(&hub).await;
    let bob = bob_kubeconfig(&hub);
    let as_master = ["--as", "alice", "--as-group", "system:masters"];
    let err = kubectl_refused(
        &hub,
        &bob,
        &[&["get", "secrets", "-n", "dev"][..], &as_master].concat(),
        "bob as alice in system:masters",
    );
    assert!(
        err.contains("groups \"system:masters\" is forbidden: User \"bob\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope in workspace \"root:a\""),
        "{err}"
    );
    grant_cluster_role(
        &hub,
        "impersonate-masters",
        "bob",
        json!([impersonate("", &["groups"], &["system:masters"])]),
    )
    .await;
    kubectl_ok(
        &hub,
        &bob,
        &[&["get", "secrets", "-n", "dev"][..], &as_master].concat(),
        "bob as alice in system:masters",
    );
    // Escalation checks run as the impersonated identity too: alice alone
    // may not write a Role that grants what she does not hold.
    grant_role_in_dev(
        &hub,
        "alice-role-writer",
        "alice",
        json!([{"verbs": ["create"], "apiGroups": [RBAC], "resources": ["roles"]}]),
    )
    .await;
    let role = json!({"apiVersion": format!("{RBAC}/v1"), "kind": "Role", "metadata": {"name": "secrets"},
        "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]});
    let roles = rbac_path(Some("dev"), "roles");
    let (code, status) = as_bob(
        &hub,
        "POST",
        &roles,
        &[("Impersonate-User", "alice")],
        Some(&role),
    )
    .await;
    assert_eq!(code, 403, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("User \"alice\"") && message.contains("does not hold"),
        "{message}"
    );
    let (code, status) = as_bob(
        &hub,
        "POST",
        &roles,
        &[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "system:masters"),
        ],
        Some(&role),
    )
    .await;
    assert_eq!(code, 201, "{status}");
}
