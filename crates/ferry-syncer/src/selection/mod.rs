//! Selection: which objects a syncer downsyncs and upsyncs (KubeStellar profile).
//!
//! A syncer merges every SyncerConfig it can see into one [`SyncSelection`]. Each config
//! is validated entry by entry ([`validate`]); an invalid entry is reported and skipped,
//! the rest of the config still applies.
//!
//! Semantics (from the KubeStellar reference; `*` is a wildcard in every name list):
//! - `namespaceScope`: namespaces × resources, *per config* (two configs do not mix
//!   their namespaces and resources). Each listed namespace's Namespace object is
//!   downsynced too.
//! - `namespacedObjects`: named objects per namespace.
//! - `clusterScope`: `objects` absent means all objects, `[]` means none.
//! - `upsync`: group × resources × namespaces (namespaced resources only) × names.
//! - An object matched by both downsync and upsync is upsynced (EdgePlacement rule).
//! - EdgeSyncConfig (the older form): `downSyncedResources`/`upSyncedResources` name
//!   objects by `{group, version, kind, namespace, name}` (`*` or empty: all); kinds are
//!   turned into resources with discovery when resolving ([`SyncSelection::resolve_downsync`]).
//! - Versions do not take part in matching: an object is the same object in every
//!   version; the configured version only decides how it is read and written.

mod resource;
mod validate;

use std::collections::{BTreeMap, BTreeSet};

use ferry_api::edge::{EdgeSyncConfig, EdgeSyncConfigResource, SyncerConfig};

pub use resource::{
    resolve, Direction, DiscoveredResource, Resolution, ResourceId, ResourcePattern, Scope, Unresolved,
    UnresolvedReason, WatchTarget, NOT_EXPANDED_BY_WILDCARD, WILDCARD,
};
pub use validate::{validate, validate_edge, ConfigError, ConfigProblem};

/// A set of names where `*` means all.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum NameSet {
    All,
    #[default]
    None,
    Some(BTreeSet<String>),
}

impl NameSet {
    fn from_names<'a>(names: impl IntoIterator<Item = &'a String>) -> Self {
        let mut set = NameSet::None;
        for name in names {
            set.insert(name);
        }
        set
    }

    fn insert(&mut self, name: &str) {
        match self {
            NameSet::All => {}
            _ if name == WILDCARD => *self = NameSet::All,
            NameSet::None => *self = NameSet::Some(BTreeSet::from([name.to_string()])),
            NameSet::Some(names) => {
                names.insert(name.to_string());
            }
        }
    }

    fn union(&mut self, other: &NameSet) {
        match other {
            NameSet::All => *self = NameSet::All,
            NameSet::None => {}
            NameSet::Some(names) => names.iter().for_each(|n| self.insert(n)),
        }
    }

    fn contains(&self, name: &str) -> bool {
        match self {
            NameSet::All => true,
            NameSet::None => false,
            NameSet::Some(names) => names.contains(name),
        }
    }

    fn explicit(&self) -> impl Iterator<Item = &String> {
        match self {
            NameSet::Some(names) => Some(names.iter()),
            _ => None,
        }
        .into_iter()
        .flatten()
    }
}

/// Group, version and resource (or `*`) as a config names them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Gvr {
    group: String,
    version: String,
    resource: String,
}

impl Gvr {
    fn new(group: &str, version: &str, resource: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    fn matches(&self, id: &ResourceId) -> bool {
        self.group == id.group && (self.resource == WILDCARD || self.resource == id.resource)
    }

    fn pattern(&self, scope: Scope) -> ResourcePattern {
        ResourcePattern {
            group: self.group.clone(),
            version: Some(self.version.clone()),
            resource: self.resource.clone(),
            scope,
        }
    }
}

/// One config's namespaces × resources.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct NamespaceScopeRule {
    namespaces: NameSet,
    resources: BTreeSet<Gvr>,
}

/// Named objects of one namespaced resource, merged over all configs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct NamespacedObjectsRule {
    gvr: Gvr,
    by_namespace: BTreeMap<String, NameSet>,
}

/// Objects of one cluster-scoped resource, merged over all configs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ClusterScopeRule {
    gvr: Gvr,
    names: NameSet,
}

/// One upsync entry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct UpsyncRule {
    group: String,
    resources: NameSet,
    namespaces: NameSet,
    names: NameSet,
}

/// Objects of one kind, as an EdgeSyncConfig names them.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct KindRule {
    group: String,
    /// Empty: the server's preferred version.
    version: String,
    kind: String,
    /// Empty or `*`: every namespace (and cluster-scoped objects).
    namespace: String,
    /// Empty or `*`: every object.
    name: String,
}

fn is_all(value: &str) -> bool {
    value.is_empty() || value == WILDCARD
}

impl KindRule {
    fn new(r: &EdgeSyncConfigResource) -> Self {
        KindRule {
            group: r.group.clone(),
            version: r.version.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
        }
    }

    fn matches(&self, target: &WatchTarget, namespace: Option<&str>, name: &str) -> bool {
        self.group == target.id.group
            && self.kind == target.kind
            && (is_all(&self.name) || self.name == name)
            && (is_all(&self.namespace) || namespace == Some(self.namespace.as_str()))
    }

    /// The resource pattern of this kind on a server with `discovered`; a kind the
    /// server does not serve gives a pattern named after the kind, which resolves to
    /// "not served".
    fn pattern(&self, discovered: &[DiscoveredResource]) -> ResourcePattern {
        let found = discovered.iter().find(|d| {
            d.group == self.group
                && d.kind == self.kind
                && !d.resource.contains('/')
                && if self.version.is_empty() {
                    d.preferred
                } else {
                    d.version == self.version
                }
        });
        match found {
            Some(d) => ResourcePattern {
                group: d.group.clone(),
                version: Some(d.version.clone()),
                resource: d.resource.clone(),
                scope: Scope::Any,
            },
            None => ResourcePattern {
                group: self.group.clone(),
                version: (!self.version.is_empty()).then(|| self.version.clone()),
                resource: self.kind.clone(),
                scope: Scope::Any,
            },
        }
    }
}

/// What one syncer downsyncs and upsyncs: the deduplicated merge of its SyncerConfigs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncSelection {
    namespace_scopes: Vec<NamespaceScopeRule>,
    namespaced_objects: Vec<NamespacedObjectsRule>,
    cluster_scope: Vec<ClusterScopeRule>,
    upsync: Vec<UpsyncRule>,
    /// Namespaces named by `namespaceScope`, whose Namespace objects are downsynced.
    namespaces: NameSet,
    /// EdgeSyncConfig `downSyncedResources`.
    down_kinds: Vec<KindRule>,
    /// EdgeSyncConfig `upSyncedResources`.
    up_kinds: Vec<KindRule>,
}

impl SyncSelection {
    /// Merges `configs` (in name order, so the result does not depend on list order).
    /// Invalid entries are skipped and returned as errors.
    pub fn from_configs(configs: &[SyncerConfig]) -> (Self, Vec<ConfigError>) {
        let mut configs: Vec<&SyncerConfig> = configs.iter().collect();
        configs.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut selection = SyncSelection::default();
        let mut all_errors = vec![];
        for config in configs {
            let errors = validate(config);
            selection.add(config, &errors);
            all_errors.extend(errors);
        }
        selection.namespace_scopes.sort();
        selection.namespace_scopes.dedup();
        selection.upsync.sort();
        selection.upsync.dedup();
        (selection, all_errors)
    }

    /// Adds `configs` (EdgeSyncConfigs) to the selection; invalid entries are skipped
    /// and returned as errors.
    pub fn add_edge_configs(&mut self, configs: &[EdgeSyncConfig]) -> Vec<ConfigError> {
        let mut all_errors = vec![];
        for config in configs {
            let errors = validate_edge(config);
            let invalid = |at: String| {
                errors
                    .iter()
                    .any(|e| e.field.starts_with(&format!("{at}.")) || e.field == at)
            };
            for (i, r) in config.spec.down_synced_resources.iter().enumerate() {
                if !invalid(format!("spec.downSyncedResources[{i}]")) {
                    self.down_kinds.push(KindRule::new(r));
                }
            }
            for (i, r) in config.spec.up_synced_resources.iter().enumerate() {
                if !invalid(format!("spec.upSyncedResources[{i}]")) {
                    self.up_kinds.push(KindRule::new(r));
                }
            }
            all_errors.extend(errors);
        }
        for rules in [&mut self.down_kinds, &mut self.up_kinds] {
            rules.sort();
            rules.dedup();
        }
        all_errors
    }

    /// Whether the source object `namespace/name` of `target` is wanted on the other
    /// side: [`SyncSelection::wants_downsync`] or [`SyncSelection::wants_upsync`] by
    /// resource, or an EdgeSyncConfig entry by kind. Upsync wins over downsync.
    pub fn wants(&self, target: &WatchTarget, namespace: Option<&str>, name: &str) -> bool {
        let up = self.wants_upsync(&target.id, namespace, name)
            || self.up_kinds.iter().any(|r| r.matches(target, namespace, name));
        match target.direction {
            Direction::Upsync => up,
            Direction::Downsync => {
                !up && (self.wants_downsync(&target.id, namespace, name)
                    || self.down_kinds.iter().any(|r| r.matches(target, namespace, name)))
            }
        }
    }

    fn add(&mut self, config: &SyncerConfig, errors: &[ConfigError]) {
        // An entry is skipped when it, or anything inside it, has an error.
        let invalid = |path: &str| {
            errors.iter().any(|e| {
                e.field == path
                    || e.field.starts_with(&format!("{path}."))
                    || e.field.starts_with(&format!("{path}["))
            })
        };
        let spec = &config.spec;

        let namespaces = NameSet::from_names(
            spec.namespace_scope
                .namespaces
                .iter()
                .enumerate()
                .filter(|(i, _)| !invalid(&format!("spec.namespaceScope.namespaces[{i}]")))
                .map(|(_, n)| n),
        );
        let resources: BTreeSet<Gvr> = spec
            .namespace_scope
            .resources
            .iter()
            .enumerate()
            .filter(|(i, _)| !invalid(&format!("spec.namespaceScope.resources[{i}]")))
            .map(|(_, r)| Gvr::new(&r.group, &r.api_version, &r.resource))
            .collect();
        self.namespaces.union(&namespaces);
        if namespaces != NameSet::None && !resources.is_empty() {
            self.namespace_scopes.push(NamespaceScopeRule {
                namespaces,
                resources,
            });
        }

        for (i, entry) in spec.namespaced_objects.iter().enumerate() {
            if invalid(&format!("spec.namespacedObjects[{i}]")) {
                continue;
            }
            let gvr = Gvr::new(&entry.group, &entry.api_version, &entry.resource);
            let index = match self
                .namespaced_objects
                .iter()
                .position(|r| r.gvr.group == gvr.group && r.gvr.resource == gvr.resource)
            {
                Some(index) => index,
                None => {
                    self.namespaced_objects.push(NamespacedObjectsRule {
                        gvr,
                        by_namespace: BTreeMap::new(),
                    });
                    self.namespaced_objects.len() - 1
                }
            };
            let rule = &mut self.namespaced_objects[index];
            for by_ns in &entry.objects_by_namespace {
                rule.by_namespace
                    .entry(by_ns.namespace.clone())
                    .or_default()
                    .union(&NameSet::from_names(&by_ns.names));
            }
        }

        for (i, entry) in spec.cluster_scope.iter().enumerate() {
            if invalid(&format!("spec.clusterScope[{i}]")) {
                continue;
            }
            let gvr = Gvr::new(&entry.group, &entry.api_version, &entry.resource);
            // Absent `objects` means all; `[]` means none.
            let names = match &entry.objects {
                None => NameSet::All,
                Some(objects) => NameSet::from_names(objects),
            };
            match self
                .cluster_scope
                .iter_mut()
                .find(|r| r.gvr.group == gvr.group && r.gvr.resource == gvr.resource)
            {
                Some(rule) => rule.names.union(&names),
                None => self.cluster_scope.push(ClusterScopeRule { gvr, names }),
            }
        }

        for (i, entry) in spec.upsync.iter().enumerate() {
            if invalid(&format!("spec.upsync[{i}]")) {
                continue;
            }
            self.upsync.push(UpsyncRule {
                group: entry.api_group.clone(),
                resources: NameSet::from_names(&entry.resources),
                namespaces: NameSet::from_names(&entry.namespaces),
                names: NameSet::from_names(&entry.names),
            });
        }
    }

    /// Whether nothing at all is selected.
    pub fn is_empty(&self) -> bool {
        self.namespace_scopes.is_empty()
            && self.namespaced_objects.is_empty()
            && self.cluster_scope.is_empty()
            && self.upsync.is_empty()
            && self.namespaces == NameSet::None
            && self.down_kinds.is_empty()
            && self.up_kinds.is_empty()
    }

    /// Whether the upstream object `namespace/name` of resource `id` belongs downstream.
    /// `namespace` is `None` for cluster-scoped objects.
    pub fn wants_downsync(&self, id: &ResourceId, namespace: Option<&str>, name: &str) -> bool {
        if self.wants_upsync(id, namespace, name) {
            return false;
        }
        match namespace {
            Some(ns) => {
                self.namespace_scopes.iter().any(|rule| {
                    rule.namespaces.contains(ns) && rule.resources.iter().any(|gvr| gvr.matches(id))
                }) || self.namespaced_objects.iter().any(|rule| {
                    rule.gvr.matches(id)
                        && [ns, WILDCARD].iter().any(|key| {
                            rule.by_namespace
                                .get(*key)
                                .is_some_and(|names| names.contains(name))
                        })
                })
            }
            None => {
                (id.is_namespaces() && self.namespaces.contains(name))
                    || self
                        .cluster_scope
                        .iter()
                        .any(|rule| rule.gvr.matches(id) && rule.names.contains(name))
            }
        }
    }

    /// Whether the downstream object `namespace/name` of resource `id` goes upstream.
    pub fn wants_upsync(&self, id: &ResourceId, namespace: Option<&str>, name: &str) -> bool {
        self.upsync.iter().any(|rule| {
            rule.group == id.group
                && rule.resources.contains(&id.resource)
                && namespace.is_none_or(|ns| rule.namespaces.contains(ns))
                && rule.names.contains(name)
        })
    }

    /// Resource types to watch for downsync (upstream, and downstream for the copies),
    /// before wildcard expansion.
    pub fn downsync_patterns(&self) -> Vec<ResourcePattern> {
        let mut patterns = vec![];
        for rule in &self.namespace_scopes {
            patterns.extend(rule.resources.iter().map(|gvr| gvr.pattern(Scope::Namespaced)));
        }
        patterns.extend(
            self.namespaced_objects
                .iter()
                .map(|r| r.gvr.pattern(Scope::Namespaced)),
        );
        patterns.extend(self.cluster_scope.iter().map(|r| r.gvr.pattern(Scope::Cluster)));
        if self.namespaces != NameSet::None {
            patterns.push(Gvr::new("", "v1", "namespaces").pattern(Scope::Cluster));
        }
        dedup_keep_order(patterns)
    }

    /// Resource types to watch downstream for upsync, before expansion. They carry no
    /// version: discovery's preferred version is used.
    pub fn upsync_patterns(&self) -> Vec<ResourcePattern> {
        let mut patterns = vec![];
        for rule in &self.upsync {
            let resources: Vec<String> = match &rule.resources {
                NameSet::All => vec![WILDCARD.to_string()],
                other => other.explicit().cloned().collect(),
            };
            patterns.extend(resources.into_iter().map(|resource| ResourcePattern {
                group: rule.group.clone(),
                version: None,
                resource,
                scope: Scope::Any,
            }));
        }
        dedup_keep_order(patterns)
    }

    /// Downsync watch targets, given the upstream server's discovery.
    pub fn resolve_downsync(&self, upstream: &[DiscoveredResource]) -> Resolution {
        let mut patterns = self.downsync_patterns();
        patterns.extend(self.down_kinds.iter().map(|r| r.pattern(upstream)));
        resolve(&dedup_keep_order(patterns), upstream, Direction::Downsync)
    }

    /// Upsync watch targets, given the downstream server's discovery.
    pub fn resolve_upsync(&self, downstream: &[DiscoveredResource]) -> Resolution {
        let mut patterns = self.upsync_patterns();
        patterns.extend(self.up_kinds.iter().map(|r| r.pattern(downstream)));
        resolve(&dedup_keep_order(patterns), downstream, Direction::Upsync)
    }

    /// Namespaces that must exist downstream before copies land in them (explicitly named
    /// ones; a `*` is served by downsyncing the Namespace objects themselves).
    pub fn downstream_namespaces(&self) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = self.namespaces.explicit().cloned().collect();
        for rule in &self.namespaced_objects {
            names.extend(rule.by_namespace.keys().filter(|ns| *ns != WILDCARD).cloned());
        }
        names.extend(
            self.down_kinds
                .iter()
                .filter(|r| !is_all(&r.namespace))
                .map(|r| r.namespace.clone()),
        );
        names
    }

    /// Namespaces named by upsync entries, which must exist upstream before upsynced
    /// objects land in them. (KubeStellar upsyncs these Namespace objects; Ferry only
    /// ensures they exist, so a namespace is never both downsynced and upsynced.)
    pub fn upstream_namespaces(&self) -> BTreeSet<String> {
        self.upsync
            .iter()
            .flat_map(|rule| rule.namespaces.explicit().cloned())
            .chain(
                self.up_kinds
                    .iter()
                    .filter(|r| !is_all(&r.namespace))
                    .map(|r| r.namespace.clone()),
            )
            .collect()
    }
}

/// Objects every cluster makes for itself, which a syncer never copies either way
/// (`ferry_api::cluster_local::is_cluster_local`, read from the object itself).
pub fn is_cluster_local(id: &ResourceId, name: &str, obj: &serde_json::Value) -> bool {
    let text = |pointer: &str| obj.pointer(pointer).and_then(serde_json::Value::as_str);
    ferry_api::cluster_local::is_cluster_local(
        &id.group,
        &id.resource,
        text("/metadata/namespace").unwrap_or_default(),
        name,
        text("/type"),
    )
}

fn dedup_keep_order(patterns: Vec<ResourcePattern>) -> Vec<ResourcePattern> {
    let mut seen = BTreeSet::new();
    patterns.into_iter().filter(|p| seen.insert(p.clone())).collect()
}

#[cfg(test)]
mod tests;
