//! Hub security end to end: authentication (admin token, token file,
//! ServiceAccount tokens, legacy token Secrets, client certificates and
//! CSRs), RBAC per workspace, reviews, and the in-flight cap.

mod common;

use std::time::Duration;

use base64::Engine;
use common::tenants::{
    binding, ready_workspace, request_token, service_account_subject, service_account_token,
    service_account_with_role,
};
use common::{
    admin, call, client_as, create, delete_ok, expect_status, expect_status_because, get_ok, kubeconfig_file,
    ok, post_created, rbac_path, token,
};
use ferry_hub::kubeconfig::AuthInfo;
use ferry_testkit::TestHub;
use serde_json::{json, Value};

const TOKENS: &str = "\
alice-token,alice,u-alice
bob-token,bob,u-bob,\"ops,dev-team\"
carol-token,carol,u-carol,system:masters
";

/// A hub with the users of [`TOKENS`].
async fn hub_with_users() -> (TestHub, tempfile::TempDir) {
    let (hub, dir) = common::tenants::hub_with_tokens(TOKENS, |_| {}).await;
    (hub, dir)
}

fn user_subject(kind: &str, name: &str) -> Value {
    json!({"kind": kind, "apiGroup": "rbac.authorization.k8s.io", "name": name})
}

/// Workspace root:a with namespaces dev and prod, Roles, bindings and a
/// ServiceAccount dev/builder with `edit` in dev; workspace root:b empty.
async fn tenants(hub: &TestHub) -> String {
    ready_workspace(hub, "a").await;
    ready_workspace(hub, "b").await;
    let a = "root:a";
    for ns in ["dev", "prod"] {
        create(hub, a, "/api/v1/namespaces", json!({"metadata": {"name": ns}})).await;
    }
    create(
        hub,
        a,
        "/api/v1/namespaces/dev/configmaps",
        json!({"metadata": {"name": "cfg"}}),
    )
    .await;
    create(
        hub,
        a,
        &rbac_path(Some("dev"), "roles"),
        json!({"metadata": {"name": "cm-reader"}, "rules": [
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["allowed"]},
            {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/status"]}]}),
    )
    .await;
    create(
        hub,
        a,
        &rbac_path(Some("dev"), "rolebindings"),
        binding(
            "RoleBinding",
            "alice-cm",
            "Role",
            "cm-reader",
            user_subject("User", "alice"),
        ),
    )
    .await;
    create(
        hub,
        a,
        &rbac_path(None, "clusterrolebindings"),
        binding(
            "ClusterRoleBinding",
            "ops-view",
            "ClusterRole",
            "view",
            user_subject("Group", "ops"),
        ),
    )
    .await;
    service_account_with_role(hub, a, ("dev", "builder"), "builder-edit", "edit", true).await;
    service_account_token(hub, a, ("dev", "builder")).await
}

fn method_of(verb: &str) -> &'static str {
    match verb {
        "get" | "list" => "GET",
        "create" => "POST",
        "update" => "PUT",
        "patch" => "PATCH",
        "delete" => "DELETE",
        other => panic!("no method for {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rbac_decisions_over_http_match_kubernetes() {
    let (hub, _dir) = hub_with_users().await;
    let builder = tenants(&hub).await;
    let cm = json!({"metadata": {"name": "new-cm"}});
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    let none = Value::Null;
    let empty = json!({});
    // (subject token, verb, path inside the workspace, workspace, body, allowed)
    let rows: Vec<(&str, &str, &str, &str, &Value, bool)> = vec![
        (
            "alice-token",
            "get",
            "/api/v1/namespaces/dev/configmaps/cfg",
            "root:a",
            &none,
            true,
        ),
        (
            "alice-token",
            "list",
            "/api/v1/namespaces/dev/configmaps",
            "root:a",
            &none,
            true,
        ),
        (
            "alice-token",
            "list",
            "/api/v1/namespaces/prod/configmaps",
            "root:a",
            &none,
            false,
        ),
        (
            "alice-token",
            "list",
            "/api/v1/configmaps",
            "root:a",
            &none,
            false,
        ),
        (
            "alice-token",
            "create",
            "/api/v1/namespaces/dev/configmaps",
            "root:a",
            &cm,
            false,
        ),
        (
            "alice-token",
            "get",
            "/api/v1/namespaces/dev/secrets/allowed",
            "root:a",
            &none,
            true,
        ),
        (
            "alice-token",
            "get",
            "/api/v1/namespaces/dev/secrets/other",
            "root:a",
            &none,
            false,
        ),
        (
            "alice-token",
            "list",
            "/api/v1/namespaces/dev/secrets",
            "root:a",
            &none,
            false,
        ),
        (
            "alice-token",
            "update",
            "/apis/apps/v1/namespaces/dev/deployments/web/status",
            "root:a",
            &deploy,
            true,
        ),
        (
            "alice-token",
            "update",
            "/apis/apps/v1/namespaces/dev/deployments/web",
            "root:a",
            &deploy,
            false,
        ),
        (
            "alice-token",
            "list",
            "/api/v1/namespaces/dev/configmaps",
            "root:b",
            &none,
            false,
        ),
        ("alice-token", "get", "/apis", "root:a", &none, true),
        ("alice-token", "get", "/version", "root:b", &none, true),
        ("alice-token", "get", "/metrics", "root:a", &none, false),
        (
            "bob-token",
            "list",
            "/apis/apps/v1/namespaces/prod/deployments",
            "root:a",
            &none,
            true,
        ),
        ("bob-token", "list", "/api/v1/namespaces", "root:a", &none, true),
        (
            "bob-token",
            "get",
            "/api/v1/namespaces/dev/secrets/allowed",
            "root:a",
            &none,
            false,
        ),
        (
            "bob-token",
            "create",
            "/apis/apps/v1/namespaces/dev/deployments",
            "root:a",
            &deploy,
            false,
        ),
        (
            "bob-token",
            "list",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "root:a",
            &none,
            false,
        ),
        (
            "bob-token",
            "list",
            "/apis/apps/v1/namespaces/prod/deployments",
            "root:b",
            &none,
            false,
        ),
        (
            "builder",
            "create",
            "/apis/apps/v1/namespaces/dev/deployments",
            "root:a",
            &deploy,
            true,
        ),
        (
            "builder",
            "create",
            "/apis/apps/v1/namespaces/prod/deployments",
            "root:a",
            &deploy,
            false,
        ),
        (
            "builder",
            "get",
            "/api/v1/namespaces/dev/secrets/any",
            "root:a",
            &none,
            true,
        ),
        (
            "builder",
            "create",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/dev/rolebindings",
            "root:a",
            &none,
            false,
        ),
        (
            "builder",
            "create",
            "/api/v1/namespaces/dev/serviceaccounts/builder/token",
            "root:a",
            &empty,
            true,
        ),
        (
            "builder",
            "list",
            "/api/v1/namespaces/dev/configmaps",
            "root:b",
            &none,
            false,
        ),
        ("builder", "list", "/api/v1/configmaps", "*", &none, false),
        ("builder", "get", "/apis", "root:b", &none, false),
        ("carol-token", "list", "/api/v1/configmaps", "*", &none, true),
        (
            "carol-token",
            "create",
            "/api/v1/namespaces/default/configmaps",
            "root:b",
            &cm,
            true,
        ),
    ];
    let mut failures = Vec::new();
    for (who, verb, path, ws, body, allowed) in rows {
        let t = if who == "builder" {
            builder.clone()
        } else {
            who.to_string()
        };
        let client = client_as(&hub, ws, token(&t)).await;
        let body = (!body.is_null()).then_some(body);
        let (code, resp) = call(&client, method_of(verb), path, body).await;
        let got = !matches!(code, 401 | 403);
        if got != allowed || code == 401 {
            failures.push(format!(
                "{who} {verb} {path} in {ws}: expected {}, got {code}: {}",
                if allowed { "allow" } else { "deny" },
                resp["message"]
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn denials_name_user_verb_resource_namespace_and_workspace() {
    let (hub, _dir) = hub_with_users().await;
    tenants(&hub).await;
    let alice = client_as(&hub, "root:a", token("alice-token")).await;
    let body = expect_status(
        &alice,
        "GET",
        "/apis/apps/v1/namespaces/prod/deployments/web",
        None,
        403,
    )
    .await;
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "deployments.apps \"web\" is forbidden: User \"alice\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"prod\" in workspace \"root:a\""
    );
    let (_, body) = call(
        &alice,
        "GET",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        None,
    )
    .await;
    assert_eq!(
        body["message"],
        "clusterroles.rbac.authorization.k8s.io is forbidden: User \"alice\" cannot list resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope in workspace \"root:a\""
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn anonymous_requests_get_401_except_health() {
    let hub = TestHub::start().await;
    let anon = client_as(&hub, "root", AuthInfo::Token(String::new())).await;
    for path in ["/api/v1/namespaces", "/version", "/apis", "/openapi/v2"] {
        let body = expect_status_because(&anon, "GET", path, None, 401, &path).await;
        assert!(
            body["message"].as_str().unwrap().contains("no credentials"),
            "{body}"
        );
    }
    for path in ["/healthz", "/readyz", "/livez"] {
        expect_status_because(&anon, "GET", path, None, 200, &path).await;
    }
    let wrong = client_as(&hub, "root", token("not-a-token")).await;
    let body = expect_status(&wrong, "GET", "/api/v1/namespaces", None, 401).await;
    assert!(
        !body.to_string().contains("not-a-token"),
        "tokens are never echoed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn service_account_token_from_one_workspace_is_refused_everywhere_else() {
    let hub = TestHub::start().await;
    ready_workspace(&hub, "a").await;
    ready_workspace(&hub, "b").await;
    create(
        &hub,
        "root:a",
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "god"}}),
    )
    .await;
    // cluster-admin in A, and a binding in B naming the same ServiceAccount user.
    let subject = service_account_subject("default", "god");
    for ws in ["root:a", "root:b"] {
        create(
            &hub,
            ws,
            &rbac_path(None, "clusterrolebindings"),
            binding(
                "ClusterRoleBinding",
                "god",
                "ClusterRole",
                "cluster-admin",
                subject.clone(),
            ),
        )
        .await;
    }
    let t = service_account_token(&hub, "root:a", ("default", "god")).await;
    let in_a = client_as(&hub, "root:a", token(&t)).await;
    get_ok(&in_a, "/api/v1/secrets").await;
    for ws in ["root:b", "root", "*"] {
        let elsewhere = client_as(&hub, ws, token(&t)).await;
        for path in ["/api/v1/secrets", "/api/v1/namespaces", "/apis"] {
            expect_status_because(&elsewhere, "GET", path, None, 403, format!("{path} in {ws}")).await;
        }
    }
    let b = client_as(&hub, "root:b", token(&t)).await;
    let (_, body) = call(&b, "GET", "/api/v1/secrets", None).await;
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("in workspace \"root:b\"")
            && message.contains("valid only in its own workspace (root:a)"),
        "{message}"
    );
    // The admin reaches everything, including the wildcard.
    let admin_all = admin(&hub, "*").await;
    get_ok(&admin_all, "/api/v1/secrets").await;
}

fn forge_with(
    hub: &TestHub,
    real: &str,
    edit: impl FnOnce(&mut ferry_hub::auth::service_account::Claims),
) -> String {
    let signer = &hub.running.hub.security.service_accounts;
    let mut claims = signer.verify_signature(real).unwrap();
    edit(&mut claims);
    signer.sign(&claims)
}

#[tokio::test(flavor = "multi_thread")]
async fn service_account_tokens_expire_resist_tampering_and_die_with_their_account() {
    let hub = TestHub::start().await;
    service_account_with_role(&hub, "root", ("default", "robot"), "robot-view", "view", false).await;
    let (code, issued) = request_token(
        &hub,
        "root",
        ("default", "robot"),
        json!({"expirationSeconds": 1200}),
    )
    .await;
    assert_eq!(code, 201, "{issued}");
    assert_eq!(issued["spec"]["expirationSeconds"], 1200);
    assert!(issued["status"]["expirationTimestamp"].is_string());
    let good = issued["status"]["token"].as_str().unwrap().to_string();
    let refused = |expect: &'static str| {
        move |(code, body): (u16, Value)| {
            assert_eq!(code, 401, "{body}");
            let m = body["message"].as_str().unwrap().to_string();
            assert!(m.contains(expect), "expected {expect:?} in {m:?}");
        }
    };
    let get_ns = |t: String| {
        let hub = &hub;
        async move {
            call(
                &client_as(hub, "root", token(&t)).await,
                "GET",
                "/api/v1/namespaces",
                None,
            )
            .await
        }
    };
    assert_eq!(get_ns(good.clone()).await.0, 200);

    // Tampered: the payload changed after signing.
    let parts: Vec<&str> = good.split('.').collect();
    let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut claims: Value = serde_json::from_slice(&engine.decode(parts[1]).unwrap()).unwrap();
    claims["kubernetes.io"]["namespace"] = json!("kube-system");
    let tampered = format!("{}.{}.{}", parts[0], engine.encode(claims.to_string()), parts[2]);
    refused("signature is invalid")(get_ns(tampered).await);

    // Expired: correctly signed, but past its exp.
    let expired = forge_with(&hub, &good, |c| {
        c.exp = Some(chrono::Utc::now().timestamp() - 5);
    });
    refused("has expired")(get_ns(expired).await);

    // Wrong audience: issued for someone else.
    let (_, vault) = request_token(
        &hub,
        "root",
        ("default", "robot"),
        json!({"audiences": ["vault"]}),
    )
    .await;
    let vault = vault["status"]["token"].as_str().unwrap().to_string();
    refused("wrong audience")(get_ns(vault).await);

    // Too short a lifetime is invalid, naming the field.
    let (code, body) = request_token(
        &hub,
        "root",
        ("default", "robot"),
        json!({"expirationSeconds": 60}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("spec.expirationSeconds"),
        "{body}"
    );
    let (code, _) = request_token(&hub, "root", ("default", "missing"), json!({})).await;
    assert_eq!(code, 404);

    // Deleting the ServiceAccount revokes its tokens at once.
    delete_ok(
        &admin(&hub, "root").await,
        "/api/v1/namespaces/default/serviceaccounts/robot",
    )
    .await;
    refused("no longer exists")(get_ns(good.clone()).await);
    // ... and a new account with the same name does not revive them.
    create(
        &hub,
        "root",
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "robot"}}),
    )
    .await;
    refused("re-created")(get_ns(good).await);
}

/// A TokenReview of `token` for `audiences` as `client`; returns the status and body.
async fn token_review(client: &kube::Client, token: &str, audiences: Value) -> (u16, Value) {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "spec": {"token": token, "audiences": audiences}});
    call(
        client,
        "POST",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some(&review),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_token_secrets_are_filled_and_token_review_verifies_tokens() {
    let hub = TestHub::start().await;
    ready_workspace(&hub, "a").await;
    let a = admin(&hub, "root:a").await;
    create(
        &hub,
        "root:a",
        "/api/v1/namespaces/default/serviceaccounts",
        json!({"metadata": {"name": "legacy"}}),
    )
    .await;
    create(
        &hub,
        "root:a",
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "legacy-token", "annotations": {"kubernetes.io/service-account.name": "legacy"}},
               "type": "kubernetes.io/service-account-token"}),
    )
    .await;
    let secret = get_ok(&a, "/api/v1/namespaces/default/secrets/legacy-token").await;
    let engine = base64::engine::general_purpose::STANDARD;
    let t = String::from_utf8(
        engine
            .decode(secret["data"]["token"].as_str().expect("token filled"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        engine
            .decode(secret["data"]["namespace"].as_str().unwrap())
            .unwrap(),
        b"default"
    );
    assert!(secret["data"]["ca.crt"].is_string());
    assert!(secret["metadata"]["annotations"]["kubernetes.io/service-account.uid"].is_string());
    // Authenticated (discovery is allowed to every authenticated user).
    let legacy = client_as(&hub, "root:a", token(&t)).await;
    get_ok(&legacy, "/apis").await;
    expect_status(&legacy, "GET", "/api/v1/namespaces", None, 403).await;

    // TokenReview in the token's workspace says who it is...
    let (code, r) = token_review(&a, &t, json!([])).await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["status"]["authenticated"], true, "{r}");
    assert_eq!(
        r["status"]["user"]["username"],
        "system:serviceaccount:default:legacy"
    );
    assert!(r["status"]["user"]["groups"]
        .as_array()
        .unwrap()
        .contains(&json!("system:serviceaccounts:default")));
    // ... and refuses it in another workspace, or for a foreign audience.
    let root = admin(&hub, "root").await;
    let (_, r) = token_review(&root, &t, json!([])).await;
    assert_eq!(r["status"]["authenticated"], false, "{r}");
    let (_, r) = token_review(&a, &t, json!(["vault"])).await;
    assert_eq!(r["status"]["authenticated"], false, "{r}");
    let (_, r) = token_review(&a, "junk.junk.junk", json!([])).await;
    assert_eq!(r["status"]["authenticated"], false, "{r}");

    // Deleting the Secret revokes the legacy token.
    delete_ok(&a, "/api/v1/namespaces/default/secrets/legacy-token").await;
    expect_status(&legacy, "GET", "/apis", None, 401).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn reviews_are_create_only_and_answer_for_the_caller() {
    let (hub, _dir) = hub_with_users().await;
    tenants(&hub).await;
    let alice = client_as(&hub, "root:a", token("alice-token")).await;
    let ssar = |verb: &str, resource: &str, ns: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": ns}}})
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let r = post_created(&alice, path, &ssar("list", "configmaps", "dev")).await;
    assert_eq!(r["status"]["allowed"], true);
    assert!(
        r["status"]["reason"]
            .as_str()
            .unwrap()
            .contains("RoleBinding \"dev/alice-cm\""),
        "{r}"
    );
    let (_, r) = call(&alice, "POST", path, Some(&ssar("list", "configmaps", "prod"))).await;
    assert_eq!(r["status"]["allowed"], false);
    // Reviews are create-only: anything else is 405 (for whoever may ask).
    expect_status(&admin(&hub, "root:a").await, "GET", path, None, 405).await;
    expect_status(&alice, "GET", path, None, 403).await;

    let rules = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "dev"}});
    let r = post_created(
        &alice,
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        &rules,
    )
    .await;
    let resources: Vec<Value> = r["status"]["resourceRules"].as_array().unwrap().clone();
    assert!(
        resources
            .iter()
            .any(|rule| rule["resources"] == json!(["configmaps"])),
        "{r}"
    );
    assert!(r["status"]["nonResourceRules"]
        .as_array()
        .unwrap()
        .iter()
        .any(|rule| rule["nonResourceURLs"]
            .as_array()
            .unwrap()
            .contains(&json!("/apis/*"))));

    // SubjectAccessReview needs permission; the admin may ask about anyone.
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "bob", "groups": ["ops"], "resourceAttributes": {"verb": "list", "group": "apps", "resource": "deployments", "namespace": "prod"}}});
    let sar_path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    expect_status(&alice, "POST", sar_path, Some(&sar), 403).await;
    let (code, r) = call(&admin(&hub, "root:a").await, "POST", sar_path, Some(&sar)).await;
    assert_eq!((code, r["status"]["allowed"].clone()), (201, json!(true)), "{r}");

    let who = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let r = post_created(&alice, "/apis/authentication.k8s.io/v1/selfsubjectreviews", &who).await;
    assert_eq!(r["status"]["userInfo"]["username"], "alice");

    // Discovery lists the reviews with the create verb only.
    let (_, list) = call(&alice, "GET", "/apis/authorization.k8s.io/v1", None).await;
    let entry = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "selfsubjectaccessreviews")
        .cloned()
        .unwrap();
    assert_eq!(entry["verbs"], json!(["create"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_rbac_objects_are_rejected_naming_the_field() {
    let hub = TestHub::start().await;
    let a = admin(&hub, "root").await;
    let role = json!({"metadata": {"name": "bad"}, "rules": [{"verbs": [], "apiGroups": [""], "resources": ["pods"]}]});
    let body = expect_status(&a, "POST", &rbac_path(Some("default"), "roles"), Some(&role), 422).await;
    assert_eq!(body["details"]["causes"][0]["field"], "rules[0].verbs");
    let crb = binding(
        "ClusterRoleBinding",
        "bad",
        "Role",
        "x",
        json!({"kind": "ServiceAccount", "name": "sa"}),
    );
    let body = expect_status(
        &a,
        "POST",
        &rbac_path(None, "clusterrolebindings"),
        Some(&crb),
        422,
    )
    .await;
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("roleRef.kind") && message.contains("subjects[0].namespace"),
        "{message}"
    );
    // The defaults exist and are listed.
    let (_, roles) = call(&a, "GET", &rbac_path(None, "clusterroles"), None).await;
    let names: Vec<&str> = roles["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    for want in ["cluster-admin", "admin", "edit", "view"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn client_certificates_signed_by_the_hub_ca_authenticate() {
    let hub = TestHub::start().await;
    let ca = hub.running.hub.security.ca().unwrap();
    let (cert, key) =
        ferry_hub::server::tls::sign_client_cert(&ca, "erin", &["system:masters".to_string()], 1).unwrap();
    let erin = client_as(
        &hub,
        "*",
        AuthInfo::ClientCert {
            cert_pem: cert,
            key_pem: key,
        },
    )
    .await;
    get_ok(&erin, "/api/v1/namespaces").await;
    let (cert, key) = ferry_hub::server::tls::sign_client_cert(&ca, "frank", &["qa".to_string()], 1).unwrap();
    let frank = client_as(
        &hub,
        "root",
        AuthInfo::ClientCert {
            cert_pem: cert,
            key_pem: key,
        },
    )
    .await;
    let body = expect_status(&frank, "GET", "/api/v1/namespaces", None, 403).await;
    assert!(body["message"].as_str().unwrap().contains("User \"frank\""));
}

/// The cap: with every slot held by a request still uploading its body,
/// a burst gets 429 with Retry-After (not a hang), counted in `/metrics` as
/// kube-apiserver counts them, and service resumes.
#[tokio::test(flavor = "multi_thread")]
async fn burst_past_the_in_flight_cap_gets_429_with_retry_after_and_is_counted() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let hub = TestHub::start_with(|o| {
        o.max_in_flight = 2;
        o.insecure_port = Some(0);
    })
    .await;
    let plain = hub.running.insecure_url.clone().expect("plain listener");
    let addr = plain.trim_start_matches("http://").to_string();
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    // Two uploads that send all but the last bytes of their body.
    let mut held = Vec::new();
    for i in 0..2 {
        let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let body = format!("{:<100}", format!("{{\"metadata\":{{\"name\":\"held-{i}\"}}}}"));
        let head = format!(
            "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
            hub.running.admin_token,
            body.len(),
            &body[..90]
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        held.push((tcp, body[90..].to_string()));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // kube-rs retries 429s by itself, so the burst is sent as raw HTTP.
    let burst: Vec<_> = (0..20)
        .map(|_| {
            let addr = addr.clone();
            let token = hub.running.admin_token.clone();
            tokio::spawn(async move {
                let mut tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
                let req = format!("GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
                tcp.write_all(req.as_bytes()).await.unwrap();
                let mut out = String::new();
                tcp.read_to_string(&mut out).await.unwrap();
                out
            })
        })
        .collect();
    for task in burst {
        let out = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("no hang")
            .unwrap();
        assert!(out.starts_with("HTTP/1.1 429"), "{out}");
        assert!(out.to_ascii_lowercase().contains("retry-after: 1\r\n"), "{out}");
    }
    // Finish the held uploads: they complete, and the slots free up.
    for (tcp, rest) in &mut held {
        tcp.write_all(rest.as_bytes()).await.unwrap();
        let mut buf = [0u8; 12];
        tcp.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"HTTP/1.1 201");
    }
    get_ok(&admin(&hub, "root").await, "/api/v1/namespaces").await;
    // Counted as kube-apiserver counts what its priority and fairness rejects.
    // (Read once the slots are free: the scrape is a request like any other.)
    let top = common::top_client_as(&hub, token(&hub.running.admin_token)).await;
    let (code, scrape) = common::get_raw(&top, "/metrics").await;
    assert_eq!(code, 200, "{scrape}");
    let refused = scrape
        .lines()
        .find(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains("code=\"429\"")
                && l.contains("verb=\"LIST\"")
                && l.contains("resource=\"namespaces\"")
        })
        .unwrap_or_else(|| panic!("no 429 in the scrape:\n{scrape}"));
    assert!(refused.ends_with(" 20"), "{refused}");
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_http_listener_is_loopback_only_and_still_authenticates() {
    let hub = TestHub::start_with(|o| o.insecure_port = Some(0)).await;
    let plain = hub.running.insecure_url.clone().unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(plain.trim_start_matches("http://"))
        .await
        .unwrap();
    tcp.write_all(b"GET /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    tcp.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 401"), "{out}");
}

// ---------------------------------------------------------------------------
// kubectl

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_create_token_and_auth_can_i() {
    let hub = TestHub::start().await;
    ready_workspace(&hub, "a").await;
    create(
        &hub,
        "root:a",
        "/api/v1/namespaces",
        json!({"metadata": {"name": "dev"}}),
    )
    .await;
    service_account_with_role(&hub, "root:a", ("dev", "builder"), "builder-edit", "edit", true).await;
    let admin_a = kubeconfig_file(&hub, "admin-a", "root:a", token(&hub.running.admin_token));
    let t = ok(
        hub.kubectl_as(
            &admin_a,
            &["create", "token", "builder", "-n", "dev", "--duration", "1h"],
            None,
        ),
        "kubectl create token",
    );
    let t = t.trim().to_string();
    assert!(t.starts_with("eyJ"), "{t}");
    let sa = kubeconfig_file(&hub, "builder", "root:a", token(&t));
    let yes = ok(
        hub.kubectl_as(
            &sa,
            &["auth", "can-i", "create", "deployments", "-n", "dev"],
            None,
        ),
        "can-i yes",
    );
    assert_eq!(yes.trim(), "yes");
    let no = hub.kubectl_as(
        &sa,
        &["auth", "can-i", "create", "rolebindings", "-n", "dev"],
        None,
    );
    assert!(!no.status.success());
    assert_eq!(String::from_utf8_lossy(&no.stdout).trim(), "no");
    let list = ok(
        hub.kubectl_as(&sa, &["auth", "can-i", "--list", "-n", "dev"], None),
        "can-i --list",
    );
    assert!(list.contains("deployments.apps"), "{list}");
    let whoami = ok(hub.kubectl_as(&sa, &["auth", "whoami"], None), "whoami");
    assert!(whoami.contains("system:serviceaccount:dev:builder"), "{whoami}");
    // The same token is refused in another workspace.
    let sa_root = kubeconfig_file(&hub, "builder-root", "root", token(&t));
    let denied = hub.kubectl_as(&sa_root, &["get", "configmaps", "-n", "default"], None);
    assert!(!denied.status.success());
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("Forbidden"),
        "{denied:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn csr_approved_with_kubectl_yields_a_working_client_certificate() {
    let hub = TestHub::start().await;
    let admin_kc = hub.kubeconfig().to_path_buf();
    let as_admin =
        |args: &[&str], stdin: Option<&str>, what: &str| ok(hub.kubectl_as(&admin_kc, args, stdin), what);
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "qa");
    params.distinguished_name.push(rcgen::DnType::CommonName, "dave");
    let csr_pem = params.serialize_request(&key).unwrap().pem().unwrap();
    let csr = json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "dave"},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(&csr_pem),
                 "signerName": "kubernetes.io/kube-apiserver-client", "usages": ["client auth"],
                 "expirationSeconds": 86400},
    });
    as_admin(&["create", "-f", "-"], Some(&csr.to_string()), "create csr");
    as_admin(&["certificate", "approve", "dave"], None, "certificate approve");
    let cert_b64 = as_admin(
        &["get", "csr", "dave", "-o", "jsonpath={.status.certificate}"],
        None,
        "get csr",
    );
    let cert = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(cert_b64.trim())
            .expect("certificate issued"),
    )
    .unwrap();
    assert!(cert.contains("BEGIN CERTIFICATE"));
    let dave = kubeconfig_file(
        &hub,
        "dave",
        "root",
        AuthInfo::ClientCert {
            cert_pem: cert,
            key_pem: key.serialize_pem(),
        },
    );
    let whoami = ok(
        hub.kubectl_as(&dave, &["auth", "whoami", "-o", "json"], None),
        "whoami",
    );
    let who: Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(who["status"]["userInfo"]["username"], "dave");
    assert!(who["status"]["userInfo"]["groups"]
        .as_array()
        .unwrap()
        .contains(&json!("qa")));
    let denied = hub.kubectl_as(&dave, &["get", "configmaps", "-n", "default"], None);
    assert!(
        String::from_utf8_lossy(&denied.stderr).contains("User \"dave\" cannot list resource \"configmaps\""),
        "{denied:?}"
    );
    as_admin(
        &[
            "create",
            "rolebinding",
            "dave-view",
            "--clusterrole=view",
            "--group=qa",
            "-n",
            "default",
        ],
        None,
        "create rolebinding",
    );
    ok(
        hub.kubectl_as(&dave, &["get", "configmaps", "-n", "default"], None),
        "get configmaps as dave",
    );
    // Denied CSRs are never signed.
    let mut other = csr.clone();
    other["metadata"]["name"] = json!("eve");
    as_admin(&["create", "-f", "-"], Some(&other.to_string()), "create csr eve");
    as_admin(&["certificate", "deny", "eve"], None, "certificate deny");
    let none = as_admin(
        &["get", "csr", "eve", "-o", "jsonpath={.status.certificate}"],
        None,
        "get csr eve",
    );
    assert!(none.trim().is_empty());
}
