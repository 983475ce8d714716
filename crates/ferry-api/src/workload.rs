//! `workload.kcp.io/v1alpha1`: the kcp TMC `SyncTarget`. KubeStellar's
//! `edge.kubestellar.io` SyncTarget ([`crate::edge::SyncTarget`]) reuses the same spec
//! and status types.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha224};

/// The API group.
pub const GROUP: &str = "workload.kcp.io";
/// The API version.
pub const VERSION: &str = "v1alpha1";

/// Resources every kcp TMC syncer syncs without an export listing them; kcp
/// does not list them in `syncedResources`. ServiceAccounts are among them as
/// kcp's `workload sync` always adds them to `--resources`. The hub serves them
/// to each syncer and the syncer syncs them, from this one list.
pub const ALWAYS_SYNCED: &[(&str, &str)] = &[
    ("", "namespaces"),
    ("", "configmaps"),
    ("", "secrets"),
    ("", "serviceaccounts"),
];

/// A SyncTarget's key, the `<key>` in `state.workload.kcp.io/<key>` and the other
/// per-target labels, annotations and finalizers (see [`crate::well_known`]):
/// base62 of sha224(`<logical cluster>:<name>`), where the logical cluster is the
/// workspace's `kcp.io/cluster` name. Same input, same key as kcp.
pub fn sync_target_key(logical_cluster: &str, name: &str) -> String {
    let hash = Sha224::digest(format!("{logical_cluster}:{name}").as_bytes());
    crate::naming::radix_text(&hash, 62)
}

/// The virtual-workspace URLs the hub publishes in a SyncTarget's
/// `status.virtualWorkspaces`, as kcp builds them:
/// `<external URL>/services/{syncer|upsyncer}/<logical cluster>/<name>/<uid>`, where
/// the logical cluster is the SyncTarget workspace's `kcp.io/cluster` name.
pub fn virtual_workspace(
    external_url: &str,
    logical_cluster: &str,
    name: &str,
    uid: &str,
) -> VirtualWorkspace {
    let base = external_url.trim_end_matches('/');
    let url = |kind: &str| format!("{base}/services/{kind}/{logical_cluster}/{name}/{uid}");
    VirtualWorkspace {
        syncer_url: url("syncer"),
        upsyncer_url: url("upsyncer"),
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn a_key_is_stable_and_differs_per_target_and_workspace() {
        let key = sync_target_key("root:org", "east");
        assert_eq!(key, sync_target_key("root:org", "east"));
        assert_ne!(key, sync_target_key("root:org", "west"));
        assert_ne!(key, sync_target_key("root:other", "east"));
        assert!(key.len() > 30 && key.len() <= 38, "{key}");
        assert!(key.chars().all(|c| c.is_ascii_alphanumeric()), "{key}");
        // A label name segment allows 63 characters: the label fits.
        assert!(crate::well_known::workload_state_label(&key).len() < 63 + 22);
    }

    #[test]
    fn the_spec_uses_kcp_field_names() {
        let st: SyncTarget = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "east"},
            "spec": {"supportedAPIExports": [{"export": "kubernetes", "path": "root:compute"}], "evictAfter": "2026-01-01T00:00:00Z"}
        }))
        .unwrap();
        assert_eq!(st.spec.supported_api_exports[0].path, "root:compute");
        let back = serde_json::to_value(&st).unwrap();
        assert!(back["spec"].get("supportedAPIExports").is_some(), "{back}");
    }

    #[test]
    fn virtual_workspace_urls_name_cluster_target_and_uid() {
        let vw = virtual_workspace("https://hub:6443/", "abc123", "east", "u-1");
        assert_eq!(vw.syncer_url, "https://hub:6443/services/syncer/abc123/east/u-1");
        assert_eq!(
            vw.upsyncer_url,
            "https://hub:6443/services/upsyncer/abc123/east/u-1"
        );
    }
}

cluster_resource! {
    /// A cluster capable of running workloads, as kcp TMC describes it.
    pub struct SyncTarget {
        group: "workload.kcp.io",
        version: "v1alpha1",
        kind: "SyncTarget",
        plural: "synctargets",
        short_names: [],
        categories: [],
        status_subresource: true,
        printer_columns: [
            ("Ready", "string", ".status.conditions[?(@.type==\"Ready\")].status"),
            ("Heartbeat", "date", ".status.lastSyncerHeartbeatTime"),
            ("Syncer", "string", ".status.syncerVersion"),
            ("Cluster", "string", ".spec.workloadCluster.name"),
            ("Resources", "string", ".spec.supportedAPIExports[*].resource"),
            ("Capabilities", "string", ".spec.capabilities[*].resource"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: SyncTargetSpec,
        status: SyncTargetStatus,
    }
}

/// The desired state of a SyncTarget.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncTargetSpec {
    /// New workloads are not scheduled here while true. Defaults to false.
    #[serde(default)]
    pub unschedulable: bool,

    /// After this time, workloads scheduled here are evicted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub evict_after: Option<Time>,

    /// APIExports whose resources this target should support. When empty, kcp uses the
    /// `kubernetes` export of the same workspace.
    #[serde(
        rename = "supportedAPIExports",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub supported_api_exports: Vec<ApiExportReference>,

    /// Labels identifying the cells the target belongs to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cells: BTreeMap<String, String>,

    /// The physical cluster behind the target, as the kcp workload syncer document
    /// describes it: informational (the syncer's kubeconfig decides where it writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_cluster: Option<WorkloadCluster>,

    /// What the cluster offers (`{type: compute, resource: cpu, capacity: "1000"}`).
    /// A Location's `instanceSelector` selects on them as if they were labels
    /// `capabilities.workload.kcp.io/<resource>: <capacity>`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<Capability>,
}

/// The physical cluster a SyncTarget stands for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadCluster {
    /// The cluster's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The cluster's API server URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub endpoint: String,
}

/// One thing a cluster offers, and how much of it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capability {
    /// The kind of capability, e.g. `compute`.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// What is offered, e.g. `cpu`, `memory`, `nvidia.com/gpu`.
    #[serde(default)]
    pub resource: String,
    /// How much, as a quantity (`1000`, `4000Gi`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub capacity: String,
}

/// A reference to an APIExport (kcp `tenancy.v1alpha1.APIExportReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiExportReference {
    /// Name of the APIExport.
    #[serde(default)]
    pub export: String,
    /// Logical cluster path of the workspace holding it; empty means the local workspace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// One resource of the export, as `<group>/<version>/<resource>` (`apps/v1/deployments`,
    /// `v1/services` for the core group), in the kcp workload syncer document's form:
    /// entries naming resources of an export limit the target to those resources of it.
    /// Empty: every resource of the export.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
}

/// The observed state of a SyncTarget.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SyncTargetStatus {
    /// Resources available for scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub allocatable: Option<BTreeMap<String, Quantity>>,

    /// Total resources of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub capacity: Option<BTreeMap<String, Quantity>>,

    /// kcp-style conditions: `SyncerReady`, `APIImporterReady`, `HeartbeatHealthy`,
    /// `SyncerAuthorized`, `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KcpCondition>,

    /// Resources the syncer can sync, with their compatibility state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub synced_resources: Vec<ResourceToSync>,

    /// When the syncer last reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_syncer_heartbeat_time: Option<Time>,

    /// The same as `lastSyncerHeartbeatTime`, under the name the kcp workload syncer
    /// document uses; the hub keeps the two equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_heartbeat_time: Option<Time>,

    /// Which syncer process sends the heartbeats (`syncer-<pod name>`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub syncer_identifier: String,

    /// The version of the syncer sending the heartbeats, as `ferry --version` prints
    /// it (`0.1.0 (commit abc123def456)`). Added by Ferry; kcp's SyncTarget has no
    /// such field.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub syncer_version: String,

    /// The syncer's heartbeat counters, as the kcp workload syncer document shows them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat: Option<HeartbeatStatus>,

    /// Virtual workspace URLs the syncer uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtual_workspaces: Vec<VirtualWorkspace>,
}

/// Heartbeats of the syncer process named in `syncerIdentifier`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatStatus {
    /// Heartbeats this syncer process has sent.
    #[serde(default)]
    pub count: i64,
    /// When the last one was sent (the same time as `lastHeartbeatTime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_heartbeat: Option<Time>,
    /// Heartbeats this syncer process failed to send.
    #[serde(default)]
    pub errors: i64,
}

/// A kcp condition (`third_party/conditions/apis/conditions/v1alpha1.Condition`): unlike
/// `metav1.Condition` it has a `severity` and only `type` and `status` are required.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KcpCondition {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `Error`, `Warning` or `Info`; only meaningful when status is `False`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub severity: String,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::time")]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason in CamelCase.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// One resource the syncer of a SyncTarget can sync.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceToSync {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Resource name (lowercase plural).
    #[serde(default)]
    pub resource: String,
    /// Versions the syncer may choose from, in order of preference.
    #[serde(default)]
    pub versions: Vec<String>,
    /// Identity of the APIExport the schema belongs to; empty for core types.
    #[serde(default)]
    pub identity_hash: String,
    /// Whether the schema is compatible with the target.
    #[serde(default)]
    pub state: ResourceCompatibleState,
}

/// Compatibility of a resource schema with a SyncTarget.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ResourceCompatibleState {
    /// The syncer has not reported yet.
    #[default]
    Pending,
    /// Compatible; the syncer syncs it.
    Accepted,
    /// Incompatible with the target's schema.
    Incompatible,
}

/// URLs of the virtual workspaces a kcp syncer talks to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct VirtualWorkspace {
    /// URL of the syncer virtual workspace.
    #[serde(rename = "syncerURL", default)]
    pub syncer_url: String,
    /// URL of the upsyncer virtual workspace.
    #[serde(rename = "upsyncerURL", default)]
    pub upsyncer_url: String,
}
