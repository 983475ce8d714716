//! The per-object `PlacementSummary` in a WMW: every destination of a placed
//! object, whether its mailbox holds the current copy, a digest of the
//! status that came back, and the last drift its syncer restored. Pure; the
//! translator writes what this computes.

use ferry_api::drift::Drift;
use ferry_api::edge::{DestinationSummary, DriftedObject};
use serde_json::Value;

/// The last drift of the object `group`/`resource` `namespace`/`name` that a
/// syncer lists on its SyncerConfig `config` (`status.drifted`), if any.
pub fn drift_of(config: &Value, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Drift> {
    let group = if group.is_empty() { "core" } else { group };
    let wanted = format!("{group}/{resource}");
    config
        .pointer("/status/drifted")?
        .as_array()?
        .iter()
        .filter_map(|d| serde_json::from_value::<DriftedObject>(d.clone()).ok())
        .find(|d| d.resource == wanted && d.namespace == namespace && d.name == name)
        .map(|d| d.drift)
}

/// A short, stable description of a copy's reported status.
pub fn status_digest(copy: &Value) -> String {
    let Some(status) = copy
        .get("status")
        .filter(|s| s.as_object().is_some_and(|o| !o.is_empty()))
    else {
        return "no status yet".into();
    };
    if let Some(available) = status.get("availableReplicas").and_then(Value::as_i64) {
        let wanted = copy
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .or_else(|| status.get("replicas").and_then(Value::as_i64))
            .unwrap_or(0);
        return format!("{available}/{wanted} available");
    }
    if let Some(conditions) = status.get("conditions").and_then(Value::as_array) {
        let parts: Vec<String> = conditions
            .iter()
            .filter_map(|c| {
                Some(format!(
                    "{}={}",
                    c.get("type")?.as_str()?,
                    c.get("status")?.as_str()?
                ))
            })
            .collect();
        if !parts.is_empty() {
            return parts.join(",");
        }
    }
    if let Some(phase) = status.get("phase").and_then(Value::as_str) {
        return phase.to_string();
    }
    use sha2::Digest;
    let hash = sha2::Sha256::digest(status.to_string().as_bytes());
    let hex: String = hash.iter().take(4).map(|b| format!("{b:02x}")).collect();
    format!("status {hex}")
}

/// `next` with each destination's `lastUpdate` carried over from `previous`
/// when neither `synced` nor `statusDigest` changed, else set to `now`.
pub fn carry_last_update(
    previous: &[DestinationSummary],
    mut next: Vec<DestinationSummary>,
    now: &str,
) -> Vec<DestinationSummary> {
    let by_destination: std::collections::HashMap<(&str, &str), &DestinationSummary> = previous
        .iter()
        .map(|p| ((p.cluster.as_str(), p.inventory.as_str()), p))
        .collect();
    for d in &mut next {
        d.last_update = match by_destination.get(&(d.cluster.as_str(), d.inventory.as_str())) {
            Some(p) if p.synced == d.synced && p.status_digest == d.status_digest => p.last_update.clone(),
            _ => now.to_string(),
        };
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digests_say_what_came_back() {
        assert_eq!(status_digest(&json!({"spec": {}})), "no status yet");
        assert_eq!(
            status_digest(&json!({"spec": {"replicas": 2}, "status": {"availableReplicas": 1}})),
            "1/2 available"
        );
        assert_eq!(
            status_digest(&json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}})),
            "Ready=True"
        );
        assert_eq!(status_digest(&json!({"status": {"phase": "Active"}})), "Active");
        assert!(status_digest(&json!({"status": {"x": 1}})).starts_with("status "));
    }

    #[test]
    fn a_drift_is_found_by_the_object_it_copies() {
        let drift = json!({"time": "2026-11-27T12:00:00Z", "fields": ["$.spec.replicas"], "corrections": 2});
        let config = json!({"status": {"drifted": [
            {"resource": "core/configmaps", "namespace": "shop", "name": "web", "drift": {"time": "t", "fields": []}},
            {"resource": "apps/deployments", "namespace": "shop", "name": "web", "drift": drift},
            {"resource": "apps/deployments", "namespace": "shop", "name": "bad", "drift": "not a drift"},
        ]}});
        let found = drift_of(&config, "apps", "deployments", "shop", "web").unwrap();
        assert_eq!(found.fields, vec!["$.spec.replicas"]);
        assert_eq!(found.corrections, 2);
        assert_eq!(
            drift_of(&config, "", "configmaps", "shop", "web").unwrap().time,
            "t"
        );
        assert!(drift_of(&config, "apps", "deployments", "other", "web").is_none());
        assert!(drift_of(&config, "apps", "deployments", "shop", "bad").is_none());
        assert!(drift_of(&json!({}), "apps", "deployments", "shop", "web").is_none());
    }

    #[test]
    fn last_update_moves_only_on_change() {
        let d = |synced, digest: &str, at: &str| DestinationSummary {
            cluster: "florin".into(),
            inventory: "imw".into(),
            mailbox: "root:mb".into(),
            synced,
            status_digest: digest.into(),
            last_update: at.into(),
            drift: None,
        };
        let prev = vec![d(true, "1/1 available", "t0")];
        let same = carry_last_update(&prev, vec![d(true, "1/1 available", "")], "t1");
        assert_eq!(same[0].last_update, "t0");
        let changed = carry_last_update(&prev, vec![d(true, "0/1 available", "")], "t1");
        assert_eq!(changed[0].last_update, "t1");
    }
}
