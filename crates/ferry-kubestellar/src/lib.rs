//! The built-in controllers of KubeStellar: the placement translator
//! ([`placement`]: EdgePlacements' where-resolver, downsync into mailbox
//! workspaces and upsync back), a mailbox workspace per SyncTarget
//! ([`mailbox`]), edge SyncTargets' status from their syncers' heartbeats
//! ([`edge_synctarget`]), the syncer's write rights in a mailbox
//! ([`upsync_role`]) and the combined status of what EdgePlacements place
//! (`ferry_multicluster::combined_status`, shared with kcp TMC).
//!
//! Clients of the object service ([`ferry_server::service`]) through their
//! handle ([`ferry_server::controller::ControllerContext`]), as the
//! Kubernetes and kcp controllers of `ferry-controllers` are, without
//! depending on them: changing one of those does not recompile this crate.
//! What kcp TMC's controllers (`ferry-tmc`) share with these — combined
//! status, the label index, SyncTarget heartbeats — is in
//! `ferry-multicluster`, so neither profile's crate depends on the other.
//! The `ferry-hub` crate starts them ([`spawn`]) beside the others.

pub mod edge_synctarget;
pub mod mailbox;
pub mod placement;
pub mod upsync_role;

pub use ferry_server::follow;

use tokio::task::JoinHandle;

use ferry_server::controller::ControllerContext;
use ferry_server::server::HubOptions;

/// Start KubeStellar's controllers that `opts` turn on: the upsync role and
/// edge SyncTargets' status always, the mailbox controller and the
/// placement translator when asked for. They stop when `ctx`'s lease is
/// lost; await the handles to know they have stopped writing.
pub fn spawn(ctx: &ControllerContext, opts: &HubOptions) -> Vec<JoinHandle<()>> {
    let mut running = vec![follow::spawn(ctx.clone(), upsync_role::UpsyncRoles)];
    if opts.mailbox_controller {
        running.push(follow::spawn(ctx.clone(), mailbox::Mailboxes));
    }
    if opts.placement_translator {
        running.push(placement::spawn(ctx.clone()));
    }
    running.push(edge_synctarget::spawn(ctx, opts.sync_target_heartbeat_threshold));
    running
}
