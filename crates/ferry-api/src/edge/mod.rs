//! `edge.kubestellar.io/v2alpha1`: the KubeStellar API (SyncerConfig, EdgeSyncConfig, SyncTarget,
//! Location, EdgePlacement, SinglePlacementSlice, Customizer). All kinds but Customizer are
//! cluster-scoped.

mod customizer;
mod edge_placement;
mod edge_sync_config;
pub mod espw;
mod location;
pub mod mailbox;
mod placement_summary;
mod single_placement_slice;
mod sync_target;
mod syncer_config;

pub use customizer::*;
pub use edge_placement::*;
pub use edge_sync_config::*;
pub use location::*;
pub use placement_summary::*;
pub use single_placement_slice::*;
pub use sync_target::*;
pub use syncer_config::*;

/// The API group.
pub const GROUP: &str = "edge.kubestellar.io";
/// The API version.
pub const VERSION: &str = "v2alpha1";
