//! Timestamps as Kubernetes writes them in objects: RFC 3339 in UTC with whole
//! seconds (`2024-05-01T12:00:00Z`), the format of `metav1.Time`.

use chrono::{DateTime, Utc};

const FORMAT: &str = "%Y-%m-%dT%H:%M:%SZ";

/// The current time.
pub fn now() -> String {
    Utc::now().format(FORMAT).to_string()
}

/// The time `secs` seconds after the Unix epoch, or `None` when it is out of range.
pub fn from_unix_seconds(secs: i64) -> Option<String> {
    DateTime::from_timestamp(secs, 0).map(|t| t.format(FORMAT).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_format_as_kubernetes_writes_them() {
        assert_eq!(from_unix_seconds(0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            from_unix_seconds(1_714_564_800).as_deref(),
            Some("2024-05-01T12:00:00Z")
        );
        assert_eq!(from_unix_seconds(i64::MAX), None);
    }

    #[test]
    fn now_has_whole_seconds_and_a_z() {
        let now = now();
        assert_eq!(now.len(), "2024-05-01T12:00:00Z".len(), "{now}");
        assert!(now.ends_with('Z'), "{now}");
    }
}
