//! What the garbage collector reads from an object: its uid, whether it is
//! being deleted, its finalizers and its `ownerReferences`, parsed straight
//! from the stored JSON without building a full `Value`.

use serde::Deserialize;
use serde_json::Value;

use super::policy::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};

/// One `metadata.ownerReferences` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// `blockOwnerDeletion: true`: a foreground deletion of the owner waits for this dependent.
    pub block_owner_deletion: bool,
}

impl OwnerRef {
    /// `(group, version)` of `apiVersion`.
    pub fn group_version(&self) -> (&str, &str) {
        match self.api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", self.api_version.as_str()),
        }
    }

    /// `Kind/name` for messages.
    pub fn describe(&self) -> String {
        format!(
            "{} {}/{} (uid {})",
            self.api_version, self.kind, self.name, self.uid
        )
    }
}

/// Whether the stored JSON can hold owner references at all: the cheap test
/// that keeps objects without any out of the collector's parsing (a string
/// value that is exactly `ownerReferences` passes too, and costs a parse).
pub fn mentions_owner_references(json: &[u8]) -> bool {
    contains(json, "\"ownerReferences\"")
}

/// Whether the stored JSON can be of an object being deleted.
pub fn mentions_deletion(json: &[u8]) -> bool {
    contains(json, "\"deletionTimestamp\"")
}

/// On every write the collector sees: a byte search, no UTF-8 check or parse.
fn contains(json: &[u8], needle: &str) -> bool {
    memchr::memmem::find(json, needle.as_bytes()).is_some()
}

/// The metadata the garbage collector works from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    pub uid: String,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    pub finalizers: Vec<String>,
    /// References with a uid; entries without one refer to nothing.
    pub owners: Vec<OwnerRef>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Object {
    metadata: Metadata,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Metadata {
    uid: Option<String>,
    deletion_timestamp: Option<serde::de::IgnoredAny>,
    finalizers: Option<Value>,
    owner_references: Option<Value>,
}

impl Ownership {
    /// Parse from stored JSON; anything malformed reads as absent.
    pub fn parse(json: &[u8]) -> Ownership {
        let meta = serde_json::from_slice::<Object>(json)
            .map(|o| o.metadata)
            .unwrap_or_default();
        let strings = |v: Option<Value>| -> Vec<String> {
            match v {
                Some(Value::Array(a)) => a
                    .into_iter()
                    .filter_map(|f| f.as_str().map(String::from))
                    .collect(),
                _ => Vec::new(),
            }
        };
        let owners = match meta.owner_references {
            Some(Value::Array(refs)) => refs.iter().filter_map(owner_ref).collect(),
            _ => Vec::new(),
        };
        Ownership {
            uid: meta.uid.unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            finalizers: strings(meta.finalizers),
            owners,
        }
    }

    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }

    /// Being deleted and waiting for the collector to delete its dependents.
    pub fn deleting_dependents(&self) -> bool {
        self.deleting && self.has_finalizer(FOREGROUND_FINALIZER)
    }

    /// Being deleted and waiting for the collector to orphan its dependents.
    pub fn orphaning_dependents(&self) -> bool {
        self.deleting && self.has_finalizer(ORPHAN_FINALIZER)
    }

    /// Waiting for the collector in either way.
    pub fn waits_for_collector(&self) -> bool {
        self.deleting_dependents() || self.orphaning_dependents()
    }
}

fn owner_ref(v: &Value) -> Option<OwnerRef> {
    let s = |f: &str| v.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
    let uid = s("uid");
    if uid.is_empty() {
        return None;
    }
    Some(OwnerRef {
        api_version: s("apiVersion"),
        kind: s("kind"),
        name: s("name"),
        uid,
        block_owner_deletion: v.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bytes(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn parses_owner_references_deletion_and_finalizers() {
        let json = bytes(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": "web-1", "uid": "rs-1", "deletionTimestamp": "2024-01-01T00:00:00Z",
                "finalizers": ["foregroundDeletion"],
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "d-1",
                     "controller": true, "blockOwnerDeletion": true},
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "cfg", "uid": "c-1"},
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "no-uid"},
                ],
            },
            "spec": {"replicas": 1},
        }));
        assert!(mentions_owner_references(&json) && mentions_deletion(&json));
        let o = Ownership::parse(&json);
        assert_eq!(o.uid, "rs-1");
        assert!(o.deleting_dependents() && !o.orphaning_dependents());
        assert_eq!(o.owners.len(), 2, "the reference without a uid refers to nothing");
        assert_eq!(o.owners[0].group_version(), ("apps", "v1"));
        assert!(o.owners[0].block_owner_deletion);
        assert_eq!(o.owners[1].group_version(), ("", "v1"));
        assert!(!o.owners[1].block_owner_deletion);
    }

    #[test]
    fn objects_without_references_are_skipped_cheaply() {
        let plain =
            bytes(json!({"metadata": {"name": "a", "uid": "u"}, "data": {"k": "has ownerReferences"}}));
        assert!(!mentions_owner_references(&plain));
        assert!(!mentions_deletion(&plain));
        // Quotes inside a string value are escaped in JSON.
        let quoted = bytes(json!({"metadata": {"name": "a"}, "data": {"k": "\"ownerReferences\""}}));
        assert!(!mentions_owner_references(&quoted));
        // A false positive (a value that is exactly the word) only costs a parse.
        let word = bytes(json!({"metadata": {"name": "a"}, "data": {"k": "ownerReferences"}}));
        assert!(mentions_owner_references(&word));
        assert!(Ownership::parse(&word).owners.is_empty());
    }

    #[test]
    fn malformed_metadata_reads_as_absent() {
        let o = Ownership::parse(br#"{"metadata": {"ownerReferences": "nope", "finalizers": 3}}"#);
        assert_eq!(o, Ownership::default());
        assert_eq!(Ownership::parse(b"not json"), Ownership::default());
    }
}
