//! kcp's `root:compute` battery: a workspace `compute` under root holding
//! APIResourceSchemas for Deployments, Services and Ingresses and the
//! APIExport `kubernetes` that lists them, which every authenticated user
//! may bind. SyncTargets name it in `supportedAPIExports`
//! (`root:compute:kubernetes`, what `kubectl ferry workload sync` writes) and
//! consumer workspaces bind it; the hub serves those kinds built in
//! everywhere, so a binding to it is Bound and the built-ins keep serving
//! (what a workspace serves leaves built-in bound resources out).
//!
//! Create-only, as kcp's battery: what exists is never overwritten, what is
//! missing is created at start.

use serde_json::{json, Value};

use ferry_server::apis;
use ferry_server::controller::ControllerContext;
use ferry_server::storage::ObjectKey;
use ferry_server::workspace::{ROOT, WORKSPACES};

pub use ferry_server::synctarget::{COMPUTE_EXPORT as EXPORT, COMPUTE_WORKSPACE as WORKSPACE};

/// kcp's set: `(group, version, plural)`.
const RESOURCES: &[(&str, &str, &str)] = &[
    ("apps", "v1", "deployments"),
    ("", "v1", "services"),
    ("networking.k8s.io", "v1", "ingresses"),
];

/// `v133` for a hub speaking Kubernetes 1.33: kcp names its schemas after
/// the Kubernetes version they come from (`v124.deployments.apps`).
fn schema_prefix() -> String {
    let v = ferry_server::discovery::GIT_VERSION.trim_start_matches('v');
    let mut parts = v.split(['.', '+', '-']);
    let major = parts.next().unwrap_or("1");
    let minor = parts.next().unwrap_or("0");
    format!("v{major}{minor}")
}

/// The APIResourceSchema of a built-in resource, from the hub's own
/// registry and OpenAPI.
pub fn builtin_schema(ctx: &ControllerContext, group: &str, version: &str, resource: &str) -> Option<Value> {
    let info = ctx.lookup(None, group, version, resource)?;
    let schema = ferry_server::openapi::self_contained_builtin_schema(group, version, &info.kind)?;
    let mut subresources = json!({});
    if info.status_subresource {
        subresources["status"] = json!({});
    }
    if let Some(scale) = &info.scale_subresource {
        subresources["scale"] = json!({
            "specReplicasPath": scale.spec_replicas,
            "statusReplicasPath": scale.status_replicas,
        });
        if let Some(selector) = &scale.label_selector {
            subresources["scale"]["labelSelectorPath"] = json!(selector);
        }
    }
    let mut names = json!({
        "plural": info.resource, "singular": info.singular,
        "kind": info.kind, "listKind": info.list_kind,
    });
    if !info.short_names.is_empty() {
        names["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        names["categories"] = json!(info.categories);
    }
    let group_name = if group.is_empty() { "core" } else { group };
    Some(json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": format!("{}.{resource}.{group_name}", schema_prefix())},
        "spec": {
            "group": group,
            "names": names,
            "scope": if info.namespaced { "Namespaced" } else { "Cluster" },
            "versions": [{
                "name": version, "served": true, "storage": true,
                "schema": schema,
                "subresources": subresources,
            }],
        },
    }))
}

/// Create what is missing of `root:compute`.
pub async fn ensure(ctx: &ControllerContext) {
    let ws = json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
                    "metadata": {"name": WORKSPACE}});
    if let Err(e) = ctx
        .create(ROOT, ("tenancy.kcp.io", "v1alpha1", "workspaces"), None, ws)
        .await
    {
        if e.code != 409 {
            tracing::warn!("creating workspace root:{WORKSPACE} failed: {e}");
            return;
        }
    }
    let key = ObjectKey {
        cluster: ROOT.into(),
        resource: WORKSPACES.into(),
        namespace: String::new(),
        name: WORKSPACE.into(),
    };
    let Some(cluster) = ctx.get(&key).and_then(|w| {
        w.value()
            .pointer("/spec/cluster")
            .and_then(Value::as_str)
            .map(String::from)
    }) else {
        tracing::warn!("root:{WORKSPACE} has no logical cluster; not filling it");
        return;
    };
    let mut schema_names = Vec::new();
    for (group, version, resource) in RESOURCES {
        let Some(schema) = builtin_schema(ctx, group, version, resource) else {
            tracing::warn!("no OpenAPI schema for built-in {resource}; root:compute leaves it out");
            continue;
        };
        schema_names.push(schema["metadata"]["name"].clone());
        create_if_missing(
            ctx,
            &cluster,
            (apis::GROUP, apis::VERSION, "apiresourceschemas"),
            schema,
        )
        .await;
    }
    let export = json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport",
        "metadata": {"name": EXPORT},
        "spec": {"latestResourceSchemas": schema_names},
    });
    create_if_missing(ctx, &cluster, (apis::GROUP, apis::VERSION, "apiexports"), export).await;
    // Everyone may bind it, as in kcp. The hub asks for workspace membership
    // before RBAC (kcp's bind check skips it), so the role also lets every
    // authenticated user into root:compute: for `bind`, and nothing else.
    let name = format!("compute:apiexport:{EXPORT}:bind");
    let role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [
            {"apiGroups": [apis::GROUP], "resources": ["apiexports"], "resourceNames": [EXPORT], "verbs": ["bind"]},
            {"nonResourceURLs": ["/"], "verbs": ["access"]},
        ],
    });
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}],
    });
    let rbac = ferry_server::auth::rbac::RBAC_GROUP;
    create_if_missing(ctx, &cluster, (rbac, "v1", "clusterroles"), role).await;
    create_if_missing(ctx, &cluster, (rbac, "v1", "clusterrolebindings"), binding).await;
}

async fn create_if_missing(ctx: &ControllerContext, cluster: &str, resource: (&str, &str, &str), obj: Value) {
    if let Err(e) = ctx.create(cluster, resource, None, obj).await {
        if e.code != 409 {
            tracing::warn!(cluster, "root:{WORKSPACE}: creating {} failed: {e}", resource.2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_are_named_after_the_kubernetes_version_as_kcp_does() {
        let p = schema_prefix();
        assert!(
            p.starts_with("v1") && p.len() >= 3 && p[1..].chars().all(|c| c.is_ascii_digit()),
            "{p}"
        );
    }
}
