//! What the controllers of KubeStellar (`ferry-kubestellar`) and of kcp TMC
//! (`ferry-tmc`) share, so that neither depends on the other: changing one
//! profile's controllers recompiles neither the other's nor this crate.
//!
//! - [`combined_status`]: StatusCollectors and CombinedStatus, the status of
//!   an object placed on many clusters reduced to one table (KubeStellar's
//!   EdgePlacements and kcp TMC's Placements both get it).
//! - [`label_index`]: the index of workspaces' labels that placement's
//!   selectors are matched against.
//! - [`heartbeat`]: when each SyncTarget's heartbeat turns stale.
//!
//! Clients of the object service through their handle
//! ([`ferry_server::controller::ControllerContext`]), like every controller.

pub mod combined_status;
pub mod heartbeat;
pub mod label_index;
#[cfg(any(test, feature = "test-support"))]
pub mod random_labels;
