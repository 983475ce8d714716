//! What is special about writing the kinds kcp, kcp TMC and KubeStellar add
//! to the API server, one strategy per kind as for Kubernetes' own
//! ([`crate::strategy`]): kcp's Workspaces ([`tenancy`]) and APIs
//! ([`apis`]), TMC's SyncTargets, Locations and Placements ([`tmc`]), and
//! KubeStellar's placements and customizations ([`edge`]). [`table`]
//! registers them with the hub, and [`builtin`] serves kcp's kinds built in,
//! with their `kubectl get` [`columns`];
//! [`reserved`] holds the labels and annotations TMC reserves on every kind.

pub mod apis;
pub mod builtin;
pub mod columns;
pub mod edge;
pub mod reserved;
pub mod tenancy;
pub mod tmc;

use crate::strategy::StrategyTable;

/// The strategies of this layer's kinds, for the hub's extensions.
pub fn table() -> StrategyTable {
    StrategyTable::default()
        // Kinds Ferry's controllers read, whoever installed the CRD serving them.
        .custom(
            "edge.kubestellar.io",
            "edgeplacements",
            &edge::EdgePlacementStrategy,
        )
        .custom("edge.kubestellar.io", "customizers", &edge::CustomizerStrategy)
        .custom(
            "control.kubestellar.io",
            "customtransforms",
            &edge::CustomTransformStrategy,
        )
        .builtin(
            "tenancy.kcp.io",
            "workspaces",
            &tenancy::workspace::WorkspaceStrategy,
        )
        .builtin("apis.kcp.io", "apiresourceschemas", &apis::SchemaStrategy)
        .builtin("apis.kcp.io", "apiexports", &apis::ExportStrategy)
        .builtin("apis.kcp.io", "apiexportendpointslices", &apis::SliceStrategy)
        .builtin("apis.kcp.io", "apibindings", &apis::BindingStrategy)
        .builtin("workload.kcp.io", "synctargets", &tmc::SyncTargetStrategy)
        .builtin("scheduling.kcp.io", "locations", &tmc::LocationStrategy)
        .builtin("scheduling.kcp.io", "placements", &tmc::PlacementStrategy)
        .builtin(
            "apiresource.kcp.io",
            "apiresourceimports",
            &tmc::ApiResourceImportStrategy,
        )
}
