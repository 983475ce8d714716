//! Whose status a WMW object carries. With `wantSingletonReportedState` and
//! exactly one destination, the translator writes that destination's
//! reported status into the WMW object and records, in
//! [`REPORTED_FROM_ANNOTATION`], which mailbox it came from and a
//! fingerprint of what it wrote. When the object stops going to that one
//! destination (its Location stops matching, its SyncTarget goes, the grant
//! is revoked, the placement now reaches two clusters, or the object is no
//! longer selected), the status is cleared — but only while it is still the
//! one the translator wrote, so a status the user (or anyone else) wrote
//! since is left alone. Pure; the translator does the writes.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Annotation on a WMW object whose status came from a destination:
/// `<mailbox workspace path> <fingerprint of that status>`.
pub const REPORTED_FROM_ANNOTATION: &str = "ferry.dev/reported-state-from";

/// A reported status worth returning: present and not empty (a copy the
/// cluster has not reported on yet carries `{}` or nothing).
pub fn reported(copy: &Value) -> Option<&Value> {
    copy.get("status")
        .filter(|s| s.as_object().is_none_or(|o| !o.is_empty()))
}

/// A short, stable fingerprint of `status`, independent of key order.
pub fn fingerprint(status: &Value) -> String {
    let digest = canonical_digest(status);
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The SHA-256 of `v` written canonically (object members sorted by key):
/// equal exactly when the values are equal as JSON values.
pub fn canonical_digest(v: &Value) -> [u8; 32] {
    let mut canonical = String::new();
    write_canonical(v, &mut canonical);
    Sha256::digest(canonical.as_bytes()).into()
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for k in keys {
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
                out.push(',');
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for item in items {
                write_canonical(item, out);
                out.push(',');
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The annotation's value for `status` reported through `mailbox`.
pub fn record(mailbox: &str, status: &Value) -> String {
    format!("{mailbox} {}", fingerprint(status))
}

/// The mailbox named in an annotation value written by [`record`].
pub fn recorded_mailbox(annotation: &str) -> &str {
    annotation.split_once(' ').map_or(annotation, |(m, _)| m)
}

/// What to do with a WMW object whose annotation says `annotation` and whose
/// status is `status`, now that `current` (the mailbox its status should
/// come from now, if any) is not the recorded one.
#[derive(Debug, PartialEq, Eq)]
pub enum Leaving {
    /// The status is still the one the old destination reported: clear it
    /// and the annotation.
    ClearStatus,
    /// Someone else wrote the status since: drop only the annotation.
    ForgetSource,
    /// The object still reports from the recorded mailbox: nothing to do.
    Stay,
}

pub fn on_leaving(annotation: &str, status: Option<&Value>, current: Option<&str>) -> Leaving {
    if current == Some(recorded_mailbox(annotation)) {
        return Leaving::Stay;
    }
    match (status, annotation.split_once(' ')) {
        (Some(s), Some((_, fp))) if fingerprint(s) == fp => Leaving::ClearStatus,
        _ => Leaving::ForgetSource,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fingerprints_ignore_key_order_but_not_values() {
        let a = json!({"replicas": 1, "conditions": [{"type": "Available", "status": "True"}]});
        let b = json!({"conditions": [{"status": "True", "type": "Available"}], "replicas": 1});
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&json!({"replicas": 2})));
        assert_eq!(fingerprint(&a).len(), 16);
    }

    #[test]
    fn an_empty_status_is_not_reported() {
        assert_eq!(reported(&json!({"spec": {}})), None);
        assert_eq!(reported(&json!({"status": {}})), None);
        assert_eq!(
            reported(&json!({"status": {"phase": "Bound"}})),
            Some(&json!({"phase": "Bound"}))
        );
    }

    #[test]
    fn only_the_status_the_old_destination_reported_is_cleared() {
        let status = json!({"readyReplicas": 2});
        let note = record("root:imw1-mb-1", &status);
        assert_eq!(recorded_mailbox(&note), "root:imw1-mb-1");
        // Still the one destination: nothing moves.
        assert_eq!(
            on_leaving(&note, Some(&status), Some("root:imw1-mb-1")),
            Leaving::Stay
        );
        // Gone, or moved elsewhere: the old cluster's status goes.
        assert_eq!(on_leaving(&note, Some(&status), None), Leaving::ClearStatus);
        assert_eq!(
            on_leaving(&note, Some(&status), Some("root:imw1-mb-2")),
            Leaving::ClearStatus
        );
        // Someone rewrote the status: it stays, the record goes.
        let theirs = json!({"readyReplicas": 5});
        assert_eq!(on_leaving(&note, Some(&theirs), None), Leaving::ForgetSource);
        assert_eq!(on_leaving(&note, None, None), Leaving::ForgetSource);
        assert_eq!(on_leaving("garbage", Some(&status), None), Leaving::ForgetSource);
    }
}
