//! Copies an API server refused: what was refused, and the server's own
//! message in one line, kept per key until the object syncs (or goes), so a
//! profile can show its user exactly which objects a cluster would not take
//! and why — KubeStellar on its SyncerConfigs, which the hub's placement
//! translator carries to the workload's owner.
//!
//! A refusal is an answer the same request will get again until someone
//! changes the object, the cluster or the syncer's rights (400, 403, 405, 413,
//! 415, 422); the engine retries it slowly ([`SLOW_MIN`] doubling to
//! [`SLOW_MAX`]) and logs it once per change of message, not at every retry.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;

use super::Key;
use crate::side::Side;

/// A refused object's first retry waits this long...
pub const SLOW_MIN: Duration = Duration::from_secs(1);
/// ...doubling up to this.
pub const SLOW_MAX: Duration = Duration::from_secs(300);

/// One refused write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The side whose API server refused.
    pub side: Side,
    /// `group/resource` (`core/services` for the core group) of the upstream object.
    pub resource: String,
    /// The upstream object's logical cluster, on an upstream that spans several.
    pub cluster: Option<String>,
    /// The upstream object's namespace (empty for a cluster-scoped one).
    pub namespace: String,
    /// The upstream object's name.
    pub name: String,
    /// The Status reason (`Invalid`, `Forbidden`, ...).
    pub reason: String,
    /// The API server's message, on one line.
    pub message: String,
}

/// Standing refusals by key.
#[derive(Default)]
pub struct Refusals {
    map: Mutex<BTreeMap<Key, Refusal>>,
}

impl Refusals {
    /// Records `refusal` for `key`; returns whether it is new or its message changed.
    pub fn set(&self, key: Key, refusal: Refusal) -> bool {
        self.map.lock().insert(key, refusal.clone()).as_ref() != Some(&refusal)
    }

    /// Forgets `key`'s refusal (it synced, or its object is gone); returns whether there was one.
    pub fn clear(&self, key: &Key) -> bool {
        let mut map = self.map.lock();
        !map.is_empty() && map.remove(key).is_some()
    }

    /// Every standing refusal, in key order.
    pub fn all(&self) -> Vec<Refusal> {
        self.map.lock().values().cloned().collect()
    }

    /// How many refusals stand.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Whether none stands.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether an API server's `code` refuses the request as sent, so that the
/// same request fails again until something changes.
pub fn is_refusal(code: u16) -> bool {
    matches!(code, 400 | 403 | 405 | 413 | 415 | 422)
}

/// What `e` says, for a person: the API server's own message on one line
/// (never the client library's debug form), or the transport error.
pub fn server_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => one_line(&status.message),
        kube::Error::Api(status) => format!("{} ({})", status.reason, status.code),
        other => one_line(&other.to_string()),
    }
}

/// `text` with its lines joined by spaces.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            status: Some(kube::core::response::StatusSummary::Failure),
            code,
            message: message.into(),
            reason: "Invalid".into(),
            ..Default::default()
        }))
    }

    #[test]
    fn the_message_is_the_servers_on_one_line_without_debug_output() {
        let e = api_error(
            422,
            "Service \"web\" is invalid: spec.clusterIPs: Invalid value: [\"10.96.0.7\"]:\n failed to allocate IP",
        );
        let text = server_message(&e);
        assert_eq!(
            text,
            "Service \"web\" is invalid: spec.clusterIPs: Invalid value: [\"10.96.0.7\"]: failed to allocate IP"
        );
        assert!(!text.contains("Status {") && !text.contains("ApiError"));
    }

    #[test]
    fn refusals_are_answers_that_repeat_until_something_changes() {
        for code in [400, 403, 422] {
            assert!(is_refusal(code), "{code}");
        }
        for code in [404, 409, 410, 429, 500, 503] {
            assert!(!is_refusal(code), "{code}");
        }
    }
}
