//! RBAC privilege escalation prevention end to end, as kube-apiserver does
//! it: writing a Role or ClusterRole needs every permission it grants (or
//! `escalate`), writing a binding needs every permission of its role (or
//! `bind` on that role), on every write path; system:masters is exempt.

mod common;

use common::tenants::{binding, cluster_role_object, user, RBAC};
use common::{
    admin, call, client_as, create, expect_sent, expect_status, expect_status_because, post_created,
    rbac_path,
};
use ferry_hub::kubeconfig::AuthInfo;
use ferry_testkit::TestHub;
use serde_json::{json, Value};

const WS: &str = "root:a";

/// alice may only create Roles and RoleBindings in dev; erin may also
/// `escalate` roles there; bob may also `bind` the ClusterRole `view`;
/// pat may create, read and change Roles and read ConfigMaps in dev; carl
/// may create ClusterRoles, and read ConfigMaps in dev only.
const TOKENS: &str = "\
alice-token,alice,u-alice
erin-token,erin,u-erin
bob-token,bob,u-bob
pat-token,pat,u-pat
carl-token,carl,u-carl
";

/// A hub with the users of [`TOKENS`].
async fn hub_with_users() -> (TestHub, tempfile::TempDir) {
    let (hub, dir) = common::tenants::hub_with_tokens(TOKENS, |_| {}).await;
    (hub, dir)
}

async fn as_user(hub: &TestHub, token: &str) -> kube::Client {
    client_as(hub, WS, AuthInfo::Token(token.to_string())).await
}

fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": format!("{RBAC}/v1"), "kind": "Role", "metadata": {"name": name}, "rules": rules})
}

fn role_binding(name: &str, role_kind: &str, role: &str, to: &str) -> Value {
    binding("RoleBinding", name, role_kind, role, user(to))
}

fn cluster_role_binding(name: &str, role: &str, to: &str) -> Value {
    binding("ClusterRoleBinding", name, "ClusterRole", role, user(to))
}

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources})
}

/// Give `user` the Role `rules` in dev (a Role and a RoleBinding, both named after the user).
async fn grant_in_dev(hub: &TestHub, user: &str, rules: Value) {
    let name = format!("{user}-grant");
    create(hub, WS, &rbac_path(Some("dev"), "roles"), role(&name, rules)).await;
    create(
        hub,
        WS,
        &rbac_path(Some("dev"), "rolebindings"),
        role_binding(&name, "Role", &name, user),
    )
    .await;
}

/// Workspace root:a with namespace dev, the users' grants, and a Role
/// `secret-reader` (get secrets) made by the admin.
async fn setup(hub: &TestHub) {
    create(
        hub,
        "root",
        "/apis/tenancy.kcp.io/v1alpha1/workspaces",
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": "a"}}),
    )
    .await;
    create(
        hub,
        WS,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "dev"}}),
    )
    .await;
    let writer = rule(&["create"], RBAC, &["roles", "rolebindings"]);
    grant_in_dev(hub, "alice", json!([writer])).await;
    grant_in_dev(
        hub,
        "erin",
        json!([writer, rule(&["escalate"], RBAC, &["roles"])]),
    )
    .await;
    grant_in_dev(
        hub,
        "bob",
        json!([writer, {"verbs": ["bind"], "apiGroups": [RBAC], "resources": ["clusterroles"], "resourceNames": ["view"]}]),
    )
    .await;
    grant_in_dev(
        hub,
        "pat",
        json!([
            rule(&["create", "get", "update", "patch"], RBAC, &["roles"]),
            rule(&["get", "list"], "", &["configmaps"]),
        ]),
    )
    .await;
    grant_in_dev(hub, "carl", json!([rule(&["get"], "", &["configmaps"])])).await;
    create(
        hub,
        WS,
        &rbac_path(None, "clusterroles"),
        cluster_role_object(
            "clusterrole-writer",
            json!([rule(&["create"], RBAC, &["clusterroles"])]),
        ),
    )
    .await;
    create(
        hub,
        WS,
        &rbac_path(None, "clusterrolebindings"),
        cluster_role_binding("carl-clusterroles", "clusterrole-writer", "carl"),
    )
    .await;
    create(
        hub,
        WS,
        &rbac_path(Some("dev"), "roles"),
        role("secret-reader", json!([rule(&["get"], "", &["secrets"])])),
    )
    .await;
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_role_writer_cannot_grant_what_it_does_not_hold() {
    let (hub, _dir) = hub_with_users().await;
    setup(&hub).await;
    let alice = as_user(&hub, "alice-token").await;
    let roles = rbac_path(Some("dev"), "roles");
    let bindings = rbac_path(Some("dev"), "rolebindings");

    let wide = role("reads-secrets", json!([rule(&["get"], "", &["secrets"])]));
    let body = expect_status(&alice, "POST", &roles, Some(&wide), 403).await;
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        message(&body),
        "roles.rbac.authorization.k8s.io \"reads-secrets\" is forbidden: User \"alice\" cannot create resource \"roles\" \
         in API group \"rbac.authorization.k8s.io\" in the namespace \"dev\" in workspace \"root:a\": it grants permissions \
         alice does not hold (verbs [get] on secrets); ask an admin, or get the \"escalate\" verb on roles"
    );
    // A dry run answers the same.
    expect_status(&alice, "POST", &format!("{roles}?dryRun=All"), Some(&wide), 403).await;

    let admin_binding = role_binding("alice-admin", "ClusterRole", "cluster-admin", "alice");
    let body = expect_status(&alice, "POST", &bindings, Some(&admin_binding), 403).await;
    assert!(
        message(&body).ends_with(
            ": ClusterRole \"cluster-admin\" grants permissions alice does not hold (verbs [*] on *.*; \
             verbs [*] on non-resource URL \"*\"); ask an admin, or get the \"bind\" verb on clusterroles \"cluster-admin\""
        ),
        "{body}"
    );
    let existing = role_binding("alice-secrets", "Role", "secret-reader", "alice");
    let body = expect_status(&alice, "POST", &bindings, Some(&existing), 403).await;
    assert!(
        message(&body).contains(
            "Role \"secret-reader\" grants permissions alice does not hold (verbs [get] on secrets)"
        ),
        "{body}"
    );
    let ghost = role_binding("alice-ghost", "Role", "ghost", "alice");
    let body = expect_status(&alice, "POST", &bindings, Some(&ghost), 403).await;
    assert!(message(&body).contains("Role \"ghost\" does not exist"), "{body}");

    // What alice holds, she may hand on.
    let same = role(
        "role-writer",
        json!([rule(&["create"], RBAC, &["roles", "rolebindings"])]),
    );
    post_created(&alice, &roles, &same).await;
    let narrower = role("role-creator", json!([rule(&["create"], RBAC, &["roles"])]));
    post_created(&alice, &roles, &narrower).await;
    let hand_on = role_binding("bob-role-writer", "Role", "role-writer", "bob");
    post_created(&alice, &bindings, &hand_on).await;
    // Nothing was written by the refused requests.
    expect_status_because(
        &alice,
        "GET",
        &format!("{bindings}/alice-admin"),
        None,
        403,
        "alice may not even read bindings",
    )
    .await;
    expect_status(
        &admin(&hub, WS).await,
        "GET",
        &format!("{bindings}/alice-admin"),
        None,
        404,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn escalate_allows_broader_roles_and_bind_allows_binding_the_named_role_only() {
    let (hub, _dir) = hub_with_users().await;
    setup(&hub).await;
    let roles = rbac_path(Some("dev"), "roles");
    let bindings = rbac_path(Some("dev"), "rolebindings");

    let erin = as_user(&hub, "erin-token").await;
    let wide = role("reads-secrets", json!([rule(&["get", "list"], "", &["secrets"])]));
    post_created(&erin, &roles, &wide).await;
    // escalate is not bind: erin still cannot bind what she does not hold.
    expect_status(
        &erin,
        "POST",
        &bindings,
        Some(&role_binding("erin-secrets", "Role", "reads-secrets", "erin")),
        403,
    )
    .await;

    let bob = as_user(&hub, "bob-token").await;
    post_created(
        &bob,
        &bindings,
        &role_binding("bob-view", "ClusterRole", "view", "bob"),
    )
    .await;
    let body = expect_status(
        &bob,
        "POST",
        &bindings,
        Some(&role_binding("bob-admin", "ClusterRole", "cluster-admin", "bob")),
        403,
    )
    .await;
    assert!(
        message(&body).ends_with("get the \"bind\" verb on clusterroles \"cluster-admin\""),
        "{body}"
    );
    // bob now holds `view` in dev, so he may write Roles within it; not beyond.
    post_created(
        &bob,
        &roles,
        &role("bob-pods", json!([rule(&["get", "list"], "", &["pods"])])),
    )
    .await;
    expect_status(
        &bob,
        "POST",
        &roles,
        Some(&role("bob-secrets", json!([rule(&["get"], "", &["secrets"])]))),
        403,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cluster_roles_need_the_permissions_cluster_wide() {
    let (hub, _dir) = hub_with_users().await;
    setup(&hub).await;
    let carl = as_user(&hub, "carl-token").await;
    let cluster_roles = rbac_path(None, "clusterroles");
    // carl reads ConfigMaps in dev only: not enough for a ClusterRole.
    let cm = cluster_role_object("cm-reader", json!([rule(&["get"], "", &["configmaps"])]));
    let body = expect_status(&carl, "POST", &cluster_roles, Some(&cm), 403).await;
    assert_eq!(
        message(&body),
        "clusterroles.rbac.authorization.k8s.io \"cm-reader\" is forbidden: User \"carl\" cannot create resource \
         \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope in workspace \"root:a\": \
         it grants permissions carl does not hold (verbs [get] on configmaps); ask an admin, or get the \"escalate\" \
         verb on clusterroles"
    );
    // An aggregationRule grants whatever its selectors match, later too:
    // it takes full authority, whatever rules the role lists.
    let aggregated = json!({"apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRole",
        "metadata": {"name": "aggregated"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]},
        "rules": [rule(&["create"], RBAC, &["clusterroles"])]});
    let body = expect_status(&carl, "POST", &cluster_roles, Some(&aggregated), 403).await;
    assert!(
        message(&body).contains("must have cluster-admin privileges to use the aggregationRule"),
        "{body}"
    );
    // Discovery is held by every authenticated user, cluster-wide.
    let discovery = cluster_role_object(
        "discovery-copy",
        json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/version"]}]),
    );
    post_created(&carl, &cluster_roles, &discovery).await;
    let metrics = cluster_role_object(
        "metrics",
        json!([{"verbs": ["get"], "nonResourceURLs": ["/metrics"]}]),
    );
    let body = expect_status(&carl, "POST", &cluster_roles, Some(&metrics), 403).await;
    assert!(
        message(&body).contains("(verbs [get] on non-resource URL \"/metrics\")"),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn updates_patches_and_server_side_apply_cannot_widen_a_role() {
    let (hub, _dir) = hub_with_users().await;
    setup(&hub).await;
    let pat = as_user(&hub, "pat-token").await;
    let roles = rbac_path(Some("dev"), "roles");
    let cm = format!("{roles}/cm");
    post_created(
        &pat,
        &roles,
        &role("cm", json!([rule(&["get"], "", &["configmaps"])])),
    )
    .await;

    let widened = json!([rule(&["get"], "", &["configmaps", "secrets"])]);
    let merge = json!({"rules": widened}).to_string();
    let json_patch =
        json!([{"op": "add", "path": "/rules/-", "value": rule(&["get"], "", &["secrets"])}]).to_string();
    let apply = format!(
        "apiVersion: {RBAC}/v1\nkind: Role\nmetadata:\n  name: cm\n  namespace: dev\nrules:\n\
         - apiGroups: [\"\"]\n  resources: [configmaps, secrets]\n  verbs: [get]\n"
    );
    for (content_type, patch) in [
        ("application/merge-patch+json", merge.as_str()),
        ("application/strategic-merge-patch+json", merge.as_str()),
        ("application/json-patch+json", json_patch.as_str()),
    ] {
        let body = expect_sent(&pat, ("PATCH", &cm), (content_type, patch), 403, content_type).await;
        assert!(
            message(&body).contains(
                "User \"pat\" cannot patch resource \"roles\" in API group \"rbac.authorization.k8s.io\" in the namespace \"dev\""
            ),
            "{body}"
        );
        assert!(message(&body).contains("(verbs [get] on secrets)"), "{body}");
    }
    expect_sent(
        &pat,
        ("PATCH", &format!("{cm}?fieldManager=pat&force=true")),
        ("application/apply-patch+yaml", &apply),
        403,
        "apply",
    )
    .await;
    // Server-side apply that would create a role is checked too.
    expect_sent(
        &pat,
        ("PATCH", &format!("{roles}/new-one?fieldManager=pat")),
        (
            "application/apply-patch+yaml",
            &apply.replace("name: cm", "name: new-one"),
        ),
        403,
        "apply-create",
    )
    .await;
    // A full update, dry run or not.
    let (_, mut current) = call(&pat, "GET", &cm, None).await;
    current["rules"] = widened.clone();
    for path in [cm.clone(), format!("{cm}?dryRun=All")] {
        expect_status_because(&pat, "PUT", &path, Some(&current), 403, &path).await;
    }
    let (_, stored) = call(&pat, "GET", &cm, None).await;
    assert_eq!(stored["rules"], json!([rule(&["get"], "", &["configmaps"])]));

    // Changes within what pat holds go through.
    let list = json!({"rules": [rule(&["get", "list"], "", &["configmaps"])]}).to_string();
    expect_sent(
        &pat,
        ("PATCH", &cm),
        ("application/merge-patch+json", &list),
        200,
        "",
    )
    .await;
    expect_sent(
        &pat,
        ("PATCH", &format!("{roles}/applied?fieldManager=pat")),
        (
            "application/apply-patch+yaml",
            &format!(
                "apiVersion: {RBAC}/v1\nkind: Role\nmetadata:\n  name: applied\nrules:\n\
                 - apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [list]\n"
            ),
        ),
        201,
        "",
    )
    .await;

    // A role pat does not cover: any change but garbage-collection fields is refused.
    let secret_reader = format!("{roles}/secret-reader");
    let label = json!({"metadata": {"labels": {"team": "pat"}}}).to_string();
    let merge_type = "application/merge-patch+json";
    expect_sent(&pat, ("PATCH", &secret_reader), (merge_type, &label), 403, "").await;
    let finalizer = json!({"metadata": {"finalizers": ["example.com/keep"]}}).to_string();
    expect_sent(&pat, ("PATCH", &secret_reader), (merge_type, &finalizer), 200, "").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn namespace_admins_delegate_what_they_hold_and_admins_are_unrestricted() {
    let (hub, _dir) = hub_with_users().await;
    setup(&hub).await;
    let bindings = rbac_path(Some("dev"), "rolebindings");
    // A ServiceAccount with the aggregated `admin` ClusterRole in dev.
    let a = admin(&hub, WS).await;
    create(
        &hub,
        WS,
        "/api/v1/namespaces/dev/serviceaccounts",
        json!({"metadata": {"name": "lead"}}),
    )
    .await;
    let mut lead_admin = role_binding("lead-admin", "ClusterRole", "admin", "x");
    lead_admin["subjects"] = json!([{"kind": "ServiceAccount", "name": "lead", "namespace": "dev"}]);
    create(&hub, WS, &bindings, lead_admin).await;
    let body = post_created(
        &a,
        "/api/v1/namespaces/dev/serviceaccounts/lead/token",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}),
    )
    .await;
    let lead = as_user(&hub, body["status"]["token"].as_str().unwrap()).await;
    for (name, role) in [
        ("alice-edit", "edit"),
        ("alice-view", "view"),
        ("alice-admin", "admin"),
    ] {
        expect_status_because(
            &lead,
            "POST",
            &bindings,
            Some(&role_binding(name, "ClusterRole", role, "alice")),
            201,
            format!("binding {role}"),
        )
        .await;
    }
    let body = expect_status(
        &lead,
        "POST",
        &bindings,
        Some(&role_binding(
            "alice-root",
            "ClusterRole",
            "cluster-admin",
            "alice",
        )),
        403,
    )
    .await;
    assert!(
        message(&body).contains("User \"system:serviceaccount:dev:lead\""),
        "{body}"
    );

    // system:masters may grant anything, itself included.
    post_created(
        &a,
        &rbac_path(None, "clusterrolebindings"),
        &cluster_role_binding("alice-root", "cluster-admin", "alice"),
    )
    .await;
    post_created(
        &a,
        &bindings,
        &role_binding("missing-role", "Role", "not-yet", "alice"),
    )
    .await;
    // ... and now alice, a cluster admin through RBAC, holds everything.
    let alice = as_user(&hub, "alice-token").await;
    post_created(
        &alice,
        &rbac_path(Some("dev"), "roles"),
        &role("anything", json!([rule(&["*"], "*", &["*"])])),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_create_rolebinding_to_cluster_admin_explains_the_refusal() {
    let (hub, _dir) = hub_with_users().await;
    setup(&hub).await;
    let server = format!("{}/clusters/{WS}", hub.url());
    let as_alice = |args: &[&str]| {
        let mut all = vec!["--server", server.as_str(), "--token", "alice-token"];
        all.extend_from_slice(args);
        hub.kubectl(&all)
    };
    let out = as_alice(&[
        "create",
        "rolebinding",
        "alice-root",
        "--clusterrole=cluster-admin",
        "--user=alice",
        "-n",
        "dev",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "rolebindings.rbac.authorization.k8s.io \"alice-root\" is forbidden: User \"alice\" cannot create resource \"rolebindings\""
        ) && stderr.contains(
            "ClusterRole \"cluster-admin\" grants permissions alice does not hold (verbs [*] on *.*; verbs [*] on non-resource URL \"*\"); ask an admin, or get the \"bind\" verb on clusterroles \"cluster-admin\""
        ),
        "{stderr}"
    );
    let out = as_alice(&[
        "create",
        "role",
        "secrets",
        "--verb=get,list",
        "--resource=secrets",
        "-n",
        "dev",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("it grants permissions alice does not hold (verbs [get list] on secrets)"),
        "{stderr}"
    );
    // What alice holds she can hand on with kubectl too.
    let out = as_alice(&[
        "create",
        "role",
        "binder",
        "--verb=create",
        "--resource=rolebindings.rbac.authorization.k8s.io",
        "-n",
        "dev",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = as_alice(&[
        "create",
        "rolebinding",
        "binder",
        "--role=binder",
        "--user=bob",
        "-n",
        "dev",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
