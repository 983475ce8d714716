//! Tenants for tests written from an attacker's side: a hub that knows a few
//! users by bearer token, workspaces each administered by one of them, and
//! clients acting as a user. `mal` is the attacker: cluster-admin of its own
//! workspace and nothing anywhere else; `alice` is the victim tenant; `bob`
//! holds nothing until a test grants him something.

use crate::TestHub;
use ferry_hub::server::HubOptions;
use serde_json::{json, Value};

use crate::clients::{admin, call, client_as, create, rbac_path, token};
use crate::eventually;
pub use crate::workspaces::ready_workspace;

pub const RBAC: &str = "rbac.authorization.k8s.io";

/// The users the hub knows: `<name>-token` authenticates `<name>` (uid `u-<name>`).
pub const USERS: &[&str] = &["mal", "alice", "bob"];

/// A hub that knows [`USERS`] by their tokens. The token file lives as long
/// as this value.
pub struct Tenants {
    pub hub: TestHub,
    _dir: tempfile::TempDir,
}

impl Tenants {
    /// A hub with default options and the tenants' tokens.
    pub async fn start() -> Tenants {
        Self::start_with(|_| {}).await
    }

    /// A hub with the tenants' tokens and `adjust` applied to its options.
    pub async fn start_with(adjust: impl FnOnce(&mut HubOptions)) -> Tenants {
        let lines: String = USERS.iter().map(|u| format!("{u}-token,{u},u-{u}\n")).collect();
        let (hub, dir) = hub_with_tokens(&lines, adjust).await;
        Tenants { hub, _dir: dir }
    }

    /// A kube-rs client acting as `user` (one of [`USERS`]) at `workspace`.
    pub async fn client_as(&self, user: &str, workspace: &str) -> kube::Client {
        client_as(&self.hub, workspace, token(&format!("{user}-token"))).await
    }

    /// `root:<name>`, ready to serve, with `owner` (if any) its cluster-admin
    /// and nothing else granted. Returns the workspace's logical cluster name.
    pub async fn workspace(&self, name: &str, owner: Option<&str>) -> String {
        let cluster = ready_workspace(&self.hub, name).await;
        if let Some(owner) = owner {
            let path = format!("root:{name}");
            bind_cluster_role(
                &self.hub,
                &path,
                &format!("{owner}-admin"),
                "cluster-admin",
                owner,
            )
            .await;
        }
        cluster
    }
}

/// A hub that knows the users of `tokens` (a static token file as kube's
/// `--token-auth-file` reads it: `token,user,uid[,"group,..."]` a line), with
/// `adjust` applied to its options. The file lives in the returned
/// directory, which must outlive the hub.
pub async fn hub_with_tokens(
    tokens: &str,
    adjust: impl FnOnce(&mut HubOptions),
) -> (TestHub, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a directory for the token file");
    let file = dir.path().join("tokens.csv");
    std::fs::write(&file, tokens).expect("writing the token file");
    let hub = TestHub::start_with(|o| {
        o.token_auth_file = Some(file.clone());
        adjust(o);
    })
    .await;
    (hub, dir)
}

/// Ferry's CRDs installed by client `c` in its workspace, as `ferry crds |
/// kubectl apply -f -` does; returns once the edge kinds are served.
pub async fn install_ferry_crds(c: &kube::Client) {
    for crd in ferry_api::all_crds() {
        let body = serde_json::to_value(&crd).expect("CRD as JSON");
        let (code, out) = call(c, "POST", CRDS, Some(&body)).await;
        assert!(
            code == 201 || code == 409,
            "installing {}: {out}",
            body["metadata"]["name"]
        );
    }
    eventually(15, "the edge kinds to be served", || {
        let c = c.clone();
        async move {
            let (code, _) = call(&c, "GET", "/apis/edge.kubestellar.io/v2alpha1/customizers", None).await;
            (code == 200).then_some(())
        }
    })
    .await;
}

/// Where CRDs are created.
pub const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// An RBAC subject naming user `name`.
pub fn user(name: &str) -> Value {
    json!({"kind": "User", "apiGroup": RBAC, "name": name})
}

/// An RBAC subject naming ServiceAccount `namespace/name`.
pub fn service_account_subject(namespace: &str, name: &str) -> Value {
    json!({"kind": "ServiceAccount", "name": name, "namespace": namespace})
}

/// A `kind` (RoleBinding or ClusterRoleBinding) `name` of `role_kind`
/// `role` to `subject`.
pub fn binding(kind: &str, name: &str, role_kind: &str, role: &str, subject: Value) -> Value {
    json!({"apiVersion": format!("{RBAC}/v1"), "kind": kind, "metadata": {"name": name},
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
        "subjects": [subject]})
}

/// Bind ClusterRole `role` to user `who` in the whole of workspace `ws`, as admin.
pub async fn bind_cluster_role(hub: &TestHub, ws: &str, binding_name: &str, role: &str, who: &str) {
    create(
        hub,
        ws,
        &rbac_path(None, "clusterrolebindings"),
        binding("ClusterRoleBinding", binding_name, "ClusterRole", role, user(who)),
    )
    .await;
}

/// ServiceAccount `namespace/name` in workspace `ws`, as admin, holding
/// ClusterRole `role` through binding `binding_name`: a RoleBinding in its
/// namespace when `in_namespace`, else a ClusterRoleBinding across the
/// workspace.
pub async fn service_account_with_role(
    hub: &TestHub,
    ws: &str,
    (namespace, name): (&str, &str),
    binding_name: &str,
    role: &str,
    in_namespace: bool,
) {
    create(
        hub,
        ws,
        &format!("/api/v1/namespaces/{namespace}/serviceaccounts"),
        json!({"metadata": {"name": name}}),
    )
    .await;
    let (kind, path) = if in_namespace {
        ("RoleBinding", rbac_path(Some(namespace), "rolebindings"))
    } else {
        ("ClusterRoleBinding", rbac_path(None, "clusterrolebindings"))
    };
    let subject = service_account_subject(namespace, name);
    create(
        hub,
        ws,
        &path,
        binding(kind, binding_name, "ClusterRole", role, subject),
    )
    .await;
}

/// Ask for a token of ServiceAccount `namespace/name` in `ws` through
/// TokenRequest (`spec` as given), as admin; the status and the answer.
pub async fn request_token(
    hub: &TestHub,
    ws: &str,
    (namespace, name): (&str, &str),
    spec: Value,
) -> (u16, Value) {
    let path = format!("/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token");
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    call(&admin(hub, ws).await, "POST", &path, Some(&body)).await
}

/// A token of ServiceAccount `namespace/name` in `ws`, which must be issued.
pub async fn service_account_token(hub: &TestHub, ws: &str, account: (&str, &str)) -> String {
    let (code, body) = request_token(hub, ws, account, json!({})).await;
    assert_eq!(
        code, 201,
        "requesting a token of {}/{}: {body}",
        account.0, account.1
    );
    body["status"]["token"].as_str().expect("the token").to_string()
}

/// ClusterRole `name` with `rules`.
pub fn cluster_role_object(name: &str, rules: Value) -> Value {
    json!({"apiVersion": format!("{RBAC}/v1"), "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
}

/// Create ClusterRole `name` with `rules` in workspace `ws`, as admin.
pub async fn cluster_role(hub: &TestHub, ws: &str, name: &str, rules: Value) {
    create(
        hub,
        ws,
        &rbac_path(None, "clusterroles"),
        cluster_role_object(name, rules),
    )
    .await;
}
