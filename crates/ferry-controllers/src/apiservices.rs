//! APIServices describing what each workspace serves, as kube-apiserver keeps
//! them: one `apiregistration.k8s.io/v1` APIService per group/version
//! (`v1.`, `v1.apps`, ...), served locally (`spec.service` unset,
//! `Available=True` with reason `Local`), including the group/versions that
//! CRDs add; removed when no CRD serves their group/version any more.
//!
//! A workspace gets them when a client first asks for APIServices in it
//! (any request on the resource, [`materialize`]), not when it is created:
//! few clients ever read them, and the 27 of a fresh workspace were half of
//! its objects and two thirds of the writes that made it. From then on they
//! follow what the workspace serves, as kube-aggregator's autoregistration
//! does. A wildcard list across workspaces shows only those made so far.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use futures::future::BoxFuture;

use super::follow::Follower;
use ferry_server::controller::{ControllerContext, CRDS};
use ferry_server::registry::ResourceInfo;
use ferry_server::service::{self, DeleteOptions, PatchType};
use ferry_server::storage::{ClusterScope, WatchEvent};

/// Storage key of APIServices.
const APISERVICES: &str = "apiregistration.k8s.io/apiservices";
/// Group, version and resource of APIServices.
const APISERVICES_GVR: (&str, &str, &str) = ("apiregistration.k8s.io", "v1", "apiservices");
/// Field manager of the controller's writes.
const MANAGER: &str = "apiservice-autoregistration";
/// Marks APIServices this controller made for CRDs (and may remove).
const AUTOREGISTER_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

fn name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

fn apiservice(group: &str, version: &str, automanaged: bool) -> Value {
    let labels = if automanaged {
        json!({ AUTOREGISTER_LABEL: "true" })
    } else {
        json!({})
    };
    json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": name(group, version), "labels": labels},
        "spec": {
            "group": group, "version": version,
            "groupPriorityMinimum": if group.is_empty() { 18000 } else { 1000 },
            "versionPriority": 15,
        },
    })
}

/// The controller as a watch follower: every workspace at start, then the
/// workspace of each CRD change.
pub struct ApiServices;

impl Follower for ApiServices {
    fn follows(&self, storage_key: &str) -> bool {
        storage_key == CRDS || storage_key == ferry_server::apis::BINDINGS
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            for cluster in ctx.clusters() {
                if ctx.logical_cluster(&cluster).is_some() {
                    sync(ctx, &cluster).await;
                }
            }
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(sync(ctx, &event.key.cluster))
    }
}

/// Whether `info` is the APIServices resource.
pub fn is_apiservices(info: &ResourceInfo) -> bool {
    info.group == APISERVICES_GVR.0 && info.resource == APISERVICES_GVR.2
}

/// Whether `cluster` has its APIServices (made by [`materialize`]).
fn materialized(ctx: &ControllerContext, cluster: &str) -> bool {
    let (existing, _) = ctx.list(&ClusterScope::One(cluster.into()), APISERVICES, None, None);
    !existing.is_empty()
}

/// Give `cluster` its APIServices if it has none yet: a client is about to
/// read or write them. Concurrent first requests make them once, and each
/// returns only when they are there and marked available.
pub async fn materialize(ctx: &ControllerContext, cluster: &str) {
    crate::make_on_demand(ctx, cluster, materialized, fill(ctx, cluster)).await;
}

/// Keep `cluster`'s APIServices in step with what it serves, if it has
/// them (see [`materialize`]).
pub async fn sync(ctx: &ControllerContext, cluster: &str) {
    if materialized(ctx, cluster) {
        fill(ctx, cluster).await;
    }
}

/// Create the APIService of every group/version served in `cluster` that
/// lacks one, and remove automanaged ones nothing serves any more.
async fn fill(ctx: &ControllerContext, cluster: &str) {
    let served: BTreeSet<(String, String, bool)> = ctx
        .served_resources(Some(cluster))
        .into_iter()
        .map(|r| (r.group, r.version, r.from_crd))
        .collect();
    let wanted: BTreeSet<String> = served.iter().map(|(g, v, _)| name(g, v)).collect();
    let (existing, _) = ctx.list(&ClusterScope::One(cluster.into()), APISERVICES, None, None);
    let have: BTreeSet<String> = existing.iter().map(|(k, _)| k.name.clone()).collect();
    // Together: each write waits for its commit, and the store commits
    // concurrent writes in one batch.
    let creates = served
        .iter()
        .filter(|(group, version, _)| !have.contains(&name(group, version)))
        .map(|(group, version, from_crd)| async move {
            let obj = apiservice(group, version, *from_crd);
            match ctx.create(cluster, APISERVICES_GVR, None, obj).await {
                Ok(_) => mark_available(ctx, cluster, &name(group, version)).await,
                Err(e) if e.code == 409 => {}
                Err(e) => {
                    tracing::warn!(cluster, apiservice = %name(group, version), "creating APIService failed: {e}")
                }
            }
        });
    futures::future::join_all(creates).await;
    for (key, obj) in existing {
        let automanaged = obj.labels.get(AUTOREGISTER_LABEL).is_some_and(|v| v == "true");
        if automanaged && !wanted.contains(&key.name) {
            let request = ctx.request(cluster, APISERVICES_GVR, None, Some(&key.name), "delete", MANAGER);
            if let Ok(r) = request {
                let _ = service::delete(&r, &DeleteOptions::default()).await;
            }
        }
    }
}

/// Local APIServices are available as soon as they exist.
async fn mark_available(ctx: &ControllerContext, cluster: &str, name: &str) {
    let status = json!({"status": {"conditions": [{
        "type": "Available", "status": "True", "reason": "Local",
        "message": "Local APIServices are always available",
        "lastTransitionTime": ferry_api::timestamp::now(),
    }]}});
    let Ok(request) = ctx.request(cluster, APISERVICES_GVR, None, Some(name), "patch", MANAGER) else {
        return;
    };
    let body = serde_json::to_vec(&status).unwrap_or_default();
    if let Err(e) = service::patch(&request.on_subresource("status"), PatchType::Merge, body.into()).await {
        tracing::warn!(
            cluster,
            apiservice = name,
            "marking an APIService available failed: {}",
            e.message
        );
    }
}
