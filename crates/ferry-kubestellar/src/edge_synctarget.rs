//! Writes KubeStellar (`edge.kubestellar.io`) SyncTargets' status from what
//! their syncers write on the SyncerConfig `the-one` in their mailbox
//! workspaces (what it says is `ferry_server::synctarget::edge`), so
//! `kubectl get synctargets` in an inventory workspace shows READY and
//! HEARTBEAT while syncers run, and why not when they do not.
//!
//! It follows edge SyncTargets and SyncerConfigs, and keeps a timer per
//! target whose heartbeat is fresh, so `Ready` turns False when the
//! threshold passes with no write at all.

use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::follow::{self, Due, Follower};
use crate::mailbox::{mailbox_name, INVENTORY_CLUSTER_ANNOTATION, MAILBOX_PARENT, SYNC_TARGETS};
use ferry_api::well_known::SYNC_TARGET_NAME_ANNOTATION;
use ferry_server::controller::ControllerContext;
use ferry_server::json;
use ferry_server::storage::{ClusterScope, ObjectKey, WatchEvent};
use ferry_server::synctarget::edge;
use ferry_server::workspace::WORKSPACES;

const MANAGER: &str = "edge-synctarget-controller";
/// Storage key of KubeStellar SyncerConfigs.
const SYNCER_CONFIGS: &str = "edge.kubestellar.io/syncerconfigs";
/// The SyncerConfig a KubeStellar syncer reports on.
const THE_ONE: &str = "the-one";

/// What the controller keeps between changes.
struct Shared {
    threshold: Duration,
    deadlines: ferry_multicluster::heartbeat::Deadlines,
}

/// Start the controller; `threshold` is `--sync-target-heartbeat-threshold`
/// (the same for KubeStellar's SyncTargets as for kcp's).
pub fn spawn(ctx: &ControllerContext, threshold: Duration) -> JoinHandle<()> {
    let shared = Shared {
        threshold,
        deadlines: Default::default(),
    };
    follow::spawn(ctx.clone(), EdgeSyncTargets(shared))
}

struct EdgeSyncTargets(Shared);

impl Follower for EdgeSyncTargets {
    fn follows(&self, storage_key: &str) -> bool {
        storage_key == SYNC_TARGETS || storage_key == SYNCER_CONFIGS
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for (key, _) in ctx.list(&ClusterScope::All, SYNC_TARGETS, None, None).0 {
                reconcile(ctx, &self.0, &key).await;
            }
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let key = &event.key;
            if key.resource == SYNC_TARGETS {
                reconcile(ctx, &self.0, key).await;
            } else if key.name == THE_ONE {
                if let Some(target) = target_of_mailbox(ctx, &key.cluster) {
                    reconcile(ctx, &self.0, &target).await;
                }
            }
        })
    }

    /// A target whose heartbeat deadline passed, with no write since.
    fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
        Box::pin(self.0.deadlines.next())
    }

    fn pass<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for key in self.0.deadlines.take_due() {
                reconcile(ctx, &self.0, &key).await;
            }
        })
    }
}

/// The SyncTarget whose mailbox is logical cluster `cluster`, from the
/// annotations the mailbox controller puts on the mailbox Workspace.
fn target_of_mailbox(ctx: &ControllerContext, cluster: &str) -> Option<ObjectKey> {
    let lc = ctx.logical_cluster(cluster)?;
    if lc.parent.as_deref() != Some(MAILBOX_PARENT) {
        return None;
    }
    let ws_name = lc.path.rsplit(':').next()?;
    let ws = ctx
        .get(&ObjectKey {
            cluster: MAILBOX_PARENT.into(),
            resource: WORKSPACES.into(),
            namespace: String::new(),
            name: ws_name.into(),
        })?
        .value();
    let annotation = |name: &str| {
        ws.pointer("/metadata/annotations")
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
            .map(String::from)
    };
    Some(ObjectKey {
        cluster: annotation(INVENTORY_CLUSTER_ANNOTATION)?,
        resource: SYNC_TARGETS.into(),
        namespace: String::new(),
        name: annotation(SYNC_TARGET_NAME_ANNOTATION)?,
    })
}

/// The SyncerConfig `the-one` in the mailbox of `target` (stored at `key`).
fn the_one_of(ctx: &ControllerContext, key: &ObjectKey, target: &Value) -> Option<Value> {
    let uid = json::str_at(target, "/metadata/uid");
    let path = format!("{MAILBOX_PARENT}:{}", mailbox_name(&key.cluster, uid));
    let mailbox = ctx.resolve_workspace(&path)?;
    ctx.get(&ObjectKey {
        cluster: mailbox.name,
        resource: SYNCER_CONFIGS.into(),
        namespace: String::new(),
        name: THE_ONE.into(),
    })
    .map(|o| o.value())
}

/// Bring one SyncTarget's status up to date. A conflict is left to the write
/// that caused it, whose event brings the target back here.
async fn reconcile(ctx: &ControllerContext, shared: &Shared, key: &ObjectKey) {
    let target = match ctx.get(key) {
        Some(stored) => stored.value(),
        None => {
            shared.deadlines.clear(key);
            return;
        }
    };
    if target.pointer("/metadata/deletionTimestamp").is_some() {
        shared.deadlines.clear(key);
        return;
    }
    let the_one = the_one_of(ctx, key, &target);
    let desired = edge::desired(
        &key.name,
        target.get("status"),
        the_one.as_ref(),
        shared.threshold,
        ctx.now(),
    );
    match desired.recheck_in {
        Some(d) => {
            // A little past the deadline, so the check sees it passed.
            let at = Instant::now() + d + Duration::from_millis(50);
            shared.deadlines.set(key, at);
        }
        None => {
            shared.deadlines.clear(key);
        }
    }
    if target.get("status") == Some(&desired.status) {
        return;
    }
    let mut updated = target;
    updated["status"] = desired.status;
    let resource = (ferry_api::edge::GROUP, ferry_api::edge::VERSION, "synctargets");
    ferry_server::controller::update_status(ctx, key, resource, MANAGER, updated).await;
}
