//! What a logical cluster serves: the built-in resources every logical
//! cluster has — Kubernetes' own and those a layer above adds
//! ([`BuiltinResources`]) — plus the custom resources its
//! CustomResourceDefinitions add.

mod builtin;
mod crd;
pub mod field_labels;
pub mod key_order;

pub use builtin::{kubernetes_resources, BuiltinKind};
pub use crd::{resources_from_crd, CrdError};

use std::sync::Arc;

use serde_json::Value;

use crate::table::PrinterColumn;

/// Verbs every fully served resource supports, in discovery order.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// One resource (a plural name in one group/version) as the hub serves it.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// API group; empty for the core group.
    pub group: String,
    /// The version this entry is served at.
    pub version: String,
    /// Plural resource name, e.g. `deployments`.
    pub resource: String,
    /// Singular name, e.g. `deployment`.
    pub singular: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// `ListKind`, e.g. `DeploymentList`.
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub verbs: Vec<String>,
    /// `status` subresource: writes to the main resource ignore `.status`.
    pub status_subresource: bool,
    /// `scale` subresource: `(specReplicasPath, statusReplicasPath, labelSelectorPath)`.
    pub scale_subresource: Option<ScalePaths>,
    /// Other subresources served as plain object views (e.g. pods/ephemeralcontainers).
    pub extra_subresources: Vec<String>,
    /// Columns for `kubectl get` (Table output), after `Name`. Empty means
    /// `Age` only for a custom resource, and Kubernetes' columns
    /// ([`crate::table::builtin_columns`]) for a built-in one.
    pub printer_columns: Vec<PrinterColumn>,
    /// For custom resources: the version's `openAPIV3Schema` (validation and pruning).
    pub schema: Option<Arc<Value>>,
    /// For custom resources: the version's `selectableFields`, as field
    /// labels (`spec.color`); see [`field_labels`].
    pub selectable_fields: Vec<String>,
    /// Whether this version is the storage version (CRDs) — informational.
    pub storage_version: bool,
    /// Set for resources defined by a CRD in the workspace, and for those an
    /// APIBinding serves there (they behave as a CRD's).
    pub from_crd: bool,
    /// For resources an APIBinding serves: that binding's name.
    pub binding: Option<String>,
    /// Set while that CRD is being deleted: its custom resources are still
    /// served, but new ones are refused.
    pub terminating: bool,
    /// Set by a layer above on a built-in resource whose plural a logical
    /// cluster's own groups (its CRDs, an APIBinding) may take over:
    /// discovery lists a group that serves the same plural and is all the
    /// cluster's own ahead of this one's group, so kubectl resolves the
    /// plural to it (KubeStellar's `locations` over kcp TMC's).
    pub yields_plural: bool,
}

/// JSON paths of the scale subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    pub label_selector: Option<String>,
}

impl ResourceInfo {
    /// `group/version`, or just `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key for this resource: group and plural, independent of version,
    /// so every served version of a CRD reads and writes the same objects.
    pub fn storage_key(&self) -> String {
        storage_key(&self.group, &self.resource)
    }
}

/// The resources of `resources` served at `group/version`, or `None` if that
/// group version is not served at all.
pub fn served_at<'a>(
    resources: &'a [ResourceInfo],
    group: &str,
    version: &str,
) -> Option<Vec<&'a ResourceInfo>> {
    let served: Vec<&ResourceInfo> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    (!served.is_empty()).then_some(served)
}

/// `group/resource` storage key (`/resource` for core).
pub fn storage_key(group: &str, resource: &str) -> String {
    format!("{group}/{resource}")
}

/// Resources a layer above serves built in, in every logical cluster, after
/// Kubernetes' own (kcp's Workspaces, APIExports, ...): among the hub's
/// extensions ([`crate::hub::Extensions`]) when it is built. Discovery,
/// OpenAPI, Table, `kubectl explain` and validation by
/// [`ResourceInfo::schema`] serve them as they serve Kubernetes' own; a
/// CRD naming one of them is stored but does not serve.
#[derive(Clone, Debug, Default)]
pub struct BuiltinResources(pub Vec<ResourceInfo>);

/// The resources each logical cluster serves: the built-ins, plus those of the
/// CRDs stored in that cluster. Updated whenever a CRD is written or deleted.
pub struct Registry {
    builtins: Vec<ResourceInfo>,
    crds: parking_lot::RwLock<std::collections::HashMap<String, Vec<ResourceInfo>>>,
    generations: Generations,
}

/// Kubernetes' own built-ins only.
impl Default for Registry {
    fn default() -> Self {
        Registry::with_builtins(&[])
    }
}

/// Which version of what it serves each cluster is at, for caches of
/// documents derived from it (OpenAPI). Every change takes the next value
/// of one hub-wide counter, so a generation names one cluster's state:
/// clusters that never had CRDs share generation 0 (the built-ins alone),
/// and the counter itself is the generation of the `/clusters/*` wildcard.
#[derive(Default)]
struct Generations {
    last: std::sync::atomic::AtomicU64,
    per_cluster: parking_lot::RwLock<std::collections::HashMap<String, u64>>,
}

impl Registry {
    /// A registry serving Kubernetes' own built-ins and then `added` (what
    /// a layer above serves built in, [`BuiltinResources`]).
    pub fn with_builtins(added: &[ResourceInfo]) -> Registry {
        let mut builtins = kubernetes_resources();
        builtins.extend(added.iter().cloned());
        Registry {
            builtins,
            crds: Default::default(),
            generations: Default::default(),
        }
    }

    /// Everything served in `cluster` (`None`: the `/clusters/*` wildcard, which
    /// serves the built-ins and every CRD-defined resource of any cluster).
    pub fn resources(&self, cluster: Option<&str>) -> Vec<ResourceInfo> {
        let crds = self.crds.read();
        let mut all = self.builtins.clone();
        match cluster {
            Some(c) => all.extend(crds.get(c).into_iter().flatten().cloned()),
            None => {
                for r in crds.values().flatten() {
                    if !all
                        .iter()
                        .any(|a| a.group == r.group && a.version == r.version && a.resource == r.resource)
                    {
                        all.push(r.clone());
                    }
                }
            }
        }
        all
    }

    /// The resource `group/version/resource` as served in `cluster`.
    pub fn lookup(
        &self,
        cluster: Option<&str>,
        group: &str,
        version: &str,
        resource: &str,
    ) -> Option<ResourceInfo> {
        if let Some(r) = self
            .builtins
            .iter()
            .find(|r| r.group == group && r.version == version && r.resource == resource)
        {
            return Some(r.clone());
        }
        let crds = self.crds.read();
        let found = match cluster {
            Some(c) => crds.get(c).and_then(|rs| {
                rs.iter()
                    .find(|r| r.group == group && r.version == version && r.resource == resource)
                    .cloned()
            }),
            None => crds
                .values()
                .flatten()
                .find(|r| r.group == group && r.version == version && r.resource == resource)
                .cloned(),
        };
        found
    }

    /// The resource whose kind is `kind` in `group`, as served in `cluster`:
    /// at `version` when that version is served, else at another served
    /// version of the group (every version reads the same stored objects).
    pub fn lookup_kind(&self, cluster: &str, group: &str, version: &str, kind: &str) -> Option<ResourceInfo> {
        let crds = self.crds.read();
        let candidates = || {
            self.builtins
                .iter()
                .chain(crds.get(cluster).into_iter().flatten())
                .filter(|r| r.group == group && r.kind == kind)
        };
        candidates()
            .find(|r| r.version == version)
            .or_else(|| candidates().find(|r| r.storage_version))
            .or_else(|| candidates().next())
            .cloned()
    }

    /// Every served version of the built-in `group`/`resource` (nothing when
    /// it is not built in). Cheaper than filtering [`Registry::resources`],
    /// which copies everything served: views ask this on every request.
    pub fn builtin_versions(&self, group: &str, resource: &str) -> Vec<ResourceInfo> {
        self.builtins
            .iter()
            .filter(|r| r.group == group && r.resource == resource)
            .cloned()
            .collect()
    }

    /// Whether `group` is built in (CRDs may not redefine built-in groups' resources).
    pub fn is_builtin(&self, group: &str, resource: &str) -> bool {
        self.builtins
            .iter()
            .any(|r| r.group == group && r.resource == resource)
    }

    /// Whether the hub serves any built-in resource in `group`.
    pub fn is_builtin_group(&self, group: &str) -> bool {
        self.builtins.iter().any(|r| r.group == group)
    }

    /// Replace what the CRDs of `cluster` serve.
    pub fn set_crd_resources(&self, cluster: &str, resources: Vec<ResourceInfo>) {
        let mut crds = self.crds.write();
        if resources.is_empty() {
            crds.remove(cluster);
        } else {
            crds.insert(cluster.to_string(), resources);
        }
        // Under the `crds` lock, so a reader that sees the new generation
        // also sees the new resources.
        let generation = self
            .generations
            .last
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        self.generations
            .per_cluster
            .write()
            .insert(cluster.to_string(), generation);
    }

    /// What `cluster` serves, with the generation it is at (see
    /// [`Registry::generation`]), read together.
    pub fn resources_at_generation(&self, cluster: Option<&str>) -> (Vec<ResourceInfo>, u64) {
        // Generation first: resources newer than their generation are
        // harmless (a cache misses once more), older ones would be stale.
        let generation = self.generation(cluster);
        (self.resources(cluster), generation)
    }

    /// A number that changes whenever what `cluster` serves changes (`None`:
    /// the `/clusters/*` wildcard). Two clusters at the same generation serve
    /// the same resources, so documents derived from them can be shared.
    pub fn generation(&self, cluster: Option<&str>) -> u64 {
        match cluster {
            Some(c) => self.generations.per_cluster.read().get(c).copied().unwrap_or(0),
            None => self.generations.last.load(std::sync::atomic::Ordering::SeqCst),
        }
    }
}
