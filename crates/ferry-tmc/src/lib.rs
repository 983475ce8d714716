//! The built-in controllers of kcp's transparent multi-cluster (TMC): the
//! scheduler of `scheduling.kcp.io` Placements ([`scheduling`]: a namespace
//! onto a SyncTarget of a Location, the objects in it labelled for that
//! target's syncer), SyncTargets' label and status ([`synctarget`]), kcp's
//! `root:compute` workspace ([`compute`]) and the combined status of what
//! Placements schedule ([`combined_status`]).
//!
//! Clients of the object service ([`ferry_server::service`]) through their
//! handle ([`ferry_server::controller::ControllerContext`]), as the
//! Kubernetes and kcp controllers of `ferry-controllers` are, without
//! depending on them: changing one of those does not recompile this crate.
//! Combined status is KubeStellar's (`CombinedStatus`, `StatusCollector`),
//! so this crate builds on `ferry-kubestellar` for it, and for the label
//! index and SyncTarget heartbeats both keep. The `ferry-hub` crate starts
//! them ([`bootstrap`], [`spawn`]) beside the others.

pub mod combined_status;
pub mod compute;
pub mod scheduling;
pub mod synctarget;

pub use ferry_server::follow;

use tokio::task::JoinHandle;

use ferry_server::controller::ControllerContext;
use ferry_server::server::HubOptions;

/// What kcp TMC has when a hub starts: the `root:compute` workspace when
/// `opts` ask for it.
pub async fn bootstrap(ctx: &ControllerContext, opts: &HubOptions) {
    if opts.compute_workspace {
        compute::ensure(ctx).await;
    }
}

/// Start kcp TMC's controllers: the scheduler, the combined status of what
/// it schedules, and SyncTargets' status. They stop when `ctx`'s lease is
/// lost; await the handles to know they have stopped writing.
pub fn spawn(ctx: &ControllerContext, opts: &HubOptions) -> Vec<JoinHandle<()>> {
    vec![
        scheduling::spawn(ctx.clone()),
        combined_status::spawn(ctx.clone()),
        synctarget::spawn(ctx, opts.sync_target_heartbeat_threshold),
    ]
}
