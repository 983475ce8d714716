//! The RBAC objects every workspace starts with: kube-apiserver's default
//! user-facing ClusterRoles (`cluster-admin`, `admin`, `edit`, `view`, with
//! the same aggregation labels), the discovery and self-review roles bound
//! to `system:authenticated`, and `cluster-admin` bound to `system:masters`.
//!
//! A workspace is judged with them from its start, but they are stored in
//! it only when a client first asks for its ClusterRoles or
//! ClusterRoleBindings (the layer above makes them then): stored, they were
//! most of what an empty workspace held. Once stored they are the
//! workspace's own, edited or deleted as its admin likes.

use serde_json::{json, Value};

use super::rbac::RBAC_GROUP;

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];
const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "delete",
    "deletecollection",
    "patch",
    "update",
];

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({"verbs": verbs, "apiGroups": [group], "resources": resources})
}

fn urls(verbs: &[&str], urls: &[&str]) -> Value {
    json!({"verbs": verbs, "nonResourceURLs": urls})
}

fn cluster_role(name: &str, labels: Value, aggregate_to: Option<&str>, rules: Vec<Value>) -> Value {
    let mut labels = labels;
    labels[BOOTSTRAPPING.0] = json!(BOOTSTRAPPING.1);
    let mut v = json!({
        "apiVersion": format!("{RBAC_GROUP}/v1"),
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "rules": rules,
    });
    if let Some(label) = aggregate_to {
        v["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]});
    }
    v
}

fn cluster_role_binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"kind": "Group", "apiGroup": RBAC_GROUP, "name": g}))
        .collect();
    json!({
        "apiVersion": format!("{RBAC_GROUP}/v1"),
        "kind": "ClusterRoleBinding",
        "metadata": {
            "name": name,
            "labels": {(BOOTSTRAPPING.0): BOOTSTRAPPING.1},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        },
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
        "subjects": subjects,
    })
}

fn view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            "",
            &[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            "",
            &[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ],
        ),
        rule(READ, "", &["namespaces"]),
        rule(READ, "discovery.k8s.io", &["endpointslices"]),
        rule(
            READ,
            "apps",
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
            ],
        ),
        rule(
            READ,
            "autoscaling",
            &["horizontalpodautoscalers", "horizontalpodautoscalers/status"],
        ),
        rule(
            READ,
            "batch",
            &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        ),
        rule(
            READ,
            "policy",
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        ),
        rule(
            READ,
            "networking.k8s.io",
            &["networkpolicies", "ingresses", "ingresses/status"],
        ),
    ]
}

fn edit_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            "",
            &[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ],
        ),
        rule(&["impersonate"], "", &["serviceaccounts"]),
        rule(
            WRITE,
            "",
            &[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ],
        ),
        rule(&["create"], "", &["pods/eviction"]),
        rule(
            WRITE,
            "",
            &[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ],
        ),
        rule(&["create"], "", &["serviceaccounts/token"]),
        rule(
            WRITE,
            "apps",
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        rule(WRITE, "autoscaling", &["horizontalpodautoscalers"]),
        rule(WRITE, "batch", &["jobs", "cronjobs"]),
        rule(WRITE, "policy", &["poddisruptionbudgets"]),
        rule(WRITE, "networking.k8s.io", &["networkpolicies", "ingresses"]),
        rule(READ_WRITE, "coordination.k8s.io", &["leases"]),
    ]
}

fn admin_rules() -> Vec<Value> {
    vec![
        rule(
            &["create"],
            "authorization.k8s.io",
            &["localsubjectaccessreviews"],
        ),
        rule(READ_WRITE, RBAC_GROUP, &["roles", "rolebindings"]),
    ]
}

/// Paths every authenticated user may read (kube's `system:discovery`).
const DISCOVERY_URLS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

/// The label every default object carries.
const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");

/// Whether a workspace's defaults are stored: one of its ClusterRoles or
/// ClusterRoleBindings carries their label.
pub fn made_in(cluster_roles: &[Value], cluster_role_bindings: &[Value]) -> bool {
    cluster_roles.iter().chain(cluster_role_bindings).any(|v| {
        v.pointer("/metadata/labels")
            .and_then(|l| l.get(BOOTSTRAPPING.0))
            .and_then(Value::as_str)
            == Some(BOOTSTRAPPING.1)
    })
}

/// Whether stored labels are those of a default object (what [`made_in`]
/// looks for, read without parsing the object).
pub fn is_default(labels: &std::collections::BTreeMap<String, String>) -> bool {
    labels.get(BOOTSTRAPPING.0).is_some_and(|v| v == BOOTSTRAPPING.1)
}

/// A workspace's ClusterRoles and ClusterRoleBindings as they are judged:
/// with the defaults added, each unless one of its name is stored, while
/// the defaults are not stored (see [`made_in`]).
pub fn add_unless_made(cluster_roles: &mut Vec<Value>, cluster_role_bindings: &mut Vec<Value>) {
    if made_in(cluster_roles, cluster_role_bindings) {
        return;
    }
    let name = |v: &Value| {
        v.pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    for (resource, v) in default_rbac_objects() {
        let into = if resource == "clusterroles" {
            &mut *cluster_roles
        } else {
            &mut *cluster_role_bindings
        };
        if !into.iter().any(|stored| name(stored) == name(&v)) {
            into.push(v);
        }
    }
}

/// ClusterRoles, then ClusterRoleBindings, in the order they are created.
pub fn default_rbac_objects() -> Vec<(&'static str, Value)> {
    let concat = |parts: &[Vec<Value>]| parts.concat();
    vec![
        (
            "clusterroles",
            cluster_role(
                "cluster-admin",
                json!({}),
                None,
                vec![
                    json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
                    urls(&["*"], &["*"]),
                ],
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "admin",
                json!({}),
                Some("rbac.authorization.k8s.io/aggregate-to-admin"),
                concat(&[admin_rules(), edit_rules(), view_rules()]),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "edit",
                json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
                Some("rbac.authorization.k8s.io/aggregate-to-edit"),
                concat(&[edit_rules(), view_rules()]),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "view",
                json!({"rbac.authorization.k8s.io/aggregate-to-edit": "true"}),
                Some("rbac.authorization.k8s.io/aggregate-to-view"),
                view_rules(),
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:discovery",
                json!({}),
                None,
                vec![urls(&["get"], DISCOVERY_URLS)],
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:basic-user",
                json!({}),
                None,
                vec![
                    rule(
                        &["create"],
                        "authorization.k8s.io",
                        &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ),
                    rule(&["create"], "authentication.k8s.io", &["selfsubjectreviews"]),
                ],
            ),
        ),
        (
            "clusterroles",
            cluster_role(
                "system:public-info-viewer",
                json!({}),
                None,
                vec![urls(
                    &["get"],
                    &["/healthz", "/livez", "/readyz", "/version", "/version/"],
                )],
            ),
        ),
        (
            "clusterrolebindings",
            cluster_role_binding("cluster-admin", "cluster-admin", &["system:masters"]),
        ),
        (
            "clusterrolebindings",
            cluster_role_binding("system:discovery", "system:discovery", &["system:authenticated"]),
        ),
        (
            "clusterrolebindings",
            cluster_role_binding(
                "system:basic-user",
                "system:basic-user",
                &["system:authenticated"],
            ),
        ),
        (
            "clusterrolebindings",
            cluster_role_binding(
                "system:public-info-viewer",
                "system:public-info-viewer",
                &["system:authenticated", "system:unauthenticated"],
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::rbac::{validate, Request, WorkspaceRbac};
    use super::super::UserInfo;
    use super::*;

    fn index() -> WorkspaceRbac {
        let objects = default_rbac_objects();
        let of = |r: &str| -> Vec<Value> {
            objects
                .iter()
                .filter(|(k, _)| *k == r)
                .map(|(_, v)| v.clone())
                .collect()
        };
        WorkspaceRbac::build(&[], &of("clusterroles"), &[], &of("clusterrolebindings"))
    }

    #[test]
    fn defaults_are_valid_and_grant_discovery_to_everyone() {
        for (resource, v) in default_rbac_objects() {
            assert!(validate(resource, &v, None).is_empty(), "{v}");
        }
        let rbac = index();
        let anyone = UserInfo::new("alice", "", vec![]);
        let get = |p: &str| Request::NonResource {
            verb: "get".into(),
            path: p.into(),
        };
        assert!(rbac.allows(&anyone, &get("/apis/apps/v1")).is_some());
        assert!(rbac.allows(&anyone, &get("/metrics")).is_none());
        let ssar = Request::Resource {
            verb: "create".into(),
            group: "authorization.k8s.io".into(),
            resource: "selfsubjectaccessreviews".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: String::new(),
        };
        assert!(rbac.allows(&anyone, &ssar).is_some());
        let masters = UserInfo::new("root", "", vec!["system:masters".into()]);
        let anything = Request::Resource {
            verb: "delete".into(),
            group: "x.io".into(),
            resource: "things".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: "a".into(),
        };
        assert!(rbac.allows(&masters, &anything).is_some());
        assert!(rbac.allows(&anyone, &anything).is_none());
    }
}
