//! SyncerConfigs: watched upstream, merged live into the selection, and judged into the
//! conditions the heartbeat writes back onto each of them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::watcher;
use parking_lot::Mutex;
use serde_json::{json, Value};

use ferry_api::edge::{EdgeSyncConfig, SyncSwitches, SyncerConfig};
use ferry_api::well_known::conditions::{CONFIG_VALID, SYNCING};
use serde::de::DeserializeOwned;

use super::denature::Conversions;
use super::KubeStellar;
use crate::engine::retry::needs_new_stream;
use crate::engine::{DiscoverySnapshot, Engine, WatchFailure, WatchRetry};
use crate::selection::{Direction, Resolution, SyncSelection};
use crate::side::{serves, Side};

/// Condition type: the syncer is connected to both sides and has completed its initial
/// sync (kcp's SyncTarget condition of the same name; KubeStellar users asked for a
/// heartbeat, kubestellar#1067).
pub const SYNCER_READY: &str = "SyncerReady";

/// One SyncerConfig (or EdgeSyncConfig) as last seen.
#[derive(Clone, Debug)]
pub struct ConfigEntry<T = SyncerConfig> {
    /// The object as served (for its current status).
    pub object: Value,
    /// The decoded config, or why it does not decode.
    pub parsed: Result<T, String>,
}

/// Every SyncerConfig (or EdgeSyncConfig) in the upstream workspace.
pub struct ConfigState<T = SyncerConfig> {
    entries: Mutex<BTreeMap<String, ConfigEntry<T>>>,
    listing: Mutex<Option<BTreeMap<String, ConfigEntry<T>>>>,
    loaded: AtomicBool,
}

impl<T> Default for ConfigState<T> {
    fn default() -> Self {
        ConfigState {
            entries: Mutex::default(),
            listing: Mutex::default(),
            loaded: AtomicBool::new(false),
        }
    }
}

impl<T: Clone> ConfigState<T> {
    /// Whether the configs have been listed once.
    pub fn is_loaded(&self) -> bool {
        self.loaded.load(Ordering::Relaxed)
    }

    /// The configs by name.
    pub fn snapshot(&self) -> Vec<(String, ConfigEntry<T>)> {
        self.entries
            .lock()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The configs that decode.
    pub fn parsed(&self) -> Vec<T> {
        self.entries
            .lock()
            .values()
            .filter_map(|e| e.parsed.as_ref().ok().cloned())
            .collect()
    }
}

fn entry<T: DeserializeOwned>(obj: DynamicObject) -> Option<(String, ConfigEntry<T>)> {
    let object = serde_json::to_value(obj).ok()?;
    let name = object.pointer("/metadata/name")?.as_str()?.to_owned();
    let parsed = serde_json::from_value::<T>(object.clone()).map_err(|e| e.to_string());
    Some((name, ConfigEntry { object, parsed }))
}

/// The SyncerConfig resource.
pub fn syncer_config_resource() -> ApiResource {
    ApiResource {
        group: SyncerConfig::GROUP.into(),
        version: SyncerConfig::VERSION.into(),
        api_version: format!("{}/{}", SyncerConfig::GROUP, SyncerConfig::VERSION),
        kind: SyncerConfig::KIND.into(),
        plural: SyncerConfig::PLURAL.into(),
    }
}

/// The EdgeSyncConfig resource.
pub fn edge_sync_config_resource() -> ApiResource {
    ApiResource {
        group: EdgeSyncConfig::GROUP.into(),
        version: EdgeSyncConfig::VERSION.into(),
        api_version: format!("{}/{}", EdgeSyncConfig::GROUP, EdgeSyncConfig::VERSION),
        kind: EdgeSyncConfig::KIND.into(),
        plural: EdgeSyncConfig::PLURAL.into(),
    }
}

/// Watches the SyncerConfigs upstream; every change re-merges the selection.
pub async fn watch_configs(engine: Arc<Engine>, profile: Arc<KubeStellar>) {
    watch::<SyncerConfig>(engine, profile, syncer_config_resource(), |p| &p.configs, true).await
}

/// Watches the EdgeSyncConfigs upstream; every change re-merges the selection and the
/// conversions. A server without their CRD, or one where the syncer may not read them,
/// has none: that is not an error (a plain Kubernetes upstream with only the
/// SyncerConfig CRD installed, a Role written for SyncerConfigs).
pub async fn watch_edge_configs(engine: Arc<Engine>, profile: Arc<KubeStellar>) {
    watch::<EdgeSyncConfig>(
        engine,
        profile,
        edge_sync_config_resource(),
        |p| &p.edge_configs,
        false,
    )
    .await
}

async fn watch<T: DeserializeOwned + Clone>(
    engine: Arc<Engine>,
    profile: Arc<KubeStellar>,
    resource: ApiResource,
    state_of: fn(&KubeStellar) -> &ConfigState<T>,
    required: bool,
) {
    let api: Api<DynamicObject> = Api::all_with(engine.up.client.clone(), &resource);
    let config = watcher::Config::default();
    let mut stream = watcher(api.clone(), config.clone()).boxed();
    let mut retry = WatchRetry::new(engine.timing.max_watch_backoff);
    let state = state_of(&profile);
    let kind = resource.kind.clone();
    while let Some(event) = stream.next().await {
        match event {
            Err(e) => {
                let failure = WatchFailure::of(&e);
                match failure {
                    // Said once for the side, whatever stops answering.
                    WatchFailure::Unreachable => engine.lost_contact(Side::Upstream, &e),
                    // A restarted server lost the watch's history: relisting is routine.
                    WatchFailure::Gone => {}
                    // Not installed and optional: there are none (until it appears).
                    // Not installed, or not readable by this syncer (a Role written for
                    // SyncerConfigs only), and optional: there are none until that changes.
                    WatchFailure::Refused(code @ (403 | 404)) if !required && !state.is_loaded() => {
                        if code == 403 {
                            tracing::info!("the syncer may not list {kind}s upstream, so it reads SyncerConfigs only; grant get/list/watch/patch on them to use {kind}s");
                        }
                        state.entries.lock().clear();
                        state.loaded.store(true, Ordering::Relaxed);
                        engine.resolve_now.notify_one();
                    }
                    WatchFailure::Refused(403 | 404) if !required => {}
                    _ if retry.failures() == 0 => {
                        let hint = if failure == WatchFailure::Refused(404) {
                            format!(
                                "; is the {kind} CRD installed upstream? (`ferry crds | kubectl apply -f -`)"
                            )
                        } else {
                            String::new()
                        };
                        tracing::warn!("watching {kind}s failed{hint}: {e}");
                    }
                    _ => {}
                }
                if needs_new_stream(&e) {
                    stream = watcher(api.clone(), config.clone()).boxed();
                }
                let next = retry.failed(failure);
                engine.pause_before_retry(Side::Upstream, next).await;
                continue;
            }
            Ok(watcher::Event::Init) => {
                *state.listing.lock() = Some(BTreeMap::new());
                continue;
            }
            Ok(watcher::Event::InitApply(obj)) => {
                if let (Some((name, e)), Some(listing)) = (entry(obj), state.listing.lock().as_mut()) {
                    listing.insert(name, e);
                }
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                if let Some(listing) = state.listing.lock().take() {
                    *state.entries.lock() = listing;
                }
                state.loaded.store(true, Ordering::Relaxed);
                retry.listed();
                // Resolve at least once after every list, even when the selection did
                // not change (no configs at all still means "ready, syncing nothing").
                engine.resolve_now.notify_one();
            }
            Ok(watcher::Event::Apply(obj)) => {
                retry.delivered();
                if let Some((name, e)) = entry(obj) {
                    state.entries.lock().insert(name, e);
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                retry.delivered();
                if let Some(name) = obj.metadata.name {
                    state.entries.lock().remove(&name);
                }
            }
        }
        configs_changed(&engine, &profile);
    }
}

fn configs_changed(engine: &Engine, profile: &KubeStellar) {
    let edge = profile.edge_configs.parsed();
    let (mut selection, mut errors) = SyncSelection::from_configs(&profile.configs.parsed());
    errors.extend(selection.add_edge_configs(&edge));
    let conversions = Conversions::from_configs(&edge);
    let switches = merged_switches(&profile.configs.parsed(), &edge);
    // Both, always: `||` would skip the second when the first changed.
    let changed = profile.set_selection(selection, conversions) | profile.set_switches(switches);
    if changed {
        for e in &errors {
            tracing::warn!("{e}");
        }
        tracing::info!("SyncerConfigs changed; re-resolving");
        engine.selection_changed();
    }
    engine.status_now.notify_one();
}

/// The switches of every config merged: each on unless some config turns it off.
pub fn merged_switches(configs: &[SyncerConfig], edge: &[EdgeSyncConfig]) -> SyncSwitches {
    let mut switches = SyncSwitches::default();
    for c in configs {
        switches.merge(c.spec.return_reported_state, c.spec.propagate_deletion);
    }
    for c in edge {
        switches.merge(c.spec.return_reported_state, c.spec.propagate_deletion);
    }
    switches
}

/// What the conditions of one SyncerConfig are computed from.
#[derive(Clone, Debug, PartialEq)]
pub struct ConditionInputs {
    /// Invalid entries (or the decode error), each with its fix.
    pub errors: Vec<String>,
    /// Resources named but not served (either side), or of the wrong scope.
    pub missing: Vec<String>,
    /// Permission problems naming verb, resource and side.
    pub denied: Vec<String>,
    /// Objects an API server refused (`<resource> <namespace/name>: <message>`).
    pub refused: Vec<String>,
    /// How many resource types the config makes the syncer watch.
    pub watched: usize,
    /// The syncer's readiness.
    pub ready: Result<(), String>,
    /// `metadata.generation` of the config.
    pub generation: Option<i64>,
}

impl Default for ConditionInputs {
    fn default() -> Self {
        ConditionInputs {
            errors: vec![],
            missing: vec![],
            denied: vec![],
            refused: vec![],
            watched: 0,
            ready: Ok(()),
            generation: None,
        }
    }
}

/// What both kinds of config report alike: the object's generation, the syncer's
/// readiness, why it does not decode (as a `kind`) or which entries are invalid, and
/// the types neither side's discovery resolves. With discovery, also the resolved
/// selection (downsync, upsync) for the caller's further checks.
fn common_inputs<T>(
    engine: &Engine,
    entry: &ConfigEntry<T>,
    kind: &str,
    discovery: Option<&DiscoverySnapshot>,
    select: impl FnOnce(&T) -> (SyncSelection, Vec<String>),
) -> (ConditionInputs, Option<(Resolution, Resolution)>) {
    let generation = entry
        .object
        .pointer("/metadata/generation")
        .and_then(Value::as_i64);
    let ready = engine.readiness();
    let config = match &entry.parsed {
        Ok(config) => config,
        Err(e) => {
            let inputs = ConditionInputs {
                errors: vec![format!(
                    "the object does not decode as {kind}: {e}; fix the field it names"
                )],
                ready,
                generation,
                ..Default::default()
            };
            return (inputs, None);
        }
    };
    let (selection, errors) = select(config);
    let mut inputs = ConditionInputs {
        errors,
        ready,
        generation,
        ..Default::default()
    };
    let Some(discovery) = discovery else {
        return (inputs, None);
    };
    let downsync = selection.resolve_downsync(&discovery.upstream);
    let upsync = selection.resolve_upsync(&discovery.downstream);
    inputs
        .missing
        .extend(downsync.unresolved.iter().map(|u| format!("upstream: {u}")));
    inputs
        .missing
        .extend(upsync.unresolved.iter().map(|u| format!("downstream: {u}")));
    (inputs, Some((downsync, upsync)))
}

/// Gathers the inputs for one config.
pub fn inputs_for(
    engine: &Engine,
    entry: &ConfigEntry,
    discovery: Option<&DiscoverySnapshot>,
) -> ConditionInputs {
    let (mut inputs, resolved) = common_inputs(engine, entry, "a SyncerConfig", discovery, |config| {
        let (selection, errors) = SyncSelection::from_configs(std::slice::from_ref(config));
        (selection, errors.iter().map(ToString::to_string).collect())
    });
    let (Some((downsync, upsync)), Some(discovery)) = (resolved, discovery) else {
        return inputs;
    };
    inputs.refused = engine
        .refusals
        .all()
        .iter()
        .map(|r| {
            let object = if r.namespace.is_empty() {
                r.name.clone()
            } else {
                format!("{}/{}", r.namespace, r.name)
            };
            format!("{} {object}: {}", r.resource, r.message)
        })
        .collect();
    let flows = engine.flows();
    for (targets, other, side) in [
        (&downsync.targets, &discovery.downstream, "downstream"),
        (&upsync.targets, &discovery.upstream, "upstream"),
    ] {
        for target in targets.iter() {
            let id = &target.id;
            inputs.watched += 1;
            let flow = flows.iter().find(|f| {
                f.target.direction == target.direction
                    && f.target.id.group == id.group
                    && f.target.id.resource == id.resource
            });
            let served = match flow {
                Some(flow) => !flow.copies.is_not_served(),
                None => serves(other, &id.group, &id.version, &id.resource),
            };
            if !served {
                let fix = match target.direction {
                    Direction::Downsync => "install its CRD in the workload cluster (or downsync the CRD too); its objects wait and sync once it is established",
                    Direction::Upsync => "install its CRD in the upstream workspace; upsynced objects wait until then",
                };
                inputs
                    .missing
                    .push(format!("resource {id} is not served {side}: {fix}"));
            }
            for problem in engine.problems.for_resource(&id.group, &id.resource) {
                if problem.permission && !inputs.denied.contains(&problem.message) {
                    inputs.denied.push(problem.message);
                }
            }
        }
    }
    inputs
}

/// Gathers the inputs for one EdgeSyncConfig: invalid entries and conversions (each
/// naming its field), and kinds neither side serves.
pub fn edge_inputs_for(
    engine: &Engine,
    entry: &ConfigEntry<EdgeSyncConfig>,
    discovery: Option<&DiscoverySnapshot>,
) -> ConditionInputs {
    let (mut inputs, resolved) = common_inputs(engine, entry, "an EdgeSyncConfig", discovery, |config| {
        let mut selection = SyncSelection::default();
        let errors = selection.add_edge_configs(std::slice::from_ref(config));
        (selection, errors.iter().map(ToString::to_string).collect())
    });
    if let Some((downsync, upsync)) = resolved {
        inputs.watched = downsync.targets.len() + upsync.targets.len();
    }
    inputs
}

fn condition(type_: &str, ok: bool, reason: &str, message: String, generation: Option<i64>) -> Value {
    let mut c = json!({
        "type": type_,
        "status": if ok { "True" } else { "False" },
        "reason": reason,
        "message": message,
    });
    if let Some(g) = generation {
        c["observedGeneration"] = g.into();
    }
    c
}

/// The conditions for one config: `ConfigValid`, `Syncing` and `SyncerReady`. Each keeps
/// its `lastTransitionTime` from `existing` while its status is unchanged.
pub fn build_conditions(inputs: &ConditionInputs, existing: &[Value], now: &str, syncer: &str) -> Vec<Value> {
    let g = inputs.generation;
    let valid = if inputs.errors.is_empty() {
        condition(CONFIG_VALID, true, "Valid", "every entry is valid".into(), g)
    } else {
        condition(CONFIG_VALID, false, "InvalidEntries", inputs.errors.join("; "), g)
    };
    let syncing = if !inputs.denied.is_empty() {
        let mut all = inputs.denied.clone();
        all.extend(inputs.missing.iter().cloned());
        condition(SYNCING, false, "PermissionDenied", all.join("; "), g)
    } else if !inputs.missing.is_empty() {
        condition(SYNCING, false, "ResourcesMissing", inputs.missing.join("; "), g)
    } else if !inputs.refused.is_empty() {
        condition(
            SYNCING,
            false,
            "CopiesRefused",
            refused_message(&inputs.refused),
            g,
        )
    } else {
        condition(
            SYNCING,
            true,
            "Syncing",
            format!(
                "syncer {syncer} is watching {} resource type(s) for this config",
                inputs.watched
            ),
            g,
        )
    };
    let ready = match &inputs.ready {
        Ok(()) => condition(
            SYNCER_READY,
            true,
            "Ready",
            format!("syncer {syncer} reaches both sides and has completed its initial sync"),
            g,
        ),
        Err(why) => condition(
            SYNCER_READY,
            false,
            "NotReady",
            format!("syncer {syncer}: {why}"),
            g,
        ),
    };
    let mut out = vec![valid, syncing, ready];
    for c in &mut out {
        let previous = existing
            .iter()
            .find(|e| e.get("type") == c.get("type") && e.get("status") == c.get("status"))
            .and_then(|e| e.get("lastTransitionTime"))
            .cloned();
        c["lastTransitionTime"] = previous.unwrap_or_else(|| now.into());
    }
    out
}

/// Refusals a condition names by object.
const NAMED_REFUSALS: usize = 5;

/// `N object(s) refused: <first few>; and M more` — a condition stays short
/// however many objects a cluster refuses; `status.refused` lists them.
fn refused_message(refused: &[String]) -> String {
    let named: Vec<&str> = refused.iter().take(NAMED_REFUSALS).map(String::as_str).collect();
    let mut message = format!("{} object(s) refused: {}", refused.len(), named.join("; "));
    if refused.len() > NAMED_REFUSALS {
        message.push_str(&format!(
            "; and {} more (see status.refused)",
            refused.len() - NAMED_REFUSALS
        ));
    }
    message
}

/// Whether two condition lists say the same, ignoring transition times.
pub fn same_conditions(a: &[Value], b: &[Value]) -> bool {
    let strip = |list: &[Value]| -> Vec<Value> {
        list.iter()
            .map(|c| {
                let mut c = c.clone();
                if let Some(obj) = c.as_object_mut() {
                    obj.remove("lastTransitionTime");
                }
                c
            })
            .collect()
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> ConditionInputs {
        ConditionInputs {
            watched: 2,
            ready: Ok(()),
            generation: Some(3),
            ..Default::default()
        }
    }

    fn find<'a>(list: &'a [Value], type_: &str) -> &'a Value {
        list.iter().find(|c| c["type"] == type_).unwrap()
    }

    #[test]
    fn healthy_config_has_three_true_conditions() {
        let list = build_conditions(&inputs(), &[], "2024-01-01T00:00:00Z", "florin");
        for t in [CONFIG_VALID, SYNCING, SYNCER_READY] {
            assert_eq!(find(&list, t)["status"], "True", "{t}");
            assert_eq!(find(&list, t)["observedGeneration"], 3);
        }
    }

    #[test]
    fn invalid_entries_missing_resources_and_denials_are_named() {
        let mut i = inputs();
        i.errors = vec!["spec.clusterScope[0].resource: bad".into()];
        i.missing = vec!["resource example.com/v1/widgets is not served downstream".into()];
        i.denied =
            vec!["permission denied: the syncer cannot create v1/secrets on the downstream side".into()];
        i.ready = Err("the downstream server is unreachable".into());
        let list = build_conditions(&i, &[], "t", "florin");
        assert_eq!(find(&list, CONFIG_VALID)["status"], "False");
        assert!(find(&list, CONFIG_VALID)["message"]
            .as_str()
            .unwrap()
            .contains("clusterScope[0]"));
        let syncing = find(&list, SYNCING);
        assert_eq!(syncing["reason"], "PermissionDenied");
        let message = syncing["message"].as_str().unwrap();
        assert!(
            message.contains("create v1/secrets on the downstream side"),
            "{message}"
        );
        assert!(message.contains("widgets"), "{message}");
        assert_eq!(find(&list, SYNCER_READY)["status"], "False");
    }

    #[test]
    fn a_switch_is_on_unless_some_config_turns_it_off() {
        let sc = |spec: Value| -> SyncerConfig {
            serde_json::from_value(
                json!({"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncerConfig",
                "metadata": {"name": "c"}, "spec": spec}),
            )
            .unwrap()
        };
        assert_eq!(merged_switches(&[], &[]), SyncSwitches::default());
        let quiet = sc(json!({}));
        let on = sc(json!({"returnReportedState": true, "propagateDeletion": true}));
        assert_eq!(
            merged_switches(&[quiet.clone(), on], &[]),
            SyncSwitches::default()
        );
        let off = sc(json!({"returnReportedState": false}));
        let merged = merged_switches(&[quiet, off], &[]);
        assert!(!merged.return_reported_state && merged.propagate_deletion);
        let esc: EdgeSyncConfig =
            serde_json::from_value(json!({"apiVersion": "edge.kubestellar.io/v2alpha1",
            "kind": "EdgeSyncConfig", "metadata": {"name": "florin"}, "spec": {"propagateDeletion": false}}))
            .unwrap();
        let merged = merged_switches(&[], &[esc]);
        assert!(merged.return_reported_state && !merged.propagate_deletion);
    }

    #[test]
    fn transition_time_is_kept_while_status_is_unchanged() {
        let first = build_conditions(&inputs(), &[], "t1", "florin");
        let second = build_conditions(&inputs(), &first, "t2", "florin");
        assert_eq!(find(&second, SYNCING)["lastTransitionTime"], "t1");
        assert!(same_conditions(&first, &second));
        let mut broken = inputs();
        broken.missing = vec!["x".into()];
        let third = build_conditions(&broken, &second, "t3", "florin");
        assert_eq!(find(&third, SYNCING)["lastTransitionTime"], "t3");
        assert!(!same_conditions(&second, &third));
    }
}
