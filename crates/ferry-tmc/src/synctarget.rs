//! Writes kcp TMC SyncTargets' label and status (what they should say is
//! `ferry_server::synctarget`): the key label `internal.workload.kcp.io/key`, the
//! virtual-workspace URLs, heartbeat conditions, `syncedResources`; and the
//! `Compatible` condition of the APIResourceImports compared.
//!
//! It also keeps each workspace's `imported-apis` export
//! (`ferry_server::synctarget::imported`).
//!
//! It follows SyncTargets, APIResourceImports, APIExports and
//! APIResourceSchemas (a change reaches the targets that support the
//! export), and keeps a timer per target whose heartbeat is fresh, so
//! `HeartbeatHealthy` turns False when the threshold passes with no write
//! at all.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{json, Value};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::follow::{self, Due, Follower};
use ferry_api::well_known::WORKLOAD_KEY_LABEL;
use ferry_server::apis;
use ferry_server::controller::ControllerContext;
use ferry_server::json;
use ferry_server::service;
use ferry_server::storage::{ClusterScope, EventType, ObjectKey, WatchEvent};
use ferry_server::synctarget::{self, imported, Resources, IMPORTS, SYNC_TARGETS};

const MANAGER: &str = "synctarget-controller";

/// What the controller keeps between changes.
struct Shared {
    threshold: Duration,
    deadlines: ferry_multicluster::heartbeat::Deadlines,
    /// Targets whose resources were judged but whose status write did
    /// not land: their next reconcile, even a heartbeat's, judges again.
    unjudged: Mutex<HashSet<ObjectKey>>,
}

/// Start the controller; `threshold` is `--sync-target-heartbeat-threshold`.
pub fn spawn(ctx: &ControllerContext, threshold: Duration) -> JoinHandle<()> {
    let shared = Shared {
        threshold,
        deadlines: Default::default(),
        unjudged: Default::default(),
    };
    follow::spawn(
        ctx.clone(),
        SyncTargets {
            shared,
            upkeep: Upkeep::default(),
        },
    )
}

struct SyncTargets {
    shared: Shared,
    upkeep: Upkeep,
}

/// The workspaces whose `imported-apis` upkeep is wanted, and when it runs.
///
/// The upkeep reads every APIResourceImport of a workspace, and each
/// syncer of a fleet writes its own imports as it starts: run on every
/// import's change, it was quadratic in the targets (two thirds of the
/// hub's CPU while 50 clusters registered). Changes now only note the
/// workspace; the upkeep runs once for all noted within `DEBOUNCE`, and a
/// pass that took `t` is followed by the next no sooner than `2t` after,
/// so however fast imports change the upkeep takes at most a third of the
/// controller's time.
#[derive(Default)]
struct Upkeep {
    workspaces: BTreeSet<String>,
    due: Option<Instant>,
    not_before: Option<Instant>,
}

impl Upkeep {
    const DEBOUNCE: Duration = Duration::from_millis(50);

    /// `workspace`'s `imported-apis` may need to change.
    fn want(&mut self, workspace: &str) {
        if !self.workspaces.contains(workspace) {
            self.workspaces.insert(workspace.to_string());
        }
        if self.due.is_none() {
            let soon = Instant::now() + Self::DEBOUNCE;
            self.due = Some(self.not_before.map_or(soon, |n| n.max(soon)));
        }
    }

    /// Wait until the upkeep is due (never, when nothing is wanted).
    async fn due(&self) {
        match self.due {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// The workspaces whose upkeep is due now (none before it is).
    fn take_due(&mut self) -> BTreeSet<String> {
        match self.due {
            Some(at) if at <= Instant::now() => {
                self.due = None;
                std::mem::take(&mut self.workspaces)
            }
            _ => BTreeSet::new(),
        }
    }

    /// A pass begun at `started` ended.
    fn ran(&mut self, started: Instant) {
        let now = Instant::now();
        self.not_before = Some(now + (now - started) * 2);
    }
}

impl Follower for SyncTargets {
    fn follows(&self, storage_key: &str) -> bool {
        matches!(
            storage_key,
            SYNC_TARGETS | IMPORTS | apis::EXPORTS | apis::SCHEMAS
        )
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.upkeep = Upkeep::default();
            ensure_imported_apis_everywhere(ctx).await;
            reconcile_all(ctx, &self.shared, ClusterScope::All).await;
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let key = &event.key;
            match key.resource.as_str() {
                SYNC_TARGETS => {
                    let now = event.object.value();
                    let before = event.previous.as_deref().map(|p| p.value());
                    let at = |o: Option<&Value>, p: &str| o.and_then(|o| o.pointer(p)).cloned();
                    let spec_changed = event.kind != EventType::Modified
                        || at(before.as_ref(), "/spec") != at(Some(&now), "/spec");
                    if spec_changed {
                        self.upkeep.want(&key.cluster);
                    }
                    if event.kind == EventType::Deleted {
                        self.shared.deadlines.clear(key);
                        self.shared.unjudged.lock().unwrap().remove(key);
                    } else {
                        // A heartbeat changes neither spec nor syncedResources:
                        // the schemas need not be compared again.
                        let resources = spec_changed
                            || at(before.as_ref(), "/status/syncedResources")
                                != at(Some(&now), "/status/syncedResources");
                        reconcile(ctx, &self.shared, key, resources).await;
                    }
                }
                // The target the import is for (before and after): only its
                // judgement reads the import. Every target of the workspace
                // here made the fleet's set-up quadratic, each syncer's
                // imports judging every other target again.
                IMPORTS => {
                    if !import_changed(event) {
                        return; // its status only (the Compatible condition written here)
                    }
                    self.upkeep.want(&key.cluster);
                    for name in import_targets(event) {
                        let target = ObjectKey {
                            cluster: key.cluster.clone(),
                            resource: SYNC_TARGETS.to_string(),
                            namespace: String::new(),
                            name,
                        };
                        reconcile(ctx, &self.shared, &target, true).await;
                    }
                }
                // An export or schema may be supported by targets anywhere.
                _ => {
                    if key.resource == apis::EXPORTS && !export_changed(event) {
                        return; // its status only (the apis controller's conditions)
                    }
                    let export = (key.resource == apis::EXPORTS).then_some(key.name.as_str());
                    for workspace in exports_changed(ctx, &self.shared, &key.cluster, export).await {
                        self.upkeep.want(&workspace);
                    }
                }
            }
        })
    }

    /// A target whose heartbeat deadline passed, with no write since, or
    /// the `imported-apis` upkeep of the workspaces changes noted.
    fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
        Box::pin(async move {
            tokio::select! {
                due = self.shared.deadlines.next() => due,
                _ = self.upkeep.due() => Due::Pass,
            }
        })
    }

    fn pass<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let workspaces = self.upkeep.take_due();
            if !workspaces.is_empty() {
                let started = Instant::now();
                for workspace in workspaces {
                    ensure_imported_apis(ctx, &workspace).await;
                }
                self.upkeep.ran(started);
            }
            for key in self.shared.deadlines.take_due() {
                reconcile(ctx, &self.shared, &key, false).await;
            }
        })
    }
}

/// The SyncTargets an import event concerns: the `spec.location` of the
/// import as it is and as it was.
fn import_targets(event: &WatchEvent) -> Vec<String> {
    let mut targets: Vec<String> = std::iter::once(&event.object)
        .chain(event.previous.as_ref())
        .filter_map(|import| synctarget::import_location(import))
        .collect();
    targets.dedup();
    targets
}

/// Whether `event` changes its object at any of `pointers`: always, unless
/// it modifies an object whose previous version it carries.
fn changed_at(event: &WatchEvent, pointers: &[&str]) -> bool {
    match (event.kind, event.previous.as_deref()) {
        (EventType::Modified, Some(previous)) => {
            let (before, now) = (previous.value(), event.object.value());
            pointers.iter().any(|p| before.pointer(p) != now.pointer(p))
        }
        _ => true,
    }
}

/// Whether an import event changes what the import says (not only the
/// conditions this controller writes on it).
fn import_changed(event: &WatchEvent) -> bool {
    changed_at(event, &["/spec", "/metadata/deletionTimestamp"])
}

/// Whether an export event changes what SyncTargets see of it: its schemas
/// or identity (not the conditions and URLs the apis controller writes).
fn export_changed(event: &WatchEvent) -> bool {
    changed_at(event, &["/spec", "/status/identityHash", "/metadata/uid"])
}

/// The export `export` of `cluster` (any export there, for a schema
/// change) changed: the SyncTargets supporting it look again. Returns
/// their workspaces, whose `imported-apis` may change too.
async fn exports_changed(
    ctx: &ControllerContext,
    shared: &Shared,
    cluster: &str,
    export: Option<&str>,
) -> Vec<String> {
    let mut workspaces = Vec::new();
    for (key, obj) in ctx.list(&ClusterScope::All, SYNC_TARGETS, None, None).0 {
        let supports = ctx
            .supported_exports(&key, &obj.value())
            .iter()
            .any(|(c, n)| c == cluster && export.is_none_or(|e| e == n));
        if supports {
            if !workspaces.contains(&key.cluster) {
                workspaces.push(key.cluster.clone());
            }
            reconcile(ctx, shared, &key, true).await;
        }
    }
    workspaces
}

/// [`ensure_imported_apis`] in every workspace that has SyncTargets.
async fn ensure_imported_apis_everywhere(ctx: &ControllerContext) {
    let mut clusters: Vec<String> = ctx
        .list(&ClusterScope::All, SYNC_TARGETS, None, None)
        .0
        .into_iter()
        .map(|(k, _)| k.cluster)
        .collect();
    clusters.sort();
    clusters.dedup();
    for cluster in clusters {
        ensure_imported_apis(ctx, &cluster).await;
    }
}

/// kcp's `imported-apis` export in `cluster`: schemas made from the
/// imports of its SyncTargets that none of their exports serve
/// (`synctarget::imported`). Created when first needed; stale schemas it
/// owns are deleted.
async fn ensure_imported_apis(ctx: &ControllerContext, cluster: &str) {
    let scope = ClusterScope::One(cluster.to_string());
    let export_key = apis::key(cluster, apis::EXPORTS, imported::EXPORT);
    let imports = ctx.list(&scope, IMPORTS, None, None).0;
    if imports.is_empty() && ctx.get(&export_key).is_none() {
        return; // nothing to publish, nothing published
    }
    // Only the targets an import names matter, and targets naming the same
    // exports support the same resources: each set is worked out once per
    // pass, not once per SyncTarget of the workspace (thousands, each change).
    let mut supported: HashMap<String, Arc<HashSet<(String, String)>>> = HashMap::new();
    let mut by_exports: HashMap<String, Arc<HashSet<(String, String)>>> = HashMap::new();
    let imports: Vec<imported::Import> = imports
        .into_iter()
        .filter_map(|(_, obj)| {
            let v = obj.value();
            let location = json::str_at(&v, "/spec/location").to_string();
            if !supported.contains_key(&location) {
                let key = apis::key(cluster, SYNC_TARGETS, &location);
                let target = ctx.get(&key)?.value();
                let exports = target
                    .pointer("/spec/supportedAPIExports")
                    .map(Value::to_string)
                    .unwrap_or_default();
                let set = by_exports
                    .entry(exports)
                    .or_insert_with(|| Arc::new(ctx.supported_resources(&key, &target)))
                    .clone();
                supported.insert(location.clone(), set);
            }
            Some(imported::Import {
                location,
                spec: v.get("spec").cloned().unwrap_or_default(),
            })
        })
        .collect();
    let desired = imported::desired_schemas(&imports, |location, group, resource| {
        // A resource no export may serve (a workspace's own Secrets, RBAC, ...)
        // is never published: listing it would have the export refused whole.
        let reserved = apis::reserved_resource(group, resource, ctx.is_builtin_group(group));
        synctarget::always_synced(group, resource)
            || reserved.is_some()
            || supported
                .get(location)
                .is_some_and(|s| s.contains(&(group.to_string(), resource.to_string())))
    });
    let export = match ctx.get(&export_key) {
        Some(e) => e.value(),
        None if desired.is_empty() => return,
        None => {
            let export = json!({"apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport",
                                "metadata": {"name": imported::EXPORT}, "spec": {}});
            match ctx
                .create(cluster, (apis::GROUP, apis::VERSION, "apiexports"), None, export)
                .await
            {
                Ok(created) => created,
                Err(e) => {
                    if e.code != 409 {
                        tracing::warn!(cluster, "creating the imported-apis APIExport failed: {e}");
                    }
                    return;
                }
            }
        }
    };
    let export_uid = json::str_at(&export, "/metadata/uid").to_string();
    for (name, mut schema) in desired.clone() {
        if ctx.get(&apis::key(cluster, apis::SCHEMAS, &name)).is_some() {
            continue;
        }
        schema["metadata"]["ownerReferences"] = json!([{
            "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIExport",
            "name": imported::EXPORT, "uid": export_uid, "controller": true,
        }]);
        if let Err(e) = ctx
            .create(
                cluster,
                (apis::GROUP, apis::VERSION, "apiresourceschemas"),
                None,
                schema,
            )
            .await
        {
            if e.code != 409 {
                tracing::warn!(cluster, schema = %name, "creating an imported-apis schema failed: {e}");
            }
        }
    }
    let names: Vec<&String> = desired.keys().collect();
    if export.pointer("/spec/latestResourceSchemas") != Some(&json!(names)) {
        let mut updated = export.clone();
        if json::set(&mut updated, &["spec", "latestResourceSchemas"], json!(names)).is_ok() {
            let request = ctx.request(
                cluster,
                (apis::GROUP, apis::VERSION, "apiexports"),
                None,
                Some(imported::EXPORT),
                "update",
                MANAGER,
            );
            if let Ok(request) = request {
                match service::update(&request, updated).await {
                    Ok(_) => {}
                    Err(e) if e.code == 409 || e.code == 404 => {}
                    Err(e) => tracing::warn!(cluster, "updating the imported-apis APIExport failed: {e}"),
                }
            }
        }
    }
    // Schemas the export owned and no longer lists.
    for (key, obj) in ctx.list(&scope, apis::SCHEMAS, None, None).0 {
        if desired.contains_key(&key.name) {
            continue;
        }
        let owned = obj
            .value()
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| refs.iter().any(|r| json::str_at(r, "/uid") == export_uid));
        if !owned {
            continue;
        }
        let request = ctx.request(
            cluster,
            (apis::GROUP, apis::VERSION, "apiresourceschemas"),
            None,
            Some(&key.name),
            "delete",
            MANAGER,
        );
        if let Ok(request) = request {
            if let Err(e) = service::delete(&request, &Default::default()).await {
                if e.code != 404 {
                    tracing::warn!(cluster, schema = %key.name, "deleting a stale imported-apis schema failed: {e}");
                }
            }
        }
    }
}

async fn reconcile_all(ctx: &ControllerContext, shared: &Shared, scope: ClusterScope) {
    for (key, _) in ctx.list(&scope, SYNC_TARGETS, None, None).0 {
        reconcile(ctx, shared, &key, true).await;
    }
}

/// Bring one SyncTarget's label and status (and its imports' conditions)
/// up to date; `resources` to judge its resources again (the exports or
/// imports changed), which compares schemas and is the costly part.
///
/// A status write that conflicts (the syncer's heartbeat writes every few
/// seconds, and a comparison under load can take longer than that) is made
/// again on the target as it now is, with the judgement carried over; if
/// it still does not land, the target's next reconcile judges again rather
/// than keeping the stored (outdated) judgement.
async fn reconcile(ctx: &ControllerContext, shared: &Shared, key: &ObjectKey, resources: bool) {
    const ATTEMPTS: usize = 5;
    let Some(stored) = ctx.get(key) else {
        shared.deadlines.clear(key);
        return;
    };
    let mut target = stored.value();
    if target.pointer("/metadata/deletionTimestamp").is_some() {
        shared.deadlines.clear(key);
        return;
    }
    let sync_target_key = ferry_api::workload::sync_target_key(&key.cluster, &key.name);
    let labelled = target
        .pointer("/metadata/labels")
        .and_then(|l| l.get(WORKLOAD_KEY_LABEL))
        .and_then(Value::as_str)
        == Some(sync_target_key.as_str());
    let exports_set = target
        .pointer("/spec/supportedAPIExports")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !labelled || !exports_set {
        // The strategy defaults `supportedAPIExports` on this update.
        let mut updated = target.clone();
        if json::set(
            &mut updated,
            &["metadata", "labels", WORKLOAD_KEY_LABEL],
            json!(sync_target_key),
        )
        .is_err()
        {
            return;
        }
        match write(ctx, key, None, updated).await {
            Ok(written) => target = written,
            Err(_) => return,
        }
    }
    let judge = resources || shared.unjudged.lock().unwrap().remove(key);
    let how = if judge { Resources::Judged } else { Resources::Kept };
    let mut desired = ctx.sync_target_status(key, &target, shared.threshold, how);
    let import_conditions = std::mem::take(&mut desired.import_conditions);
    for attempt in 1..=ATTEMPTS {
        if target.get("status") == Some(&desired.status) {
            break;
        }
        let mut updated = target;
        if json::set(&mut updated, &["status"], desired.status.clone()).is_err() {
            return;
        }
        match write(ctx, key, Some("status"), updated).await {
            Ok(_) => break,
            Err(409) if attempt < ATTEMPTS => {
                let Some(now) = ctx.get(key) else { return };
                target = now.value();
                let judgement = desired.judgement.clone();
                desired = ctx.sync_target_status(key, &target, shared.threshold, Resources::From(&judgement));
            }
            Err(_) => {
                if judge {
                    shared.unjudged.lock().unwrap().insert(key.clone());
                }
                break;
            }
        }
    }
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
    for (import_key, compatible) in import_conditions {
        set_import_condition(ctx, &import_key, compatible).await;
    }
}

/// Update the SyncTarget at `key` (its `subresource`) as the controller:
/// the stored object, or the refusal's code (404 and 409 are expected and
/// not logged).
async fn write(
    ctx: &ControllerContext,
    key: &ObjectKey,
    subresource: Option<&str>,
    obj: Value,
) -> Result<Value, u16> {
    let request = ctx
        .request(
            &key.cluster,
            (
                ferry_api::workload::GROUP,
                ferry_api::workload::VERSION,
                "synctargets",
            ),
            None,
            Some(&key.name),
            "update",
            MANAGER,
        )
        .map_err(|e| e.code)?;
    let request = match subresource {
        Some(s) => request.on_subresource(s),
        None => request,
    };
    match service::update(&request, obj).await {
        Ok(w) => Ok(w.object),
        Err(e) => {
            if e.code != 409 && e.code != 404 {
                tracing::warn!(cluster = %key.cluster, synctarget = %key.name, "writing SyncTarget failed: {e}");
            }
            Err(e.code)
        }
    }
}

/// Put `condition` (`Compatible`) on the import at `key` when it differs.
async fn set_import_condition(ctx: &ControllerContext, key: &ObjectKey, condition: Value) {
    let Some(stored) = ctx.get(key) else { return };
    let mut import = stored.value();
    let old = import.pointer("/status/conditions").cloned();
    let mut conditions: Vec<Value> = old
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| json::str_at(c, "/type") != "Compatible")
        .cloned()
        .collect();
    conditions.push(condition);
    let merged = json!(apis::merge_conditions(old.as_ref(), conditions));
    if old.as_ref() == Some(&merged) {
        return;
    }
    if json::set(&mut import, &["status", "conditions"], merged).is_err() {
        return;
    }
    let resource = (
        ferry_api::apiresource::GROUP,
        ferry_api::apiresource::VERSION,
        "apiresourceimports",
    );
    ferry_server::controller::update_status(ctx, key, resource, MANAGER, import).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst of changes shares one upkeep, and a slow upkeep spaces the
    /// next by twice its time.
    #[tokio::test(start_paused = true)]
    async fn the_imported_apis_upkeep_runs_once_per_burst_and_is_paced() {
        let mut upkeep = Upkeep::default();
        assert!(upkeep.take_due().is_empty(), "nothing wanted");
        let start = Instant::now();
        upkeep.want("root:a");
        tokio::time::advance(Duration::from_millis(10)).await;
        upkeep.want("root:b");
        upkeep.want("root:a");
        assert!(upkeep.take_due().is_empty(), "not before the debounce");
        upkeep.due().await;
        assert_eq!(
            Instant::now() - start,
            Upkeep::DEBOUNCE,
            "due the debounce after the first change"
        );
        let due: Vec<String> = upkeep.take_due().into_iter().collect();
        assert_eq!(due, ["root:a", "root:b"], "both workspaces, once each");
        assert!(upkeep.take_due().is_empty(), "taken");

        // The upkeep took 400 ms: the next waits 800 ms after it ended.
        let began = Instant::now();
        tokio::time::advance(Duration::from_millis(400)).await;
        upkeep.ran(began);
        let ended = Instant::now();
        upkeep.want("root:a");
        upkeep.due().await;
        assert_eq!(Instant::now() - ended, Duration::from_millis(800));
        assert_eq!(upkeep.take_due().len(), 1);

        // A quick one leaves only the debounce.
        let began = Instant::now();
        upkeep.ran(began);
        let ended = Instant::now();
        upkeep.want("root:c");
        upkeep.due().await;
        assert_eq!(Instant::now() - ended, Upkeep::DEBOUNCE);
    }
}
