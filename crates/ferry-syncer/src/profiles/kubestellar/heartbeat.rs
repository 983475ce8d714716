//! The heartbeat: every `--heartbeat-period`, and whenever conditions may have changed,
//! each SyncerConfig and EdgeSyncConfig gets `status.lastSyncerHeartbeatTime` (heartbeat only) and its
//! conditions (a SyncerConfig also the refused and the drifted objects, and with the
//! heartbeat the syncer's version, `status.syncerVersion`), merge-patched
//! onto the status subresource (onto the object itself where the server's CRD has
//! none); nothing is written when none of them changed between heartbeats.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use ferry_api::drift::Drift;
use ferry_api::edge::DriftedObject;

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::{json, Value};

use super::config::{
    build_conditions, edge_inputs_for, edge_sync_config_resource, inputs_for, same_conditions,
    syncer_config_resource, ConditionInputs,
};
use super::KubeStellar;
use crate::engine::reconcile::FIELD_MANAGER;
use crate::engine::{Engine, UpstreamObject};
use crate::side::Reachability;

/// Writes heartbeats and conditions until aborted.
pub async fn status_loop(engine: Arc<Engine>, profile: Arc<KubeStellar>, period: Duration) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let heartbeat = tokio::select! {
            _ = ticks.tick() => true,
            _ = engine.status_now.notified() => false,
        };
        // While upstream does not answer there is nowhere to write; its return wakes this.
        let unreachable = matches!(engine.up.reachability(), Reachability::Unreachable { .. });
        if !profile.configs.is_loaded() || unreachable {
            continue;
        }
        write_statuses(&engine, &profile, heartbeat).await;
    }
}

async fn write_statuses(engine: &Engine, profile: &KubeStellar, heartbeat: bool) {
    let discovery = engine.discovery.read().clone();
    let configs: Vec<(String, Value, ConditionInputs)> = profile
        .configs
        .snapshot()
        .into_iter()
        .map(|(name, entry)| {
            let inputs = inputs_for(engine, &entry, discovery.as_ref());
            (name, entry.object, inputs)
        })
        .collect();
    let mut all_written = write(engine, profile, &syncer_config_resource(), &configs, heartbeat).await;
    let edge: Vec<(String, Value, ConditionInputs)> = profile
        .edge_configs
        .snapshot()
        .into_iter()
        .map(|(name, entry)| {
            let inputs = edge_inputs_for(engine, &entry, discovery.as_ref());
            (name, entry.object, inputs)
        })
        .collect();
    all_written &= write(engine, profile, &edge_sync_config_resource(), &edge, heartbeat).await;
    if heartbeat && all_written && engine.up.is_connected() {
        engine.metrics.heartbeat();
    }
}

/// The False conditions last logged. A status write can run again before the
/// watch brings back the previous one (a notification, then the heartbeat), and
/// the syncer-wide `SyncerReady` is the same on every config: without this each
/// of them would log the same message again.
#[derive(Default)]
pub struct LoggedConditions(parking_lot::Mutex<std::collections::HashMap<String, String>>);

impl LoggedConditions {
    /// Records condition `type_` of config `kind`/`name` as False with
    /// `message` (`None`: not False); returns whether that is news to log.
    pub fn changed(&self, kind: &str, name: &str, type_: &str, message: Option<&str>) -> bool {
        // SyncerReady says how the syncer is, not the config: one entry for all.
        let key = if type_ == super::config::SYNCER_READY {
            type_.to_string()
        } else {
            format!("{kind}/{name}/{type_}")
        };
        let mut logged = self.0.lock();
        match message {
            None => {
                logged.remove(&key);
                false
            }
            Some(m) if logged.get(&key).is_some_and(|l| l == m) => false,
            Some(m) => {
                logged.insert(key, m.to_string());
                true
            }
        }
    }
}

/// Refused objects listed in a SyncerConfig's status.
const LISTED_REFUSALS: usize = 50;

/// `status.refused` and `status.refusedCount`: the engine's standing refusals
/// (at most [`LISTED_REFUSALS`]), both null when there are none.
fn refused_status(engine: &Engine) -> (Value, Value) {
    let all = engine.refusals.all();
    if all.is_empty() {
        return (Value::Null, Value::Null);
    }
    let listed: Vec<ferry_api::edge::RefusedObject> = all
        .iter()
        .take(LISTED_REFUSALS)
        .map(|r| ferry_api::edge::RefusedObject {
            resource: r.resource.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            side: r.side.name().to_string(),
            message: r.message.clone(),
        })
        .collect();
    (
        serde_json::to_value(listed).unwrap_or(Value::Null),
        json!(all.len()),
    )
}

/// Drifted objects listed in a SyncerConfig's status.
const LISTED_DRIFTS: usize = 50;

/// `status.drifted`: the engine's most recent drifts (at most
/// [`LISTED_DRIFTS`]), null when there are none.
fn drifted_status(engine: &Engine) -> Value {
    let recent = engine.drifts.recent(LISTED_DRIFTS);
    if recent.is_empty() {
        return Value::Null;
    }
    serde_json::to_value(recent).unwrap_or(Value::Null)
}

/// The drifts a previous run of this syncer listed on `configs`, so that counts
/// go on from there (a restarted syncer starts with none).
fn reported_drifts(configs: &[(String, Value, ConditionInputs)]) -> Vec<(UpstreamObject, Drift)> {
    let Some(listed) = configs
        .iter()
        .find_map(|(_, config, _)| config.pointer("/status/drifted"))
    else {
        return Vec::new();
    };
    let listed: Vec<DriftedObject> = serde_json::from_value(listed.clone()).unwrap_or_default();
    listed
        .into_iter()
        .map(|d| {
            let source = UpstreamObject {
                resource: d.resource,
                cluster: None,
                namespace: d.namespace,
                name: d.name,
            };
            (source, d.drift)
        })
        .collect()
}

/// Writes the conditions (and the heartbeat) of `configs` of `resource`; returns
/// whether every write succeeded.
async fn write(
    engine: &Engine,
    profile: &KubeStellar,
    resource: &kube::core::ApiResource,
    configs: &[(String, Value, ConditionInputs)],
    heartbeat: bool,
) -> bool {
    let api: Api<DynamicObject> = Api::all_with(engine.up.client.clone(), resource);
    let now = ferry_api::timestamp::now();
    // Only SyncerConfigs carry the refusals (EdgeSyncConfig's schema has no such field).
    let (refused, refused_count) = if resource.kind == "SyncerConfig" {
        refused_status(engine)
    } else {
        (Value::Null, Value::Null)
    };
    // Drifts too; those an earlier run listed are taken over at the first write.
    if resource.kind == "SyncerConfig" && !profile.drifts_taken_over.swap(true, Ordering::Relaxed) {
        engine.drifts.carry_over(reported_drifts(configs));
    }
    let drifted = if resource.kind == "SyncerConfig" {
        drifted_status(engine)
    } else {
        Value::Null
    };
    let mut all_written = true;
    for (name, entry_object, inputs) in configs.iter() {
        let existing: Vec<Value> = entry_object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let conditions = build_conditions(inputs, &existing, &now, &engine.name);
        let reports_changed = entry_object.pointer("/status/refused").unwrap_or(&Value::Null) != &refused
            || entry_object
                .pointer("/status/refusedCount")
                .unwrap_or(&Value::Null)
                != &refused_count
            || entry_object.pointer("/status/drifted").unwrap_or(&Value::Null) != &drifted;
        let changed = !same_conditions(&existing, &conditions) || reports_changed;
        if !heartbeat && !changed {
            continue;
        }
        for c in &conditions {
            let (type_, message) = (
                c["type"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or(""),
            );
            let false_ = c["status"] == "False";
            if profile
                .logged
                .changed(&resource.kind, name, type_, false_.then_some(message))
            {
                tracing::info!(config = %name, kind = %resource.kind, condition = %type_, "{message}");
            }
        }
        // Null removes the fields in a merge patch once nothing is refused.
        let mut status = json!({ "conditions": conditions });
        if resource.kind == "SyncerConfig" {
            status["refused"] = refused.clone();
            status["refusedCount"] = refused_count.clone();
            status["drifted"] = drifted.clone();
        }
        if heartbeat {
            status["lastSyncerHeartbeatTime"] = now.clone().into();
            if resource.kind == "SyncerConfig" {
                status["syncerVersion"] = engine.version.clone().into();
            }
        }
        engine.up.limiter.acquire().await;
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let patch = Patch::Merge(json!({ "status": status }));
        // The status subresource first (Ferry's CRDs and the syncer's rights); a
        // server whose CRD has none (KubeStellar's own) takes status on the object.
        let written = match api.patch_status(name, &params, &patch).await {
            Err(kube::Error::Api(e)) if e.code == 404 => api.patch(name, &params, &patch).await,
            other => other,
        };
        if let Err(e) = written {
            all_written = false;
            tracing::debug!(config = %name, "writing {} status failed: {e}", resource.kind);
        }
    }
    all_written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_false_condition_is_logged_once_per_change() {
        let logged = LoggedConditions::default();
        let not_synced = Some("syncer s: the initial sync has not completed");
        // The same readiness on the-one and on an EdgeSyncConfig, written twice each.
        assert!(logged.changed("SyncerConfig", "the-one", "SyncerReady", not_synced));
        assert!(!logged.changed("SyncerConfig", "the-one", "SyncerReady", not_synced));
        assert!(!logged.changed("EdgeSyncConfig", "e", "SyncerReady", not_synced));
        // A new reason is news; so is the same one after the condition was True.
        assert!(logged.changed("SyncerConfig", "the-one", "SyncerReady", Some("unreachable")));
        assert!(!logged.changed("SyncerConfig", "the-one", "SyncerReady", None));
        assert!(logged.changed("SyncerConfig", "the-one", "SyncerReady", Some("unreachable")));
        // Per-config conditions are per config.
        assert!(logged.changed("SyncerConfig", "a", "ConfigValid", Some("bad")));
        assert!(logged.changed("SyncerConfig", "b", "ConfigValid", Some("bad")));
    }
}
