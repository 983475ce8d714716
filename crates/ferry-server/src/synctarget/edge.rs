//! The hub side of KubeStellar's `edge.kubestellar.io` SyncTarget: what its
//! status says about its syncer. A KubeStellar syncer never writes the
//! SyncTarget (it reads only its mailbox workspace); it writes its heartbeat
//! and conditions on the SyncerConfig `the-one` there. The SyncTarget shows
//! them in the inventory workspace:
//!
//! - `status.lastSyncerHeartbeatTime`: the-one's, as the syncer wrote it;
//! - `Ready`: True while that heartbeat is younger than the threshold and the
//!   syncer's own `SyncerReady` is not False; else False with why
//!   (`NoSyncer`, `HeartbeatStale`, `SyncerNotReady`) and what to do.
//!
//! Pure; `controllers::edge_synctarget` writes it, the placement translator
//! reads `Ready` before it counts a destination as synced.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::{condition, condition_true};
use crate::apis::merge_conditions;
use crate::json;

/// The condition this module owns on an edge SyncTarget.
pub const READY: &str = "Ready";

/// What one edge SyncTarget's status should be now, and when to look again.
#[derive(Debug, PartialEq)]
pub struct Desired {
    pub status: Value,
    /// When the heartbeat turns stale, if it is fresh now.
    pub recheck_in: Option<Duration>,
}

/// The status of the SyncTarget named `name` whose status is now `old`
/// (any), given its mailbox's SyncerConfig `the_one` (if any), at `now`.
pub fn desired(
    name: &str,
    old: Option<&Value>,
    the_one: Option<&Value>,
    threshold: Duration,
    now: DateTime<Utc>,
) -> Desired {
    let mut status = match old {
        Some(Value::Object(m)) => Value::Object(m.clone()),
        _ => json!({}),
    };
    let heartbeat = the_one
        .map(|c| json::str_at(c, "/status/lastSyncerHeartbeatTime"))
        .unwrap_or_default();
    if heartbeat.is_empty() {
        if let Some(m) = status.as_object_mut() {
            m.remove("lastSyncerHeartbeatTime");
        }
    } else {
        status["lastSyncerHeartbeatTime"] = json!(heartbeat);
    }
    let (ready, recheck_in) = ready(name, heartbeat, the_one, threshold, now);
    let kept: Vec<Value> = old
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| json::str_at(c, "/type") != READY)
        .cloned()
        .chain([ready])
        .collect();
    status["conditions"] = json!(merge_conditions(old.and_then(|s| s.get("conditions")), kept));
    Desired { status, recheck_in }
}

fn ready(
    name: &str,
    heartbeat: &str,
    the_one: Option<&Value>,
    threshold: Duration,
    now: DateTime<Utc>,
) -> (Value, Option<Duration>) {
    let not_ready = |reason: &str, message: String| condition(READY, false, "Warning", reason, &message);
    if heartbeat.is_empty() {
        let message = format!(
            "no syncer has reported for SyncTarget {name}: run `kubectl ferry syncer-gen {name}` in its mailbox workspace and run the syncer it describes"
        );
        return (not_ready("NoSyncer", message), None);
    }
    let Ok(last) = DateTime::parse_from_rfc3339(heartbeat) else {
        let message =
            format!("the syncer's heartbeat {heartbeat:?} on SyncerConfig the-one is not an RFC 3339 time");
        return (not_ready("HeartbeatStale", message), None);
    };
    let stale_at = last
        .with_timezone(&Utc)
        .checked_add_signed(chrono::Duration::from_std(threshold).unwrap_or(chrono::Duration::MAX))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    if now > stale_at {
        let message = format!(
            "no heartbeat from the syncer of SyncTarget {name} since {heartbeat} (threshold {}s): is it running and able to reach the hub?",
            threshold.as_secs_f64()
        );
        return (not_ready("HeartbeatStale", message), None);
    }
    let fresh_for = (stale_at - now).to_std().ok();
    let syncer_ready = the_one
        .and_then(|c| c.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| json::str_at(c, "/type") == "SyncerReady"));
    match syncer_ready {
        Some(c) if json::str_at(c, "/status") == "False" => {
            let message = json::str_at(c, "/message").to_string();
            (not_ready("SyncerNotReady", message), fresh_for)
        }
        _ => (
            condition_true(
                READY,
                "SyncerReady",
                "the syncer sends heartbeats and has completed its initial sync",
            ),
            fresh_for,
        ),
    }
}

/// Why a destination whose mailbox holds the current copy does not count as
/// synced yet (`None`: it does): its SyncTarget (`target`, in the inventory
/// workspace) is not Ready, or its syncer has not yet read the current
/// SyncerConfig `the_one` (its `SyncerReady` is of an older generation).
pub fn pending(target: Option<&Value>, the_one: Option<&Value>) -> Option<String> {
    let ready = target
        .and_then(|t| t.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| json::str_at(c, "/type") == READY));
    match ready {
        None => return Some("no syncer has reported for this SyncTarget yet".into()),
        Some(c) if json::str_at(c, "/status") != "True" => {
            let message = json::str_at(c, "/message");
            return Some(match message {
                "" => format!("SyncTarget not Ready ({})", json::str_at(c, "/reason")),
                m => m.to_string(),
            });
        }
        Some(_) => {}
    }
    let the_one = the_one?;
    let generation = the_one.pointer("/metadata/generation").and_then(Value::as_i64)?;
    let seen = the_one
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| json::str_at(c, "/type") == "SyncerReady"))
        .and_then(|c| c.get("observedGeneration"))
        .and_then(Value::as_i64);
    match seen {
        Some(g) if g >= generation => None,
        _ => Some(format!(
            "the syncer has not yet acknowledged SyncerConfig the-one at generation {generation}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn the_one(heartbeat: &str, ready: &str, generation: i64, seen: i64) -> Value {
        json!({"metadata": {"generation": generation},
               "status": {"lastSyncerHeartbeatTime": heartbeat,
                          "conditions": [{"type": "SyncerReady", "status": ready, "observedGeneration": seen,
                                          "message": "syncer s: the initial sync has not completed"}]}})
    }

    fn reason(d: &Desired) -> (&str, &str) {
        let c = &d.status["conditions"][0];
        (json::str_at(c, "/status"), json::str_at(c, "/reason"))
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn no_syncer_is_not_ready_and_says_what_to_run() {
        let d = desired("florin", None, None, MINUTE, at("2026-01-01T00:00:00Z"));
        assert_eq!(reason(&d), ("False", "NoSyncer"));
        assert!(json::str_at(&d.status, "/conditions/0/message").contains("syncer-gen florin"));
        assert_eq!(d.recheck_in, None);
        assert!(d.status.get("lastSyncerHeartbeatTime").is_none());
    }

    #[test]
    fn a_fresh_heartbeat_is_ready_until_the_threshold_passes() {
        let one = the_one("2026-01-01T00:00:00Z", "True", 1, 1);
        let d = desired("florin", None, Some(&one), MINUTE, at("2026-01-01T00:00:20Z"));
        assert_eq!(reason(&d), ("True", "SyncerReady"));
        assert_eq!(d.status["lastSyncerHeartbeatTime"], "2026-01-01T00:00:00Z");
        assert_eq!(d.recheck_in, Some(Duration::from_secs(40)));
        let later = desired(
            "florin",
            Some(&d.status),
            Some(&one),
            MINUTE,
            at("2026-01-01T00:01:01Z"),
        );
        assert_eq!(reason(&later), ("False", "HeartbeatStale"));
        assert_eq!(later.recheck_in, None);
    }

    #[test]
    fn a_syncer_not_ready_says_why() {
        let one = the_one("2026-01-01T00:00:00Z", "False", 1, 1);
        let d = desired("florin", None, Some(&one), MINUTE, at("2026-01-01T00:00:01Z"));
        assert_eq!(reason(&d), ("False", "SyncerNotReady"));
        assert!(json::str_at(&d.status, "/conditions/0/message").contains("initial sync"));
    }

    #[test]
    fn a_destination_is_pending_until_ready_and_acknowledged() {
        let one = the_one("2026-01-01T00:00:00Z", "True", 2, 1);
        assert!(pending(None, Some(&one)).unwrap().contains("no syncer"));
        let ready = desired("florin", None, Some(&one), MINUTE, at("2026-01-01T00:00:01Z"));
        let target = json!({"status": ready.status});
        assert!(pending(Some(&target), Some(&one))
            .unwrap()
            .contains("generation 2"));
        let caught_up = the_one("2026-01-01T00:00:00Z", "True", 2, 2);
        assert_eq!(pending(Some(&target), Some(&caught_up)), None);
        let stale = desired("florin", None, Some(&one), MINUTE, at("2026-01-01T01:00:00Z"));
        let target = json!({"status": stale.status});
        assert!(pending(Some(&target), Some(&caught_up))
            .unwrap()
            .contains("no heartbeat"));
    }
}
