//! `metadata.managedFields`: reading and writing the entries, deciding which
//! fields are tracked at all, and recording ownership for non-apply writes.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::fieldpath::{FieldSet, FieldWalker};

pub(super) const APPLY: &str = "Apply";
const FIELDS_V1: &str = "FieldsV1";

/// Metadata the server sets; nobody owns it (structured-merge-diff's
/// `stripMeta` list, plus the deletion markers).
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "clusterName",
    "managedFields",
];

/// One `metadata.managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ManagedFieldsEntry {
    pub(super) manager: String,
    pub(super) operation: String,
    pub(super) api_version: String,
    pub(super) time: Option<String>,
    pub(super) subresource: Option<String>,
    pub(super) fields: FieldSet,
}

impl ManagedFieldsEntry {
    fn from_json(entry: &Value) -> Option<Self> {
        let entry = entry.as_object()?;
        let text = |name: &str| entry.get(name).and_then(Value::as_str).map(str::to_owned);
        if text("fieldsType").is_some_and(|fields_type| fields_type != FIELDS_V1) {
            return None;
        }
        Some(ManagedFieldsEntry {
            manager: text("manager").unwrap_or_default(),
            operation: text("operation").unwrap_or_default(),
            api_version: text("apiVersion").unwrap_or_default(),
            time: text("time"),
            subresource: text("subresource").filter(|subresource| !subresource.is_empty()),
            fields: entry
                .get("fieldsV1")
                .map(FieldSet::from_fields_v1)
                .unwrap_or_default(),
        })
    }

    fn to_json(&self) -> Value {
        let mut entry = Map::new();
        entry.insert("manager".into(), self.manager.clone().into());
        entry.insert("operation".into(), self.operation.clone().into());
        entry.insert("apiVersion".into(), self.api_version.clone().into());
        if let Some(time) = &self.time {
            entry.insert("time".into(), time.clone().into());
        }
        entry.insert("fieldsType".into(), FIELDS_V1.into());
        entry.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(subresource) = &self.subresource {
            entry.insert("subresource".into(), subresource.clone().into());
        }
        Value::Object(entry)
    }

    /// Whether this entry belongs to the given writer. As in Kubernetes, an
    /// applier is one manager whatever apiVersion it applies, while updates
    /// are tracked per apiVersion.
    pub(super) fn is_for(
        &self,
        manager: &str,
        operation: &str,
        api_version: &str,
        subresource: Option<&str>,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
            && (operation == APPLY || self.api_version == api_version)
    }

    /// Sort order of kube-apiserver: operation, time, manager, apiVersion,
    /// subresource.
    fn cmp_for_encoding(&self, other: &Self) -> Ordering {
        let seconds = |entry: &Self| {
            entry
                .time
                .as_deref()
                .and_then(|time| chrono::DateTime::parse_from_rfc3339(time).ok())
                .map_or(0, |time| time.timestamp())
        };
        self.operation
            .cmp(&other.operation)
            .then_with(|| seconds(self).cmp(&seconds(other)))
            .then_with(|| self.manager.cmp(&other.manager))
            .then_with(|| self.api_version.cmp(&other.api_version))
            .then_with(|| self.subresource.cmp(&other.subresource))
    }
}

/// The managedFields entries of `object`; `None` when it has none.
pub(super) fn decode(object: &Value) -> Option<Vec<ManagedFieldsEntry>> {
    let entries = object.get("metadata")?.get("managedFields")?.as_array()?;
    if entries.is_empty() {
        return None;
    }
    Some(entries.iter().filter_map(ManagedFieldsEntry::from_json).collect())
}

/// Writes `entries` into `object`'s metadata, sorted as kube-apiserver does
/// and without empty ones; removes `managedFields` when none are left.
pub(super) fn encode(object: &mut Value, mut entries: Vec<ManagedFieldsEntry>) {
    entries.retain(|entry| !entry.fields.is_empty());
    entries.sort_by(ManagedFieldsEntry::cmp_for_encoding);
    let Some(object) = object.as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
            metadata.shift_remove("managedFields");
        }
        return;
    }
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(metadata) = metadata {
        metadata.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(ManagedFieldsEntry::to_json).collect()),
        );
    }
}

/// Removes `metadata.managedFields` from `object`.
pub(super) fn strip(object: &mut Value) {
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.shift_remove("managedFields");
    }
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// The main resource: everything but `status`.
    Main,
    /// The `status` subresource: only `status`.
    Status,
}

/// The part of `object` whose fields are owned by managers in `scope`:
/// without `apiVersion`, `kind` and server-set metadata, and restricted to or
/// without `status`.
pub(super) fn tracked(object: &Value, scope: Scope) -> Value {
    let Value::Object(object) = object else {
        return Value::Object(Map::new());
    };
    let mut tracked = Map::new();
    for (name, value) in object {
        match (scope, name.as_str()) {
            (Scope::Status, "status") => {
                tracked.insert(name.clone(), value.clone());
            }
            (Scope::Main, "metadata") => {
                if let Value::Object(metadata) = value {
                    let mut metadata = metadata.clone();
                    metadata.retain(|field, _| !SERVER_METADATA.contains(&field.as_str()));
                    if !metadata.is_empty() {
                        tracked.insert(name.clone(), Value::Object(metadata));
                    }
                }
            }
            (Scope::Main, "apiVersion" | "kind" | "status") | (Scope::Status, _) => {}
            (Scope::Main, _) => {
                tracked.insert(name.clone(), value.clone());
            }
        }
    }
    Value::Object(tracked)
}

/// The API group of an `apiVersion`: `apps` for `apps/v1`, empty for `v1`.
pub(super) fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Records in `new`'s `metadata.managedFields` that `manager` wrote the
/// fields that differ between `old` and `new`, for every write that is not
/// a server-side apply: create (`old` is `None`), update and patch.
///
/// `operation` is normally `"Update"`; `subresource` is the subresource
/// written (`Some("status")` tracks only `status`, any other write tracks
/// everything but `status`); `now` is the RFC 3339 time recorded when the
/// manager gains fields. As in Kubernetes, the changed fields are taken away
/// from every other manager, entries left empty are dropped, and
/// managedFields sent in `new` replace the stored ones (unless empty or
/// written through a subresource), which is how clients reset them.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: &str,
    subresource: Option<&str>,
    now: &str,
) {
    if !new.is_object() {
        return;
    }
    let scope = if subresource == Some("status") {
        Scope::Status
    } else {
        Scope::Main
    };
    let sent = if subresource.is_none() { decode(new) } else { None };
    let mut entries = sent.or_else(|| old.and_then(decode)).unwrap_or_default();
    strip(new);

    let api_version = new
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let kind = new
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let walker = FieldWalker::new(group_of(&api_version), &kind);
    let empty = Value::Object(Map::new());
    let comparison = walker.compare(&tracked(old.unwrap_or(&empty), scope), &tracked(new, scope));
    let changed = comparison.added.union(&comparison.modified);

    let mut own = None;
    for (index, entry) in entries.iter_mut().enumerate() {
        if entry.is_for(manager, operation, &api_version, subresource) && own.is_none() {
            own = Some(index);
            continue;
        }
        entry.fields = entry.fields.difference(&changed).difference(&comparison.removed);
    }
    let index = own.unwrap_or_else(|| {
        entries.push(ManagedFieldsEntry {
            manager: manager.to_owned(),
            operation: operation.to_owned(),
            api_version: api_version.clone(),
            time: None,
            subresource: subresource.map(str::to_owned),
            fields: FieldSet::default(),
        });
        entries.len() - 1
    });
    let entry = &mut entries[index];
    entry.fields = entry.fields.difference(&comparison.removed).union(&changed);
    entry.api_version = api_version;
    if !changed.is_empty() {
        entry.time = Some(now.to_owned());
    }
    encode(new, entries);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const T1: &str = "2024-01-01T00:00:00Z";
    const T2: &str = "2024-01-02T00:00:00Z";

    fn config_map(data: Value) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default", "uid": "u1", "resourceVersion": "7"},
            "data": data
        })
    }

    fn entries(object: &Value) -> Vec<Value> {
        object["metadata"]["managedFields"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    #[test]
    fn create_gives_all_fields_to_the_creator() {
        let mut created = config_map(json!({"a": "1"}));
        created["metadata"]["labels"] = json!({"app": "x"});
        created["status"] = json!({"phase": "ignored"});
        record_update(None, &mut created, "kubectl-create", "Update", None, T1);
        assert_eq!(
            entries(&created),
            [json!({
                "manager": "kubectl-create",
                "operation": "Update",
                "apiVersion": "v1",
                "time": T1,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
            })]
        );
    }

    #[test]
    fn update_takes_changed_fields_from_other_managers() {
        let mut old = config_map(json!({"a": "1", "b": "2"}));
        record_update(None, &mut old, "creator", "Update", None, T1);
        let mut new = old.clone();
        new["data"]["a"] = json!("changed");
        record_update(Some(&old), &mut new, "kubectl-edit", "Update", None, T2);
        let managed = entries(&new);
        assert_eq!(managed.len(), 2);
        assert_eq!(managed[0]["manager"], "creator");
        assert_eq!(managed[0]["time"], T1);
        assert_eq!(managed[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
        assert_eq!(managed[1]["manager"], "kubectl-edit");
        assert_eq!(managed[1]["time"], T2);
        assert_eq!(managed[1]["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    }

    #[test]
    fn removed_fields_leave_every_manager_and_empty_entries_are_dropped() {
        let mut old = config_map(json!({"a": "1"}));
        record_update(None, &mut old, "creator", "Update", None, T1);
        let mut new = old.clone();
        new["data"] = json!({"b": "2"});
        record_update(Some(&old), &mut new, "editor", "Update", None, T2);
        let managed = entries(&new);
        assert_eq!(managed.len(), 1, "{managed:?}");
        assert_eq!(managed[0]["manager"], "editor");
        assert_eq!(managed[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    }

    #[test]
    fn unchanged_update_keeps_the_time() {
        let mut old = config_map(json!({"a": "1"}));
        record_update(None, &mut old, "creator", "Update", None, T1);
        let mut new = old.clone();
        new["metadata"]["resourceVersion"] = json!("8");
        record_update(Some(&old), &mut new, "creator", "Update", None, T2);
        assert_eq!(entries(&new), entries(&old));
    }

    #[test]
    fn status_writes_track_only_status_and_main_writes_ignore_it() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        record_update(None, &mut pod, "kubectl", "Update", None, T1);
        let mut with_status = pod.clone();
        with_status["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        with_status["spec"]["containers"][0]["image"] = json!("sneaky");
        record_update(
            Some(&pod),
            &mut with_status,
            "kubelet",
            "Update",
            Some("status"),
            T2,
        );
        let managed = entries(&with_status);
        assert_eq!(managed.len(), 2);
        assert_eq!(managed[0]["manager"], "kubectl");
        assert_eq!(
            managed[0]["fieldsV1"],
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        assert_eq!(managed[1]["manager"], "kubelet");
        assert_eq!(managed[1]["subresource"], "status");
        assert_eq!(
            managed[1]["fieldsV1"],
            json!({"f:status": {"f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}}})
        );
    }

    #[test]
    fn managed_fields_sent_by_the_client_replace_the_stored_ones() {
        let mut old = config_map(json!({"a": "1"}));
        record_update(None, &mut old, "creator", "Update", None, T1);
        let mut new = old.clone();
        new["metadata"]["managedFields"] = json!([{}]);
        new["data"]["b"] = json!("2");
        record_update(Some(&old), &mut new, "resetter", "Update", None, T2);
        let managed = entries(&new);
        assert_eq!(managed.len(), 1);
        assert_eq!(managed[0]["manager"], "resetter");
        assert_eq!(managed[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
    }

    #[test]
    fn update_managers_are_tracked_per_api_version() {
        let mut old = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 1}});
        record_update(None, &mut old, "m", "Update", None, T1);
        let mut new = old.clone();
        new["apiVersion"] = json!("apps/v1beta1");
        new["spec"]["paused"] = json!(true);
        record_update(Some(&old), &mut new, "m", "Update", None, T2);
        let managed = entries(&new);
        assert_eq!(managed.len(), 2);
        assert_eq!(managed[0]["apiVersion"], "apps/v1");
        assert_eq!(managed[1]["apiVersion"], "apps/v1beta1");
    }

    #[test]
    fn removing_a_list_item_takes_it_from_its_owner() {
        let pod = |containers: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": containers}})
        };
        let mut old = pod(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]));
        record_update(None, &mut old, "creator", "Update", None, T1);
        let mut new = old.clone();
        new["spec"]["containers"] = json!([{"name": "a", "image": "1"}]);
        record_update(Some(&old), &mut new, "editor", "Update", None, T2);
        let managed = entries(&new);
        assert_eq!(managed.len(), 1);
        assert_eq!(
            managed[0]["fieldsV1"],
            json!({"f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
    }

    #[test]
    fn entries_are_sorted_by_operation_then_time() {
        let entry = |manager: &str, operation: &str, time: &str| ManagedFieldsEntry {
            manager: manager.into(),
            operation: operation.into(),
            api_version: "v1".into(),
            time: Some(time.into()),
            subresource: None,
            fields: FieldWalker::new("", "ConfigMap").field_set(&json!({"data": {"a": "1"}})),
        };
        let mut object = json!({});
        encode(
            &mut object,
            vec![
                entry("b", "Update", T2),
                entry("c", "Update", T1),
                entry("a", "Apply", T2),
            ],
        );
        let managers: Vec<String> = entries(&object)
            .iter()
            .map(|entry| entry["manager"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(managers, ["a", "c", "b"]);
    }
}
