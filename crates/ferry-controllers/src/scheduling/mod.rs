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
//! Differences from kcp v0.11, on purpose: each namespace gets its own
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
pub mod placement;
pub mod targets;

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ferry_api::well_known::{WORKLOAD_STATE_LABEL_PREFIX, WORKLOAD_STATE_SYNC};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use assignment::{Meta, MetaPatch};
use targets::Target;

use ferry_server::auth::rbac::{CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, ROLES, ROLE_BINDINGS};
use ferry_server::controller::ControllerContext;
use ferry_server::registry::ResourceInfo;
use ferry_server::service::{self, PatchType};
use ferry_server::storage::{ClusterScope, EventType, ObjectKey, StoredObject, WatchEvent};

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
    tokio::spawn(async move {
        let mut lease = ctx.lease();
        while lease.is_held() {
            let rv = ctx.resource_version();
            let Ok(mut events) = ctx.watch(rv) else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            resync(&ctx).await;
            let mut wake = next_eviction(&ctx);
            loop {
                let sleep = wake.map(|at| {
                    let wait = (at - ctx.now()).to_std().unwrap_or_default();
                    // Past the second the time names, so the target counts as evicting.
                    tokio::time::sleep(wait + Duration::from_millis(50))
                });
                tokio::select! {
                    _ = lease.lost() => return,
                    _ = async { sleep.expect("guarded").await }, if sleep.is_some() => {
                        resync(&ctx).await;
                        wake = next_eviction(&ctx);
                    }
                    event = events.next() => match event {
                        Some(event) => {
                            changed(&ctx, &event).await;
                            if event.key.resource == SYNC_TARGETS {
                                wake = next_eviction(&ctx);
                            }
                        }
                        None => break, // fell behind: resync
                    },
                }
            }
        }
    })
}

/// The next future `evictAfter` of any SyncTarget.
fn next_eviction(ctx: &ControllerContext) -> Option<DateTime<Utc>> {
    let now = ctx.now();
    all_targets(ctx)
        .into_iter()
        .filter_map(|t| t.evict_after)
        .filter(|t| *t > now)
        .min()
}

/// Look at everything.
async fn resync(ctx: &ControllerContext) {
    let (targets, _) = ctx.list(&ClusterScope::All, SYNC_TARGETS, None, None);
    let mut location_workspaces: BTreeSet<String> = targets.iter().map(|(k, _)| k.cluster.clone()).collect();
    let (locations, _) = ctx.list(&ClusterScope::All, LOCATIONS, None, None);
    location_workspaces.extend(locations.iter().map(|(k, _)| k.cluster.clone()));
    for cluster in &location_workspaces {
        reconcile_locations(ctx, cluster).await;
    }
    let (placements, _) = ctx.list(&ClusterScope::All, PLACEMENTS, None, None);
    let workspaces: BTreeSet<String> = placements.iter().map(|(k, _)| k.cluster.clone()).collect();
    for ws in &workspaces {
        reconcile_workspace(ctx, ws).await;
    }
    // Namespaces and objects anywhere that still carry scheduling metadata
    // (a Placement that went away, a target deleted while the hub was
    // down): one pass over every namespaced object.
    let (namespaces, _) = ctx.list(&ClusterScope::All, NAMESPACES, None, None);
    let mut scheduled_namespaces = BTreeSet::new();
    for (key, ns) in &namespaces {
        if mentions_workloads(ns) {
            if !workspaces.contains(&key.cluster) {
                schedule_namespace(ctx, &key.cluster, &key.name, None).await;
            }
            scheduled_namespaces.insert((key.cluster.clone(), key.name.clone()));
        }
    }
    let live = live_keys(ctx);
    for resource in ctx.resource_keys() {
        if NOT_LABELLED.contains(&resource.as_str()) || resource == NAMESPACES {
            continue;
        }
        let (objects, _) = ctx.list(&ClusterScope::All, &resource, None, None);
        for (key, obj) in objects {
            let in_scheduled = scheduled_namespaces.contains(&(key.cluster.clone(), key.namespace.clone()));
            if !key.namespace.is_empty() && (in_scheduled || mentions_workloads(&obj)) {
                label_object(ctx, &key, &live).await;
            }
        }
    }
}

/// React to one change.
async fn changed(ctx: &ControllerContext, event: &WatchEvent) {
    let key = &event.key;
    match key.resource.as_str() {
        SYNC_TARGETS | LOCATIONS => {
            if !placement_relevant(event) {
                return;
            }
            reconcile_locations(ctx, &key.cluster).await;
            for ws in workspaces_placing_in(ctx, &key.cluster) {
                reconcile_workspace(ctx, &ws).await;
            }
        }
        PLACEMENTS => reconcile_workspace(ctx, &key.cluster).await,
        ROLES | CLUSTER_ROLES | ROLE_BINDINGS | CLUSTER_ROLE_BINDINGS => {
            // A grant given or taken back. The event can arrive before the
            // write's own invalidation: forget the cached RBAC first.
            ctx.invalidate_rbac(&key.cluster);
            for ws in workspaces_placing_in(ctx, &key.cluster) {
                if ws != key.cluster {
                    reconcile_workspace(ctx, &ws).await;
                }
            }
            // A Role or RoleBinding is also workload a SyncTarget may sync.
            if !key.namespace.is_empty() {
                label_object(ctx, key, &BTreeSet::new()).await;
            }
        }
        NAMESPACES => {
            if ctx.get(key).is_none() {
                return;
            }
            schedule_namespace(ctx, &key.cluster, &key.name, None).await;
            // Its objects follow what it has, or had: a namespace that
            // leaves its last target leaves no trace to look for.
            if mentions_workloads(&event.object) || event.previous.as_deref().is_some_and(mentions_workloads)
            {
                label_contents(ctx, &key.cluster, &key.name).await;
            }
            update_placements(ctx, &key.cluster).await;
        }
        r if !key.namespace.is_empty() && !NOT_LABELLED.contains(&r) => {
            label_object(ctx, key, &BTreeSet::new()).await;
        }
        _ => {}
    }
}

/// Whether a SyncTarget or Location change can matter to scheduling: not
/// a heartbeat, nor a Location's status (the controller's own write).
fn placement_relevant(event: &WatchEvent) -> bool {
    let (Some(previous), EventType::Modified) = (event.previous.as_deref(), event.kind) else {
        return true;
    };
    let (before, after) = (previous.value(), event.object.value());
    if event.key.resource == SYNC_TARGETS {
        Target::from_object(&event.key.cluster, &before) != Target::from_object(&event.key.cluster, &after)
    } else {
        before.get("spec") != after.get("spec") || previous.labels != event.object.labels
    }
}

/// Whether the JSON may carry TMC labels, annotations or finalizers.
fn mentions_workloads(obj: &StoredObject) -> bool {
    memchr::memmem::find(&obj.json, b"workload.kcp.io").is_some()
}

fn now() -> String {
    ferry_api::timestamp::now()
}

fn all_targets(ctx: &ControllerContext) -> Vec<Target> {
    let (objs, _) = ctx.list(&ClusterScope::All, SYNC_TARGETS, None, None);
    objs.iter()
        .filter_map(|(k, o)| Target::from_object(&k.cluster, &o.value()))
        .collect()
}

fn live_keys(ctx: &ControllerContext) -> BTreeSet<String> {
    all_targets(ctx).into_iter().map(|t| t.key).collect()
}

fn targets_in(ctx: &ControllerContext, cluster: &str) -> Vec<Target> {
    let (objs, _) = ctx.list(&ClusterScope::One(cluster.into()), SYNC_TARGETS, None, None);
    objs.iter()
        .filter_map(|(k, o)| Target::from_object(&k.cluster, &o.value()))
        .collect()
}

fn list_values(ctx: &ControllerContext, cluster: &str, resource: &str) -> Vec<Value> {
    let (objs, _) = ctx.list(&ClusterScope::One(cluster.into()), resource, None, None);
    objs.iter().map(|(_, o)| o.value()).collect()
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

/// The default Location, and every Location's status, in `cluster`.
async fn reconcile_locations(ctx: &ControllerContext, cluster: &str) {
    let targets = targets_in(ctx, cluster);
    let mut locations = list_values(ctx, cluster, LOCATIONS);
    if !targets.is_empty() && locations.is_empty() {
        if let Some(created) = create_default_location(ctx, cluster).await {
            locations.push(created);
        }
    }
    let Some(info) = lookup(ctx, cluster, "scheduling.kcp.io", "v1alpha1", "locations") else {
        return;
    };
    for loc in locations {
        let members = targets::members(&targets, &loc);
        let available = members.iter().filter(|t| t.available()).count();
        let key = key_of(cluster, LOCATIONS, "", name_of(&loc));
        let Some(rv) = ctx.get(&key).map(|o| o.rv) else {
            continue;
        };
        let status = json!({"instances": members.len(), "availableInstances": available});
        if loc.pointer("/status/instances") != Some(&status["instances"])
            || loc.pointer("/status/availableInstances") != Some(&status["availableInstances"])
        {
            let body = json!({"metadata": {"resourceVersion": rv.to_string()}, "status": status});
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

/// The Placements of `ws`, each decoded and parsed once per version.
fn placements_in(ctx: &ControllerContext, ws: &str) -> Vec<Arc<placement::Compiled>> {
    let (objs, _) = ctx.list(&ClusterScope::One(ws.into()), PLACEMENTS, None, None);
    objs.iter().map(|(_, o)| placement::compiled(o)).collect()
}

/// Workspaces with a Placement taking Locations from `location_cluster`.
fn workspaces_placing_in(ctx: &ControllerContext, location_cluster: &str) -> BTreeSet<String> {
    let (placements, _) = ctx.list(&ClusterScope::All, PLACEMENTS, None, None);
    placements
        .iter()
        .filter(|(k, p)| {
            location_workspace(ctx, &k.cluster, &placement::compiled(p).value)
                .0
                .as_deref()
                == Some(location_cluster)
        })
        .map(|(k, _)| k.cluster.clone())
        .collect()
}

/// The Placements of `ws`, then its namespaces.
async fn reconcile_workspace(ctx: &ControllerContext, ws: &str) {
    update_placements(ctx, ws).await;
    let namespaces = list_values(ctx, ws, NAMESPACES);
    let mut load = load_of(&namespaces);
    for ns in &namespaces {
        schedule_namespace(ctx, ws, name_of(ns), Some(&mut load)).await;
    }
}

/// Every Placement's status in `ws`.
async fn update_placements(ctx: &ControllerContext, ws: &str) {
    let placements = placements_in(ctx, ws);
    if placements.is_empty() {
        return;
    }
    let Some(info) = lookup(ctx, ws, "scheduling.kcp.io", "v1alpha1", "placements") else {
        return;
    };
    let namespaces = list_values(ctx, ws, NAMESPACES);
    for p in placements {
        let (_, path) = location_workspace(ctx, ws, &p.value);
        let locations = match ctx.location_source(ws, &p.value) {
            grant::LocationSource::Usable(_, locations) => Ok(locations),
            grant::LocationSource::NotUsable { requester } => Err(grant::not_usable(&path, &requester)),
        };
        let used = namespaces.iter().any(|ns| {
            let meta = Meta::of(ns);
            meta.annotations.contains_key(PLACEMENT_ANNOTATION)
                && placement::selects_namespace(&p, &meta.labels)
        });
        let status = placement::status(&p, &path, locations.as_deref().map_err(String::as_str), used);
        if p.value.get("status") == Some(&status) {
            continue;
        }
        let key = key_of(ws, PLACEMENTS, "", name_of(&p.value));
        let Some(rv) = ctx.get(&key).map(|o| o.rv) else {
            continue;
        };
        let mut body = json!({"metadata": {"resourceVersion": rv.to_string()}, "status": status});
        if status.get("selectedLocation").is_none() && p.value.pointer("/status/selectedLocation").is_some() {
            // A merge patch keeps what it does not name: a Location no
            // longer usable is named to go.
            body["status"]["selectedLocation"] = Value::Null;
        }
        patch(ctx, info.clone(), &key, Some("status"), body).await;
    }
}

// ---------------------------------------------------------------- Namespaces

/// How many namespaces each target key has (labelled `Sync`, not leaving).
fn load_of(namespaces: &[Value]) -> HashMap<String, usize> {
    let mut load = HashMap::new();
    for ns in namespaces {
        let meta = Meta::of(ns);
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

/// The namespace's placement annotation and target labels.
async fn schedule_namespace(
    ctx: &ControllerContext,
    ws: &str,
    name: &str,
    load: Option<&mut HashMap<String, usize>>,
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
    let all_placements = placements_in(ctx, ws);
    if !managed(!all_placements.is_empty(), &meta) {
        return;
    }
    let placements: Vec<Arc<placement::Compiled>> = all_placements
        .into_iter()
        .filter(|p| placement::usable(&p.value) && placement::selects_namespace(p, &meta.labels))
        .collect();
    let mut own_load;
    let load = match load {
        Some(l) => l,
        None => {
            own_load = load_of(&list_values(ctx, ws, NAMESPACES));
            &mut own_load
        }
    };
    // This namespace's own assignments do not weigh on its choice.
    let mine = load_of(std::slice::from_ref(&obj));
    for (k, n) in &mine {
        if let Some(l) = load.get_mut(k) {
            *l = l.saturating_sub(*n);
        }
    }
    let now_time = ctx.now();
    let deleting = meta.deleting();
    let current: Vec<String> = meta
        .keys()
        .into_iter()
        .filter(|k| !deleting.contains_key(k))
        .collect();
    let namespace_id = format!("{ws}/{name}");
    let mut desired = BTreeSet::new();
    for p in &placements {
        let Some(loc_name) = p
            .value
            .pointer("/status/selectedLocation/locationName")
            .and_then(Value::as_str)
        else {
            continue;
        };
        // The grant again, not the status: a status is anyone's to write
        // who may write the Placement, and a grant may have gone since.
        let grant::LocationSource::Usable(lc, usable) = ctx.location_source(ws, &p.value) else {
            continue;
        };
        let Some(location) = usable.iter().find(|l| name_of(l) == loc_name) else {
            continue;
        };
        let all = targets_in(ctx, &lc.name);
        let members = targets::members(&all, location);
        let keep = current
            .iter()
            .find(|k| members.iter().any(|t| t.key == **k))
            .map(String::as_str);
        if let Some(chosen) = targets::choose(&namespace_id, &members, keep, load, now_time) {
            desired.insert(chosen);
        }
    }
    let mut patch_ = assignment::schedule_namespace(&meta, &desired, &live_keys(ctx), &now());
    let annotated = meta.annotations.contains_key(PLACEMENT_ANNOTATION);
    if !placements.is_empty() && !annotated {
        patch_
            .annotations
            .insert(PLACEMENT_ANNOTATION.into(), Some(String::new()));
    } else if placements.is_empty() && annotated && meta.keys().is_empty() && meta.deleting().is_empty() {
        // Last, once nothing is left to hand over: until then the
        // annotation keeps the namespace (and its objects) managed.
        patch_.annotations.insert(PLACEMENT_ANNOTATION.into(), None);
    }
    // What this namespace will have counts for the next one.
    for k in &desired {
        *load.entry(k.clone()).or_default() += 1;
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
async fn label_contents(ctx: &ControllerContext, ws: &str, namespace: &str) {
    let ns_key = key_of(ws, NAMESPACES, "", namespace);
    let Some(ns) = ctx.get(&ns_key) else {
        return;
    };
    let ns_mentions = mentions_workloads(&ns);
    let live = live_keys(ctx);
    for resource in ctx.resources_in(ws) {
        if NOT_LABELLED.contains(&resource.as_str()) || resource == NAMESPACES {
            continue;
        }
        let (objects, _) = ctx.list(&ClusterScope::One(ws.into()), &resource, Some(namespace), None);
        for (key, obj) in objects {
            if key.namespace.is_empty() || (!ns_mentions && !mentions_workloads(&obj)) {
                continue;
            }
            label_object(ctx, &key, &live).await;
        }
    }
}

/// The namespace's metadata as an object of `resource` follows it: without the
/// targets that do not take that resource (a SyncTarget whose
/// `supportedAPIExports` list resources and not this one), so the object is
/// not scheduled there, or leaves it.
fn without_targets_refusing(ctx: &ControllerContext, mut namespace: Meta, resource: &str) -> Meta {
    let keys = namespace.keys();
    if keys.is_empty() {
        return namespace;
    }
    for target in all_targets(ctx) {
        if keys.contains(&target.key) && !target.takes(resource) {
            namespace
                .labels
                .remove(&format!("{WORKLOAD_STATE_LABEL_PREFIX}{}", target.key));
            namespace
                .annotations
                .remove(&ferry_api::well_known::workload_deletion_annotation(&target.key));
        }
    }
    namespace
}

/// Label one object as its namespace is (`live`: target keys, empty to look them up).
async fn label_object(ctx: &ControllerContext, key: &ObjectKey, live: &BTreeSet<String>) {
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
    let ns_meta = without_targets_refusing(ctx, Meta::of(&ns_value), &key.resource);
    let (placements, _) = ctx.list(&ClusterScope::One(key.cluster.clone()), PLACEMENTS, None, None);
    if !managed(!placements.is_empty(), &ns_meta) {
        return;
    }
    let looked_up;
    let live = if live.is_empty() {
        looked_up = live_keys(ctx);
        &looked_up
    } else {
        live
    };
    let value = obj.value();
    let patch_: MetaPatch = assignment::schedule_object(&Meta::of(&value), &ns_meta, live, &now());
    if patch_.is_empty() {
        return;
    }
    let Some(info) = crate::info_for_storage_key(ctx, &key.cluster, &key.resource) else {
        return;
    };
    patch(ctx, info, key, None, patch_.to_merge_patch(obj.rv)).await;
}
