//! `SyncTarget` in `edge.kubestellar.io`: a copy of kcp's shape.

pub use crate::workload::{
    ApiExportReference, KcpCondition, ResourceCompatibleState, ResourceToSync, SyncTargetSpec,
    SyncTargetStatus, VirtualWorkspace,
};

cluster_resource! {
    /// An edge cluster (workload execution cluster). The mailbox controller creates one
    /// mailbox workspace per SyncTarget, named `<spaceID>-mb-<uid>`.
    pub struct SyncTarget {
        group: "edge.kubestellar.io",
        version: "v2alpha1",
        kind: "SyncTarget",
        plural: "synctargets",
        short_names: [],
        categories: [],
        status_subresource: true,
        printer_columns: [
            ("Ready", "string", ".status.conditions[?(@.type==\"Ready\")].status"),
            ("Heartbeat", "date", ".status.lastSyncerHeartbeatTime"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: SyncTargetSpec,
        status: SyncTargetStatus,
    }
}
