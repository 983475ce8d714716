//! The hub side of kcp TMC's `workload.kcp.io/v1alpha1` SyncTarget: what its
//! status should say, computed from the store without writing anything.
//! `controllers::synctarget` writes it.
//!
//! - `status.virtualWorkspaces`: the syncer and upsyncer virtual-workspace
//!   URLs ([`ferry_api::workload::virtual_workspace`]);
//! - conditions `HeartbeatHealthy` (the syncer's last heartbeat is younger
//!   than the threshold) and its twin `HeartbeatReady` (the kcp workload
//!   syncer document's name), `SyncerReady` (a heartbeat ever arrived,
//!   reason `SyncerConnected`) and `Ready` (their summary, with the syncer's
//!   own `APIImporterReady` and `SyncerAuthorized` when it wrote them; reason
//!   `SyncTargetReady` when True), plus `ResourcesCompatible` naming the
//!   fields of any incompatible resource;
//! - the heartbeat under both documents' names: `lastSyncerHeartbeatTime`
//!   (kcp), `lastHeartbeatTime` and `heartbeat.lastHeartbeat` (the workload
//!   syncer document) always say the same time, the latest any of them says;
//! - `status.syncedResources`: every resource of every supported APIExport,
//!   `Pending` until the target's syncer imported its schema
//!   (APIResourceImport with `spec.location` = the target), then `Accepted`
//!   or `Incompatible` by [`compat::differences`]; and each namespaced
//!   built-in resource of the workspace that no export may serve (Roles,
//!   RoleBindings, LimitRanges, ...) once the syncer imported it (`--resources
//!   roles.rbac.authorization.k8s.io`): `Accepted` when the cluster serves a
//!   version the hub serves ([`workspace_builtin`]). Its objects reach the
//!   syncer from each workspace's own built-in resource, through the syncer
//!   virtual workspace, never through an APIExport.

pub mod compat;
pub mod edge;
pub mod imported;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::apis::{self, merge_conditions};
use crate::hub::Hub;
use crate::json;
use crate::storage::{ClusterScope, ObjectKey, StoredObject};

/// What `supportedAPIExports` means when it is empty: the `kubernetes`
/// export of the SyncTarget's own workspace (kcp's default).
pub fn default_supported_exports() -> Value {
    json!([{"export": "kubernetes"}])
}

/// Storage key of SyncTargets.
pub const SYNC_TARGETS: &str = "workload.kcp.io/synctargets";
/// The compute workspace's name under root (`ferry hub --compute-workspace`).
pub const COMPUTE_WORKSPACE: &str = "compute";
/// The name of the compute workspace's APIExport of Kubernetes kinds.
pub const COMPUTE_EXPORT: &str = "kubernetes";
/// Storage key of APIResourceImports.
pub const IMPORTS: &str = "apiresource.kcp.io/apiresourceimports";

/// kcp's default for `--sync-target-heartbeat-threshold`.
pub const DEFAULT_HEARTBEAT_THRESHOLD: Duration = Duration::from_secs(60);

pub use ferry_api::workload::ALWAYS_SYNCED;

/// Conditions this module owns on a SyncTarget; the others (`SyncerAuthorized`,
/// `APIImporterReady`) are the syncer's and are kept as written.
const OWNED: &[&str] = &[
    "HeartbeatHealthy",
    "HeartbeatReady",
    "SyncerReady",
    "ResourcesCompatible",
    "Ready",
];

/// The conditions `Ready` summarises, in the order their reasons win.
const SUMMARISED: &[&str] = &[
    "SyncerReady",
    "APIImporterReady",
    "HeartbeatHealthy",
    "SyncerAuthorized",
];

/// A kcp condition (`conditionsv1alpha1.Condition`) with a severity when False.
fn condition(type_: &str, ok: bool, severity: &str, reason: &str, message: &str) -> Value {
    let mut c = json!({
        "type": type_,
        "status": if ok { "True" } else { "False" },
        "lastTransitionTime": ferry_api::timestamp::now(),
    });
    if !ok {
        c["severity"] = json!(severity);
        c["reason"] = json!(reason);
        if !message.is_empty() {
            c["message"] = json!(message);
        }
    }
    c
}

/// A True condition with a reason and message (the kcp workload syncer
/// document shows them on `Ready` and `SyncerReady`).
fn condition_true(type_: &str, reason: &str, message: &str) -> Value {
    let mut c = condition(type_, true, "", "", "");
    c["reason"] = json!(reason);
    c["message"] = json!(message);
    c
}

/// The latest heartbeat time the status names under any of its three names
/// (an RFC 3339 string), if any parses; else the raw kcp field.
fn heartbeat_time(status: &Value) -> String {
    let names = [
        "/lastSyncerHeartbeatTime",
        "/lastHeartbeatTime",
        "/heartbeat/lastHeartbeat",
    ];
    names
        .iter()
        .map(|p| json::str_at(status, p))
        .filter_map(|raw| Some((DateTime::parse_from_rfc3339(raw).ok()?, raw)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, raw)| raw.to_string())
        .unwrap_or_else(|| json::str_at(status, "/lastSyncerHeartbeatTime").to_string())
}

/// The heartbeat time under each of its names, so readers of either document
/// see the same; the syncer's counters are kept.
fn align_heartbeat(status: &mut Value) {
    let at = heartbeat_time(status);
    if at.is_empty() {
        return;
    }
    status["lastSyncerHeartbeatTime"] = json!(at);
    status["lastHeartbeatTime"] = json!(at);
    if !status.get("heartbeat").is_some_and(Value::is_object) {
        status["heartbeat"] = json!({"count": 0, "errors": 0});
    }
    status["heartbeat"]["lastHeartbeat"] = json!(at);
}

/// What one SyncTarget's status should be now, and when to look again.
pub struct Desired {
    /// The whole status (fields the syncer writes kept as they are).
    pub status: Value,
    /// When the heartbeat turns stale, if it is fresh now.
    pub recheck_in: Option<Duration>,
    /// The `Compatible` condition each of the target's imports should carry.
    pub import_conditions: Vec<(ObjectKey, Value)>,
    /// The resource judgement in `status`, to carry over to a retry.
    pub judgement: Judgement,
}

/// What the exports and imports say of a target's resources: its
/// `syncedResources` (`None` for none) and its `ResourcesCompatible`
/// condition. It depends on the target's spec, the exports and the
/// imports, never on the status fields a heartbeat writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    pub synced: Option<Value>,
    pub compatible: Value,
}

/// Where [`desired`] takes the resource judgement from.
pub enum Resources<'a> {
    /// As the stored status has it, when it has one (a heartbeat: cheap).
    Kept,
    /// Compared again from the exports' and imports' schemas.
    Judged,
    /// One made moments ago for the same spec, e.g. before a write
    /// conflicted with a heartbeat: comparing again would only widen the
    /// window for the next conflict.
    From(&'a Judgement),
}

/// One resource an export serves, with its schema per served version.
struct Upstream {
    group: String,
    resource: String,
    identity_hash: String,
    /// Served versions, sorted, with their `openAPIV3Schema`.
    versions: BTreeMap<String, Value>,
}

impl Upstream {
    fn shown(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// The status the SyncTarget `target` (stored at `key`) should have at `now`.
///
/// `resources` says where `syncedResources` and `ResourcesCompatible` come from.
pub fn desired(
    hub: &Hub,
    key: &ObjectKey,
    target: &Value,
    threshold: Duration,
    now: DateTime<Utc>,
    resources: Resources<'_>,
) -> Desired {
    let old = target.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut status = match &old {
        Value::Object(_) => old.clone(),
        _ => json!({}),
    };
    let uid = json::str_at(target, "/metadata/uid");
    let vw = ferry_api::workload::virtual_workspace(&hub.external_url(), &key.cluster, &key.name, uid);
    status["virtualWorkspaces"] = json!([vw]);
    align_heartbeat(&mut status);

    let (heartbeat, recheck_in) = heartbeat_conditions(&status, threshold, now);
    let mut conditions = heartbeat;
    let kept = || {
        let compatible = old
            .get("conditions")
            .and_then(Value::as_array)?
            .iter()
            .find(|c| json::str_at(c, "/type") == "ResourcesCompatible")?;
        Some(Judgement {
            synced: old.get("syncedResources").cloned(),
            compatible: compatible.clone(),
        })
    };
    let mut import_conditions = Vec::new();
    let reused = match resources {
        Resources::From(judgement) => Some(judgement.clone()),
        Resources::Kept => kept(),
        Resources::Judged => None,
    };
    let judgement = reused.unwrap_or_else(|| {
        let (synced, incompatible, imports) = synced_resources(hub, key, target);
        import_conditions = imports;
        Judgement {
            synced: (!synced.is_empty()).then(|| json!(synced)),
            compatible: resources_compatible(&incompatible),
        }
    });
    match &judgement.synced {
        Some(synced) => status["syncedResources"] = synced.clone(),
        None => {
            if let Some(m) = status.as_object_mut() {
                m.remove("syncedResources");
            }
        }
    }
    conditions.push(judgement.compatible.clone());
    // The syncer's conditions stay as it wrote them.
    let theirs: Vec<Value> = old
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| !OWNED.contains(&json::str_at(c, "/type")))
        .cloned()
        .collect();
    conditions.extend(theirs);
    conditions.push(ready(&conditions));
    status["conditions"] = json!(merge_conditions(old.get("conditions"), conditions));
    Desired {
        status,
        recheck_in,
        import_conditions,
        judgement,
    }
}

/// `ResourcesCompatible`: False naming the differences when any resource
/// is incompatible.
fn resources_compatible(incompatible: &[String]) -> Value {
    if incompatible.is_empty() {
        condition("ResourcesCompatible", true, "", "", "")
    } else {
        condition(
            "ResourcesCompatible",
            false,
            "Warning",
            "IncompatibleSchema",
            &format!(
                "the cluster's schema cannot hold what the export describes: {}",
                incompatible.join("; ")
            ),
        )
    }
}

/// `HeartbeatHealthy`, its twin `HeartbeatReady` and `SyncerReady` from the
/// heartbeat time, and how long the heartbeat stays fresh.
fn heartbeat_conditions(
    status: &Value,
    threshold: Duration,
    now: DateTime<Utc>,
) -> (Vec<Value>, Option<Duration>) {
    let (conditions, recheck) = heartbeat_health(status, threshold, now);
    // The workload syncer document's name for the same condition.
    let mut twin = conditions[0].clone();
    twin["type"] = json!("HeartbeatReady");
    let mut all = vec![conditions[0].clone(), twin];
    all.extend(conditions.into_iter().skip(1));
    (all, recheck)
}

/// `HeartbeatHealthy` and `SyncerReady`, and how long the heartbeat stays fresh.
fn heartbeat_health(
    status: &Value,
    threshold: Duration,
    now: DateTime<Utc>,
) -> (Vec<Value>, Option<Duration>) {
    const REASON: &str = "ErrorHeartbeat";
    let raw = heartbeat_time(status);
    let raw = raw.as_str();
    if raw.is_empty() {
        let waiting = "no heartbeat from the syncer yet: deploy it (`kubectl ferry workload sync <name>`) and check its logs";
        return (
            vec![
                condition(
                    "HeartbeatHealthy",
                    false,
                    "Warning",
                    REASON,
                    "No heartbeat yet seen",
                ),
                condition("SyncerReady", false, "Warning", "SyncerNotConnected", waiting),
            ],
            None,
        );
    }
    let Ok(last) = DateTime::parse_from_rfc3339(raw) else {
        let bad = format!("status.lastSyncerHeartbeatTime {raw:?} is not an RFC 3339 time");
        return (
            vec![
                condition("HeartbeatHealthy", false, "Warning", REASON, &bad),
                condition("SyncerReady", false, "Warning", "SyncerNotConnected", &bad),
            ],
            None,
        );
    };
    let last = last.with_timezone(&Utc);
    let threshold_chrono = chrono::Duration::from_std(threshold).unwrap_or(chrono::Duration::MAX);
    let stale_at = last
        .checked_add_signed(threshold_chrono)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    let syncer_ready = |fresh: bool| {
        let message = if fresh {
            "Syncer is connected and sending heartbeats".to_string()
        } else {
            format!("Syncer connected; no heartbeat since {raw} (see HeartbeatReady)")
        };
        condition_true("SyncerReady", "SyncerConnected", &message)
    };
    if now > stale_at {
        let message = format!(
            "No heartbeat since {raw} (threshold {}s): is the syncer running and able to reach the hub?",
            threshold.as_secs_f64()
        );
        return (
            vec![
                condition("HeartbeatHealthy", false, "Warning", REASON, &message),
                syncer_ready(false),
            ],
            None,
        );
    }
    let fresh_for = (stale_at - now).to_std().unwrap_or_default();
    (
        vec![
            condition("HeartbeatHealthy", true, "", "", ""),
            syncer_ready(true),
        ],
        Some(fresh_for),
    )
}

/// `Ready`: True when every summarised condition present is True; else
/// False with the first False one's severity, reason and message.
fn ready(conditions: &[Value]) -> Value {
    let first_false = SUMMARISED.iter().find_map(|t| {
        conditions
            .iter()
            .find(|c| json::str_at(c, "/type") == *t && json::str_at(c, "/status") == "False")
    });
    match first_false {
        None => condition_true("Ready", "SyncTargetReady", "SyncTarget is ready and operational"),
        Some(c) => {
            let severity = match json::str_at(c, "/severity") {
                "" => "Error",
                s => s,
            };
            condition(
                "Ready",
                false,
                severity,
                json::str_at(c, "/reason"),
                json::str_at(c, "/message"),
            )
        }
    }
}

/// The SyncTarget an APIResourceImport is for (its `spec.location`), read
/// without building the import's schema: a workspace holds every target's
/// imports, and a target's judgement needs only its own.
pub fn import_location(import: &StoredObject) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Import {
        spec: Spec,
    }
    #[derive(serde::Deserialize)]
    struct Spec {
        location: String,
    }
    serde_json::from_slice::<Import>(&import.json)
        .ok()
        .map(|i| i.spec.location)
}

/// One imported version of a resource: version, the import, its schema.
type ImportedVersion = (String, ObjectKey, Value);

/// The supported exports' resources, with each one's state; the messages of
/// the incompatible ones; the `Compatible` condition of each import compared.
fn synced_resources(
    hub: &Hub,
    key: &ObjectKey,
    target: &Value,
) -> (Vec<Value>, Vec<String>, Vec<(ObjectKey, Value)>) {
    let upstream = upstream_resources(hub, key, target);
    // This target's imports, by (group, resource) then version.
    let (imports, _) = hub
        .store
        .list(&ClusterScope::One(key.cluster.clone()), IMPORTS, None, None);
    let mut by_resource: BTreeMap<(String, String), Vec<ImportedVersion>> = BTreeMap::new();
    for (ikey, obj) in imports {
        if import_location(&obj).as_deref() != Some(key.name.as_str()) {
            continue;
        }
        let import = obj.value();
        let group = match json::str_at(&import, "/spec/groupVersion/group") {
            "core" => "",
            g => g,
        };
        let resource = json::str_at(&import, "/spec/plural").to_string();
        let version = json::str_at(&import, "/spec/groupVersion/version").to_string();
        let schema = import
            .pointer("/spec/openAPIV3Schema")
            .cloned()
            .unwrap_or(Value::Null);
        by_resource
            .entry((group.to_string(), resource))
            .or_default()
            .push((version, ikey, schema));
    }
    let mut synced = Vec::new();
    let mut incompatible = Vec::new();
    let mut import_conditions = Vec::new();
    for up in &upstream {
        let imported = by_resource.get(&(up.group.clone(), up.resource.clone()));
        let state = match imported {
            None => "Pending",
            Some(imported) => {
                let mut problems = Vec::new();
                let mut accepted = false;
                for (version, ikey, schema) in imported {
                    let compatible = match up.versions.get(version) {
                        None => {
                            let served: Vec<&str> = up.versions.keys().map(String::as_str).collect();
                            let why = format!(
                                "the cluster serves {version}, the export serves {}",
                                served.join(", ")
                            );
                            problems.push(format!("{} {version}: {why}", up.shown()));
                            import_conditions.push((ikey.clone(), compatible_condition(false, &why)));
                            false
                        }
                        Some(up_schema) => {
                            let diffs = compat::differences(up_schema, schema);
                            let ok = diffs.is_empty();
                            if !ok {
                                problems.push(format!("{} {version}: {}", up.shown(), summary(&diffs)));
                            }
                            import_conditions
                                .push((ikey.clone(), compatible_condition(ok, &summary(&diffs))));
                            ok
                        }
                    };
                    accepted |= compatible;
                }
                if accepted {
                    "Accepted"
                } else {
                    incompatible.extend(problems);
                    "Incompatible"
                }
            }
        };
        synced.push(json!({
            "group": up.group,
            "resource": up.resource,
            "versions": up.versions.keys().collect::<Vec<_>>(),
            "identityHash": up.identity_hash,
            "state": state,
        }));
    }
    // The workspace's own built-ins the syncer imported (`--resources`).
    for ((group, resource), imported) in &by_resource {
        if upstream
            .iter()
            .any(|u| &u.group == group && &u.resource == resource)
        {
            continue;
        }
        let served: Vec<String> = hub
            .registry
            .resources(None)
            .into_iter()
            .filter(|i| !i.from_crd && &i.group == group && &i.resource == resource)
            .filter(|i| workspace_builtin(i, hub))
            .map(|i| i.version)
            .collect();
        if served.is_empty() {
            continue;
        }
        let accepted = imported.iter().any(|(v, _, _)| served.contains(v));
        if !accepted {
            let shown = if group.is_empty() {
                resource.clone()
            } else {
                format!("{resource}.{group}")
            };
            let versions: Vec<&str> = imported.iter().map(|(v, _, _)| v.as_str()).collect();
            incompatible.push(format!(
                "{shown}: the cluster serves {}, the workspace serves {}",
                versions.join(", "),
                served.join(", ")
            ));
        }
        synced.push(json!({
            "group": group,
            "resource": resource,
            "versions": served,
            "identityHash": "",
            "state": if accepted { "Accepted" } else { "Incompatible" },
        }));
    }
    (synced, incompatible, import_conditions)
}

/// Whether `info`, a resource the hub serves built in, is one a syncer may
/// sync from each workspace itself once its `--resources` names it: a
/// namespaced kind every workspace serves that no APIExport may serve (its
/// objects are the workspace's own: Roles, RoleBindings, LimitRanges,
/// Leases, ...), listable and watchable, and not Events (the syncer writes
/// those) or one every syncer syncs anyway.
pub fn workspace_builtin(info: &crate::registry::ResourceInfo, hub: &Hub) -> bool {
    let verb = |v: &str| info.verbs.iter().any(|have| have == v);
    info.namespaced
        && !info.from_crd
        && verb("list")
        && verb("watch")
        && verb("create")
        && info.resource != "events"
        && !always_synced(&info.group, &info.resource)
        && apis::reserved_resource(
            &info.group,
            &info.resource,
            hub.registry.is_builtin_group(&info.group),
        )
        .is_some()
}

/// How many differences a message names before it counts the rest.
const DIFFERENCES_SHOWN: usize = 5;

/// The first differences, and how many more there are: a cluster whose
/// schema is entirely different must not make a huge condition.
fn summary(diffs: &[String]) -> String {
    let mut text = diffs
        .iter()
        .take(DIFFERENCES_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if diffs.len() > DIFFERENCES_SHOWN {
        text.push_str(&format!(" (and {} more)", diffs.len() - DIFFERENCES_SHOWN));
    }
    text
}

fn compatible_condition(ok: bool, message: &str) -> Value {
    condition("Compatible", ok, "Warning", "IncompatibleSchema", message)
}

/// Whether a syncer syncs `(group, resource)` without any export listing it.
pub fn always_synced(group: &str, resource: &str) -> bool {
    ALWAYS_SYNCED.contains(&(group, resource))
}

/// The `(group, resource)`s the exports the SyncTarget supports serve,
/// other than `imported-apis` (which serves what they do not).
pub fn supported_resources(hub: &Hub, key: &ObjectKey, target: &Value) -> HashSet<(String, String)> {
    let mut out = HashSet::new();
    for supported in supported_export_refs(hub, key, target) {
        if supported.name == imported::EXPORT && supported.cluster == key.cluster {
            continue;
        }
        let Some(export) = hub
            .store
            .get(&apis::key(&supported.cluster, apis::EXPORTS, &supported.name))
        else {
            continue;
        };
        for (group, resource) in apis::listed_group_resources(hub, &supported.cluster, &export.value()) {
            let listed = supported
                .resources
                .as_ref()
                .is_none_or(|only| only.contains(&(group.clone(), resource.clone())));
            if listed && !ALWAYS_SYNCED.contains(&(group.as_str(), resource.as_str())) {
                out.insert((group, resource));
            }
        }
    }
    out
}

/// The exports the SyncTarget supports, as `(logical cluster, name)`: those
/// `spec.supportedAPIExports` names (the local `kubernetes` export when it
/// names none) whose workspace exists.
pub fn supported_exports(hub: &Hub, key: &ObjectKey, target: &Value) -> Vec<(String, String)> {
    supported_export_refs(hub, key, target)
        .into_iter()
        .map(|e| (e.cluster, e.name))
        .collect()
}

/// One export a SyncTarget supports, and which of its resources.
pub struct SupportedExport {
    /// The logical cluster holding the export.
    pub cluster: String,
    pub name: String,
    /// `(group, resource)`s the target takes of it (the kcp workload syncer
    /// document's `resource` entries); `None`: all of them.
    pub resources: Option<BTreeSet<(String, String)>>,
}

/// The `(group, resource)` of a `resource` entry in `supportedAPIExports`:
/// `<group>/<version>/<resource>`, or `<version>/<resource>` for the core group.
pub fn parse_resource_entry(entry: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = entry.split('/').collect();
    match parts.as_slice() {
        [_version, resource] if !resource.is_empty() => Some((String::new(), resource.to_string())),
        [group, _version, resource] if !resource.is_empty() => {
            Some((group.to_string(), resource.to_string()))
        }
        _ => None,
    }
}

/// Whether the SyncTarget limits itself to some resources of its exports
/// (any `supportedAPIExports` entry names a `resource`).
pub fn lists_resources(target: &Value) -> bool {
    target
        .pointer("/spec/supportedAPIExports")
        .and_then(Value::as_array)
        .is_some_and(|refs| refs.iter().any(|r| !json::str_at(r, "/resource").is_empty()))
}

/// The exports `spec.supportedAPIExports` names (the local `kubernetes`
/// export when it names none) whose workspace exists, entries naming the
/// same export merged. `kubernetes` with no path, where the target's
/// workspace has no such export, is kcp's in `root:compute` (what the kcp
/// workload syncer document's SyncTarget means).
pub fn supported_export_refs(hub: &Hub, key: &ObjectKey, target: &Value) -> Vec<SupportedExport> {
    let refs = match target
        .pointer("/spec/supportedAPIExports")
        .and_then(Value::as_array)
    {
        Some(r) if !r.is_empty() => r.clone(),
        _ => default_supported_exports()
            .as_array()
            .cloned()
            .unwrap_or_default(),
    };
    let mut out: Vec<SupportedExport> = Vec::new();
    for r in &refs {
        let name = json::str_at(r, "/export");
        let path = json::str_at(r, "/path");
        let cluster = if !path.is_empty() {
            hub.workspaces.resolve(path).map(|lc| lc.name)
        } else if name == COMPUTE_EXPORT
            && hub
                .store
                .get(&apis::key(&key.cluster, apis::EXPORTS, name))
                .is_none()
        {
            hub.workspaces
                .resolve(&format!("{}:{}", crate::workspace::ROOT, COMPUTE_WORKSPACE))
                .map(|lc| lc.name)
                .or_else(|| Some(key.cluster.clone()))
        } else {
            Some(key.cluster.clone())
        };
        let Some(cluster) = cluster else { continue };
        let resource = parse_resource_entry(json::str_at(r, "/resource"));
        match out.iter_mut().find(|e| e.cluster == cluster && e.name == name) {
            Some(existing) => match (&mut existing.resources, resource) {
                (Some(set), Some(one)) => {
                    set.insert(one);
                }
                (slot, None) => *slot = None,
                (None, Some(_)) => {}
            },
            None => out.push(SupportedExport {
                cluster,
                name: name.to_string(),
                resources: resource.map(|one| BTreeSet::from([one])),
            }),
        }
    }
    out
}

/// Every resource of every export `spec.supportedAPIExports` names (the
/// local `kubernetes` export when it names none), first export first.
fn upstream_resources(hub: &Hub, key: &ObjectKey, target: &Value) -> Vec<Upstream> {
    let mut out: Vec<Upstream> = Vec::new();
    for supported in supported_export_refs(hub, key, target) {
        let (export_cluster, name) = (supported.cluster, supported.name.as_str());
        let Some(export) = hub.store.get(&apis::key(&export_cluster, apis::EXPORTS, name)) else {
            continue;
        };
        let export = export.value();
        let identity_hash = match json::str_at(&export, "/status/identityHash") {
            "" => apis::identity_hash(&export_cluster, name, json::str_at(&export, "/metadata/uid")),
            h => h.to_string(),
        };
        for schema in apis::listed_schemas(&hub.store, &export_cluster, &export) {
            let (group, resource) = apis::schema_group_resource(&schema);
            let listed = supported
                .resources
                .as_ref()
                .is_none_or(|only| only.contains(&(group.clone(), resource.clone())));
            if !listed
                || ALWAYS_SYNCED.contains(&(group.as_str(), resource.as_str()))
                || out.iter().any(|u| u.group == group && u.resource == resource)
            {
                continue;
            }
            let versions = schema
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|v| v.get("served") != Some(&Value::Bool(false)))
                .map(|v| {
                    (
                        json::str_at(v, "/name").to_string(),
                        v.get("schema").cloned().unwrap_or(Value::Null),
                    )
                })
                .filter(|(n, _)| !n.is_empty())
                .collect();
            out.push(Upstream {
                group,
                resource,
                identity_hash: identity_hash.clone(),
                versions,
            });
        }
    }
    out.sort_by(|a, b| (&a.group, &a.resource).cmp(&(&b.group, &b.resource)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(conditions: &[Value]) -> Vec<(&str, &str)> {
        conditions
            .iter()
            .map(|c| (json::str_at(c, "/type"), json::str_at(c, "/status")))
            .collect()
    }

    #[test]
    fn no_heartbeat_is_neither_ready_nor_healthy() {
        let (c, recheck) = heartbeat_conditions(&json!({}), DEFAULT_HEARTBEAT_THRESHOLD, Utc::now());
        assert_eq!(
            types(&c),
            [
                ("HeartbeatHealthy", "False"),
                ("HeartbeatReady", "False"),
                ("SyncerReady", "False")
            ]
        );
        assert_eq!(json::str_at(&c[0], "/reason"), "ErrorHeartbeat");
        assert_eq!(json::str_at(&c[1], "/reason"), "ErrorHeartbeat");
        assert!(recheck.is_none());
    }

    #[test]
    fn a_fresh_heartbeat_is_healthy_until_the_threshold_passes() {
        let now = Utc::now();
        let at = (now - chrono::Duration::seconds(20)).to_rfc3339();
        let (c, recheck) = heartbeat_conditions(
            &json!({"lastSyncerHeartbeatTime": at}),
            Duration::from_secs(60),
            now,
        );
        assert_eq!(
            types(&c),
            [
                ("HeartbeatHealthy", "True"),
                ("HeartbeatReady", "True"),
                ("SyncerReady", "True")
            ]
        );
        assert_eq!(json::str_at(&c[2], "/reason"), "SyncerConnected");
        let recheck = recheck.unwrap();
        assert!(
            recheck > Duration::from_secs(39) && recheck <= Duration::from_secs(40),
            "{recheck:?}"
        );

        let later = now + chrono::Duration::seconds(41);
        let (c, recheck) = heartbeat_conditions(
            &json!({"lastSyncerHeartbeatTime": at}),
            Duration::from_secs(60),
            later,
        );
        assert_eq!(
            types(&c),
            [
                ("HeartbeatHealthy", "False"),
                ("HeartbeatReady", "False"),
                ("SyncerReady", "True")
            ]
        );
        assert_eq!(json::str_at(&c[0], "/reason"), "ErrorHeartbeat");
        assert!(json::str_at(&c[0], "/message").contains(&at));
        assert!(recheck.is_none());
    }

    #[test]
    fn the_heartbeat_time_is_the_same_under_every_name() {
        // A kcp syncer writes only its field: the document's names follow it.
        let mut s = json!({"lastSyncerHeartbeatTime": "2026-01-15T10:30:00Z"});
        align_heartbeat(&mut s);
        assert_eq!(s["lastHeartbeatTime"], "2026-01-15T10:30:00Z");
        assert_eq!(
            s["heartbeat"],
            json!({"count": 0, "errors": 0, "lastHeartbeat": "2026-01-15T10:30:00Z"})
        );
        // One written under the document's name only is as good; the latest wins,
        // and the syncer's counters stay.
        let mut s = json!({"lastSyncerHeartbeatTime": "2026-01-15T10:30:00Z",
                           "lastHeartbeatTime": "2026-01-15T10:31:00Z",
                           "heartbeat": {"count": 7, "errors": 1}});
        align_heartbeat(&mut s);
        assert_eq!(s["lastSyncerHeartbeatTime"], "2026-01-15T10:31:00Z");
        assert_eq!(s["heartbeat"]["count"], 7);
        assert_eq!(s["heartbeat"]["lastHeartbeat"], "2026-01-15T10:31:00Z");
        // No heartbeat: nothing invented.
        let mut s = json!({});
        align_heartbeat(&mut s);
        assert_eq!(s, json!({}));
    }

    #[test]
    fn resource_entries_name_group_and_resource() {
        let entry = |s: &str| parse_resource_entry(s);
        assert_eq!(
            entry("apps/v1/deployments"),
            Some(("apps".into(), "deployments".into()))
        );
        assert_eq!(entry("v1/services"), Some((String::new(), "services".into())));
        assert_eq!(entry(""), None);
        assert_eq!(entry("deployments"), None);
        assert_eq!(entry("a/b/c/d"), None);
        assert!(lists_resources(&json!({"spec": {"supportedAPIExports": [
            {"export": "kubernetes", "resource": "v1/services"}]}})));
        assert!(!lists_resources(
            &json!({"spec": {"supportedAPIExports": [{"export": "kubernetes"}]}})
        ));
    }

    #[test]
    fn a_long_list_of_differences_is_cut_short_and_counted() {
        let diffs: Vec<String> = (0..12)
            .map(|i| format!("spec.f{i}: missing downstream"))
            .collect();
        let s = summary(&diffs);
        assert!(s.starts_with("spec.f0: missing downstream, spec.f1"), "{s}");
        assert!(s.ends_with("(and 7 more)") && !s.contains("spec.f5"), "{s}");
        assert_eq!(summary(&diffs[..1]), "spec.f0: missing downstream");
    }

    #[test]
    fn ready_summarises_the_first_false_condition() {
        let ok = |t: &str| condition(t, true, "", "", "");
        let all_ok = [
            ok("SyncerReady"),
            ok("HeartbeatHealthy"),
            ok("ResourcesCompatible"),
        ];
        assert_eq!(json::str_at(&ready(&all_ok), "/status"), "True");
        assert_eq!(json::str_at(&ready(&all_ok), "/reason"), "SyncTargetReady");
        let unauthorized = condition(
            "SyncerAuthorized",
            false,
            "Error",
            "SyncerUnauthorized",
            "SSAR check failed for gvrs: x",
        );
        let c = ready(&[ok("SyncerReady"), ok("HeartbeatHealthy"), unauthorized]);
        assert_eq!(json::str_at(&c, "/status"), "False");
        assert_eq!(json::str_at(&c, "/reason"), "SyncerUnauthorized");
        // Incompatible resources do not make the target unready.
        let incompatible = condition("ResourcesCompatible", false, "Warning", "IncompatibleSchema", "x");
        assert_eq!(
            json::str_at(&ready(&[ok("SyncerReady"), incompatible]), "/status"),
            "True"
        );
    }
}
