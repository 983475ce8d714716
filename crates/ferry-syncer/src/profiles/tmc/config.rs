//! The TMC profile's configuration source: the SyncTarget.
//!
//! Before the engine starts, [`connect`] reads the SyncTarget in its workspace, polling
//! until `status.virtualWorkspaces` is set, refuses a SyncTarget whose uid is not
//! `--sync-target-uid`, and returns the virtual workspace URLs the engine reads and
//! writes. While the syncer runs, [`Tmc`] follows `status.syncedResources` (state
//! `Accepted`), checks each type with a downstream SelfSubjectAccessReview (condition
//! `SyncerAuthorized`), sends the heartbeat, and imports the cluster's schemas
//! ([`super::importer`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use serde_json::{json, Value};

use ferry_api::well_known::KCP_CLUSTER_ANNOTATION;
use ferry_api::workload::{ResourceCompatibleState, SyncTarget};

use super::locator::SyncTargetLocator;
use super::{always_synced, SyncedType, Tmc};
use crate::engine::Engine;
use crate::profile::ConfigSource;
use crate::side::{Reachability, Side};

/// What a TMC syncer needs beyond the engine's options.
#[derive(Clone, Debug)]
pub struct TmcOptions {
    /// The SyncTarget's uid (`--sync-target-uid`): a SyncTarget with another uid is
    /// refused.
    pub sync_target_uid: String,
    /// `--heartbeat-period`.
    pub heartbeat_period: Duration,
    /// `--downstream-namespace-clean-delay`.
    pub namespace_clean_delay: Duration,
    /// How often the SyncTarget is read until its virtual workspaces are set, and
    /// re-read while the syncer runs (kcp: 5 s).
    pub sync_target_poll: Duration,
    /// `--resources`: types whose schemas the syncer imports besides those the
    /// SyncTarget lists (`<plural>.<group>`); the hub then judges them.
    pub resources: Vec<String>,
    /// `--api-import-poll-interval`: how often the cluster's schemas are imported.
    pub api_import_poll_interval: Duration,
    /// The SyncTarget's workspace path (`root:my-org`), for the copies'
    /// `syncer.kcp.io/workspace`; set from the upstream URL when connecting.
    pub workspace_path: String,
}

impl TmcOptions {
    /// kcp's defaults for the SyncTarget with uid `uid`.
    pub fn new(uid: &str) -> Self {
        TmcOptions {
            sync_target_uid: uid.to_string(),
            heartbeat_period: super::DEFAULT_HEARTBEAT,
            namespace_clean_delay: Duration::from_secs(30),
            sync_target_poll: Duration::from_secs(5),
            resources: vec![],
            api_import_poll_interval: Duration::from_secs(60),
            workspace_path: String::new(),
        }
    }
}

pub(super) fn sync_targets() -> ApiResource {
    ApiResource::erase::<SyncTarget>(&())
}

/// Where a TMC syncer reads and writes, from its SyncTarget.
pub struct Connection {
    /// The profile's state.
    pub tmc: Arc<Tmc>,
    /// The syncer virtual workspace (credentials of the workspace config).
    pub syncer: kube::Config,
    /// The upsyncer virtual workspace.
    pub upsyncer: kube::Config,
}

/// The URLs of a SyncTarget's virtual workspaces, as its status advertises them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VirtualWorkspaces {
    /// `syncerURL`: where objects going down are read and their status written.
    pub syncer: String,
    /// `upsyncerURL`: where objects going up are written (the syncer's, if not given).
    pub upsyncer: String,
}

impl VirtualWorkspaces {
    /// The virtual workspaces `sync_target` advertises in `status.virtualWorkspaces`,
    /// once it does.
    pub fn advertised(sync_target: &Value) -> Option<VirtualWorkspaces> {
        let vw = &sync_target["status"]["virtualWorkspaces"][0];
        let syncer = vw["syncerURL"].as_str().filter(|url| !url.is_empty())?;
        let upsyncer = vw["upsyncerURL"]
            .as_str()
            .filter(|url| !url.is_empty())
            .unwrap_or(syncer);
        Some(VirtualWorkspaces {
            syncer: syncer.to_string(),
            upsyncer: upsyncer.to_string(),
        })
    }

    /// What moved from `before` to these, as a log line says it (`None`: nothing).
    pub fn moved_from(&self, before: &VirtualWorkspaces) -> Option<String> {
        let moved = |what: &str, from: &str, to: &str| {
            format!("its {what} virtual workspace moved from {from} to {to}")
        };
        let changes: Vec<String> = [
            ("syncer", &before.syncer, &self.syncer),
            ("upsyncer", &before.upsyncer, &self.upsyncer),
        ]
        .into_iter()
        .filter(|(_, from, to)| from != to)
        .map(|(what, from, to)| moved(what, from, to))
        .collect();
        (!changes.is_empty()).then(|| changes.join("; "))
    }
}

/// Where a connected syncer reads and writes: the virtual workspaces its SyncTarget
/// advertised last, and the configuration of the SyncTarget's workspace, whose
/// credentials the clients for them use.
pub(super) struct Views {
    workspace: kube::Config,
    urls: VirtualWorkspaces,
}

/// How often the SyncTarget is read while its syncer virtual workspace does not answer
/// (at most): the hub behind it may have moved, and the SyncTarget says where to.
const UNANSWERED_POLL: Duration = Duration::from_secs(1);
/// How long a virtual workspace has to answer when connecting.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Reads SyncTarget `name` through `workspace` (a config for its workspace), waiting
/// until its virtual workspaces are set and its syncer virtual workspace answers (a
/// SyncTarget read moments after its hub restarted may still advertise where the hub
/// was). Fails at once if its uid is not `options.sync_target_uid`.
pub async fn connect(
    workspace: kube::Config,
    name: &str,
    mut options: TmcOptions,
) -> anyhow::Result<Connection> {
    let client = kube::Client::try_from(workspace.clone()).context("building the upstream client")?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &sync_targets());
    let url = workspace.cluster_url.to_string();
    if let Some((_, path)) = url.trim_end_matches('/').rsplit_once("/clusters/") {
        options.workspace_path = path.to_string();
    }
    let mut said = String::new();
    let (target, urls, syncer, upsyncer) = loop {
        let mut period = options.sync_target_poll;
        let why = match api.get(name).await {
            Ok(obj) => {
                let obj = serde_json::to_value(obj).unwrap_or_default();
                let uid = obj["metadata"]["uid"].as_str().unwrap_or_default();
                anyhow::ensure!(
                    uid == options.sync_target_uid,
                    "SyncTarget {name} at {url} has uid {uid}, not --sync-target-uid {}: it was deleted and created again, or the flag names another one; regenerate the syncer's manifest for the SyncTarget as it is now",
                    options.sync_target_uid
                );
                let cluster = obj["metadata"]["annotations"][KCP_CLUSTER_ANNOTATION]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                anyhow::ensure!(
                    !cluster.is_empty(),
                    "SyncTarget {name} at {url} has no {KCP_CLUSTER_ANNOTATION} annotation: the upstream is not a kcp-style server (a Ferry hub or kcp)"
                );
                match VirtualWorkspaces::advertised(&obj) {
                    Some(urls) => {
                        let syncer = config_at(&workspace, name, &urls.syncer)?;
                        let upsyncer = config_at(&workspace, name, &urls.upsyncer)?;
                        match answers(&syncer).await {
                            Ok(()) => {
                                let target = SyncTargetLocator {
                                    cluster,
                                    name: name.to_string(),
                                    uid: uid.to_string(),
                                    ..Default::default()
                                };
                                break (target, urls, syncer, upsyncer);
                            }
                            Err(e) => {
                                period = period.min(UNANSWERED_POLL);
                                format!(
                                    "SyncTarget {name} advertises its syncer virtual workspace at {}, which does not answer ({e})",
                                    urls.syncer
                                )
                            }
                        }
                    }
                    None => format!("SyncTarget {name} has no status.virtualWorkspaces yet"),
                }
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                format!("SyncTarget {name} does not exist at {url} yet (create it, e.g. with kubectl ferry workload sync)")
            }
            Err(e) => format!("reading SyncTarget {name} at {url} failed: {e}"),
        };
        if why != said {
            tracing::info!(sync_target = name, "{why}; checking again every {period:?}");
            said = why;
        }
        tokio::time::sleep(period).await;
    };
    tracing::info!(sync_target = name, cluster = %target.cluster, syncer = %urls.syncer, upsyncer = %urls.upsyncer, "connected to the SyncTarget's virtual workspaces");
    let tmc = Tmc::new(target, options, client);
    *tmc.views.lock() = Some(Views { workspace, urls });
    Ok(Connection {
        tmc,
        syncer,
        upsyncer,
    })
}

/// `workspace`'s configuration (its credentials) for the virtual workspace at `url`
/// that SyncTarget `name` advertises.
fn config_at(workspace: &kube::Config, name: &str, url: &str) -> anyhow::Result<kube::Config> {
    let mut config = workspace.clone();
    config.cluster_url = url
        .trim_end_matches('/')
        .parse()
        .with_context(|| format!("SyncTarget {name}'s virtual workspace URL {url:?}"))?;
    Ok(config)
}

/// Whether `config`'s server answers HTTP (with any status: a refusal is an answer);
/// `Err` says why not.
async fn answers(config: &kube::Config) -> Result<(), String> {
    let client = kube::Client::try_from(config.clone()).map_err(|e| e.to_string())?;
    let request = http::Request::get("/version")
        .body(kube::client::Body::empty())
        .map_err(|e| e.to_string())?;
    match tokio::time::timeout(ANSWER_TIMEOUT, client.send(request)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {ANSWER_TIMEOUT:?}")),
    }
}

/// The SyncTarget advertises `advertised`: if the syncer uses others, its upstream
/// clients move there and every watch starts again (the kcp syncer likewise runs its
/// controllers against whichever virtual workspace its SyncTarget names). Said in one
/// line, from where to where.
fn follow_views(engine: &Arc<Engine>, tmc: &Tmc, advertised: VirtualWorkspaces) {
    let name = &tmc.target.name;
    let mut views = tmc.views.lock();
    let Some(views) = views.as_mut() else {
        return;
    };
    let Some(moved) = advertised.moved_from(&views.urls) else {
        return;
    };
    let configs = config_at(&views.workspace, name, &advertised.syncer)
        .and_then(|syncer| Ok((syncer, config_at(&views.workspace, name, &advertised.upsyncer)?)));
    // Recorded either way, so a URL that cannot be used is said once.
    views.urls = advertised;
    match configs.and_then(|(syncer, upsyncer)| engine.up.retarget(syncer, Some(upsyncer))) {
        Ok(()) => {
            tracing::info!(sync_target = %name, "SyncTarget {name}: {moved}; reconnecting there");
            engine.moved(Side::Upstream);
        }
        Err(e) => {
            tracing::warn!(sync_target = %name, "SyncTarget {name}: {moved}, but the syncer cannot use it: {e:#}; it stays where it was")
        }
    }
}

/// The types to sync from a SyncTarget's status: the fixed ones plus every
/// `syncedResources` entry in state `Accepted`.
pub fn synced_types(sync_target: &Value) -> Vec<SyncedType> {
    let mut types = always_synced();
    let status: ferry_api::workload::SyncTargetStatus =
        serde_json::from_value(sync_target["status"].clone()).unwrap_or_default();
    for entry in status.synced_resources {
        if entry.state != ResourceCompatibleState::Accepted {
            continue;
        }
        let synced = SyncedType {
            group: entry.group,
            resource: entry.resource,
            versions: entry.versions,
        };
        if !types
            .iter()
            .any(|t| t.group == synced.group && t.resource == synced.resource)
        {
            types.push(synced);
        }
    }
    types
}

impl ConfigSource for Tmc {
    fn start(self: Arc<Self>, engine: &Arc<Engine>) -> Vec<tokio::task::JoinHandle<()>> {
        let _ = self.engine.set(Arc::downgrade(engine));
        vec![
            crate::spawn(follow_sync_target(engine.clone(), self.clone())),
            crate::spawn(heartbeat(engine.clone(), self.clone())),
            crate::spawn(report_refusals(engine.clone(), self.clone())),
            crate::spawn(super::transforms::follow(engine.clone(), self.clone())),
            crate::spawn(super::importer::run(
                engine.clone(),
                self.clone(),
                self.options.api_import_poll_interval,
            )),
        ]
    }
}

/// Re-reads the SyncTarget every poll period, and at once (then every
/// [`UNANSWERED_POLL`]) while the syncer virtual workspace does not answer: new synced
/// types are checked against the downstream cluster's permissions (and all of them
/// again every 12 reads, so a permission granted later is noticed) and handed to the
/// engine, and virtual workspaces advertised elsewhere are followed ([`follow_views`]).
async fn follow_sync_target(engine: Arc<Engine>, tmc: Arc<Tmc>) {
    let api: Api<DynamicObject> = Api::all_with(tmc.workspace.clone(), &sync_targets());
    let name = tmc.target.name.clone();
    let mut checked: Option<Vec<SyncedType>> = None;
    // Permissions granted later are noticed: every this many reads they are asked again.
    const RECHECK_EVERY: u32 = 12;
    let mut reads = 0u32;
    let mut upstream = engine.up.reachability_changes();
    // Failed reads since the last that succeeded: the first is a warning, the rest not.
    let mut failures = 0u32;
    // Whether the SyncTarget found was another (re-created) one, as last said.
    let mut replaced = false;
    loop {
        reads = reads.wrapping_add(1);
        if reads.is_multiple_of(RECHECK_EVERY) {
            checked = None;
        }
        match api.get(&name).await {
            Ok(obj) => {
                if failures > 0 {
                    tracing::info!(sync_target = %name, "reading SyncTarget {name} works again after {failures} failed attempt(s)");
                    failures = 0;
                }
                let obj = serde_json::to_value(obj).unwrap_or_default();
                let other = obj["metadata"]["uid"].as_str() != Some(tmc.target.uid.as_str());
                if other && !std::mem::replace(&mut replaced, true) {
                    tracing::error!(sync_target = %name, "SyncTarget {name} was deleted and created again (its uid is not --sync-target-uid {}); this syncer no longer serves it: regenerate its manifest for the SyncTarget as it is now", tmc.target.uid);
                }
                if !other {
                    replaced = false;
                    if let Some(advertised) = VirtualWorkspaces::advertised(&obj) {
                        follow_views(&engine, &tmc, advertised);
                    }
                    let types = synced_types(&obj);
                    if checked.as_ref() != Some(&types) {
                        authorize(&engine, &tmc, &types).await;
                        checked = Some(types.clone());
                    }
                    if tmc.set_synced(types) {
                        let types: Vec<String> =
                            tmc.synced().iter().map(SyncedType::group_resource).collect();
                        tracing::info!(sync_target = %name, "synced resource types: {}", types.join(", "));
                        engine.selection_changed();
                    }
                }
            }
            Err(e) => {
                failures += 1;
                if failures == 1 {
                    tracing::warn!(sync_target = %name, "reading SyncTarget {name} failed: {e}; trying again every {:?}", tmc.options.sync_target_poll);
                } else {
                    tracing::debug!(sync_target = %name, failures, "reading SyncTarget {name} failed: {e}");
                }
            }
        }
        let period = match engine.up.reachability() {
            Reachability::Unreachable { .. } => tmc.options.sync_target_poll.min(UNANSWERED_POLL),
            _ => tmc.options.sync_target_poll,
        };
        upstream.borrow_and_update();
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            // Contact with the virtual workspace lost (or back): the SyncTarget may say
            // it moved.
            _ = upstream.changed() => {}
        }
    }
}

/// Asks the downstream cluster whether the syncer may do everything (`*`) with each of
/// `types`; refused ones are not synced, and the SyncTarget's `SyncerAuthorized`
/// condition says which.
async fn authorize(engine: &Engine, tmc: &Tmc, types: &[SyncedType]) {
    let api: Api<SelfSubjectAccessReview> = Api::all(engine.down.client.clone());
    let mut denied = BTreeSet::new();
    let mut mentioned = vec![];
    let mut unanswered = vec![];
    // Namespaces are only created and deleted (never written otherwise), which is all
    // kcp's plugin grants on them: they are not asked for `*`.
    let pods = SyncedType::core("pods");
    let checked = types
        .iter()
        .filter(|t| !(t.group.is_empty() && t.resource == "namespaces"));
    for synced in checked
        .chain(std::iter::once(&pods))
        .map(|t| (t, t.group_resource()))
    {
        let (t, group_resource) = synced;
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    group: Some(t.group.clone()),
                    resource: Some(t.resource.clone()),
                    verb: Some("*".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let allowed = match api.create(&PostParams::default(), &review).await {
            Ok(answer) => answer.status.is_some_and(|s| s.allowed),
            Err(e) => {
                unanswered.push(format!("{group_resource} ({e})"));
                false
            }
        };
        if !allowed {
            mentioned.push(group_resource.clone());
            denied.insert(group_resource);
        }
    }
    let name = &tmc.target.name;
    if !unanswered.is_empty() {
        // One line for the whole check, not one per type.
        tracing::warn!(sync_target = %name, "asking the downstream cluster what SyncTarget {name}'s syncer may do failed for {}", unanswered.join(", "));
    }
    if tmc.set_denied(denied) {
        engine.selection_changed();
    }
    let condition = if mentioned.is_empty() {
        json!({ "type": "SyncerAuthorized", "status": "True" })
    } else {
        tracing::warn!(sync_target = %name, "SyncTarget {name}'s syncer may not manage {} in the downstream cluster; they are not synced until it may", mentioned.join(", "));
        json!({
            "type": "SyncerAuthorized", "status": "False", "severity": "Error",
            "reason": "SyncerUnauthorized",
            "message": format!("SSAR check failed for gvrs: {}", mentioned.join(", ")),
        })
    };
    if let Err(e) = set_condition(tmc, condition).await {
        tracing::warn!(sync_target = %name, "writing the SyncerAuthorized condition of SyncTarget {name} failed: {e}");
    }
}

/// Sets one condition on the SyncTarget's status (read, change, write; retried on a
/// conflict), leaving the others as the hub's controllers wrote them.
pub(super) async fn set_condition(tmc: &Tmc, mut condition: Value) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::all_with(tmc.workspace.clone(), &sync_targets());
    for _ in 0..5 {
        let obj = serde_json::to_value(api.get(&tmc.target.name).await?).unwrap_or_default();
        let mut conditions = obj["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let existing = conditions.iter().position(|c| c["type"] == condition["type"]);
        let now = Value::String(ferry_api::timestamp::now());
        match existing {
            Some(i) if conditions[i]["status"] == condition["status"] => {
                condition["lastTransitionTime"] = conditions[i]["lastTransitionTime"].clone();
                if conditions[i] == condition {
                    return Ok(());
                }
                conditions[i] = condition.clone();
            }
            Some(i) => {
                condition["lastTransitionTime"] = now;
                conditions[i] = condition.clone();
            }
            None => {
                condition["lastTransitionTime"] = now;
                conditions.push(condition.clone());
            }
        }
        let mut body = obj.clone();
        body["status"]["conditions"] = Value::Array(conditions);
        let body: DynamicObject = serde_json::from_value(body).map_err(kube::Error::SerdeError)?;
        match api
            .replace_status(&tmc.target.name, &PostParams::default(), &body)
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            other => return other.map(drop),
        }
    }
    Ok(())
}

/// The SyncTarget condition that names the copies the cluster refused.
pub const COPIES_ACCEPTED: &str = "CopiesAccepted";
/// Refusals the condition names by object.
const NAMED_REFUSALS: usize = 5;

/// Keeps the SyncTarget's [`COPIES_ACCEPTED`] condition saying which objects the
/// cluster refused and why (the API server's message), as soon as that changes:
/// the SyncTarget is where kcp users look at a cluster's health.
async fn report_refusals(engine: Arc<Engine>, tmc: Arc<Tmc>) {
    loop {
        tokio::select! {
            _ = engine.status_now.notified() => {}
            _ = tokio::time::sleep(tmc.options.heartbeat_period) => {}
        }
        let condition = refusals_condition(&engine.refusals.all());
        if let Err(e) = set_condition(&tmc, condition).await {
            tracing::debug!("writing the {COPIES_ACCEPTED} condition failed: {e}");
        }
    }
}

/// [`COPIES_ACCEPTED`]: True, or False naming the first refused objects (their
/// workspace, namespace and name upstream) with each server message.
pub fn refusals_condition(refused: &[crate::engine::refusals::Refusal]) -> Value {
    if refused.is_empty() {
        return json!({ "type": COPIES_ACCEPTED, "status": "True", "reason": "CopiesAccepted",
                       "message": "the cluster accepts every copy" });
    }
    let named: Vec<String> = refused
        .iter()
        .take(NAMED_REFUSALS)
        .map(|r| {
            let object = if r.namespace.is_empty() {
                r.name.clone()
            } else {
                format!("{}/{}", r.namespace, r.name)
            };
            let workspace = r.cluster.as_deref().map(|c| format!("{c}|")).unwrap_or_default();
            format!("{} {workspace}{object}: {}", r.resource, r.message)
        })
        .collect();
    let mut message = format!("{} object(s) refused: {}", refused.len(), named.join("; "));
    if refused.len() > NAMED_REFUSALS {
        message.push_str(&format!("; and {} more", refused.len() - NAMED_REFUSALS));
    }
    json!({ "type": COPIES_ACCEPTED, "status": "False", "severity": "Error",
            "reason": "CopiesRefused", "message": message })
}

/// Every heartbeat period: `status.lastSyncerHeartbeatTime` (kcp), and the kcp
/// workload syncer document's `lastHeartbeatTime`, `syncerIdentifier` and
/// `heartbeat {count, lastHeartbeat, errors}` (this process's heartbeats sent and
/// failed), and Ferry's `syncerVersion` (the binary's version), by one JSON patch that first tests the uid, so a re-created SyncTarget
/// is never taken for this one.
async fn heartbeat(engine: Arc<Engine>, tmc: Arc<Tmc>) {
    let name = tmc.target.name.clone();
    let mut beat = Heartbeat {
        identifier: syncer_identifier(),
        version: engine.version.clone(),
        ..Heartbeat::default()
    };
    // Heartbeats failed in a row: the first is a warning, the rest wait for the
    // line that says they are back.
    let mut failing = 0u64;
    loop {
        let now = ferry_api::timestamp::now();
        beat.count += 1;
        let result = send_heartbeat(&tmc.workspace, &name, &tmc.target.uid, &now, &beat).await;
        let next = match result {
            Ok(()) => {
                engine.metrics.heartbeat();
                tracing::debug!(sync_target = %name, count = beat.count, "heartbeat sent");
                if failing > 0 {
                    tracing::info!(sync_target = %name, "heartbeats of SyncTarget {name} go through again after {failing} failed");
                    failing = 0;
                }
                tmc.options.heartbeat_period
            }
            Err(e) => {
                beat.count -= 1;
                beat.errors += 1;
                failing += 1;
                let retry = Duration::from_secs(1).min(tmc.options.heartbeat_period);
                if failing == 1 {
                    tracing::warn!(sync_target = %name, "the heartbeat to SyncTarget {name} failed: {e}; retrying every {retry:?}");
                } else {
                    tracing::debug!(sync_target = %name, failing, "the heartbeat to SyncTarget {name} failed: {e}");
                }
                retry
            }
        };
        tokio::time::sleep(next).await;
    }
}

/// What a syncer process reports of its heartbeats.
#[derive(Default)]
struct Heartbeat {
    /// `syncer-<pod name>-<random>`: one per process.
    identifier: String,
    /// The syncer's version (`0.1.0 (commit abc123def456)`).
    version: String,
    /// Heartbeats sent, this one included.
    count: u64,
    /// Heartbeats that failed.
    errors: u64,
}

/// This process's `syncerIdentifier`: the pod's name and a random part, as a
/// restarted container is another process with its own counts.
fn syncer_identifier() -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("syncer-{}-{}", crate::leader::hostname(), &random[..6])
}

/// The JSON patch of one heartbeat at `now` (`op` for the kcp field: `replace`,
/// or `add` on the first heartbeat).
fn heartbeat_patch(uid: &str, now: &str, beat: &Heartbeat, op: &str) -> Value {
    json!([
        { "op": "test", "path": "/metadata/uid", "value": uid },
        { "op": op, "path": "/status/lastSyncerHeartbeatTime", "value": now },
        { "op": "add", "path": "/status/lastHeartbeatTime", "value": now },
        { "op": "add", "path": "/status/syncerIdentifier", "value": beat.identifier },
        { "op": "add", "path": "/status/syncerVersion", "value": beat.version },
        { "op": "add", "path": "/status/heartbeat",
          "value": { "count": beat.count, "lastHeartbeat": now, "errors": beat.errors } },
    ])
}

async fn send_heartbeat(
    client: &kube::Client,
    name: &str,
    uid: &str,
    now: &str,
    beat: &Heartbeat,
) -> Result<(), kube::Error> {
    let path = format!("/apis/workload.kcp.io/v1alpha1/synctargets/{name}/status");
    let patch = |op: &str| heartbeat_patch(uid, now, beat, op);
    let send = |body: Value| {
        let request = http::Request::patch(path.as_str())
            .header(http::header::CONTENT_TYPE, "application/json-patch+json")
            .body(serde_json::to_vec(&body).unwrap_or_default());
        async move {
            let request = request.map_err(kube::Error::HttpError)?;
            client.request::<Value>(request).await.map(drop)
        }
    };
    match send(patch("replace")).await {
        // A first heartbeat: the field does not exist yet, so `replace` may not apply.
        Err(kube::Error::Api(status))
            if matches!(status.code, 422 | 500) && !status.message.contains("test") =>
        {
            send(patch("add")).await
        }
        other => other,
    }
}
