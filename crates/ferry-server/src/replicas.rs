//! Several hubs on one etcd: what a hub learns from writes made through the
//! others, and which of them runs the built-in controllers.
//!
//! What a hub on etcd learns from writes made through the other hubs on the
//! same prefix. A write's effects beyond storage — the workspaces the hub
//! routes to, the resources CRDs and APIBindings serve, the RBAC it caches —
//! are applied by the hub that takes the write, inside the write
//! ([`crate::service::hooks::after_write`]). Every other hub applies them
//! here, from the store's watch, which etcd feeds with every hub's writes.
//! Applying them again for this hub's own writes is harmless: each is a
//! recomputation from the stored state.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::apis::BINDINGS;
use crate::auth::rbac::{CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS};
use crate::controller::ControllerContext;
use crate::follow::Follower;
use crate::hub::{Hub, CRDS};
use crate::service::{self, create_internal, Request};
use crate::storage::{EventType, ObjectKey, WatchEvent};
use crate::workspace::{logical_cluster_of, ROOT, WORKSPACES};

/// Follows the writes whose effects live in a hub's memory.
pub struct PeerWrites;

impl Follower for PeerWrites {
    fn follows(&self, storage_key: &str) -> bool {
        matches!(
            storage_key,
            WORKSPACES | CRDS | BINDINGS | ROLES | CLUSTER_ROLES | ROLE_BINDINGS | CLUSTER_ROLE_BINDINGS
        )
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let hub = ctx.hub();
            hub.rebuild_indexes();
            for cluster in hub.store.clusters() {
                hub.security.rbac.invalidate(&cluster);
            }
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let hub = ctx.hub();
            let cluster = &event.key.cluster;
            match event.key.resource.as_str() {
                CRDS | BINDINGS => hub.refresh_crds(cluster),
                WORKSPACES => workspace_changed(hub, event),
                _ => hub.security.rbac.invalidate(cluster),
            }
        })
    }
}

/// A Workspace in `event.key.cluster` (its parent) was written or deleted:
/// its logical cluster is routed to, or no longer.
fn workspace_changed(hub: &Hub, event: &WatchEvent) {
    let Some(parent) = hub.workspaces.by_name(&event.key.cluster) else {
        return;
    };
    let Some(lc) = logical_cluster_of(&parent, &event.object.value()) else {
        return;
    };
    match event.kind {
        EventType::Deleted => {
            hub.registry.set_crd_resources(&lc.name, Vec::new());
            hub.security.rbac.invalidate(&lc.name);
            hub.workspaces.remove(&lc.name);
        }
        EventType::Added | EventType::Modified => hub.workspaces.insert(lc),
    }
}

/// The Lease whose holder runs the built-in controllers, in `root`'s
/// `kube-system`, as kube-controller-manager's.
pub const CONTROLLERS_LEASE: &str = "ferry-hub-controllers";
const LEASES: (&str, &str, &str) = ("coordination.k8s.io", "v1", "leases");
const LEASE_NAMESPACE: &str = "kube-system";
const LEASE_MANAGER: &str = "ferry-hub-leader-election";

/// How long a holder keeps the controllers without renewing
/// (`leaseDurationSeconds`); it renews every third of it.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);

/// Run the built-in controllers on whichever hub on this etcd holds
/// [`CONTROLLERS_LEASE`], as client-go's leader election does: try to
/// acquire it, renew it while holding it, take it over once its record has
/// not changed for its duration, stop the controllers when a renewal has
/// failed for that long, and give it up when the hub stops. `controllers`
/// starts them with the stop signal to obey. Every write to the Lease is a
/// conditional one, so etcd lets one hub win each round.
pub fn spawn_elected<F>(
    hub: Arc<Hub>,
    mut stop: watch::Receiver<bool>,
    identity: String,
    duration: Duration,
    controllers: F,
) -> JoinHandle<()>
where
    F: Fn(watch::Receiver<bool>) -> Vec<JoinHandle<()>> + Send + 'static,
{
    tokio::spawn(async move {
        let mut elector = Elector {
            identity,
            duration,
            observed: None,
        };
        let mut running: Option<(watch::Sender<bool>, Vec<JoinHandle<()>>)> = None;
        let mut renewed = Instant::now();
        loop {
            let held = elector.try_acquire_or_renew(&hub).await;
            if held {
                renewed = Instant::now();
                if running.is_none() {
                    tracing::info!(identity = %elector.identity, "holding the controllers' Lease: starting the built-in controllers");
                    let (tx, rx) = watch::channel(false);
                    running = Some((tx, controllers(rx)));
                }
            } else if running.is_some() && (elector.lost_to_another() || renewed.elapsed() >= duration) {
                tracing::warn!(identity = %elector.identity, "lost the controllers' Lease: stopping the built-in controllers");
                stop_controllers(running.take()).await;
            }
            let pause = if held { duration / 3 } else { duration / 6 };
            tokio::select! {
                _ = stop.changed() => {
                    if *stop.borrow() || stop.has_changed().is_err() {
                        let held = running.is_some();
                        stop_controllers(running.take()).await;
                        if held {
                            elector.release(&hub).await;
                        }
                        return;
                    }
                }
                _ = tokio::time::sleep(pause) => {}
            }
        }
    })
}

async fn stop_controllers(running: Option<(watch::Sender<bool>, Vec<JoinHandle<()>>)>) {
    if let Some((tx, handles)) = running {
        let _ = tx.send(true);
        for h in handles {
            let _ = h.await;
        }
    }
}

struct Elector {
    identity: String,
    duration: Duration,
    /// The Lease's resourceVersion and holder when last seen held by
    /// another, and when it was first seen so: it has expired once it
    /// stays so for its duration (local time only, as client-go, so clocks
    /// of different machines need not agree).
    observed: Option<(u64, String, Instant)>,
}

impl Elector {
    fn key() -> ObjectKey {
        ObjectKey {
            cluster: ROOT.into(),
            resource: "coordination.k8s.io/leases".into(),
            namespace: LEASE_NAMESPACE.into(),
            name: CONTROLLERS_LEASE.into(),
        }
    }

    fn lost_to_another(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|(_, holder, _)| !holder.is_empty() && *holder != self.identity)
    }

    /// Whether this hub holds the Lease after one round.
    async fn try_acquire_or_renew(&mut self, hub: &Arc<Hub>) -> bool {
        let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        let seconds = self.duration.as_secs().max(1);
        let Some(current) = hub.store.get(&Self::key()) else {
            let lease = json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": CONTROLLERS_LEASE, "namespace": LEASE_NAMESPACE},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": seconds,
                    "acquireTime": now, "renewTime": now, "leaseTransitions": 0}});
            self.observed = None;
            return create_internal(hub, ROOT, LEASES, Some(LEASE_NAMESPACE), lease)
                .await
                .is_ok();
        };
        let mut lease = current.value();
        let holder = lease
            .pointer("/spec/holderIdentity")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let ours = holder == self.identity;
        if !ours {
            let changed = self.observed.as_ref().is_none_or(|(rv, _, _)| *rv != current.rv);
            if changed {
                self.observed = Some((current.rv, holder.clone(), Instant::now()));
            }
            let record_duration = lease
                .pointer("/spec/leaseDurationSeconds")
                .and_then(Value::as_u64)
                .map(Duration::from_secs)
                .unwrap_or(self.duration);
            let expired = holder.is_empty()
                || self
                    .observed
                    .as_ref()
                    .is_some_and(|(_, _, since)| since.elapsed() >= record_duration);
            if !expired {
                return false;
            }
        }
        let spec = json!({
            "holderIdentity": self.identity,
            "leaseDurationSeconds": seconds,
            "renewTime": now,
        });
        if let (Some(s), Some(new)) = (
            lease.pointer_mut("/spec").and_then(Value::as_object_mut),
            spec.as_object(),
        ) {
            for (k, v) in new {
                s.insert(k.clone(), v.clone());
            }
            if !ours {
                let transitions = s.get("leaseTransitions").and_then(Value::as_u64).unwrap_or(0);
                s.insert("acquireTime".into(), json!(now));
                s.insert("leaseTransitions".into(), json!(transitions + 1));
            }
        }
        let written = self.update(hub, lease).await;
        if written {
            self.observed = None;
        }
        written
    }

    /// Write `lease` if it is still at the resourceVersion it carries.
    async fn update(&self, hub: &Arc<Hub>, lease: Value) -> bool {
        let request = match Request::internal(
            hub,
            ROOT,
            LEASES,
            Some(LEASE_NAMESPACE),
            Some(CONTROLLERS_LEASE),
            "update",
            LEASE_MANAGER,
        ) {
            Ok(r) => r,
            Err(_) => return false,
        };
        service::update(&request, lease).await.is_ok()
    }

    /// Give the Lease up, so another hub takes over at once.
    async fn release(&self, hub: &Arc<Hub>) {
        let Some(current) = hub.store.get(&Self::key()) else {
            return;
        };
        let mut lease = current.value();
        if lease.pointer("/spec/holderIdentity").and_then(Value::as_str) != Some(self.identity.as_str()) {
            return;
        }
        if let Some(spec) = lease.pointer_mut("/spec").and_then(Value::as_object_mut) {
            spec.insert("holderIdentity".into(), json!(""));
        }
        if !self.update(hub, lease).await {
            tracing::warn!(
                "could not give up the controllers' Lease; another hub takes over when it expires"
            );
        }
    }
}
