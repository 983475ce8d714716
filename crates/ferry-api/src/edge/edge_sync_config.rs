//! `EdgeSyncConfig`: the older form of SyncerConfig, still in the seeds' YAML, with the
//! `conversions` that denature and renature objects.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::SyncerConfigStatus;

cluster_resource! {
    /// EdgeSyncConfig (KubeStellar's first syncer config, shortName `esc`): objects to
    /// downsync and upsync named by kind, and conversions between an object's denatured
    /// form in the mailbox workspace and its natural form in the edge cluster. A syncer
    /// merges every EdgeSyncConfig and SyncerConfig it can see.
    pub struct EdgeSyncConfig {
        group: "edge.kubestellar.io",
        version: "v2alpha1",
        kind: "EdgeSyncConfig",
        plural: "edgesyncconfigs",
        short_names: ["esc"],
        categories: [],
        // As SyncerConfig's: the syncer may report, not rewrite what it syncs.
        status_subresource: true,
        printer_columns: [
            ("Heartbeat", "date", ".status.lastSyncerHeartbeatTime"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: EdgeSyncConfigSpec,
        status: SyncerConfigStatus,
    }
}

/// What to sync and how to rename it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeSyncConfigSpec {
    /// Objects copied from the mailbox workspace to the edge cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub down_synced_resources: Vec<EdgeSyncConfigResource>,
    /// Objects copied from the edge cluster to the mailbox workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub up_synced_resources: Vec<EdgeSyncConfigResource>,
    /// Denatured (upstream) ↔ natural (downstream) forms of objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversions: Vec<EdgeSyncConversion>,
    /// As SyncerConfig's `returnReportedState` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_reported_state: Option<bool>,
    /// As SyncerConfig's `propagateDeletion` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagate_deletion: Option<bool>,
}

/// Objects of one kind: `name` and `namespace` `*` (or empty `name`) mean all; an empty
/// `namespace` means a cluster-scoped kind (or every namespace).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeSyncConfigResource {
    /// The kind (`Deployment`).
    #[serde(default)]
    pub kind: String,
    /// The API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// The version to read and write; empty: the server's preferred one.
    #[serde(default)]
    pub version: String,
    /// The object's name, or `*`.
    #[serde(default)]
    pub name: String,
    /// The object's namespace, `*`, or empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
}

/// One conversion: the object `upstream` in the mailbox workspace is `downstream` in
/// the edge cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeSyncConversion {
    /// The denatured form.
    #[serde(default)]
    pub upstream: EdgeSyncConversionObject,
    /// The natural form.
    #[serde(default)]
    pub downstream: EdgeSyncConversionObject,
}

/// An object named by group, kind and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EdgeSyncConversionObject {
    /// The API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// The kind.
    #[serde(default)]
    pub kind: String,
    /// The object's name.
    #[serde(default)]
    pub name: String,
}
