//! A copy the workload cluster refuses, set up end to end through KubeStellar:
//! an EdgePlacement in `root:wmw1`, SyncTarget and Location `florin` in
//! `root:imw1`, its mailbox, the syncer `syncer-gen` makes running against a
//! stand-in cluster whose node-port range lacks the port the user pinned.
//! The test crate provides `edge` (the hub tests' KubeStellar kit) and
//! `edge_syncer`.

#![allow(dead_code)]

use ferry_hub::strategy::core::service::ServiceRanges;
use ferry_testkit::TestHub;
use serde_json::{json, Value};

use crate::{edge, edge_syncer};

/// Node ports of the hub holding the WMW: 30000-30511.
pub const HUB_RANGES: u32 = 0;
/// Node ports of the stand-in cluster: 30512-31023.
pub const CLUSTER_RANGES: u32 = 1;

/// A NodePort Service whose port the user pinned (KubeStellar's
/// `control.kubestellar.io/preserve: nodeport` keeps it on every copy) to one
/// the hub's range holds and the cluster's does not.
pub fn pinned_service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "web", "namespace": "shop",
                        "annotations": {"control.kubestellar.io/preserve": "nodeport"}},
           "spec": {"type": "NodePort", "selector": {"app": "web"},
                    "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}})
}

/// The stand-in cluster and its syncer.
pub struct RefusedCopy {
    pub cluster: TestHub,
    /// The cluster's admin.
    pub admin: kube::Client,
    pub syncer: ferry_syncer::RunningSyncer,
    /// `root:wmw1`'s admin client.
    pub wmw: kube::Client,
    /// florin's mailbox workspace.
    pub mailbox: String,
}

impl RefusedCopy {
    pub async fn stop(self) {
        self.syncer.stop().await;
        self.cluster.running.stop().await;
    }
}

/// On `hub` (started with [`HUB_RANGES`]): florin, its syncer and cluster,
/// and EdgePlacement `shop` sending the pinned Service `shop/web` there. The
/// cluster refuses the copy soon after this returns.
pub async fn refused_copy(hub: &TestHub) -> RefusedCopy {
    let imw = edge::workspace(hub, "imw1").await;
    edge::workspace(hub, "wmw1").await;
    let mailbox = edge::location(hub, &imw, "florin", json!({"env": "prod"})).await;
    let cluster = TestHub::start_with(|o| {
        o.mailbox_controller = false;
        o.service_ranges = ServiceRanges::distinct(CLUSTER_RANGES);
    })
    .await;
    let admin = cluster.client("root").await;
    let syncer = edge_syncer::generated_syncer(hub, &mailbox, "florin", &cluster, &admin).await;

    let wmw = hub.client("root:wmw1").await;
    edge::apply(
        &wmw,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
    )
    .await;
    edge::apply(&wmw, pinned_service()).await;
    edge::apply(
        &wmw,
        json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "EdgePlacement",
               "metadata": {"name": "shop"},
               "spec": {"locationSelectors": [{"matchLabels": {"env": "prod"}}],
                        "downsync": [{"apiGroup": "", "resources": ["services"], "namespaces": ["shop"]}]}}),
    )
    .await;
    RefusedCopy {
        cluster,
        admin,
        syncer,
        wmw,
        mailbox,
    }
}

/// The owner's fix: let the cluster choose the port.
pub async fn unpin(wmw: &kube::Client) {
    use kube::api::{Patch, PatchParams};
    edge::api(wmw, &edge::ar("", "v1", "Service", "services"), Some("shop"))
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"control.kubestellar.io/preserve": null}}})),
        )
        .await
        .unwrap();
}
