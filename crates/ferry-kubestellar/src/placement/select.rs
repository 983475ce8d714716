//! The "what" of a placement: which objects of its workload management
//! workspace (WMW) its downsync members select. Pure: objects in, answers out.
//!
//! Ferry's reading of KubeStellar's `DownsyncObjectTest`: an object matches
//! a member iff every criterion holds; in every list `*` matches anything and
//! an empty list does not constrain (`apiGroup` absent: any group). A
//! cluster-scoped object passes `namespaces` only when it is empty or holds
//! `*`, and `namespaceSelectors` only when it is empty or holds `{}`.

use std::collections::BTreeMap;

use ferry_api::edge::{DownsyncScope, EdgePlacementSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as MetaSelector;
use serde_json::Value;

use ferry_server::selector::LabelSelector;

/// Something in a placement's spec that cannot be used, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SpecProblem {
    /// e.g. `spec.downsync[1].resources[0]`.
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for SpecProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// One downsync member, compiled.
#[derive(Debug, Clone)]
pub struct ObjectTest {
    /// The field it came from (`spec.downsync[0]`, `spec.namespaceSelector`, ...).
    pub field: String,
    pub group: Option<String>,
    pub resources: Vec<String>,
    pub namespaces: Vec<String>,
    pub namespace_selectors: Vec<LabelSelector>,
    pub object_names: Vec<String>,
    pub label_selectors: Vec<LabelSelector>,
    pub scope: DownsyncScope,
    /// The StatusCollectors the member names for what it matches.
    pub status_collectors: Vec<String>,
}

fn any_or(list: &[String], value: &str) -> bool {
    list.is_empty() || list.iter().any(|v| v == "*" || v == value)
}

/// Parse a list of `metav1.LabelSelector`s; a bad one is reported under
/// `field[i]` and left out (so it selects nothing).
pub fn compile_selectors(
    field: &str,
    selectors: &[MetaSelector],
    problems: &mut Vec<SpecProblem>,
) -> Vec<LabelSelector> {
    let mut out = Vec::new();
    for (i, s) in selectors.iter().enumerate() {
        let json = serde_json::to_value(s).unwrap_or(Value::Null);
        match LabelSelector::from_label_selector_json(&json) {
            Ok(sel) => out.push(sel),
            Err(e) => problems.push(SpecProblem {
                field: format!("{field}[{i}]"),
                message: format!("invalid label selector: {e}"),
            }),
        }
    }
    out
}

impl ObjectTest {
    /// Whether objects of `group`/`resource` can match at all.
    pub fn wants_resource(&self, group: &str, resource: &str) -> bool {
        self.group.as_deref().is_none_or(|g| g == "*" || g == group) && any_or(&self.resources, resource)
    }

    /// Whether the object matches. `namespace_labels` are the labels of the
    /// object's Namespace (`None` when it is cluster-scoped or the Namespace
    /// does not exist).
    pub fn matches(
        &self,
        namespaced: bool,
        namespace: &str,
        name: &str,
        labels: &BTreeMap<String, String>,
        namespace_labels: Option<&BTreeMap<String, String>>,
    ) -> bool {
        let scope_ok = match self.scope {
            DownsyncScope::Any => true,
            DownsyncScope::Namespaced => namespaced,
            DownsyncScope::ClusterScoped => !namespaced,
        };
        let namespace_ok = if namespaced {
            any_or(&self.namespaces, namespace)
        } else {
            self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == "*")
        };
        let namespace_selected = self.namespace_selectors.is_empty()
            || if namespaced {
                namespace_labels.is_some_and(|l| self.namespace_selectors.iter().any(|s| s.matches(l)))
            } else {
                self.namespace_selectors.iter().any(LabelSelector::is_empty)
            };
        scope_ok
            && namespace_ok
            && namespace_selected
            && any_or(&self.object_names, name)
            && (self.label_selectors.is_empty() || self.label_selectors.iter().any(|s| s.matches(labels)))
    }
}

/// Every downsync member of `spec` (the older fields converted), and the
/// problems found compiling them. A member with a bad selector is dropped.
pub fn compile(spec: &EdgePlacementSpec, problems: &mut Vec<SpecProblem>) -> Vec<ObjectTest> {
    let mut tests = Vec::new();
    for (field, t, scope) in spec.effective_downsync() {
        let before = problems.len();
        let namespace_selectors = if field == "spec.namespaceSelector" {
            compile_selectors(&field, &t.namespace_selectors, problems)
        } else {
            compile_selectors(
                &format!("{field}.namespaceSelectors"),
                &t.namespace_selectors,
                problems,
            )
        };
        // The older single selector is reported under its own name.
        for p in problems.iter_mut().skip(before) {
            if p.field == "spec.namespaceSelector[0]" {
                p.field = "spec.namespaceSelector".into();
            }
        }
        let label_selectors =
            compile_selectors(&format!("{field}.labelSelectors"), &t.label_selectors, problems);
        if problems.len() > before {
            continue;
        }
        tests.push(ObjectTest {
            field,
            group: t.api_group.clone(),
            resources: t.resources.clone(),
            namespaces: t.namespaces.clone(),
            namespace_selectors,
            object_names: t.object_names.clone(),
            label_selectors,
            scope,
            status_collectors: t.status_collectors.clone(),
        });
    }
    tests
}

/// `(group, resource)` pairs served in the workspace.
pub type Served<'a> = &'a [(String, String)];

/// Problems with resources and groups the members name that the workspace
/// does not serve (a typo, or a CRD not created yet).
pub fn unknown_resources(tests: &[ObjectTest], served: Served<'_>, workspace: &str) -> Vec<SpecProblem> {
    let mut problems = Vec::new();
    for t in tests {
        let group = t.group.as_deref().filter(|g| *g != "*");
        let mut named = false;
        for (j, r) in t.resources.iter().enumerate() {
            if r == "*" {
                continue;
            }
            named = true;
            if !served
                .iter()
                .any(|(g, res)| res == r && group.is_none_or(|want| want == g))
            {
                let in_group = match group {
                    Some("") => " in the core group".to_string(),
                    Some(g) => format!(" in API group {g:?}"),
                    None => String::new(),
                };
                problems.push(SpecProblem {
                    field: format!("{}.resources[{j}]", t.field),
                    message: format!(
                        "no resource {r:?}{in_group} is served in workspace {workspace} \
                         (resources are lowercase plurals, e.g. deployments; create the CRD first if it is a custom resource)"
                    ),
                });
            }
        }
        if let (false, Some(g)) = (named, group) {
            if !served.iter().any(|(sg, _)| sg == g) {
                problems.push(SpecProblem {
                    field: format!("{}.apiGroup", t.field),
                    message: format!("API group {g:?} is not served in workspace {workspace}"),
                });
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> EdgePlacementSpec {
        serde_json::from_value(v).unwrap()
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn example1_members_select_what_the_walkthrough_says() {
        let mut problems = Vec::new();
        let tests = compile(
            &spec(json!({"downsync": [
                {"apiGroup": "", "resources": ["configmaps"], "namespaces": ["commonstuff"], "objectNames": ["httpd-htdocs"]},
                {"apiGroup": "apps", "resources": ["deployments"], "namespaceSelectors": [{"matchLabels": {"special": "yes"}}]},
            ]})),
            &mut problems,
        );
        assert!(problems.is_empty());
        let none = BTreeMap::new();
        assert!(tests[0].matches(true, "commonstuff", "httpd-htdocs", &none, None));
        assert!(!tests[0].matches(true, "commonstuff", "other", &none, None));
        assert!(!tests[0].wants_resource("apps", "configmaps"));
        let special = labels(&[("special", "yes")]);
        assert!(tests[1].matches(true, "specialstuff", "speciald", &none, Some(&special)));
        assert!(!tests[1].matches(true, "commonstuff", "commond", &none, Some(&none)));
        // Cluster-scoped objects need `*` namespaces (or none) and `{}` among namespace selectors.
        assert!(!tests[1].matches(false, "", "x", &none, None));
    }

    #[test]
    fn older_form_is_converted_with_its_scope() {
        let mut problems = Vec::new();
        let tests = compile(
            &spec(json!({
                "namespaceSelector": {"matchLabels": {"common": "si"}},
                "nonNamespacedObjects": [{"apiGroup": "apiextensions.k8s.io", "resources": ["customresourcedefinitions"], "resourceNames": ["policies.kyverno.io"]}],
            })),
            &mut problems,
        );
        assert!(problems.is_empty());
        assert_eq!(tests.len(), 2);
        let si = labels(&[("common", "si")]);
        let none = BTreeMap::new();
        assert!(tests[0].matches(true, "commonstuff", "anything", &none, Some(&si)));
        assert!(!tests[0].matches(false, "", "anything", &none, None));
        assert!(tests[1].matches(false, "", "policies.kyverno.io", &none, None));
        assert!(!tests[1].matches(true, "ns", "policies.kyverno.io", &none, Some(&none)));
    }

    #[test]
    fn bad_selectors_and_unknown_resources_name_the_field() {
        let mut problems = Vec::new();
        let tests = compile(
            &spec(json!({"downsync": [
                {"apiGroup": "", "resources": ["configmaps"], "labelSelectors": [{"matchExpressions": [{"key": "a", "operator": "Sometimes"}]}]},
                {"apiGroup": "apps", "resources": ["deploymnets"]},
                {"apiGroup": "nope.example", "resources": ["*"]},
            ]})),
            &mut problems,
        );
        assert_eq!(problems[0].field, "spec.downsync[0].labelSelectors[0]");
        assert_eq!(tests.len(), 2, "the bad member is dropped, the others stay");
        let served = vec![("apps".to_string(), "deployments".to_string())];
        let unknown = unknown_resources(&tests, &served, "root:wmw");
        assert_eq!(unknown[0].field, "spec.downsync[1].resources[0]");
        assert!(unknown[0].message.contains("deploymnets"));
        assert_eq!(unknown[1].field, "spec.downsync[2].apiGroup");
    }
}
