//! The mailbox controller: one mailbox workspace per SyncTarget, as KubeStellar
//! keeps them. A SyncTarget with uid U in the inventory workspace whose
//! logical cluster is C gets the workspace `root:C-mb-U` (a child of root, as
//! in the KubeStellar walkthrough), annotated with
//! the SyncTarget's name and with the `edge.kubestellar.io` API: bound from
//! the ESPW as the APIBinding `bind-edge` once `root:espw` exports it
//! (`kubectl ferry kubestellar init`), installed as CRDs before that (and
//! handed to the binding when it comes: `controllers::apis`).
//! Deleting the SyncTarget deletes its mailbox workspace.

use ferry_api::edge::espw;
use ferry_api::well_known::SYNC_TARGET_NAME_ANNOTATION;
use serde_json::{json, Value};

use futures::future::BoxFuture;

use super::follow::Follower;
use ferry_server::apis;
use ferry_server::controller::ControllerContext;
use ferry_server::service::{self, DeleteOptions};
use ferry_server::storage::{ClusterScope, EventType, ObjectKey, WatchEvent};
use ferry_server::workspace::{ROOT, WORKSPACES};

/// Storage key of `edge.kubestellar.io` SyncTargets.
pub const SYNC_TARGETS: &str = "edge.kubestellar.io/synctargets";
/// The workspace that holds every mailbox workspace.
pub const MAILBOX_PARENT: &str = ROOT;
/// Annotations recording which SyncTarget a mailbox belongs to, and its name.
pub use ferry_api::edge::mailbox::{mailbox_name, INVENTORY_CLUSTER_ANNOTATION, SYNC_TARGET_UID_ANNOTATION};

/// The controller as a watch follower (started by [`crate::spawn`]).
pub struct Mailboxes;

impl Follower for Mailboxes {
    fn follows(&self, storage_key: &str) -> bool {
        storage_key == SYNC_TARGETS || storage_key == apis::EXPORTS
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(resync(ctx))
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if event.key.resource == apis::EXPORTS {
                // The ESPW's export appearing moves every mailbox to it.
                if event.key.name == espw::EXPORT && espw_export(ctx).is_some() {
                    resync(ctx).await;
                }
                return;
            }
            let target = event.object.value();
            // Only the uid and a deletion matter here, not the status the
            // heartbeat keeps changing (`controllers::edge_synctarget`).
            let previous = event.previous.as_deref().map(|p| p.value());
            if event.kind == EventType::Modified
                && previous.as_ref().is_some_and(|p| {
                    ["/metadata/uid", "/metadata/deletionTimestamp"]
                        .iter()
                        .all(|f| p.pointer(f) == target.pointer(f))
                })
            {
                return;
            }
            match event.kind {
                EventType::Deleted => remove_mailbox(ctx, &event.key.cluster, &target).await,
                _ => ensure_mailbox(ctx, &event.key.cluster, &target).await,
            }
        })
    }
}

/// Make every SyncTarget's mailbox exist, and remove mailboxes whose SyncTarget is gone.
async fn resync(ctx: &ControllerContext) {
    let (targets, _) = ctx.list(&ClusterScope::All, SYNC_TARGETS, None, None);
    let mut wanted = Vec::new();
    for (key, obj) in &targets {
        let target = obj.value();
        if let Some(uid) = target.pointer("/metadata/uid").and_then(Value::as_str) {
            wanted.push(mailbox_name(&key.cluster, uid));
        }
        ensure_mailbox(ctx, &key.cluster, &target).await;
    }
    let (mailboxes, _) = ctx.list(&ClusterScope::One(MAILBOX_PARENT.into()), WORKSPACES, None, None);
    for (key, obj) in mailboxes {
        let ws = obj.value();
        let is_mailbox = ws
            .pointer(&format!(
                "/metadata/annotations/{}",
                SYNC_TARGET_UID_ANNOTATION.replace('/', "~1")
            ))
            .is_some();
        if is_mailbox && !wanted.contains(&key.name) {
            delete_workspace(ctx, MAILBOX_PARENT, &key.name).await;
        }
    }
}

async fn ensure_workspace(
    ctx: &ControllerContext,
    parent: &str,
    name: &str,
    annotations: Value,
) -> Option<String> {
    let ws = json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
                    "metadata": {"name": name, "annotations": annotations}});
    match ctx
        .create(parent, ("tenancy.kcp.io", "v1alpha1", "workspaces"), None, ws)
        .await
    {
        Ok(_) => {}
        Err(e) if e.code == 409 => {}
        Err(e) => {
            tracing::warn!(parent, workspace = name, "creating workspace failed: {e}");
            return None;
        }
    }
    let key = ObjectKey {
        cluster: parent.into(),
        resource: WORKSPACES.into(),
        namespace: String::new(),
        name: name.into(),
    };
    ctx.get(&key)?
        .value()
        .pointer("/spec/cluster")
        .and_then(Value::as_str)
        .map(String::from)
}

async fn ensure_mailbox(ctx: &ControllerContext, inventory_cluster: &str, target: &Value) {
    if target.pointer("/metadata/deletionTimestamp").is_some() {
        return;
    }
    let (Some(name), Some(uid)) = (
        target.pointer("/metadata/name").and_then(Value::as_str),
        target.pointer("/metadata/uid").and_then(Value::as_str),
    ) else {
        return;
    };
    let annotations = json!({
        SYNC_TARGET_NAME_ANNOTATION: name,
        SYNC_TARGET_UID_ANNOTATION: uid,
        INVENTORY_CLUSTER_ANNOTATION: inventory_cluster,
    });
    let mailbox = mailbox_name(inventory_cluster, uid);
    let Some(cluster) = ensure_workspace(ctx, MAILBOX_PARENT, &mailbox, annotations).await else {
        return;
    };
    install_edge_api(ctx, &cluster).await;
}

/// The logical cluster of `root:espw` when it holds the export of the
/// KubeStellar API.
fn espw_export(ctx: &ControllerContext) -> Option<String> {
    let lc = ctx.resolve_workspace(espw::PATH)?;
    ctx.get(&apis::key(&lc.name, apis::EXPORTS, espw::EXPORT))
        .map(|_| lc.name)
}

/// The `edge.kubestellar.io` API inside a mailbox: the ESPW's export bound as
/// `bind-edge` when there is one, else Ferry's CRDs.
async fn install_edge_api(ctx: &ControllerContext, cluster: &str) {
    if espw_export(ctx).is_none() {
        install_crds(ctx, cluster).await;
        return;
    }
    match ctx
        .create(
            cluster,
            (apis::GROUP, apis::VERSION, "apibindings"),
            None,
            espw::binding(espw::MAILBOX_BINDING),
        )
        .await
    {
        Ok(_) => tracing::info!(
            cluster,
            binding = espw::MAILBOX_BINDING,
            "created APIBinding in a mailbox workspace"
        ),
        Err(e) if e.code == 409 => {}
        Err(e) => tracing::warn!(cluster, "binding {} in a mailbox failed: {e}", espw::PATH),
    }
}

/// Ferry's CRDs inside a mailbox, for a hub without the ESPW.
async fn install_crds(ctx: &ControllerContext, cluster: &str) {
    for crd in ferry_api::all_crds() {
        if let Err(e) = ferry_server::controller::install_crd(ctx, cluster, &crd).await {
            tracing::warn!(
                cluster,
                crd = crd.metadata.name.as_deref().unwrap_or_default(),
                "installing CRD failed: {e}"
            );
        }
    }
}

async fn remove_mailbox(ctx: &ControllerContext, inventory_cluster: &str, target: &Value) {
    let Some(uid) = target.pointer("/metadata/uid").and_then(Value::as_str) else {
        return;
    };
    delete_workspace(ctx, MAILBOX_PARENT, &mailbox_name(inventory_cluster, uid)).await;
}

async fn delete_workspace(ctx: &ControllerContext, parent: &str, name: &str) {
    let request = match ctx.request(
        parent,
        ("tenancy.kcp.io", "v1alpha1", "workspaces"),
        None,
        Some(name),
        "delete",
        "mailbox-controller",
    ) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(
                parent,
                workspace = name,
                "deleting mailbox workspace failed: {}",
                e.message
            );
            return;
        }
    };
    match service::delete(&request, &DeleteOptions::default()).await {
        Ok(_) => tracing::info!(
            workspace = name,
            "removed mailbox workspace of a deleted SyncTarget"
        ),
        Err(e) if e.code == 404 => {}
        Err(e) => tracing::warn!(
            parent,
            workspace = name,
            "deleting mailbox workspace failed: {}",
            e.message
        ),
    }
}
