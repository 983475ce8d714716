//! The built-in controllers of every profile, wired into the server: those
//! of Kubernetes and kcp's tenancy (`ferry-controllers`), of KubeStellar
//! (`ferry-kubestellar`) and of kcp TMC (`ferry-tmc`), each crate's
//! modules re-exported here under the paths they had when they were one
//! crate (`ferry_hub::controllers::placement::PLACED_LABEL`).

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use ferry_server::controller::{ControllerContext, WriteObserver};
use ferry_server::server::{Controllers, HubOptions};

pub use ferry_controllers::*;
pub use ferry_kubestellar::{edge_synctarget, mailbox, placement, upsync_role};
pub use ferry_tmc::{compute, scheduling, synctarget};

/// The built-in controllers as the server runs them (its [`Controllers`]
/// hook): the first pass within a write is Kubernetes' and kcp's tenancy's
/// ([`BuiltIn`]); at start, what a fresh hub has and the controllers
/// `ferry hub`'s options turn on (the compute workspace, the mailbox
/// controller, the placement translator), with the SyncTarget heartbeat
/// threshold.
pub struct BuiltInControllers;

impl Controllers for BuiltInControllers {
    fn write_observer(&self) -> Arc<dyn WriteObserver> {
        Arc::new(BuiltIn)
    }

    fn bootstrap<'a>(&'a self, ctx: &'a ControllerContext, opts: &'a HubOptions) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            ferry_controllers::bootstrap(ctx).await;
            ferry_tmc::bootstrap(ctx, opts).await;
        })
    }

    fn spawn(&self, ctx: &ControllerContext, opts: &HubOptions) -> Vec<JoinHandle<()>> {
        let mut running = ferry_controllers::spawn(ctx);
        running.extend(ferry_kubestellar::spawn(ctx, opts));
        running.extend(ferry_tmc::spawn(ctx, opts));
        running
    }
}
