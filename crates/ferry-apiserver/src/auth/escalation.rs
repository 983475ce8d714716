//! Privilege escalation prevention, as kube-apiserver's RBAC storage does it:
//! a user may write a Role or ClusterRole only if they already hold every
//! permission it grants (or may `escalate` roles), and a RoleBinding or
//! ClusterRoleBinding only if they hold every permission of the role it
//! references (or may `bind` that role). Members of `system:masters`, and so
//! the hub's own writes ([`UserInfo::loopback`]), are never restricted.
//!
//! Coverage is kube's `Covers`: each rule asked for is broken into single
//! permissions ([`breakdown`]), and each must be covered by one of the
//! user's rules ([`rule_covers`]).

use serde_json::Value;

use super::authorize::{self, qualified, Attributes};
use super::rbac::{rules_of, PolicyRule, Request, RoleRef, RBAC_GROUP};
use super::{AuthContext, UserInfo};
use crate::status::ApiError;

/// How many missing permissions a 403 lists before "and N more".
const LISTED: usize = 8;

/// `rule` as single-permission rules: one verb on one resource of one API
/// group (and one name, if the rule names any), or one verb on one
/// non-resource URL (kube's `BreakdownRule`).
pub fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| vec![s.clone()];
    let mut atoms = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let atom = PolicyRule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    atoms.push(atom);
                } else {
                    atoms.extend(rule.resource_names.iter().map(|name| PolicyRule {
                        resource_names: one(name),
                        ..atom.clone()
                    }));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            atoms.push(PolicyRule {
                verbs: one(verb),
                non_resource_urls: one(url),
                ..PolicyRule::default()
            });
        }
    }
    atoms
}

fn has(set: &[String], item: &str) -> bool {
    set.iter().any(|s| s == item)
}

/// `*` covers anything; otherwise every item must be listed. A requested
/// `*` is therefore covered only by `*`.
fn covers_all(set: &[String], items: &[String]) -> bool {
    has(set, "*") || items.iter().all(|i| has(set, i))
}

/// `*`, the resource itself, or `*/<subresource>` for a subresource.
fn resource_covered(owner: &[String], resource: &str) -> bool {
    has(owner, "*")
        || has(owner, resource)
        || resource
            .split_once('/')
            .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
}

/// The URL itself, or a prefix ending in `*`.
fn url_covered(owner: &str, url: &str) -> bool {
    owner == url || owner.ends_with('*') && url.starts_with(owner.trim_end_matches('*'))
}

/// Whether `owner` covers everything `atom` (one of [`breakdown`]'s
/// rules) grants (kube's `ruleCovers`). A rule without resourceNames covers
/// every name; a rule with some covers only those names.
pub fn rule_covers(owner: &PolicyRule, atom: &PolicyRule) -> bool {
    let names = if atom.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || atom.resource_names.iter().all(|n| has(&owner.resource_names, n))
    };
    covers_all(&owner.verbs, &atom.verbs)
        && covers_all(&owner.api_groups, &atom.api_groups)
        && atom
            .resources
            .iter()
            .all(|r| resource_covered(&owner.resources, r))
        && atom
            .non_resource_urls
            .iter()
            .all(|u| owner.non_resource_urls.iter().any(|o| url_covered(o, u)))
        && names
}

/// The single permissions of `requested` that none of `held` covers
/// (empty: `held` covers `requested`).
pub fn uncovered(held: &[PolicyRule], requested: &[PolicyRule]) -> Vec<PolicyRule> {
    requested
        .iter()
        .flat_map(breakdown)
        .filter(|atom| !held.iter().any(|h| rule_covers(h, atom)))
        .collect()
}

/// `verbs [get list] on secrets; verbs [get] on non-resource URL "/metrics"`:
/// missing permissions with the verbs of each target together.
pub fn describe(missing: &[PolicyRule]) -> String {
    let mut entries: Vec<(String, Vec<&str>)> = Vec::new();
    for atom in missing {
        let target = match atom.non_resource_urls.first() {
            Some(url) => format!("non-resource URL {url:?}"),
            None => {
                let first = |l: &[String]| l.first().cloned().unwrap_or_default();
                let resource = qualified(&first(&atom.api_groups), &first(&atom.resources));
                match atom.resource_names.first() {
                    Some(name) => format!("{resource} {name:?}"),
                    None => resource,
                }
            }
        };
        let i = match entries.iter().position(|(t, _)| *t == target) {
            Some(i) => i,
            None => {
                entries.push((target, Vec::new()));
                entries.len() - 1
            }
        };
        for verb in &atom.verbs {
            if !entries[i].1.contains(&verb.as_str()) {
                entries[i].1.push(verb);
            }
        }
    }
    let mut text = entries
        .iter()
        .take(LISTED)
        .map(|(target, verbs)| format!("verbs [{}] on {target}", verbs.join(" ")))
        .collect::<Vec<_>>()
        .join("; ");
    if entries.len() > LISTED {
        text.push_str(&format!("; and {} more", entries.len() - LISTED));
    }
    text
}

/// `*` on every resource of every group, and on every non-resource URL:
/// what kube calls full authority.
fn full_authority() -> Vec<PolicyRule> {
    let all = || vec!["*".to_string()];
    vec![
        PolicyRule {
            verbs: all(),
            api_groups: all(),
            resources: all(),
            ..PolicyRule::default()
        },
        PolicyRule {
            verbs: all(),
            non_resource_urls: all(),
            ..PolicyRule::default()
        },
    ]
}

/// Whether an update changes nothing but what garbage collection needs
/// (ownerReferences, finalizers): kube lets those through unchecked, so
/// that a role can always be cleaned up.
fn only_gc_fields_change(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in [
                "ownerReferences",
                "finalizers",
                "managedFields",
                "resourceVersion",
            ] {
                m.remove(f);
            }
        }
        v
    };
    strip(old) == strip(new)
}

/// Refuse (403) a write of `new` — a Role, ClusterRole, RoleBinding or
/// ClusterRoleBinding, replacing `old` if any — that would let `user` grant
/// permissions they do not hold. `attrs` is the write as authorized (verb,
/// resource, namespace and name as in the URL); other resources pass.
pub fn check_rbac_write(
    hub: &dyn AuthContext,
    user: &UserInfo,
    attrs: &Attributes,
    old: Option<&Value>,
    new: &Value,
) -> Result<(), ApiError> {
    let Request::Resource {
        group,
        resource,
        namespace,
        name,
        ..
    } = &attrs.request
    else {
        return Ok(());
    };
    if group != RBAC_GROUP || user.is_superuser() || old.is_some_and(|old| only_gc_fields_change(old, new)) {
        return Ok(());
    }
    let refuse = |reason: String| {
        // A create names its object in the body, not the URL.
        let mut named = attrs.clone();
        if let Request::Resource { name, .. } = &mut named.request {
            if let Some(n) = new.pointer("/metadata/name").and_then(Value::as_str) {
                *name = n.to_string();
            }
        }
        authorize::forbidden(user, &named, &reason)
    };
    let Some(ws) = &attrs.workspace else {
        return Err(refuse("RBAC objects are written in one workspace".into()));
    };
    // kube's RoleEscalationAuthorized and BindingAuthorized: an RBAC
    // request in the object's namespace (empty: cluster-wide).
    let may = |verb: &str, role_resource: &str, role_name: &str| {
        let request = Request::Resource {
            verb: verb.into(),
            group: RBAC_GROUP.into(),
            resource: role_resource.into(),
            subresource: String::new(),
            namespace: namespace.clone(),
            name: role_name.into(),
        };
        let attrs = Attributes {
            request,
            workspace: attrs.workspace.clone(),
        };
        authorize::authorize(hub, user, &attrs).allowed()
    };
    let rbac = hub.security().rbac.get(hub.store(), &ws.name);
    let held = || {
        let (resource_rules, url_rules) = rbac.rules_for(user, namespace);
        [resource_rules, url_rules].concat()
    };
    match resource.as_str() {
        "roles" | "clusterroles" => {
            if may("escalate", resource, name) {
                return Ok(());
            }
            // An aggregationRule grants whatever roles match its selectors,
            // now or later, so setting or changing one takes full authority
            // (kube's rule), whatever rules the role lists.
            let aggregation = |v: &Value| v.get("aggregationRule").filter(|a| !a.is_null()).cloned();
            let new_rule = aggregation(new);
            if resource == "clusterroles" && new_rule.is_some() && new_rule != old.and_then(aggregation) {
                let missing = uncovered(&held(), &full_authority());
                if !missing.is_empty() {
                    return Err(refuse(format!(
                        "must have cluster-admin privileges to use the aggregationRule (all verbs on all resources \
                         and non-resource URLs in this workspace); ask an admin, or get the \"escalate\" verb on {resource}"
                    )));
                }
            }
            // Otherwise aggregated ClusterRoles are judged by the rules they list.
            let missing = uncovered(&held(), &rules_of(new));
            if missing.is_empty() {
                return Ok(());
            }
            Err(refuse(format!(
                "it grants permissions {} does not hold ({}); ask an admin, or get the \"escalate\" verb on {resource}",
                user.name,
                describe(&missing)
            )))
        }
        "rolebindings" | "clusterrolebindings" => {
            // Validation has refused a binding without a usable roleRef.
            let Some(role_ref) = RoleRef::of(new) else {
                return Ok(());
            };
            let role_resource = if role_ref.kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            if may("bind", role_resource, &role_ref.name) {
                return Ok(());
            }
            let role = format!("{} {:?}", role_ref.kind, role_ref.name);
            let fix = format!("get the \"bind\" verb on {role_resource} {:?}", role_ref.name);
            let Some(rules) = rbac.role_rules(&role_ref, namespace) else {
                return Err(refuse(format!(
                    "{role} does not exist, so what it grants cannot be checked; create the role first, ask an admin, or {fix}"
                )));
            };
            let missing = uncovered(&held(), rules);
            if missing.is_empty() {
                return Ok(());
            }
            Err(refuse(format!(
                "{role} grants permissions {} does not hold ({}); ask an admin, or {fix}",
                user.name,
                describe(&missing)
            )))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> PolicyRule {
        serde_json::from_value(v).unwrap()
    }

    fn rules(v: Value) -> Vec<PolicyRule> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn rules_break_down_into_single_permissions() {
        let r = rule(json!({"verbs": ["get", "list"], "apiGroups": ["", "apps"],
            "resources": ["pods"], "resourceNames": ["a", "b"]}));
        let atoms = breakdown(&r);
        assert_eq!(atoms.len(), 2 * 2 * 2);
        assert!(atoms.contains(&rule(
            json!({"verbs": ["list"], "apiGroups": ["apps"], "resources": ["pods"], "resourceNames": ["b"]})
        )));
        let urls = rule(json!({"verbs": ["get", "post"], "nonResourceURLs": ["/healthz", "/metrics"]}));
        assert_eq!(breakdown(&urls).len(), 4);
        assert!(breakdown(&urls).iter().all(|a| a.api_groups.is_empty()));
    }

    #[test]
    fn held_rules_cover_what_they_list() {
        let held = rules(json!([
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps", "pods/log"]},
            {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["*/status"]},
        ]));
        let ask = |v: Value| uncovered(&held, &rules(v));
        assert!(ask(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}])).is_empty());
        assert!(ask(json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["pods/log"]}])).is_empty());
        assert!(ask(
            json!([{"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/status"]}])
        )
        .is_empty());
        // Each permission may come from a different held rule...
        assert!(ask(json!([
            {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]},
            {"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments/status"]},
        ]))
        .is_empty());
        // ...and each is judged on its own.
        let mixed = ask(
            json!([{"verbs": ["get", "update"], "apiGroups": ["", "apps"], "resources": ["configmaps"]}]),
        );
        assert_eq!(
            describe(&mixed),
            "verbs [update] on configmaps; verbs [get update] on configmaps.apps"
        );
        let missing = ask(
            json!([{"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["configmaps", "secrets"]}]),
        );
        assert_eq!(
            describe(&missing),
            "verbs [delete] on configmaps; verbs [get delete] on secrets"
        );
        // `*/status` does not cover the main resource.
        assert_eq!(
            ask(json!([{"verbs": ["update"], "apiGroups": ["apps"], "resources": ["deployments"]}])).len(),
            1
        );
    }

    #[test]
    fn wildcards_cover_anything_but_are_covered_only_by_wildcards() {
        let star = rules(json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]));
        assert!(uncovered(
            &star,
            &rules(json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "resourceNames": ["x"]}]))
        )
        .is_empty());
        // But not non-resource URLs.
        assert_eq!(
            uncovered(
                &star,
                &rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]))
            )
            .len(),
            1
        );
        let explicit = rules(
            json!([{"verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            "apiGroups": [""], "resources": ["pods"]}]),
        );
        for wanted in [
            json!({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}),
            json!({"verbs": ["get"], "apiGroups": ["*"], "resources": ["pods"]}),
            json!({"verbs": ["get"], "apiGroups": [""], "resources": ["*"]}),
        ] {
            assert_eq!(uncovered(&explicit, &[rule(wanted.clone())]).len(), 1, "{wanted}");
        }
        let all_sub = rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]}]));
        assert!(uncovered(
            &all_sub,
            &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["*/status"]}]))
        )
        .is_empty());
    }

    #[test]
    fn resource_names_narrow_what_a_rule_covers() {
        let named = rules(
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a", "b"]}]),
        );
        let ask = |v: Value| uncovered(&named, &rules(v));
        assert!(ask(
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}])
        )
        .is_empty());
        let c = ask(
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a", "c"]}]),
        );
        assert_eq!(describe(&c), "verbs [get] on secrets \"c\"");
        // A named rule does not cover every name.
        assert_eq!(
            ask(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}])).len(),
            1
        );
        // An unnamed rule covers every name.
        let any = rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]));
        assert!(uncovered(
            &any,
            &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["z"]}]))
        )
        .is_empty());
    }

    #[test]
    fn non_resource_urls_are_covered_exactly_or_by_a_star_prefix() {
        let held = rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/apis/*"]}]));
        let ask = |url: &str| {
            uncovered(
                &held,
                &rules(json!([{"verbs": ["get"], "nonResourceURLs": [url]}])),
            )
        };
        assert!(ask("/healthz").is_empty());
        assert!(ask("/apis/apps/v1").is_empty());
        assert!(ask("/apis/*").is_empty());
        assert_eq!(
            describe(&ask("/metrics")),
            "verbs [get] on non-resource URL \"/metrics\""
        );
        assert_eq!(ask("/*").len(), 1);
        assert_eq!(ask("/healthz/*").len(), 1);
        // Resource rules never cover URLs, nor URL rules resources.
        assert_eq!(
            uncovered(
                &held,
                &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]))
            )
            .len(),
            1
        );
        let star = rules(json!([{"verbs": ["*"], "nonResourceURLs": ["*"]}]));
        assert!(uncovered(
            &star,
            &rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/anything"]}]))
        )
        .is_empty());
    }

    #[test]
    fn long_lists_of_missing_permissions_are_cut() {
        let wanted = rules(json!([{"verbs": ["get"], "apiGroups": [""],
            "resources": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"]}]));
        let text = describe(&uncovered(&[], &wanted));
        assert!(text.ends_with("verbs [get] on h; and 2 more"), "{text}");
    }

    #[test]
    fn updates_of_gc_fields_only_are_not_checked() {
        let old = json!({"metadata": {"name": "r", "resourceVersion": "3"}, "rules": []});
        let gc = json!({"metadata": {"name": "r", "finalizers": ["x"],
            "ownerReferences": [{"name": "o"}]}, "rules": []});
        assert!(only_gc_fields_change(&old, &gc));
        let wider = json!({"metadata": {"name": "r"}, "rules": [{"verbs": ["get"]}]});
        assert!(!only_gc_fields_change(&old, &wider));
    }
}
