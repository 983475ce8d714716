//! kcp TMC placement and scheduling: which SyncTarget each namespace (and
//! every object in it) goes to.
//!
//! - **Locations** (`scheduling.kcp.io/v1alpha1`): a workspace with
//!   SyncTargets and no Location gets Location `default` (every target);
//!   each Location's `status.instances` / `availableInstances` (Ready and
//!   not cordoned) follow its targets.
//! - **Placements**: select a Location in `spec.locationWorkspace` (the
//!   Placement's own workspace when empty) — [`placement`] — among those
//!   the workspace's owners granted to whoever wrote the Placement's spec
//!   ([`grant`]); revoking the grant unschedules.
//! - **Namespaces** in a Placement's workspace that its `namespaceSelector`
//!   selects get the annotation `scheduling.kcp.io/placement` and one
//!   target of the selected Location each: label
//!   `state.workload.kcp.io/<key>=Sync` ([`targets::choose`]: spread by
//!   load, stable, away from cordoned and evicting targets).
//! - **Objects** in a namespace carry their namespace's labels (every
//!   namespaced resource but events, pods and endpoints; upsynced objects
//!   are the syncer's) — [`assignment`], with kcp's deletion handshake.
//! - **Eviction**: a target whose `spec.evictAfter` has passed loses its
//!   namespaces; a timer wakes the controller when the next one is due.
//!
//! Differences from kcp v0.11, on purpose: an object labelled for a target
//! whose syncer copies it gets that syncer's finalizer in the same write
//! ([`targets::Target::syncer_copies`]; kcp's syncer appends its own, one
//! write per target); each namespace gets its own
//! target (kcp picks one per Placement, at random), so namespaces spread;
//! a namespace's old label goes once its syncer's finalizer is gone (kcp
//! waits a fixed 5s); a not-Ready target keeps what it has and is only
//! avoided for new namespaces while a Ready one exists; an absent
//! `namespaceSelector`, `instanceSelector` or empty `locationSelectors`
//! selects everything (kcp documents that, its code selected nothing).
//!
//! The controller follows the store's watch like the others, re-reading
//! the current state of whatever an event names (events are only
//! triggers), so every reaction is idempotent and a resync catches up.

pub mod assignment;
pub use ferry_server::grants::tmc as grant;
pub mod index;
pub mod placement;
pub mod targets;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ferry_api::well_known::{WORKLOAD_STATE_LABEL_PREFIX, WORKLOAD_STATE_SYNC};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use assignment::{Meta, MetaPatch};
use index::SchedulingIndex;
use targets::Target;

use crate::follow::{self, Due, Follower};
use ferry_server::auth::rbac::{CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS};
use ferry_server::auth::UserInfo;
use ferry_server::controller::ControllerContext;
use ferry_server::registry::ResourceInfo;
use ferry_server::service::{self, PatchType};
use ferry_server::storage::{ClusterScope, EventType, ObjectKey, StoredObject, WatchEvent};
use ferry_server::workspace::LogicalCluster;

/// Storage keys the controller reads.
pub const SYNC_TARGETS: &str = ferry_server::virtual_workspace::syncer::SYNC_TARGETS;
pub use grant::{LOCATIONS, PLACEMENTS, PLACEMENT_ANNOTATION};
const NAMESPACES: &str = "/namespaces";
/// The field manager of the controller's writes.
pub const MANAGER: &str = "ferry-scheduler";
/// kcp's Location annotation listing its labels (for a table column).
pub const LOCATION_LABELS_ANNOTATION: &str = "scheduling.kcp.io/labels";
/// Namespaces never scheduled: kcp's block list (its resource scheduler's
/// `namespaceBlocklist`): what every cluster has of its own, and `kcp-system`,
/// where kcp keeps APIExport identities. `default` is scheduled like any
/// other namespace.
pub const BLOCKED_NAMESPACES: &[&str] = &["kube-system", "kube-public", "kube-node-lease", "kcp-system"];
/// Namespaced resources whose objects are not labelled: events, and what
/// syncers upsync (pods, endpoints).
const NOT_LABELLED: &[&str] = &["/events", "events.k8s.io/events", "/pods", "/endpoints"];

/// Run the scheduler while `ctx`'s lease is held.
pub fn spawn(ctx: ControllerContext) -> JoinHandle<()> {
    follow::spawn(
        ctx,
        TmcScheduler {
            index: SchedulingIndex::default(),
            eviction: None,
        },
    )
}

/// The scheduler as it follows the store: its index, and the next future
/// `evictAfter` of any SyncTarget, when it looks at everything again.
struct TmcScheduler {
    index: SchedulingIndex,
    eviction: Option<DateTime<Utc>>,
}

impl Follower for TmcScheduler {
    fn follows(&self, _storage_key: &str) -> bool {
        true
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            resync(ctx, &mut self.index).await;
            self.eviction = next_eviction(ctx, &self.index);
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            changed(ctx, &mut self.index, event).await;
            if event.key.resource == SYNC_TARGETS {
                self.eviction = next_eviction(ctx, &self.index);
            }
        })
    }

    fn wait<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
        Box::pin(async move {
            let Some(at) = self.eviction else {
                return std::future::pending().await;
            };
            let wait = (at - ctx.now()).to_std().unwrap_or_default();
            // Past the second the time names, so the target counts as evicting.
            tokio::time::sleep(wait + Duration::from_millis(50)).await;
            Due::Resync
        })
    }
}

/// The next future `evictAfter` of any SyncTarget.
fn next_eviction(ctx: &ControllerContext, index: &SchedulingIndex) -> Option<DateTime<Utc>> {
    let now = ctx.now();
    index.evictions().filter(|t| *t > now).min()
}

/// Look at everything, starting the index over.
async fn resync(ctx: &ControllerContext, index: &mut SchedulingIndex) {
    let (targets, _) = ctx.list(&ClusterScope::All, SYNC_TARGETS, None, None);
    let (locations, _) = ctx.list(&ClusterScope::All, LOCATIONS, None, None);
    let (placements, _) = ctx.list(&ClusterScope::All, PLACEMENTS, None, None);
    index.reset(
        targets.iter().map(|(k, o)| (k.cluster.as_str(), o.value())),
        locations.iter().map(|(k, o)| (k.cluster.as_str(), o.value())),
        placements.iter().map(|(k, o)| (k.cluster.as_str(), o)),
    );
    let mut location_workspaces: BTreeSet<String> = targets.iter().map(|(k, _)| k.cluster.clone()).collect();
    location_workspaces.extend(locations.iter().map(|(k, _)| k.cluster.clone()));
    for cluster in &location_workspaces {
        reconcile_locations(ctx, index, cluster, None).await;
    }
    let workspaces = index.placement_workspaces();
    for ws in &workspaces {
        reconcile_workspace(ctx, index, ws).await;
    }
    // Namespaces and objects anywhere that still carry scheduling metadata
    // (a Placement that went away, a target deleted while the hub was
    // down): one pass over every namespaced object.
    let (namespaces, _) = ctx.list(&ClusterScope::All, NAMESPACES, None, None);
    let mut scheduled_namespaces = BTreeSet::new();
    for (key, ns) in &namespaces {
        if mentions_workloads(ns) {
            if !workspaces.contains(&key.cluster) {
                schedule_alone(ctx, index, key).await;
            }
            scheduled_namespaces.insert((key.cluster.clone(), key.name.clone()));
        }
    }
    for resource in ctx.resource_keys() {
        if NOT_LABELLED.contains(&resource.as_str()) || resource == NAMESPACES {
            continue;
        }
        let (objects, _) = ctx.list(&ClusterScope::All, &resource, None, None);
        for (key, obj) in objects {
            let in_scheduled = scheduled_namespaces.contains(&(key.cluster.clone(), key.namespace.clone()));
            if !key.namespace.is_empty() && (in_scheduled || mentions_workloads(&obj)) {
                label_object(ctx, index, &key).await;
            }
        }
    }
}

/// React to one change: the index takes the object's current state, then
/// only what the change can affect is reconciled.
async fn changed(ctx: &ControllerContext, index: &mut SchedulingIndex, event: &WatchEvent) {
    let key = &event.key;
    match key.resource.as_str() {
        SYNC_TARGETS => {
            let current = ctx.get(key).map(|o| o.value());
            let (old, new) = index.apply_target(&key.cluster, &key.name, current.as_ref());
            if old == new {
                return; // a heartbeat, or nothing the scheduler reads
            }
            let touched: Vec<&Target> = old.iter().chain(new.iter()).collect();
            let affected = index.locations_selecting(&key.cluster, &touched);
            let keys: BTreeSet<String> = touched.iter().map(|t| t.key.clone()).collect();
            reconcile_locations(ctx, index, &key.cluster, Some(&affected)).await;
            for ws in workspaces_placing_in(ctx, index, &key.cluster) {
                // Only the Placements on a Location whose members changed
                // decide again (every Location with the target, before or
                // after, is among them); every other choice stands.
                let placements: BTreeSet<String> = affected
                    .iter()
                    .flat_map(|l| index.placements_on(&ws, l))
                    .map(|p| name_of(&p.value).to_string())
                    .collect();
                redecide(ctx, index, &ws, &placements, &keys).await;
            }
        }
        LOCATIONS => {
            let current = ctx.get(key).map(|o| o.value());
            let old = index.apply_location(&key.cluster, &key.name, current.as_ref());
            if !placement_relevant(event) {
                return;
            }
            let only = BTreeSet::from([key.name.clone()]);
            reconcile_locations(ctx, index, &key.cluster, Some(&only)).await;
            for ws in workspaces_placing_in(ctx, index, &key.cluster) {
                // Placements that select the Location before or after, or
                // are on it: no other's status or namespaces can change.
                let new = index.location(&key.cluster, &key.name).map(|l| l.value.clone());
                let concerned = |p: &placement::Compiled| {
                    [old.as_ref().map(|l| &l.value), new.as_ref()]
                        .into_iter()
                        .flatten()
                        .any(|l| placement::selects_location(p, l))
                        || placement::selected_location(&p.value) == Some(key.name.as_str())
                };
                if update_placements(ctx, index, &ws, concerned).await > 0 {
                    reconcile_namespaces(ctx, index, &ws).await;
                }
            }
        }
        PLACEMENTS => {
            let stored = ctx.get(key);
            let old = index.apply_placement(&key.cluster, &key.name, stored.as_ref());
            let name = key.name.as_str();
            update_placements(ctx, index, &key.cluster, |p| name_of(&p.value) == name).await;
            let new = index.placement(&key.cluster, name).cloned();
            if schedules_differently(old.as_deref(), new.as_deref()) {
                reconcile_namespaces(ctx, index, &key.cluster).await;
            }
        }
        ROLES | CLUSTER_ROLES | ROLE_BINDINGS | CLUSTER_ROLE_BINDINGS => {
            // A grant given or taken back. The event can arrive before the
            // write's own invalidation: forget the cached RBAC first.
            ctx.invalidate_rbac(&key.cluster);
            for ws in workspaces_placing_in(ctx, index, &key.cluster) {
                if ws != key.cluster {
                    reconcile_workspace(ctx, index, &ws).await;
                }
            }
            // A Role or RoleBinding is also workload a SyncTarget may sync.
            if !key.namespace.is_empty() {
                label_object(ctx, index, key).await;
            }
        }
        NAMESPACES => {
            let Some(stored) = ctx.get(key) else {
                return;
            };
            schedule_alone(ctx, index, key).await;
            // Its objects follow what it has, or had: a namespace that
            // leaves its last target leaves no trace to look for. What it
            // has now counts too, so the objects follow a namespace just
            // placed before the Placements' statuses are written.
            let placed_now = ctx.get(key).is_some_and(|ns| mentions_workloads(&ns));
            if placed_now
                || mentions_workloads(&event.object)
                || event.previous.as_deref().is_some_and(mentions_workloads)
            {
                label_contents(ctx, index, &key.cluster, &key.name).await;
            }
            // Whether a Placement is used changes only for those that
            // select the namespace, as it was or is.
            let mut labels = vec![&stored.labels, &event.object.labels];
            labels.extend(event.previous.as_deref().map(|p| &p.labels));
            update_placements(ctx, index, &key.cluster, |p| {
                labels.iter().any(|l| placement::selects_namespace(p, l))
            })
            .await;
        }
        r if !key.namespace.is_empty() && !NOT_LABELLED.contains(&r) => {
            label_object(ctx, index, key).await;
        }
        _ => {}
    }
}

/// Whether a Placement change can change where namespaces go: created or
/// deleted, or its spec, requester, selected Location or usability
/// changed — not its phase alone (the controller's own status write).
fn schedules_differently(old: Option<&placement::Compiled>, new: Option<&placement::Compiled>) -> bool {
    let (Some(old), Some(new)) = (old, new) else {
        return old.is_some() || new.is_some();
    };
    let requester = |p: &placement::Compiled| {
        p.value
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(grant::REQUESTER_ANNOTATION))
            .cloned()
    };
    let selected = |p: &placement::Compiled| p.value.pointer("/status/selectedLocation").cloned();
    old.value.get("spec") != new.value.get("spec")
        || requester(old) != requester(new)
        || selected(old) != selected(new)
        || old.usable != new.usable
}

/// Whether a Location change can matter to scheduling: not its status
/// (the controller's own write).
fn placement_relevant(event: &WatchEvent) -> bool {
    let (Some(previous), EventType::Modified) = (event.previous.as_deref(), event.kind) else {
        return true;
    };
    let (before, after) = (previous.value(), event.object.value());
    before.get("spec") != after.get("spec") || previous.labels != event.object.labels
}

/// Whether the JSON may carry TMC labels, annotations or finalizers.
fn mentions_workloads(obj: &StoredObject) -> bool {
    memchr::memmem::find(&obj.json, b"workload.kcp.io").is_some()
}

fn now() -> String {
    ferry_api::timestamp::now()
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Merge-patch the object at `key` (served as `info`), pinned to `rv`; a
/// conflict means a newer state is on its way, and with it another event.
async fn patch(
    ctx: &ControllerContext,
    info: ResourceInfo,
    key: &ObjectKey,
    subresource: Option<&str>,
    body: Value,
) {
    let r = match ctx.request_at(info, key, "patch", MANAGER) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(cluster = %key.cluster, name = %key.name, "scheduler cannot patch: {}", e.message);
            return;
        }
    };
    let r = match subresource {
        Some(s) => r.on_subresource(s),
        None => r,
    };
    match service::patch(&r, PatchType::Merge, body.to_string().into()).await {
        Ok(_) => {}
        Err(e) if e.code == 409 || e.code == 404 => {}
        Err(e) => tracing::warn!(
            cluster = %key.cluster,
            resource = %key.resource,
            namespace = %key.namespace,
            name = %key.name,
            "scheduler could not update the object: {}",
            e.message
        ),
    }
}

fn lookup(
    ctx: &ControllerContext,
    cluster: &str,
    group: &str,
    version: &str,
    resource: &str,
) -> Option<ResourceInfo> {
    ctx.lookup(Some(cluster), group, version, resource)
}

fn key_of(cluster: &str, resource: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        cluster: cluster.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

// ---------------------------------------------------------------- Locations

/// The default Location of `cluster`, and the status of its Locations
/// named in `only` (`None`: every one).
async fn reconcile_locations(
    ctx: &ControllerContext,
    index: &mut SchedulingIndex,
    cluster: &str,
    only: Option<&BTreeSet<String>>,
) {
    let mut names: BTreeSet<String> = match only {
        Some(names) => names.clone(),
        None => index.locations_in(cluster).map(|l| l.name.clone()).collect(),
    };
    if index.has_targets(cluster) && index.locations_in(cluster).next().is_none() {
        if let Some(created) = create_default_location(ctx, cluster).await {
            let name = name_of(&created).to_string();
            index.apply_location(cluster, &name, Some(&created));
            names.insert(name);
        }
    }
    let Some(info) = lookup(ctx, cluster, "scheduling.kcp.io", "v1alpha1", "locations") else {
        return;
    };
    for name in names {
        let members = index.members(cluster, &name);
        let available = members.iter().filter(|t| t.available()).count();
        let key = key_of(cluster, LOCATIONS, "", &name);
        let Some(stored) = ctx.get(&key) else {
            continue;
        };
        let loc = stored.value();
        let status = json!({"instances": members.len(), "availableInstances": available});
        if loc.pointer("/status/instances") != Some(&status["instances"])
            || loc.pointer("/status/availableInstances") != Some(&status["availableInstances"])
        {
            let body = json!({"metadata": {"resourceVersion": stored.rv.to_string()}, "status": status});
            patch(ctx, info.clone(), &key, Some("status"), body).await;
        }
        let labels = location_labels(&loc);
        let current = loc
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(LOCATION_LABELS_ANNOTATION))
            .and_then(Value::as_str);
        if current != Some(labels.as_str()) {
            let body = json!({"metadata": {"annotations": {LOCATION_LABELS_ANNOTATION: labels}}});
            patch(ctx, info.clone(), &key, None, body).await;
        }
    }
}

/// `k=v k2=v2`, sorted: kcp's `scheduling.kcp.io/labels`.
fn location_labels(loc: &Value) -> String {
    let mut pairs: Vec<String> = loc
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    pairs.join(" ")
}

async fn create_default_location(ctx: &ControllerContext, cluster: &str) -> Option<Value> {
    let obj = json!({
        "apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Location",
        "metadata": {"name": "default"},
        "spec": {
            "resource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"},
            "instanceSelector": {},
        },
    });
    match ctx
        .create(cluster, ("scheduling.kcp.io", "v1alpha1", "locations"), None, obj)
        .await
    {
        Ok(v) => Some(v),
        Err(e) if e.code == 409 => None,
        Err(e) => {
            tracing::warn!(cluster, "creating the default Location failed: {}", e.message);
            None
        }
    }
}

// ---------------------------------------------------------------- Placements

/// The logical cluster a Placement in `cluster` takes Locations from, and
/// that workspace's path as the Placement names it.
fn location_workspace(ctx: &ControllerContext, cluster: &str, placement: &Value) -> (Option<String>, String) {
    match placement
        .pointer("/spec/locationWorkspace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        Some(path) => (ctx.resolve_workspace(path).map(|lc| lc.name), path.to_string()),
        None => {
            let path = ctx
                .logical_cluster(cluster)
                .map(|lc| lc.path)
                .unwrap_or_else(|| cluster.to_string());
            (Some(cluster.to_string()), path)
        }
    }
}

/// Workspaces with a Placement taking Locations from `location_cluster`.
fn workspaces_placing_in(
    ctx: &ControllerContext,
    index: &SchedulingIndex,
    location_cluster: &str,
) -> BTreeSet<String> {
    index.workspaces_placing_in(location_cluster, |path| {
        ctx.resolve_workspace(path).map(|lc| lc.name)
    })
}

/// Where a Placement of `ws` may take Locations from, as
/// [`grant::location_source`] decides, without reading every Location.
enum Source {
    /// Its own workspace: no grant needed.
    Own(LogicalCluster),
    /// Another workspace, and the user whose grant there counts.
    Granted(LogicalCluster, UserInfo),
    /// The workspace does not exist, or nobody's grant can count; the
    /// recorded requester's name.
    NotUsable(String),
}

fn source_of(ctx: &ControllerContext, ws: &str, placement: &placement::Compiled) -> Source {
    let requester = placement.requester.clone();
    let path = placement
        .value
        .pointer("/spec/locationWorkspace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let lc = match path {
        Some(p) => ctx.resolve_workspace(p),
        None => ctx.logical_cluster(ws),
    };
    match (lc, requester) {
        (Some(lc), _) if lc.name == ws => Source::Own(lc),
        (Some(lc), Some(user)) => Source::Granted(lc, user),
        (_, requester) => Source::NotUsable(requester.map(|u| u.name).unwrap_or_default()),
    }
}

/// The Locations the Placement `p` of `ws` selects among those it may use
/// (`Err`: the requester's name, who may use none): what
/// [`grant::location_source`] then [`placement::status`] would keep, through
/// the index.
fn usable_selected(
    ctx: &ControllerContext,
    index: &SchedulingIndex,
    ws: &str,
    p: &placement::Compiled,
) -> Result<Vec<Value>, String> {
    let values = |ls: Vec<&index::Location>| ls.into_iter().map(|l| l.value.clone()).collect();
    match source_of(ctx, ws, p) {
        Source::NotUsable(requester) => Err(requester),
        Source::Own(lc) => Ok(values(index.locations_selected_by(&lc.name, p))),
        Source::Granted(lc, user) => {
            let selected = index.locations_selected_by(&lc.name, p);
            if ctx.may_bind_location(&user, &lc, None) {
                return Ok(values(selected));
            }
            let bindable: Vec<&index::Location> = selected
                .into_iter()
                .filter(|l| ctx.may_bind_location(&user, &lc, Some(&l.name)))
                .collect();
            // A grant for some Location makes the workspace usable even when
            // none of them is selected; a grant for none does not.
            if bindable.is_empty()
                && !index
                    .locations_in(&lc.name)
                    .any(|l| ctx.may_bind_location(&user, &lc, Some(&l.name)))
            {
                return Err(user.name);
            }
            Ok(values(bindable))
        }
    }
}

/// The Location `name` of the Placement's location workspace, if the
/// Placement may use it: its workspace's logical cluster.
fn usable_location(
    ctx: &ControllerContext,
    index: &SchedulingIndex,
    ws: &str,
    p: &placement::Compiled,
    name: &str,
) -> Option<String> {
    let lc = match source_of(ctx, ws, p) {
        Source::NotUsable(_) => return None,
        Source::Own(lc) => lc,
        Source::Granted(lc, user) => {
            if !(ctx.may_bind_location(&user, &lc, None) || ctx.may_bind_location(&user, &lc, Some(name))) {
                return None;
            }
            lc
        }
    };
    index.location(&lc.name, name).map(|_| lc.name)
}

/// The Placements of `ws`, then its namespaces.
async fn reconcile_workspace(ctx: &ControllerContext, index: &mut SchedulingIndex, ws: &str) {
    update_placements(ctx, index, ws, |_| true).await;
    reconcile_namespaces(ctx, index, ws).await;
}

/// Every namespace of `ws`.
async fn reconcile_namespaces(ctx: &ControllerContext, index: &SchedulingIndex, ws: &str) {
    let (namespaces, _) = ctx.list(&ClusterScope::One(ws.into()), NAMESPACES, None, None);
    let mut load = Load::default();
    for (key, _) in &namespaces {
        schedule_namespace(ctx, index, ws, &key.name, &mut load, Reach::All).await;
    }
}

/// The namespaces of `ws` that one of the Placements `placements` selects,
/// or that mention one of the target `keys` (a deleted target's finalizer
/// goes), each decided again for those Placements only.
async fn redecide(
    ctx: &ControllerContext,
    index: &SchedulingIndex,
    ws: &str,
    placements: &BTreeSet<String>,
    keys: &BTreeSet<String>,
) {
    let compiled: Vec<&Arc<placement::Compiled>> = placements
        .iter()
        .filter_map(|name| index.placement(ws, name))
        .filter(|p| p.usable)
        .collect();
    let (namespaces, _) = ctx.list(&ClusterScope::One(ws.into()), NAMESPACES, None, None);
    let mut load = Load::default();
    for (key, ns) in &namespaces {
        let selected = compiled
            .iter()
            .any(|p| placement::selects_namespace(p, &ns.labels));
        let mentions = keys
            .iter()
            .any(|k| memchr::memmem::find(&ns.json, k.as_bytes()).is_some());
        if selected || mentions {
            let reach = Reach::Some { placements, keys };
            schedule_namespace(ctx, index, ws, &key.name, &mut load, reach).await;
        }
    }
}

/// The status of the Placements of `ws` that `concerned` picks; how many
/// it picked. The index takes each status written.
async fn update_placements(
    ctx: &ControllerContext,
    index: &mut SchedulingIndex,
    ws: &str,
    concerned: impl Fn(&placement::Compiled) -> bool,
) -> usize {
    let names: Vec<String> = index
        .placements_in(ws)
        .filter(|p| concerned(p))
        .map(|p| name_of(&p.value).to_string())
        .collect();
    if names.is_empty() {
        return 0;
    }
    let Some(info) = lookup(ctx, ws, "scheduling.kcp.io", "v1alpha1", "placements") else {
        return names.len();
    };
    // The namespaces placed by some Placement, read once for all of them.
    let placed: Vec<Meta> = ctx
        .list(&ClusterScope::One(ws.into()), NAMESPACES, None, None)
        .0
        .iter()
        .map(|(_, ns)| Meta::of_stored(ns))
        .filter(|meta| meta.annotations.contains_key(PLACEMENT_ANNOTATION))
        .collect();
    for name in &names {
        let key = key_of(ws, PLACEMENTS, "", name);
        let Some(stored) = ctx.get(&key) else {
            continue;
        };
        let p = placement::compiled(&stored);
        let (_, path) = location_workspace(ctx, ws, &p.value);
        let locations =
            usable_selected(ctx, index, ws, &p).map_err(|requester| grant::not_usable(&path, &requester));
        let used = placed
            .iter()
            .any(|meta| placement::selects_namespace(&p, &meta.labels));
        let status = placement::status(&p, &path, locations.as_deref().map_err(String::as_str), used);
        if p.value.get("status") == Some(&status) {
            continue;
        }
        let mut body = json!({"metadata": {"resourceVersion": stored.rv.to_string()}, "status": status});
        if status.get("selectedLocation").is_none() && p.value.pointer("/status/selectedLocation").is_some() {
            // A merge patch keeps what it does not name: a Location no
            // longer usable is named to go.
            body["status"]["selectedLocation"] = Value::Null;
        }
        patch(ctx, info.clone(), &key, Some("status"), body).await;
        // What namespaces are scheduled by next is the status just written.
        index.apply_placement(ws, name, ctx.get(&key).as_ref());
    }
    names.len()
}

// ---------------------------------------------------------------- Namespaces

/// How many namespaces of a workspace each target key has, counted from
/// its namespaces only once a choice needs it: most passes keep every
/// namespace where it is.
#[derive(Default)]
struct Load {
    counts: Option<HashMap<String, usize>>,
}

impl Load {
    /// The counts of `ws`'s namespaces but for the one being decided
    /// (`mine`: its own), read now if not yet.
    fn counts(
        &mut self,
        ctx: &ControllerContext,
        ws: &str,
        mine: &HashMap<String, usize>,
    ) -> &mut HashMap<String, usize> {
        self.counts.get_or_insert_with(|| {
            let namespaces = ctx.list(&ClusterScope::One(ws.into()), NAMESPACES, None, None).0;
            let mut counts = load_of(namespaces.iter().map(|(_, ns)| Meta::of_stored(ns)));
            discount(&mut counts, mine);
            counts
        })
    }
}

fn discount(load: &mut HashMap<String, usize>, mine: &HashMap<String, usize>) {
    for (k, n) in mine {
        if let Some(l) = load.get_mut(k) {
            *l = l.saturating_sub(*n);
        }
    }
}

/// Which of a namespace's Placements a pass decides again.
#[derive(Clone, Copy)]
enum Reach<'a> {
    /// Every Placement that selects it, and its placement annotation: a
    /// change of the namespace or of a Placement, a resync.
    All,
    /// SyncTargets changed: of the Placements selecting it, those named in
    /// `placements` (on a Location whose members changed) decide again; of
    /// the targets it has, only `keys` (those that changed) may go unless
    /// one of them chooses it, and every other one stays (its Placement's
    /// choice stands: a namespace keeps a target while it is a member).
    Some {
        placements: &'a BTreeSet<String>,
        keys: &'a BTreeSet<String>,
    },
}

/// How many namespaces each target key has (labelled `Sync`, not leaving).
fn load_of(namespaces: impl Iterator<Item = Meta>) -> HashMap<String, usize> {
    let mut load = HashMap::new();
    for meta in namespaces {
        let deleting = meta.deleting();
        for (k, v) in &meta.labels {
            if let Some(key) = k.strip_prefix(WORKLOAD_STATE_LABEL_PREFIX) {
                if v == WORKLOAD_STATE_SYNC && !deleting.contains_key(key) {
                    *load.entry(key.to_string()).or_default() += 1;
                }
            }
        }
    }
    load
}

/// Whether the scheduler owns a namespace's (and its objects') labels: in a
/// workspace with Placements, or while it carries the placement
/// annotation (it was placed, and what it had is being handed over). In a
/// workspace that never used a Placement, labels are set by hand (as kcp's
/// syncer tests do) and left alone.
fn managed(workspace_has_placements: bool, namespace: &Meta) -> bool {
    workspace_has_placements || namespace.annotations.contains_key(PLACEMENT_ANNOTATION)
}

/// The namespace at `key` on its own: every Placement that selects it.
async fn schedule_alone(ctx: &ControllerContext, index: &SchedulingIndex, key: &ObjectKey) {
    schedule_namespace(
        ctx,
        index,
        &key.cluster,
        &key.name,
        &mut Load::default(),
        Reach::All,
    )
    .await;
}

/// The namespace's target labels, as far as `reach` decides them, and with
/// [`Reach::All`] its placement annotation. `load` is shared by the
/// namespaces of one pass: each one's choice weighs on the next.
async fn schedule_namespace(
    ctx: &ControllerContext,
    index: &SchedulingIndex,
    ws: &str,
    name: &str,
    load: &mut Load,
    reach: Reach<'_>,
) {
    if BLOCKED_NAMESPACES.contains(&name) {
        return;
    }
    let key = key_of(ws, NAMESPACES, "", name);
    let Some(stored) = ctx.get(&key) else {
        return;
    };
    let obj = stored.value();
    let meta = Meta::of(&obj);
    if !managed(index.has_placements(ws), &meta) {
        return;
    }
    let selects = |p: &&Arc<placement::Compiled>| p.usable && placement::selects_namespace(p, &meta.labels);
    let placements: Vec<&Arc<placement::Compiled>> = match reach {
        Reach::All => index.placements_in(ws).filter(selects).collect(),
        Reach::Some { placements, .. } => placements
            .iter()
            .filter_map(|p| index.placement(ws, p))
            .filter(selects)
            .collect(),
    };
    // This namespace's own assignments do not weigh on its choice.
    let mine = load_of(std::iter::once(meta.clone()));
    if let Some(counts) = load.counts.as_mut() {
        discount(counts, &mine);
    }
    let now_time = ctx.now();
    let deleting = meta.deleting();
    let current: BTreeSet<String> = meta
        .keys()
        .into_iter()
        .filter(|k| !deleting.contains_key(k))
        .collect();
    let namespace_id = format!("{ws}/{name}");
    let mut desired: BTreeSet<String> = match reach {
        Reach::All => BTreeSet::new(),
        Reach::Some { keys, .. } => current.difference(keys).cloned().collect(),
    };
    for p in &placements {
        let Some(loc_name) = placement::selected_location(&p.value) else {
            continue;
        };
        // The grant again, not the status: a status is anyone's to write
        // who may write the Placement, and a grant may have gone since.
        let Some(lc) = usable_location(ctx, index, ws, p, loc_name) else {
            continue;
        };
        let members = index.members(&lc, loc_name);
        // The first target it has that is a member, as kcp's order of
        // label keys has it.
        let keep = members
            .iter()
            .map(|t| t.key.as_str())
            .filter(|k| current.contains(*k))
            .min();
        let chosen = match targets::staying(&members, keep, now_time) {
            Some(stays) => Some(stays.to_string()),
            None => targets::choose(
                &namespace_id,
                &members,
                None,
                load.counts(ctx, ws, &mine),
                now_time,
            ),
        };
        desired.extend(chosen);
    }
    let mut patch_ = assignment::schedule_namespace(&meta, &desired, index, &now());
    let annotated = meta.annotations.contains_key(PLACEMENT_ANNOTATION);
    if matches!(reach, Reach::Some { .. }) {
        // Which Placements select it is not what changed.
    } else if !placements.is_empty() && !annotated {
        patch_
            .annotations
            .insert(PLACEMENT_ANNOTATION.into(), Some(String::new()));
    } else if placements.is_empty() && annotated && meta.keys().is_empty() && meta.deleting().is_empty() {
        // Last, once nothing is left to hand over: until then the
        // annotation keeps the namespace (and its objects) managed.
        patch_.annotations.insert(PLACEMENT_ANNOTATION.into(), None);
    }
    // What this namespace will have counts for the next one.
    if let Some(counts) = load.counts.as_mut() {
        for k in &desired {
            *counts.entry(k.clone()).or_default() += 1;
        }
    }
    if patch_.is_empty() {
        return;
    }
    let Some(info) = lookup(ctx, ws, "", "v1", "namespaces") else {
        return;
    };
    patch(ctx, info, &key, None, patch_.to_merge_patch(stored.rv)).await;
}

// ---------------------------------------------------------------- Objects

/// Label every object in the namespace as the namespace is.
async fn label_contents(ctx: &ControllerContext, index: &SchedulingIndex, ws: &str, namespace: &str) {
    let ns_key = key_of(ws, NAMESPACES, "", namespace);
    let Some(ns) = ctx.get(&ns_key) else {
        return;
    };
    let ns_mentions = mentions_workloads(&ns);
    for resource in ctx.resources_in(ws) {
        if NOT_LABELLED.contains(&resource.as_str()) || resource == NAMESPACES {
            continue;
        }
        let (objects, _) = ctx.list(&ClusterScope::One(ws.into()), &resource, Some(namespace), None);
        for (key, obj) in objects {
            if key.namespace.is_empty() || (!ns_mentions && !mentions_workloads(&obj)) {
                continue;
            }
            label_object(ctx, index, &key).await;
        }
    }
}

/// The namespace's metadata as an object of `resource` follows it: without the
/// targets that do not take that resource (a SyncTarget whose
/// `supportedAPIExports` list resources and not this one), so the object is
/// not scheduled there, or leaves it.
fn without_targets_refusing(index: &SchedulingIndex, mut namespace: Meta, resource: &str) -> Meta {
    for key in namespace.keys() {
        if index.target_by_key(&key).is_some_and(|t| !t.takes(resource)) {
            namespace
                .labels
                .remove(&format!("{WORKLOAD_STATE_LABEL_PREFIX}{key}"));
            namespace
                .annotations
                .remove(&ferry_api::well_known::workload_deletion_annotation(&key));
        }
    }
    namespace
}

/// Label one object as its namespace is.
async fn label_object(ctx: &ControllerContext, index: &SchedulingIndex, key: &ObjectKey) {
    let Some(obj) = ctx.get(key) else {
        return;
    };
    let ns_key = key_of(&key.cluster, NAMESPACES, "", &key.namespace);
    let Some(ns) = ctx.get(&ns_key) else {
        return;
    };
    if !mentions_workloads(&ns) && !mentions_workloads(&obj) {
        return;
    }
    if BLOCKED_NAMESPACES.contains(&key.namespace.as_str()) {
        return;
    }
    let ns_value = ns.value();
    let ns_meta = without_targets_refusing(index, Meta::of(&ns_value), &key.resource);
    if !managed(index.has_placements(&key.cluster), &ns_meta) {
        return;
    }
    let value = obj.value();
    let copied_by = |target: &str| {
        index
            .target_by_key(target)
            .is_some_and(|t| t.syncer_copies(&key.resource, &key.namespace, &key.name))
    };
    let patch_: MetaPatch =
        assignment::schedule_object(&Meta::of(&value), &ns_meta, index, &now(), copied_by);
    if patch_.is_empty() {
        return;
    }
    let Some(info) = ferry_server::controller::info_for_storage_key(ctx, &key.cluster, &key.resource) else {
        return;
    };
    patch(ctx, info, key, None, patch_.to_merge_patch(obj.rv)).await;
}
