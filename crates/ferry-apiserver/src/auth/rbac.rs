//! Kubernetes RBAC, evaluated the way kube-apiserver's RBAC authorizer does:
//! ClusterRoleBindings grant their ClusterRole everywhere in the workspace;
//! RoleBindings grant a Role or ClusterRole in their namespace only; rules
//! match verbs, API groups, `resource/subresource` (with `*` and
//! `*/subresource`), resourceNames and nonResourceURLs (with a trailing `*`).
//!
//! Each workspace's RBAC objects are indexed once ([`WorkspaceRbac`]) and
//! cached ([`RbacCache`]); a write to a Role, ClusterRole or binding in the
//! workspace drops its entry (from the write pipeline's `after_write` hook),
//! and the next request rebuilds it. Evaluation itself does no I/O.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::UserInfo;
use crate::selector::LabelSelector;
use crate::status::Cause;
use crate::storage::{ClusterScope, Store};

pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
pub const ROLES: &str = "rbac.authorization.k8s.io/roles";
pub const CLUSTER_ROLES: &str = "rbac.authorization.k8s.io/clusterroles";
pub const ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/rolebindings";
pub const CLUSTER_ROLE_BINDINGS: &str = "rbac.authorization.k8s.io/clusterrolebindings";

/// Whether `storage_key` is one of the four RBAC resources.
pub fn is_rbac_resource(storage_key: &str) -> bool {
    matches!(
        storage_key,
        ROLES | CLUSTER_ROLES | ROLE_BINDINGS | CLUSTER_ROLE_BINDINGS
    )
}

/// One rule of a Role or ClusterRole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    #[serde(default)]
    pub verbs: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// What a request asks to do (kube's `authorizer.Attributes` without the user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Resource {
        verb: String,
        group: String,
        resource: String,
        subresource: String,
        /// Empty for cluster-scoped requests.
        namespace: String,
        name: String,
    },
    NonResource {
        verb: String,
        path: String,
    },
}

impl Request {
    pub fn verb(&self) -> &str {
        match self {
            Request::Resource { verb, .. } | Request::NonResource { verb, .. } => verb,
        }
    }

    pub fn namespace(&self) -> &str {
        match self {
            Request::Resource { namespace, .. } => namespace,
            Request::NonResource { .. } => "",
        }
    }
}

fn has_all(list: &[String]) -> bool {
    list.iter().any(|v| v == "*")
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == "*" || v == verb)
}

fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    rule.resources.iter().any(|r| {
        r == "*"
            || r == combined
            || (!subresource.is_empty()
                && r.len() == subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(subresource))
    })
}

fn url_matches(rule: &PolicyRule, path: &str) -> bool {
    rule.non_resource_urls
        .iter()
        .any(|u| u == "*" || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix)))
}

/// `resource/subresource`, or `resource` when there is no subresource: how RBAC
/// rules and forbidden messages name what a request touches.
pub fn combined_resource(resource: &str, subresource: &str) -> String {
    if subresource.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}/{subresource}")
    }
}

/// Whether one rule allows the request (kube's `RuleAllows`).
pub fn rule_allows(rule: &PolicyRule, req: &Request) -> bool {
    match req {
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            name,
            ..
        } => {
            let combined = combined_resource(resource, subresource);
            verb_matches(rule, verb)
                && (has_all(&rule.api_groups) || rule.api_groups.iter().any(|g| g == group))
                && resource_matches(rule, &combined, subresource)
                && (rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == name))
        }
        Request::NonResource { verb, path } => verb_matches(rule, verb) && url_matches(rule, path),
    }
}

/// A binding's subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    pub kind: String,
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub api_group: String,
}

/// Whether `subject` (of a binding in `binding_namespace`, empty for
/// ClusterRoleBindings) is `user` (kube's `appliesToUser`).
pub fn subject_matches(subject: &Subject, user: &UserInfo, binding_namespace: &str) -> bool {
    match subject.kind.as_str() {
        "User" => subject.name == user.name,
        "Group" => user.groups.contains(&subject.name),
        "ServiceAccount" => {
            let ns = if subject.namespace.is_empty() {
                binding_namespace
            } else {
                &subject.namespace
            };
            !ns.is_empty() && user.name == super::service_account_user(ns, &subject.name)
        }
        _ => false,
    }
}

/// kcp's verb for entering a workspace, on the non-resource URL `/`.
pub const WORKSPACE_ACCESS_VERB: &str = "access";

/// A binding with its role's rules resolved.
#[derive(Debug, Clone)]
pub struct Binding {
    /// `RoleBinding "ns/name"` or `ClusterRoleBinding "name"`, for reasons.
    pub describe: String,
    /// `Role "x"` or `ClusterRole "x"`.
    pub role: String,
    pub namespace: String,
    pub subjects: Vec<Subject>,
    pub rules: Arc<Vec<PolicyRule>>,
}

impl Binding {
    fn applies_to(&self, user: &UserInfo) -> Option<&Subject> {
        self.subjects
            .iter()
            .find(|s| subject_matches(s, user, &self.namespace))
    }
}

/// A workspace's RBAC objects, indexed for evaluation.
#[derive(Debug, Default)]
pub struct WorkspaceRbac {
    pub cluster_bindings: Vec<Binding>,
    pub namespace_bindings: HashMap<String, Vec<Binding>>,
    /// Rules of each Role, by `(namespace, name)`.
    pub roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    /// Rules of each ClusterRole, aggregation applied.
    pub cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
}

/// A binding's `roleRef` (the parts evaluation needs).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
}

impl RoleRef {
    /// The `roleRef` of a RoleBinding or ClusterRoleBinding, if it has one.
    pub fn of(binding: &Value) -> Option<RoleRef> {
        serde_json::from_value(binding.get("roleRef")?.clone()).ok()
    }
}

/// The rules of a Role or ClusterRole as written (none when malformed:
/// validation reports those).
pub fn rules_of(v: &Value) -> Vec<PolicyRule> {
    v.get("rules")
        .and_then(|r| serde_json::from_value(r.clone()).ok())
        .unwrap_or_default()
}

fn name_of(v: &Value) -> (String, String) {
    let s = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or("").to_string();
    (s("/metadata/namespace"), s("/metadata/name"))
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// ClusterRole rules with aggregation applied: a ClusterRole with an
/// `aggregationRule` also has the rules of every ClusterRole its selectors
/// match (what kube's clusterrole-aggregation controller writes).
pub fn effective_cluster_roles(cluster_roles: &[Value]) -> HashMap<String, Vec<PolicyRule>> {
    let own: Vec<(String, BTreeMap<String, String>, Vec<PolicyRule>)> = cluster_roles
        .iter()
        .map(|v| (name_of(v).1, labels_of(v), rules_of(v)))
        .collect();
    let mut out: HashMap<String, Vec<PolicyRule>> = HashMap::new();
    for (v, (name, _, rules)) in cluster_roles.iter().zip(&own) {
        let mut rules = rules.clone();
        let selectors: Vec<LabelSelector> = v
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| LabelSelector::from_label_selector_json(s).ok())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !selectors.is_empty() {
            for (other, labels, other_rules) in &own {
                if other != name && selectors.iter().any(|s| s.matches(labels)) {
                    for r in other_rules {
                        if !rules.contains(r) {
                            rules.push(r.clone());
                        }
                    }
                }
            }
        }
        out.insert(name.clone(), rules);
    }
    out
}

impl WorkspaceRbac {
    /// Index the RBAC objects of one workspace. Bindings whose role does
    /// not exist grant nothing (as in Kubernetes).
    pub fn build(
        roles: &[Value],
        cluster_roles: &[Value],
        role_bindings: &[Value],
        cluster_role_bindings: &[Value],
    ) -> Self {
        let cluster_role_rules: HashMap<String, Arc<Vec<PolicyRule>>> =
            effective_cluster_roles(cluster_roles)
                .into_iter()
                .map(|(k, v)| (k, Arc::new(v)))
                .collect();
        let role_rules: HashMap<(String, String), Arc<Vec<PolicyRule>>> = roles
            .iter()
            .map(|v| (name_of(v), Arc::new(rules_of(v))))
            .collect();
        let subjects_of = |v: &Value| -> Vec<Subject> {
            v.get("subjects")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| serde_json::from_value(s.clone()).ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut index = WorkspaceRbac::default();
        for v in cluster_role_bindings {
            let (_, name) = name_of(v);
            let Some(r) = RoleRef::of(v).filter(|r| r.kind == "ClusterRole") else {
                continue;
            };
            let Some(rules) = cluster_role_rules.get(&r.name) else {
                continue;
            };
            index.cluster_bindings.push(Binding {
                describe: format!("ClusterRoleBinding {name:?}"),
                role: format!("ClusterRole {:?}", r.name),
                namespace: String::new(),
                subjects: subjects_of(v),
                rules: rules.clone(),
            });
        }
        for v in role_bindings {
            let (ns, name) = name_of(v);
            let Some(r) = RoleRef::of(v) else { continue };
            let rules = match r.kind.as_str() {
                "ClusterRole" => cluster_role_rules.get(&r.name),
                "Role" => role_rules.get(&(ns.clone(), r.name.clone())),
                _ => None,
            };
            let Some(rules) = rules else { continue };
            index
                .namespace_bindings
                .entry(ns.clone())
                .or_default()
                .push(Binding {
                    describe: format!("RoleBinding \"{ns}/{name}\""),
                    role: format!("{} {:?}", r.kind, r.name),
                    namespace: ns,
                    subjects: subjects_of(v),
                    rules: rules.clone(),
                });
        }
        index.roles = role_rules;
        index.cluster_roles = cluster_role_rules;
        index
    }

    /// The rules a binding's `roleRef` grants: the Role named in the
    /// binding's `namespace`, or the ClusterRole. `None` when it does not exist.
    pub fn role_rules(&self, role_ref: &RoleRef, namespace: &str) -> Option<&[PolicyRule]> {
        let rules = match role_ref.kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&role_ref.name),
            "Role" => self.roles.get(&(namespace.to_string(), role_ref.name.clone())),
            _ => None,
        };
        rules.map(|r| r.as_slice())
    }

    /// The bindings that can apply to a request in `namespace`.
    fn bindings_for<'a>(&'a self, namespace: &str) -> impl Iterator<Item = &'a Binding> {
        let ns: &[Binding] = if namespace.is_empty() {
            &[]
        } else {
            self.namespace_bindings
                .get(namespace)
                .map(Vec::as_slice)
                .unwrap_or(&[])
        };
        self.cluster_bindings.iter().chain(ns.iter())
    }

    /// `Some(reason)` if RBAC allows `user` to make `req`.
    pub fn allows(&self, user: &UserInfo, req: &Request) -> Option<String> {
        for b in self.bindings_for(req.namespace()) {
            let Some(subject) = b.applies_to(user) else {
                continue;
            };
            if b.rules.iter().any(|r| rule_allows(r, req)) {
                return Some(format!(
                    "RBAC: allowed by {} of {} to {} {:?}",
                    b.describe, b.role, subject.kind, subject.name
                ));
            }
        }
        None
    }

    /// Whether `user` is a member of the workspace: named by a binding in it
    /// (as a user, a ServiceAccount, or a group other than the ones every
    /// caller is in), or allowed kcp's `access` verb on `/` there (which is
    /// how a workspace is opened to everyone: bind it to `system:authenticated`).
    pub fn is_member(&self, user: &UserInfo) -> bool {
        let everyone = |s: &Subject| {
            s.kind == "Group" && matches!(s.name.as_str(), super::AUTHENTICATED | super::UNAUTHENTICATED)
        };
        let named = self
            .cluster_bindings
            .iter()
            .chain(self.namespace_bindings.values().flatten())
            .any(|b| {
                b.subjects
                    .iter()
                    .any(|s| !everyone(s) && subject_matches(s, user, &b.namespace))
            });
        named
            || self
                .allows(
                    user,
                    &Request::NonResource {
                        verb: WORKSPACE_ACCESS_VERB.into(),
                        path: "/".into(),
                    },
                )
                .is_some()
    }

    /// Every rule that applies to `user` in `namespace` (empty: cluster scope),
    /// split into resource and non-resource rules (SelfSubjectRulesReview).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<PolicyRule>) {
        let mut resource = Vec::new();
        let mut non_resource = Vec::new();
        for b in self.bindings_for(namespace) {
            if b.applies_to(user).is_none() {
                continue;
            }
            for r in b.rules.iter() {
                let target = if r.non_resource_urls.is_empty() {
                    &mut resource
                } else {
                    &mut non_resource
                };
                if !target.contains(r) {
                    target.push(r.clone());
                }
            }
        }
        (resource, non_resource)
    }
}

/// Per-workspace [`WorkspaceRbac`], built on first use and dropped when an
/// RBAC object of the workspace is written. A workspace whose default
/// ClusterRoles and bindings are not stored yet is judged with them all the
/// same ([`super::defaults::add_unless_made`]).
#[derive(Default)]
pub struct RbacCache {
    by_cluster: RwLock<HashMap<String, Arc<WorkspaceRbac>>>,
    /// Bumped by every invalidation, so a build that raced one is not cached.
    epoch: AtomicU64,
}

impl RbacCache {
    /// The index for logical cluster `cluster`.
    pub fn get(&self, store: &Store, cluster: &str) -> Arc<WorkspaceRbac> {
        if let Some(hit) = self.by_cluster.read().get(cluster) {
            return hit.clone();
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        let list = |resource: &str| -> Vec<Value> {
            let (objects, _) = store.list(&ClusterScope::One(cluster.into()), resource, None, None);
            objects.into_iter().map(|(_, o)| o.value()).collect()
        };
        let mut cluster_roles = list(CLUSTER_ROLES);
        let mut cluster_role_bindings = list(CLUSTER_ROLE_BINDINGS);
        super::defaults::add_unless_made(&mut cluster_roles, &mut cluster_role_bindings);
        let built = Arc::new(WorkspaceRbac::build(
            &list(ROLES),
            &cluster_roles,
            &list(ROLE_BINDINGS),
            &cluster_role_bindings,
        ));
        let mut map = self.by_cluster.write();
        if self.epoch.load(Ordering::Acquire) == epoch {
            map.insert(cluster.to_string(), built.clone());
        }
        built
    }

    /// Forget what is cached for `cluster` (an RBAC object there changed).
    pub fn invalidate(&self, cluster: &str) {
        let mut map = self.by_cluster.write();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        map.remove(cluster);
    }
}

// ---------------------------------------------------------------------------
// Validation (what kube-apiserver's RBAC validation rejects with 422)

fn string_list(v: &Value, field: &str, causes: &mut Vec<Cause>) -> Vec<String> {
    match v {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s.as_str() {
                Some(s) => Some(s.to_string()),
                None => {
                    causes.push(Cause::type_invalid(format!("{field}[{i}]"), "must be a string"));
                    None
                }
            })
            .collect(),
        _ => {
            causes.push(Cause::type_invalid(field, "must be a list of strings"));
            Vec::new()
        }
    }
}

fn validate_rules(obj: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    let rules = match obj.get("rules") {
        None | Some(Value::Null) => return,
        Some(Value::Array(r)) => r,
        Some(_) => {
            causes.push(Cause::type_invalid("rules", "must be a list of rules"));
            return;
        }
    };
    for (i, rule) in rules.iter().enumerate() {
        let f = |name: &str| format!("rules[{i}].{name}");
        if !rule.is_object() {
            causes.push(Cause::type_invalid(format!("rules[{i}]"), "must be an object"));
            continue;
        }
        let field = |name: &str, causes: &mut Vec<Cause>| {
            string_list(rule.get(name).unwrap_or(&Value::Null), &f(name), causes)
        };
        let verbs = field("verbs", causes);
        let groups = field("apiGroups", causes);
        let resources = field("resources", causes);
        field("resourceNames", causes);
        let urls = field("nonResourceURLs", causes);
        if verbs.is_empty() {
            causes.push(Cause {
                reason: "FieldValueRequired".into(),
                field: f("verbs"),
                message: "Required value: verbs must contain at least one value".into(),
            });
        }
        if !urls.is_empty() {
            if namespaced {
                causes.push(Cause::invalid(
                    f("nonResourceURLs"),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !groups.is_empty() || !resources.is_empty() {
                causes.push(Cause::invalid(
                    f("nonResourceURLs"),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if groups.is_empty() {
            causes.push(Cause {
                reason: "FieldValueRequired".into(),
                field: f("apiGroups"),
                message: "Required value: resource rules must supply at least one api group".into(),
            });
        }
        if resources.is_empty() {
            causes.push(Cause {
                reason: "FieldValueRequired".into(),
                field: f("resources"),
                message: "Required value: resource rules must supply at least one resource".into(),
            });
        }
    }
}

fn validate_binding(obj: &Value, old: Option<&Value>, cluster_binding: bool, causes: &mut Vec<Cause>) {
    let role_ref = obj.get("roleRef").unwrap_or(&Value::Null);
    if !role_ref.is_object() {
        causes.push(Cause::required("roleRef"));
    } else {
        let s = |k: &str| role_ref.get(k).and_then(Value::as_str).unwrap_or("");
        if s("apiGroup") != RBAC_GROUP {
            causes.push(Cause::unsupported(
                "roleRef.apiGroup",
                format!(
                    "Unsupported value: {:?}: supported values: \"{RBAC_GROUP}\"",
                    s("apiGroup")
                ),
            ));
        }
        let kinds: &[&str] = if cluster_binding {
            &["ClusterRole"]
        } else {
            &["Role", "ClusterRole"]
        };
        if !kinds.contains(&s("kind")) {
            causes.push(Cause::unsupported(
                "roleRef.kind",
                format!(
                    "Unsupported value: {:?}: supported values: {}",
                    s("kind"),
                    kinds
                        .iter()
                        .map(|k| format!("{k:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        if s("name").is_empty() {
            causes.push(Cause::required("roleRef.name"));
        }
        if let Some(old_ref) = old.and_then(|o| o.get("roleRef")) {
            if old_ref != role_ref {
                causes.push(Cause::invalid("roleRef", "cannot change roleRef"));
            }
        }
    }
    let subjects = match obj.get("subjects") {
        None | Some(Value::Null) => return,
        Some(Value::Array(s)) => s,
        Some(_) => {
            causes.push(Cause::type_invalid("subjects", "must be a list of subjects"));
            return;
        }
    };
    for (i, subject) in subjects.iter().enumerate() {
        let f = |name: &str| format!("subjects[{i}].{name}");
        let s = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
        if s("name").is_empty() {
            causes.push(Cause::required(f("name")));
        }
        match s("kind") {
            "ServiceAccount" => {
                if !s("apiGroup").is_empty() {
                    causes.push(Cause::unsupported(
                        f("apiGroup"),
                        format!("Unsupported value: {:?}: supported values: \"\"", s("apiGroup")),
                    ));
                }
                if cluster_binding && s("namespace").is_empty() {
                    causes.push(Cause::required(f("namespace")));
                }
            }
            "User" | "Group" => {
                if s("apiGroup") != RBAC_GROUP {
                    causes.push(Cause::unsupported(
                        f("apiGroup"),
                        format!(
                            "Unsupported value: {:?}: supported values: \"{RBAC_GROUP}\"",
                            s("apiGroup")
                        ),
                    ));
                }
            }
            other => causes.push(Cause::unsupported(
                f("kind"),
                format!(
                    "Unsupported value: {other:?}: supported values: \"ServiceAccount\", \"User\", \"Group\""
                ),
            )),
        }
    }
}

/// Field errors in a Role, ClusterRole, RoleBinding or ClusterRoleBinding
/// (`resource` is the plural name); empty for other resources.
pub fn validate(resource: &str, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    match resource {
        "roles" => validate_rules(obj, true, &mut causes),
        "clusterroles" => validate_rules(obj, false, &mut causes),
        "rolebindings" => validate_binding(obj, old, false, &mut causes),
        "clusterrolebindings" => validate_binding(obj, old, true, &mut causes),
        _ => {}
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn res(verb: &str, group: &str, resource: &str, sub: &str, ns: &str, name: &str) -> Request {
        Request::Resource {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn rule(v: Value) -> PolicyRule {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn rules_match_like_kubernetes() {
        let r = rule(json!({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["deployments"]}));
        assert!(rule_allows(
            &r,
            &res("get", "apps", "deployments", "", "ns", "web")
        ));
        assert!(!rule_allows(
            &r,
            &res("list", "apps", "deployments", "", "ns", "")
        ));
        assert!(!rule_allows(&r, &res("get", "", "deployments", "", "ns", "web")));
        // A subresource needs its own rule...
        assert!(!rule_allows(
            &r,
            &res("get", "apps", "deployments", "status", "ns", "web")
        ));
        let s = rule(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/status"]}));
        assert!(rule_allows(
            &s,
            &res("update", "apps", "deployments", "status", "", "web")
        ));
        assert!(!rule_allows(
            &s,
            &res("update", "apps", "deployments", "", "", "web")
        ));
        assert!(!rule_allows(
            &s,
            &res("update", "apps", "deployments", "scale", "", "web")
        ));
        let exact =
            rule(json!({"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/status"]}));
        assert!(rule_allows(
            &exact,
            &res("update", "apps", "deployments", "status", "x", "w")
        ));
        // resourceNames restrict named requests and never match collections.
        let named = rule(
            json!({"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"]}),
        );
        assert!(rule_allows(
            &named,
            &res("get", "", "configmaps", "", "ns", "cfg")
        ));
        assert!(!rule_allows(
            &named,
            &res("get", "", "configmaps", "", "ns", "other")
        ));
        assert!(!rule_allows(&named, &res("list", "", "configmaps", "", "ns", "")));
        let urls = rule(json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}));
        let nr = |p: &str| Request::NonResource {
            verb: "get".into(),
            path: p.into(),
        };
        assert!(rule_allows(&urls, &nr("/healthz")));
        assert!(rule_allows(&urls, &nr("/apis/apps/v1")));
        assert!(!rule_allows(&urls, &nr("/apis")));
        assert!(!rule_allows(&urls, &nr("/version")));
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo::new(name, "", groups.iter().map(|g| g.to_string()).collect())
    }

    fn objects() -> WorkspaceRbac {
        let roles = vec![json!({"metadata": {"namespace": "dev", "name": "cm-reader"},
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]})];
        let cluster_roles = vec![
            json!({"metadata": {"name": "edit-apps", "labels": {"agg": "yes"}},
                "rules": [{"verbs": ["*"], "apiGroups": ["apps"], "resources": ["*"]}]}),
            json!({"metadata": {"name": "aggregate"},
                "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "yes"}}]}, "rules": []}),
            json!({"metadata": {"name": "node-reader"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["nodes"]}]}),
        ];
        let role_bindings = vec![
            json!({"metadata": {"namespace": "dev", "name": "alice-cm"},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "cm-reader"},
                "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": "alice"}]}),
            json!({"metadata": {"namespace": "dev", "name": "sa-apps"},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "aggregate"},
                "subjects": [{"kind": "ServiceAccount", "name": "builder"}]}),
            json!({"metadata": {"namespace": "dev", "name": "dangling"},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "missing"},
                "subjects": [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": "system:authenticated"}]}),
        ];
        let cluster_role_bindings = vec![json!({"metadata": {"name": "ops-nodes"},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "node-reader"},
            "subjects": [{"kind": "Group", "apiGroup": RBAC_GROUP, "name": "ops"}]})];
        WorkspaceRbac::build(&roles, &cluster_roles, &role_bindings, &cluster_role_bindings)
    }

    #[test]
    fn bindings_grant_in_their_scope_only() {
        let rbac = objects();
        let alice = user("alice", &[]);
        assert!(rbac
            .allows(&alice, &res("get", "", "configmaps", "", "dev", "x"))
            .is_some());
        assert!(rbac
            .allows(&alice, &res("get", "", "configmaps", "", "prod", "x"))
            .is_none());
        assert!(rbac
            .allows(&alice, &res("get", "", "configmaps", "", "", "x"))
            .is_none());
        let bob = user("bob", &["ops"]);
        let why = rbac.allows(&bob, &res("get", "", "nodes", "", "", "n1")).unwrap();
        assert!(why.contains("ClusterRoleBinding \"ops-nodes\""), "{why}");
        assert!(rbac.allows(&bob, &res("list", "", "nodes", "", "", "")).is_none());
        // A RoleBinding to a ClusterRole grants it in the binding's namespace,
        // with aggregation applied; the SA subject defaults to that namespace.
        let sa = user("system:serviceaccount:dev:builder", &[]);
        assert!(rbac
            .allows(&sa, &res("create", "apps", "deployments", "", "dev", ""))
            .is_some());
        assert!(rbac
            .allows(&sa, &res("create", "apps", "deployments", "", "other", ""))
            .is_none());
        let other_sa = user("system:serviceaccount:other:builder", &[]);
        assert!(rbac
            .allows(&other_sa, &res("create", "apps", "deployments", "", "dev", ""))
            .is_none());
        let (resource, non_resource) = rbac.rules_for(&sa, "dev");
        assert_eq!(resource.len(), 1);
        assert!(non_resource.is_empty());
    }

    #[test]
    fn role_refs_resolve_to_their_rules() {
        let rbac = objects();
        let role_ref = |kind: &str, name: &str| RoleRef {
            kind: kind.into(),
            name: name.into(),
        };
        assert_eq!(
            rbac.role_rules(&role_ref("Role", "cm-reader"), "dev")
                .unwrap()
                .len(),
            1
        );
        assert!(rbac.role_rules(&role_ref("Role", "cm-reader"), "prod").is_none());
        // A ClusterRole's rules are the aggregated ones, in any namespace.
        let aggregate = rbac
            .role_rules(&role_ref("ClusterRole", "aggregate"), "prod")
            .unwrap();
        assert_eq!(aggregate[0].api_groups, vec!["apps".to_string()]);
        assert!(rbac.role_rules(&role_ref("ClusterRole", "missing"), "").is_none());
        assert!(rbac.role_rules(&role_ref("Robot", "cm-reader"), "dev").is_none());
    }

    #[test]
    fn malformed_rbac_objects_name_the_field() {
        let bad_role = json!({"rules": [{"verbs": [], "resources": ["pods"]}]});
        let fields: Vec<String> = validate("roles", &bad_role, None)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, vec!["rules[0].verbs", "rules[0].apiGroups"]);
        let urls_in_role = json!({"rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]});
        assert_eq!(
            validate("roles", &urls_in_role, None)[0].field,
            "rules[0].nonResourceURLs"
        );
        assert!(validate("clusterroles", &urls_in_role, None).is_empty());
        let bad_binding = json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "x"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Robot", "name": "r"}]});
        let fields: Vec<String> = validate("clusterrolebindings", &bad_binding, None)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            vec!["roleRef.kind", "subjects[0].namespace", "subjects[1].kind"]
        );
        let good = json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "x"}});
        let changed = json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "y"}});
        assert_eq!(
            validate("rolebindings", &changed, Some(&good))[0].field,
            "roleRef"
        );
        assert!(validate("rolebindings", &good, Some(&good)).is_empty());
        let wrong_type = json!({"rules": [{"verbs": "get", "apiGroups": [""], "resources": ["pods"]}]});
        assert_eq!(validate("roles", &wrong_type, None)[0].field, "rules[0].verbs");
    }
}
