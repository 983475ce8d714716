//! Resource types: how selection names them, how discovery reports them, and what the
//! engine ends up watching.

use std::fmt;

/// One resource type, as the engine watches it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId {
    /// API group; empty for the core group.
    pub group: String,
    /// API version (without group).
    pub version: String,
    /// Resource name: lowercase plural.
    pub resource: String,
    /// Whether objects of this resource live in namespaces.
    pub namespaced: bool,
}

impl ResourceId {
    /// A resource id from its parts.
    pub fn new(group: &str, version: &str, resource: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            namespaced,
        }
    }

    /// `group/version`, or just `version` for the core group (as in `apiVersion:`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether this is the core `namespaces` resource.
    pub fn is_namespaces(&self) -> bool {
        self.group.is_empty() && self.resource == "namespaces"
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            write!(f, "{}/{}", self.version, self.resource)
        } else {
            write!(f, "{}/{}/{}", self.group, self.version, self.resource)
        }
    }
}

/// One resource type as discovery reports it (`/api`, `/apis/<group>/<version>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredResource {
    /// API group; empty for the core group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource name; subresources contain a `/` (`deployments/status`).
    pub resource: String,
    /// The kind of its objects.
    pub kind: String,
    /// Whether its objects are namespaced.
    pub namespaced: bool,
    /// Supported verbs (`list`, `watch`, ...).
    pub verbs: Vec<String>,
    /// Whether `version` is the group's preferred version.
    pub preferred: bool,
}

impl DiscoveredResource {
    /// Whether the engine can watch it: not a subresource, and `list` + `watch` allowed.
    pub fn is_watchable(&self) -> bool {
        !self.resource.contains('/')
            && self.verbs.iter().any(|v| v == "list")
            && self.verbs.iter().any(|v| v == "watch")
    }

    fn id(&self) -> ResourceId {
        ResourceId::new(&self.group, &self.version, &self.resource, self.namespaced)
    }
}

/// Which scope a pattern accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// Namespaced resources only (`namespaceScope`, `namespacedObjects`).
    Namespaced,
    /// Cluster-scoped resources only (`clusterScope`).
    Cluster,
    /// Either (`upsync`).
    Any,
}

impl Scope {
    fn accepts(self, namespaced: bool) -> bool {
        match self {
            Scope::Namespaced => namespaced,
            Scope::Cluster => !namespaced,
            Scope::Any => true,
        }
    }
}

/// A resource type as a SyncerConfig names it: possibly `*`, possibly without a version.
/// [`resolve`] turns patterns into concrete [`WatchTarget`]s using discovery.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourcePattern {
    /// API group; empty for the core group.
    pub group: String,
    /// The version to use; `None` means the group's preferred version (upsync names no version).
    pub version: Option<String>,
    /// Resource name, or `*` for every resource of the group (and version).
    pub resource: String,
    /// Which scope the config entry is about.
    pub scope: Scope,
}

impl ResourcePattern {
    /// Whether the pattern is a `*` wildcard that needs discovery to expand.
    pub fn is_wildcard(&self) -> bool {
        self.resource == WILDCARD
    }

    fn matches(&self, found: &DiscoveredResource) -> bool {
        found.group == self.group
            && match &self.version {
                Some(version) => &found.version == version,
                None => found.preferred,
            }
            && (self.is_wildcard() || found.resource == self.resource)
    }
}

impl fmt::Display for ResourcePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        let version = self.version.as_deref().unwrap_or("(preferred)");
        write!(f, "{group}/{version}/{}", self.resource)
    }
}

/// The wildcard entry.
pub const WILDCARD: &str = "*";

/// Resources a `*` never expands to: events are per-cluster records, and copying them
/// would only fill the other side with noise. They can still be named explicitly.
pub const NOT_EXPANDED_BY_WILDCARD: &[(&str, &str)] = &[("", "events"), ("events.k8s.io", "events")];

/// Which way objects of a watched resource travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// Upstream → downstream (status comes back up).
    Downsync,
    /// Downstream → upstream.
    Upsync,
}

impl std::fmt::Display for Direction {
    /// `downsync` or `upsync`, as logs say it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::Downsync => "downsync",
            Direction::Upsync => "upsync",
        })
    }
}

/// A concrete resource type the engine watches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatchTarget {
    /// The resource, at the version to use on both sides.
    pub id: ResourceId,
    /// The kind of its objects (for `kind:` and ownership marks).
    pub kind: String,
    /// Which way its objects go.
    pub direction: Direction,
}

/// Why a pattern produced no watch target.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnresolvedReason {
    /// Discovery does not list the resource (or the version). The CRD may be missing or
    /// not yet established; the engine retries on the next discovery refresh.
    NotServed,
    /// The resource exists but has the other scope (e.g. `clusterroles` listed under
    /// `namespaceScope`).
    WrongScope {
        /// Whether the server says it is namespaced.
        namespaced: bool,
    },
    /// The resource exists but cannot be listed and watched.
    NotWatchable,
}

/// A pattern that could not be turned into a watch target, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Unresolved {
    /// The pattern as the config named it.
    pub pattern: ResourcePattern,
    /// Why it did not resolve.
    pub reason: UnresolvedReason,
}

impl fmt::Display for Unresolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.pattern;
        match &self.reason {
            UnresolvedReason::NotServed => write!(
                f,
                "resource {p} is not served by the server: install its CRD, or fix the group, version or resource name"
            ),
            UnresolvedReason::WrongScope { namespaced: true } => write!(
                f,
                "resource {p} is namespaced: list it under namespaceScope or namespacedObjects, not clusterScope"
            ),
            UnresolvedReason::WrongScope { namespaced: false } => write!(
                f,
                "resource {p} is cluster-scoped: list it under clusterScope, not namespaceScope or namespacedObjects"
            ),
            UnresolvedReason::NotWatchable => {
                write!(f, "resource {p} does not support list and watch, so it cannot be synced")
            }
        }
    }
}

/// The result of resolving patterns against discovery.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Resource types to watch, one per group/resource (the first pattern to name a
    /// group/resource decides its version), sorted.
    pub targets: Vec<WatchTarget>,
    /// Patterns that matched nothing, with reasons; the rest of the work goes on.
    pub unresolved: Vec<Unresolved>,
}

/// Expands `patterns` against one server's discovery.
///
/// Wildcards expand to every watchable resource of the group (and version) in the
/// pattern's scope, except [`NOT_EXPANDED_BY_WILDCARD`]. A wildcard matching nothing is
/// not an error. Named resources that are missing, of the wrong scope or not watchable
/// come back in [`Resolution::unresolved`].
pub fn resolve(
    patterns: &[ResourcePattern],
    discovered: &[DiscoveredResource],
    direction: Direction,
) -> Resolution {
    let mut resolution = Resolution::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut add = |found: &DiscoveredResource, targets: &mut Vec<WatchTarget>| {
        if seen.insert((found.group.clone(), found.resource.clone())) {
            targets.push(WatchTarget {
                id: found.id(),
                kind: found.kind.clone(),
                direction,
            });
        }
    };
    for pattern in patterns {
        let candidates: Vec<&DiscoveredResource> = discovered.iter().filter(|d| pattern.matches(d)).collect();
        if pattern.is_wildcard() {
            for found in candidates {
                let excluded = NOT_EXPANDED_BY_WILDCARD
                    .iter()
                    .any(|(g, r)| *g == found.group && *r == found.resource);
                if found.is_watchable() && pattern.scope.accepts(found.namespaced) && !excluded {
                    add(found, &mut resolution.targets);
                }
            }
            continue;
        }
        let reason = match candidates.first() {
            None => Some(UnresolvedReason::NotServed),
            Some(found) if !pattern.scope.accepts(found.namespaced) => Some(UnresolvedReason::WrongScope {
                namespaced: found.namespaced,
            }),
            Some(found) if !found.is_watchable() => Some(UnresolvedReason::NotWatchable),
            Some(found) => {
                add(found, &mut resolution.targets);
                None
            }
        };
        if let Some(reason) = reason {
            resolution.unresolved.push(Unresolved {
                pattern: pattern.clone(),
                reason,
            });
        }
    }
    resolution.targets.sort();
    resolution
}
