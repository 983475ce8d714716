//! Checks one SyncerConfig entry by entry, so a mistake is reported with the entry it is
//! in and how to fix it, and only that entry is skipped.

use ferry_api::edge::{EdgeSyncConfig, SyncerConfig};

use super::resource::WILDCARD;

/// One invalid entry of a SyncerConfig.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {config:?}: {field}: {problem}")]
pub struct ConfigError {
    /// Kind of the config (`SyncerConfig`, `EdgeSyncConfig`).
    pub kind: &'static str,
    /// Name of the SyncerConfig.
    pub config: String,
    /// Path of the offending entry, e.g. `spec.clusterScope[1].apiVersion`.
    pub field: String,
    /// What is wrong, and the fix.
    pub problem: ConfigProblem,
}

/// What is wrong with an entry. Each message ends with the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigProblem {
    /// The resource name is empty.
    #[error("resource is empty; set it to the lowercase plural resource name (e.g. `deployments`) or `*`")]
    EmptyResource,
    /// The resource name is not a lowercase plural name (looks like a Kind, or a subresource).
    #[error("resource {0:?} is not a resource name; use the lowercase plural name (e.g. `deployments`, not `Deployment`); subresources cannot be synced")]
    BadResource(String),
    /// `apiVersion` is empty.
    #[error("apiVersion is empty; set it to the version only (e.g. `v1`)")]
    EmptyApiVersion,
    /// `apiVersion` holds `group/version` or is not a version.
    #[error(
        "apiVersion {0:?} is not a version; put only the version here (e.g. `v1`) and the group in `group`"
    )]
    BadApiVersion(String),
    /// The group is not a DNS-style name.
    #[error(
        "group {0:?} is not an API group; use the group name only (e.g. `apps`, or \"\" for the core group)"
    )]
    BadGroup(String),
    /// A namespace entry is empty.
    #[error("namespace is empty; name a namespace or use `*`")]
    EmptyNamespace,
    /// A name entry is empty.
    #[error("name is empty; name an object or use `*`")]
    EmptyName,
    /// An upsync entry lists no resources, so it matches nothing.
    #[error("resources is empty, so this entry matches nothing; list resource names or `*`")]
    UpsyncWithoutResources,
    /// A kind is empty (EdgeSyncConfig).
    #[error("kind is empty; set it to the object's kind (e.g. `Deployment`)")]
    EmptyKind,
    /// A kind is not a kind (EdgeSyncConfig names kinds, not resources).
    #[error("kind {0:?} is not a kind; use the CamelCase kind (e.g. `ClusterRoleBinding`, not `clusterrolebindings`)")]
    BadKind(String),
    /// A conversion names no object.
    #[error("name is empty; a conversion renames one object: name it on both sides")]
    ConversionWithoutName,
    /// A CRD's natural name has no group part.
    #[error("CustomResourceDefinition name {0:?} is not `<plural>.<group>`; the renatured CRD's spec.group is taken from it")]
    BadCrdName(String),
    /// Two conversions map one object, or one denatured kind, two ways.
    #[error(
        "conflicts with {0}; an object (and a denatured kind) converts one way only: remove one of them"
    )]
    ConflictingConversion(String),
    /// An upsync entry lists no names, so it matches nothing.
    #[error("names is empty, so this entry matches nothing; list object names or `*`")]
    UpsyncWithoutNames,
}

fn is_dns_label_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'
}

pub(super) fn check_group(group: &str) -> Option<ConfigProblem> {
    let ok = group.is_empty()
        || group.split('.').all(|part| {
            !part.is_empty()
                && part.chars().all(is_dns_label_char)
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
    (!ok).then(|| ConfigProblem::BadGroup(group.to_string()))
}

fn check_version(version: &str) -> Option<ConfigProblem> {
    if version.is_empty() {
        return Some(ConfigProblem::EmptyApiVersion);
    }
    let ok = version.starts_with(|c: char| c.is_ascii_lowercase()) && version.chars().all(is_dns_label_char);
    (!ok).then(|| ConfigProblem::BadApiVersion(version.to_string()))
}

fn check_resource(resource: &str) -> Option<ConfigProblem> {
    if resource.is_empty() {
        return Some(ConfigProblem::EmptyResource);
    }
    let ok = resource == WILDCARD
        || resource
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    (!ok).then(|| ConfigProblem::BadResource(resource.to_string()))
}

/// Collects errors for one config, entry by entry.
struct Checker<'a> {
    kind: &'static str,
    config: &'a str,
    errors: Vec<ConfigError>,
}

impl Checker<'_> {
    fn report(&mut self, field: String, problem: Option<ConfigProblem>) {
        if let Some(problem) = problem {
            self.errors.push(ConfigError {
                kind: self.kind,
                config: self.config.to_string(),
                field,
                problem,
            });
        }
    }

    fn gvr(&mut self, at: &str, group: &str, version: &str, resource: &str) {
        self.report(format!("{at}.group"), check_group(group));
        self.report(format!("{at}.apiVersion"), check_version(version));
        self.report(format!("{at}.resource"), check_resource(resource));
    }

    fn non_empty(&mut self, field: String, value: &str, problem: ConfigProblem) {
        self.report(field, value.is_empty().then_some(problem));
    }
}

/// Every problem in `config`, in field order. Empty means valid.
pub fn validate(config: &SyncerConfig) -> Vec<ConfigError> {
    let name = config.metadata.name.as_deref().unwrap_or("");
    let mut check = Checker {
        kind: "SyncerConfig",
        config: name,
        errors: vec![],
    };
    let spec = &config.spec;

    for (i, ns) in spec.namespace_scope.namespaces.iter().enumerate() {
        check.non_empty(
            format!("spec.namespaceScope.namespaces[{i}]"),
            ns,
            ConfigProblem::EmptyNamespace,
        );
    }
    for (i, r) in spec.namespace_scope.resources.iter().enumerate() {
        check.gvr(
            &format!("spec.namespaceScope.resources[{i}]"),
            &r.group,
            &r.api_version,
            &r.resource,
        );
    }
    for (i, o) in spec.namespaced_objects.iter().enumerate() {
        let at = format!("spec.namespacedObjects[{i}]");
        check.gvr(&at, &o.group, &o.api_version, &o.resource);
        for (j, by_ns) in o.objects_by_namespace.iter().enumerate() {
            let at = format!("{at}.objectsByNamespace[{j}]");
            check.non_empty(
                format!("{at}.namespace"),
                &by_ns.namespace,
                ConfigProblem::EmptyNamespace,
            );
            for (k, n) in by_ns.names.iter().enumerate() {
                check.non_empty(format!("{at}.names[{k}]"), n, ConfigProblem::EmptyName);
            }
        }
    }
    for (i, c) in spec.cluster_scope.iter().enumerate() {
        let at = format!("spec.clusterScope[{i}]");
        check.gvr(&at, &c.group, &c.api_version, &c.resource);
        for (k, n) in c.objects.iter().flatten().enumerate() {
            check.non_empty(format!("{at}.objects[{k}]"), n, ConfigProblem::EmptyName);
        }
    }
    for (i, u) in spec.upsync.iter().enumerate() {
        let at = format!("spec.upsync[{i}]");
        check.report(format!("{at}.apiGroup"), check_group(&u.api_group));
        check.report(
            format!("{at}.resources"),
            u.resources
                .is_empty()
                .then_some(ConfigProblem::UpsyncWithoutResources),
        );
        for (k, r) in u.resources.iter().enumerate() {
            check.report(format!("{at}.resources[{k}]"), check_resource(r));
        }
        for (k, ns) in u.namespaces.iter().enumerate() {
            check.non_empty(format!("{at}.namespaces[{k}]"), ns, ConfigProblem::EmptyNamespace);
        }
        check.report(
            format!("{at}.names"),
            u.names.is_empty().then_some(ConfigProblem::UpsyncWithoutNames),
        );
        for (k, n) in u.names.iter().enumerate() {
            check.non_empty(format!("{at}.names[{k}]"), n, ConfigProblem::EmptyName);
        }
    }
    check.errors
}

fn check_kind(kind: &str) -> Option<ConfigProblem> {
    if kind.is_empty() {
        return Some(ConfigProblem::EmptyKind);
    }
    let ok =
        kind.starts_with(|c: char| c.is_ascii_uppercase()) && kind.chars().all(|c| c.is_ascii_alphanumeric());
    (!ok).then(|| ConfigProblem::BadKind(kind.to_string()))
}

/// Every problem in the EdgeSyncConfig `config`, in field order. Empty means valid.
///
/// Resources are named by kind; `version` may be empty (the server's preferred one),
/// `name` and `namespace` empty or `*` mean all. A conversion needs group-valid, kind
/// and name on both sides; a CustomResourceDefinition's natural name must be
/// `<plural>.<group>`; one denatured object (or one denatured kind) converts one way only.
pub fn validate_edge(config: &EdgeSyncConfig) -> Vec<ConfigError> {
    let name = config.metadata.name.as_deref().unwrap_or("");
    let mut check = Checker {
        kind: "EdgeSyncConfig",
        config: name,
        errors: vec![],
    };
    let spec = &config.spec;
    for (list, entries) in [
        ("downSyncedResources", &spec.down_synced_resources),
        ("upSyncedResources", &spec.up_synced_resources),
    ] {
        for (i, r) in entries.iter().enumerate() {
            let at = format!("spec.{list}[{i}]");
            check.report(format!("{at}.kind"), check_kind(&r.kind));
            check.report(format!("{at}.group"), check_group(&r.group));
            if !r.version.is_empty() {
                check.report(format!("{at}.version"), check_version(&r.version));
            }
        }
    }
    for (i, c) in spec.conversions.iter().enumerate() {
        let at = format!("spec.conversions[{i}]");
        for (side, o) in [("upstream", &c.upstream), ("downstream", &c.downstream)] {
            check.report(format!("{at}.{side}.group"), check_group(&o.group));
            check.report(format!("{at}.{side}.kind"), check_kind(&o.kind));
            check.non_empty(
                format!("{at}.{side}.name"),
                &o.name,
                ConfigProblem::ConversionWithoutName,
            );
        }
        let crd = |o: &ferry_api::edge::EdgeSyncConversionObject| {
            o.group == "apiextensions.k8s.io" && o.kind == "CustomResourceDefinition"
        };
        for (side, o) in [("upstream", &c.upstream), ("downstream", &c.downstream)] {
            let has_group = o
                .name
                .split_once('.')
                .is_some_and(|(plural, group)| !plural.is_empty() && !group.is_empty());
            if crd(o) && !o.name.is_empty() && !has_group {
                check.report(
                    format!("{at}.{side}.name"),
                    Some(ConfigProblem::BadCrdName(o.name.clone())),
                );
            }
        }
        for (j, earlier) in spec.conversions[..i].iter().enumerate() {
            let same_up_object = earlier.upstream == c.upstream && earlier.downstream != c.downstream;
            let same_down_object = earlier.downstream == c.downstream && earlier.upstream != c.upstream;
            let same_up_kind = earlier.upstream.group == c.upstream.group
                && earlier.upstream.kind == c.upstream.kind
                && (earlier.downstream.group != c.downstream.group
                    || earlier.downstream.kind != c.downstream.kind);
            if same_up_object || same_down_object || same_up_kind {
                check.report(
                    at.clone(),
                    Some(ConfigProblem::ConflictingConversion(format!(
                        "spec.conversions[{j}]"
                    ))),
                );
                break;
            }
        }
    }
    check.errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::edge::{
        ClusterScopeDownsyncResource, NamespaceScopeDownsyncResource, SyncerConfigSpec, UpsyncSet,
    };

    fn config(spec: SyncerConfigSpec) -> SyncerConfig {
        SyncerConfig::new("the-one", spec)
    }

    #[test]
    fn valid_config_has_no_errors() {
        let mut spec = SyncerConfigSpec::default();
        spec.namespace_scope.namespaces = vec!["kyverno".into()];
        spec.namespace_scope.resources = vec![NamespaceScopeDownsyncResource {
            group: "apps".into(),
            resource: "deployments".into(),
            api_version: "v1".into(),
        }];
        assert_eq!(validate(&config(spec)), vec![]);
    }

    #[test]
    fn empty_resource_name_is_reported_with_entry_and_fix() {
        let spec = SyncerConfigSpec {
            cluster_scope: vec![ClusterScopeDownsyncResource {
                group: "rbac.authorization.k8s.io".into(),
                resource: "".into(),
                api_version: "v1".into(),
                objects: None,
            }],
            ..Default::default()
        };
        let errors = validate(&config(spec));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].field, "spec.clusterScope[0].resource");
        let message = errors[0].to_string();
        assert!(message.contains("\"the-one\""), "{message}");
        assert!(message.contains("lowercase plural"), "{message}");
    }

    #[test]
    fn group_slash_version_in_api_version_is_reported() {
        let spec = SyncerConfigSpec {
            cluster_scope: vec![ClusterScopeDownsyncResource {
                group: "apps".into(),
                resource: "Deployment".into(),
                api_version: "apps/v1".into(),
                objects: None,
            }],
            ..Default::default()
        };
        let problems: Vec<ConfigProblem> = validate(&config(spec)).into_iter().map(|e| e.problem).collect();
        assert_eq!(
            problems,
            vec![
                ConfigProblem::BadApiVersion("apps/v1".into()),
                ConfigProblem::BadResource("Deployment".into())
            ]
        );
    }

    #[test]
    fn upsync_entry_matching_nothing_is_reported() {
        let spec = SyncerConfigSpec {
            upsync: vec![UpsyncSet {
                api_group: "my.domain".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let fields: Vec<String> = validate(&config(spec)).into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["spec.upsync[0].resources", "spec.upsync[0].names"]);
    }
}
