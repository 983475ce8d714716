//! kcp's workspaces as the hub's logical clusters: a `tenancy.kcp.io/v1alpha1`
//! Workspace named `x` in the logical cluster at `root` makes the logical
//! cluster at path `root:x` usable, under the name in its `spec.cluster`.
//! The API server keeps the index of logical clusters and resolves the one a
//! request names ([`LogicalCluster`], [`WorkspaceIndex`]); this layer tells
//! it which objects make them ([`objects`]).

use serde_json::Value;

pub use ferry_apiserver::workspace::*;

/// Storage key of `tenancy.kcp.io` workspaces.
pub const WORKSPACES: &str = "tenancy.kcp.io/workspaces";

/// The logical cluster a Workspace object (stored in `parent`) stands for.
pub fn logical_cluster_of(parent: &LogicalCluster, ws: &Value) -> Option<LogicalCluster> {
    let name = ws.pointer("/metadata/name")?.as_str()?;
    let cluster = ws.pointer("/spec/cluster")?.as_str()?;
    Some(LogicalCluster {
        name: cluster.to_string(),
        path: format!("{}:{name}", parent.path),
        parent: Some(parent.name.clone()),
    })
}

/// Workspaces make the hub's logical clusters, for the hub's extensions.
pub fn objects() -> LogicalClusterObjects {
    LogicalClusterObjects {
        resource: WORKSPACES,
        cluster_of: logical_cluster_of,
        how_to_create: "create it with a tenancy.kcp.io/v1alpha1 Workspace in its parent",
        annotation: ferry_api::well_known::KCP_CLUSTER_ANNOTATION,
    }
}
