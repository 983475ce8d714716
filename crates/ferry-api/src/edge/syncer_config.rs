//! `SyncerConfig`: what one syncer down-syncs and up-syncs.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

cluster_resource! {
    /// SyncerConfig tells a syncer what to sync down and up. KubeStellar keeps one per
    /// mailbox workspace (named `the-one`); a syncer merges every SyncerConfig it can see.
    ///
    /// Its `status` is a subresource (KubeStellar's CRD has none): the syncer reports
    /// there, so its identity may write status without being able to change the spec
    /// that decides what it may upsync. It falls back to the object itself on servers
    /// without the subresource.
    pub struct SyncerConfig {
        group: "edge.kubestellar.io",
        version: "v2alpha1",
        kind: "SyncerConfig",
        plural: "syncerconfigs",
        short_names: ["escfg"],
        categories: [],
        status_subresource: true,
        printer_columns: [
            ("Heartbeat", "date", ".status.lastSyncerHeartbeatTime"),
            ("Syncer", "string", ".status.syncerVersion"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: SyncerConfigSpec,
        status: SyncerConfigStatus,
    }
}

/// Instructions to the syncer. The namespaced objects to downsync are those that match
/// `namespaceScope` or `namespacedObjects` (or both).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncerConfigSpec {
    /// Namespaces × resources: every object of each listed resource in each listed namespace.
    #[serde(default, skip_serializing_if = "NamespaceScopeDownsyncs::is_empty")]
    pub namespace_scope: NamespaceScopeDownsyncs,

    /// Individual namespaced objects, by resource, namespace and name. Matches if any
    /// member matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaced_objects: Vec<NamespaceScopeDownsyncObjects>,

    /// Cluster-scoped objects to downsync, by resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_scope: Vec<ClusterScopeDownsyncResource>,

    /// Objects to upsync (from the edge cluster to the mailbox workspace). Matches if any
    /// member matches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub upsync: Vec<UpsyncSet>,

    /// Whether the syncer writes the status a downsynced object has in the edge cluster
    /// back onto the object upstream (its reported state). Default true. Added by
    /// Ferry: a syncer turns it off when any SyncerConfig or EdgeSyncConfig it reads
    /// sets it to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_reported_state: Option<bool>,

    /// Whether deleting an object upstream (or its leaving the selection) deletes its
    /// copy in the edge cluster. Default true; false leaves the copies in place, still
    /// the syncer's, and setting it back to true deletes those whose objects are gone.
    /// Added by Ferry: a syncer turns it off when any SyncerConfig or EdgeSyncConfig it
    /// reads sets it to false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagate_deletion: Option<bool>,
}

/// The syncer's behaviour switches, merged over every config it reads: each is on
/// unless some config turns it off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncSwitches {
    /// See [`SyncerConfigSpec::return_reported_state`].
    pub return_reported_state: bool,
    /// See [`SyncerConfigSpec::propagate_deletion`].
    pub propagate_deletion: bool,
}

impl Default for SyncSwitches {
    fn default() -> Self {
        SyncSwitches {
            return_reported_state: true,
            propagate_deletion: true,
        }
    }
}

impl SyncSwitches {
    /// Turns off what one config's fields turn off (unset fields leave a switch as is).
    pub fn merge(&mut self, return_reported_state: Option<bool>, propagate_deletion: Option<bool>) {
        self.return_reported_state &= return_reported_state.unwrap_or(true);
        self.propagate_deletion &= propagate_deletion.unwrap_or(true);
    }
}

/// Namespace-scoped objects to downsync, as two orthogonal parts: an object is wanted iff
/// its namespace is in `namespaces` and its resource is in `resources`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceScopeDownsyncs {
    /// Names of the namespaces whose contents are downsynced. Empty means none. Each
    /// listed namespace is also created downstream.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,

    /// The namespace-scoped resources to downsync. Empty means none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<NamespaceScopeDownsyncResource>,
}

impl NamespaceScopeDownsyncs {
    /// True when neither namespaces nor resources are listed.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.resources.is_empty()
    }
}

/// One namespace-scoped resource (all its objects in the selected namespaces).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceScopeDownsyncResource {
    /// API group; empty for the core group. (Required by KubeStellar's schema; Ferry
    /// accepts it missing and reads that as the core group.)
    #[serde(default)]
    pub group: String,
    /// Resource name: lowercase plural (`deployments`), or `*` for every resource of the
    /// group/version.
    #[serde(default)]
    pub resource: String,
    /// Just the version, not the group too (`v1`). Used both upstream and downstream.
    #[serde(default)]
    pub api_version: String,
}

/// Some objects of one namespaced resource, named per namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceScopeDownsyncObjects {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Resource name (lowercase plural), or `*`.
    #[serde(default)]
    pub resource: String,
    /// Just the version (`v1`).
    #[serde(default)]
    pub api_version: String,
    /// Matches by namespace and name; no object matches an empty list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects_by_namespace: Vec<NamespaceAndNames>,
}

/// Objects of an implied namespaced resource, all in one namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceAndNames {
    /// The namespace.
    #[serde(default)]
    pub namespace: String,
    /// Names of the matching objects; `*` matches all; empty means none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// Cluster-scoped objects of one resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterScopeDownsyncResource {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Resource name (lowercase plural), or `*`.
    #[serde(default)]
    pub resource: String,
    /// Just the version (`v1`).
    #[serde(default)]
    pub api_version: String,
    /// Names of the objects to downsync. Absent (or null) means all objects, an empty
    /// list means none, and an entry `*` also means all.
    //
    // In Rust: `None` = all, `Some(vec![])` = none. The distinction survives a round trip:
    // `None` is not serialized and `Some([])` is written as `[]`. The CRD marks the field
    // nullable, so an explicit `null` is kept by the API server and reads as `None` too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<String>>,
}

/// A set of objects (namespaced or cluster-scoped) of one API group, to upsync.
///
/// An object is in the set iff its group is `apiGroup`, its resource is in `resources`,
/// its namespace is in `namespaces` (namespaced resources only) and its name is in `names`.
/// `*` matches anything in each list; an empty list matches nothing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpsyncSet {
    /// API group; empty for the core group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// Lowercase plural resource names, or `*`.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Acceptable namespaces, or `*`. Ignored for cluster-scoped resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Acceptable names, or `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// What the syncer reports about itself.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncerConfigStatus {
    /// When the syncer last reported. (KubeStellar never writes it; Ferry does.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_syncer_heartbeat_time: Option<Time>,

    /// The version of the syncer sending the heartbeats, as `ferry --version` prints
    /// it (`0.1.0 (commit abc123def456)`). Added by Ferry.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub syncer_version: String,

    /// Standard conditions, added by Ferry (ConfigValid, Syncing, HeartbeatHealthy).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::schema::metav1_conditions")]
    pub conditions: Vec<Condition>,

    /// Objects a cluster's API server refused as the syncer sent them, with the
    /// server's message (at most 50 are listed). Added by Ferry; the hub's
    /// placement translator shows them to whoever placed each object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedObject>,

    /// How many objects are refused in all (the list stops at 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused_count: Option<i64>,

    /// Objects whose copy someone changed in the cluster and the syncer
    /// restored, the most recently restored first (at most 50 are listed).
    /// Added by Ferry; the hub's placement translator shows each on the
    /// object's PlacementSummary and CombinedStatus.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drifted: Vec<DriftedObject>,
}

/// An object whose copy drifted, named as it is in this workspace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftedObject {
    /// API group and resource, e.g. `apps/deployments` or `core/configmaps`.
    pub resource: String,
    /// Namespace; empty for a cluster-scoped object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The last drift the syncer restored, and how many in all.
    pub drift: crate::drift::Drift,
}

/// An object an API server refused, named as it is in this workspace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefusedObject {
    /// API group and resource, e.g. `core/services` or `batch/jobs`.
    pub resource: String,
    /// Namespace; empty for a cluster-scoped object.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Which API server refused it: `downstream` (the cluster) or `upstream`.
    pub side: String,
    /// The API server's message, on one line.
    pub message: String,
}
