//! The hub side of kcp TMC's `workload.kcp.io/v1alpha1` SyncTarget: what its
//! status should say, computed from the store without writing anything.
//! `controllers::synctarget` writes it.
//!
//! - `status.virtualWorkspaces`: the syncer and upsyncer virtual-workspace
//!   URLs ([`ferry_api::workload::virtual_workspace`]);
//! - conditions `HeartbeatHealthy` (the syncer's last heartbeat is younger
//!   than the threshold), `SyncerReady` (a heartbeat ever arrived) and
//!   `Ready` (their summary, with the syncer's own `APIImporterReady` and
//!   `SyncerAuthorized` when it wrote them), plus `ResourcesCompatible`
//!   naming the fields of any incompatible resource;
//! - `status.syncedResources`: every resource of every supported APIExport,
//!   `Pending` until the target's syncer imported its schema
//!   (APIResourceImport with `spec.location` = the target), then `Accepted`
//!   or `Incompatible` by [`compat::differences`].

pub mod compat;
pub mod imported;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::apis::{self, merge_conditions};
use crate::hub::Hub;
use crate::json;
use crate::storage::{ClusterScope, ObjectKey};
use crate::strategy::tmc::default_supported_exports;

/// Storage key of SyncTargets.
pub const SYNC_TARGETS: &str = "workload.kcp.io/synctargets";
/// Storage key of APIResourceImports.
pub const IMPORTS: &str = "apiresource.kcp.io/apiresourceimports";

/// kcp's default for `--sync-target-heartbeat-threshold`.
pub const DEFAULT_HEARTBEAT_THRESHOLD: Duration = Duration::from_secs(60);

/// Resources every syncer syncs without an export listing them; kcp does
/// not list them in `syncedResources`.
const ALWAYS_SYNCED: &[(&str, &str)] = &[("", "namespaces"), ("", "configmaps"), ("", "secrets")];

/// Conditions this module owns on a SyncTarget; the others (`SyncerAuthorized`,
/// `APIImporterReady`) are the syncer's and are kept as written.
const OWNED: &[&str] = &["HeartbeatHealthy", "SyncerReady", "ResourcesCompatible", "Ready"];

/// The conditions `Ready` summarises, in the order their reasons win.
const SUMMARISED: &[&str] = &[
    "SyncerReady",
    "APIImporterReady",
    "HeartbeatHealthy",
    "SyncerAuthorized",
];

/// A kcp condition (`conditionsv1alpha1.Condition`) with a severity when False.
fn condition(type_: &str, ok: bool, severity: &str, reason: &str, message: &str) -> Value {
    let mut c = json!({
        "type": type_,
        "status": if ok { "True" } else { "False" },
        "lastTransitionTime": ferry_api::timestamp::now(),
    });
    if !ok {
        c["severity"] = json!(severity);
        c["reason"] = json!(reason);
        if !message.is_empty() {
            c["message"] = json!(message);
        }
    }
    c
}

/// What one SyncTarget's status should be now, and when to look again.
pub struct Desired {
    /// The whole status (fields the syncer writes kept as they are).
    pub status: Value,
    /// When the heartbeat turns stale, if it is fresh now.
    pub recheck_in: Option<Duration>,
    /// The `Compatible` condition each of the target's imports should carry.
    pub import_conditions: Vec<(ObjectKey, Value)>,
}

/// One resource an export serves, with its schema per served version.
struct Upstream {
    group: String,
    resource: String,
    identity_hash: String,
    /// Served versions, sorted, with their `openAPIV3Schema`.
    versions: BTreeMap<String, Value>,
}

impl Upstream {
    fn shown(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// The status the SyncTarget `target` (stored at `key`) should have at `now`.
///
/// With `resources` false, `syncedResources` and `ResourcesCompatible` are
/// kept as they are (when present) instead of recomputed from the exports'
/// and imports' schemas: what a heartbeat needs, cheaply.
pub fn desired(
    hub: &Hub,
    key: &ObjectKey,
    target: &Value,
    threshold: Duration,
    now: DateTime<Utc>,
    resources: bool,
) -> Desired {
    let old = target.get("status").cloned().unwrap_or_else(|| json!({}));
    let mut status = match &old {
        Value::Object(_) => old.clone(),
        _ => json!({}),
    };
    let uid = json::str_at(target, "/metadata/uid");
    let vw = ferry_api::workload::virtual_workspace(&hub.external_url(), &key.cluster, &key.name, uid);
    status["virtualWorkspaces"] = json!([vw]);

    let (heartbeat, recheck_in) = heartbeat_conditions(&old, threshold, now);
    let mut conditions = heartbeat;
    let kept = old
        .get("conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| json::str_at(c, "/type") == "ResourcesCompatible")
        })
        .filter(|_| !resources);
    let mut import_conditions = Vec::new();
    if let Some(compatible) = kept {
        conditions.push(compatible.clone());
    } else {
        let (synced, incompatible, imports) = synced_resources(hub, key, target);
        import_conditions = imports;
        if synced.is_empty() {
            if let Some(m) = status.as_object_mut() {
                m.remove("syncedResources");
            }
        } else {
            status["syncedResources"] = json!(synced);
        }
        conditions.push(resources_compatible(&incompatible));
    }
    // The syncer's conditions stay as it wrote them.
    let theirs: Vec<Value> = old
        .get("conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|c| !OWNED.contains(&json::str_at(c, "/type")))
        .cloned()
        .collect();
    conditions.extend(theirs);
    conditions.push(ready(&conditions));
    status["conditions"] = json!(merge_conditions(old.get("conditions"), conditions));
    Desired {
        status,
        recheck_in,
        import_conditions,
    }
}

/// `ResourcesCompatible`: False naming the differences when any resource
/// is incompatible.
fn resources_compatible(incompatible: &[String]) -> Value {
    if incompatible.is_empty() {
        condition("ResourcesCompatible", true, "", "", "")
    } else {
        condition(
            "ResourcesCompatible",
            false,
            "Warning",
            "IncompatibleSchema",
            &format!(
                "the cluster's schema cannot hold what the export describes: {}",
                incompatible.join("; ")
            ),
        )
    }
}

/// `HeartbeatHealthy` and `SyncerReady` from `status.lastSyncerHeartbeatTime`,
/// and how long the heartbeat stays fresh.
fn heartbeat_conditions(
    status: &Value,
    threshold: Duration,
    now: DateTime<Utc>,
) -> (Vec<Value>, Option<Duration>) {
    const REASON: &str = "ErrorHeartbeat";
    let raw = json::str_at(status, "/lastSyncerHeartbeatTime");
    if raw.is_empty() {
        let waiting = "no heartbeat from the syncer yet: deploy it (`kubectl ferry workload sync <name>`) and check its logs";
        return (
            vec![
                condition(
                    "HeartbeatHealthy",
                    false,
                    "Warning",
                    REASON,
                    "No heartbeat yet seen",
                ),
                condition("SyncerReady", false, "Warning", "SyncerNotConnected", waiting),
            ],
            None,
        );
    }
    let Ok(last) = DateTime::parse_from_rfc3339(raw) else {
        let bad = format!("status.lastSyncerHeartbeatTime {raw:?} is not an RFC 3339 time");
        return (
            vec![
                condition("HeartbeatHealthy", false, "Warning", REASON, &bad),
                condition("SyncerReady", false, "Warning", "SyncerNotConnected", &bad),
            ],
            None,
        );
    };
    let last = last.with_timezone(&Utc);
    let threshold_chrono = chrono::Duration::from_std(threshold).unwrap_or(chrono::Duration::MAX);
    let stale_at = last
        .checked_add_signed(threshold_chrono)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    let syncer_ready = condition("SyncerReady", true, "", "", "");
    if now > stale_at {
        let message = format!(
            "No heartbeat since {raw} (threshold {}s): is the syncer running and able to reach the hub?",
            threshold.as_secs_f64()
        );
        return (
            vec![
                condition("HeartbeatHealthy", false, "Warning", REASON, &message),
                syncer_ready,
            ],
            None,
        );
    }
    let fresh_for = (stale_at - now).to_std().unwrap_or_default();
    (
        vec![condition("HeartbeatHealthy", true, "", "", ""), syncer_ready],
        Some(fresh_for),
    )
}

/// `Ready`: True when every summarised condition present is True; else
/// False with the first False one's severity, reason and message.
fn ready(conditions: &[Value]) -> Value {
    let first_false = SUMMARISED.iter().find_map(|t| {
        conditions
            .iter()
            .find(|c| json::str_at(c, "/type") == *t && json::str_at(c, "/status") == "False")
    });
    match first_false {
        None => condition("Ready", true, "", "", ""),
        Some(c) => {
            let severity = match json::str_at(c, "/severity") {
                "" => "Error",
                s => s,
            };
            condition(
                "Ready",
                false,
                severity,
                json::str_at(c, "/reason"),
                json::str_at(c, "/message"),
            )
        }
    }
}

/// One imported version of a resource: version, the import, its schema.
type ImportedVersion = (String, ObjectKey, Value);

/// The supported exports' resources, with each one's state; the messages of
/// the incompatible ones; the `Compatible` condition of each import compared.
fn synced_resources(
    hub: &Hub,
    key: &ObjectKey,
    target: &Value,
) -> (Vec<Value>, Vec<String>, Vec<(ObjectKey, Value)>) {
    let upstream = upstream_resources(hub, key, target);
    // This target's imports, by (group, resource) then version.
    let (imports, _) = hub
        .store
        .list(&ClusterScope::One(key.cluster.clone()), IMPORTS, None, None);
    let mut by_resource: BTreeMap<(String, String), Vec<ImportedVersion>> = BTreeMap::new();
    for (ikey, obj) in imports {
        let import = obj.value();
        if json::str_at(&import, "/spec/location") != key.name {
            continue;
        }
        let group = match json::str_at(&import, "/spec/groupVersion/group") {
            "core" => "",
            g => g,
        };
        let resource = json::str_at(&import, "/spec/plural").to_string();
        let version = json::str_at(&import, "/spec/groupVersion/version").to_string();
        let schema = import
            .pointer("/spec/openAPIV3Schema")
            .cloned()
            .unwrap_or(Value::Null);
        by_resource
            .entry((group.to_string(), resource))
            .or_default()
            .push((version, ikey, schema));
    }
    let mut synced = Vec::new();
    let mut incompatible = Vec::new();
    let mut import_conditions = Vec::new();
    for up in &upstream {
        let imported = by_resource.get(&(up.group.clone(), up.resource.clone()));
        let state = match imported {
            None => "Pending",
            Some(imported) => {
                let mut problems = Vec::new();
                let mut accepted = false;
                for (version, ikey, schema) in imported {
                    let compatible = match up.versions.get(version) {
                        None => {
                            let served: Vec<&str> = up.versions.keys().map(String::as_str).collect();
                            let why = format!(
                                "the cluster serves {version}, the export serves {}",
                                served.join(", ")
                            );
                            problems.push(format!("{} {version}: {why}", up.shown()));
                            import_conditions.push((ikey.clone(), compatible_condition(false, &why)));
                            false
                        }
                        Some(up_schema) => {
                            let diffs = compat::differences(up_schema, schema);
                            let ok = diffs.is_empty();
                            if !ok {
                                problems.push(format!("{} {version}: {}", up.shown(), summary(&diffs)));
                            }
                            import_conditions
                                .push((ikey.clone(), compatible_condition(ok, &summary(&diffs))));
                            ok
                        }
                    };
                    accepted |= compatible;
                }
                if accepted {
                    "Accepted"
                } else {
                    incompatible.extend(problems);
                    "Incompatible"
                }
            }
        };
        synced.push(json!({
            "group": up.group,
            "resource": up.resource,
            "versions": up.versions.keys().collect::<Vec<_>>(),
            "identityHash": up.identity_hash,
            "state": state,
        }));
    }
    (synced, incompatible, import_conditions)
}

/// How many differences a message names before it counts the rest.
const DIFFERENCES_SHOWN: usize = 5;

/// The first differences, and how many more there are: a cluster whose
/// schema is entirely different must not make a huge condition.
fn summary(diffs: &[String]) -> String {
    let mut text = diffs
        .iter()
        .take(DIFFERENCES_SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if diffs.len() > DIFFERENCES_SHOWN {
        text.push_str(&format!(" (and {} more)", diffs.len() - DIFFERENCES_SHOWN));
    }
    text
}

fn compatible_condition(ok: bool, message: &str) -> Value {
    condition("Compatible", ok, "Warning", "IncompatibleSchema", message)
}

/// Whether a syncer syncs `(group, resource)` without any export listing it.
pub fn always_synced(group: &str, resource: &str) -> bool {
    ALWAYS_SYNCED.contains(&(group, resource))
}

/// The `(group, resource)`s the exports the SyncTarget supports serve,
/// other than `imported-apis` (which serves what they do not).
pub fn supported_resources(hub: &Hub, key: &ObjectKey, target: &Value) -> HashSet<(String, String)> {
    upstream_resources_except(hub, key, target, Some(imported::EXPORT))
        .into_iter()
        .map(|u| (u.group, u.resource))
        .collect()
}

/// The exports the SyncTarget supports, as `(logical cluster, name)`: those
/// `spec.supportedAPIExports` names (the local `kubernetes` export when it
/// names none) whose workspace exists.
pub fn supported_exports(hub: &Hub, key: &ObjectKey, target: &Value) -> Vec<(String, String)> {
    let refs = match target
        .pointer("/spec/supportedAPIExports")
        .and_then(Value::as_array)
    {
        Some(r) if !r.is_empty() => r.clone(),
        _ => default_supported_exports()
            .as_array()
            .cloned()
            .unwrap_or_default(),
    };
    refs.iter()
        .filter_map(|r| {
            let name = json::str_at(r, "/export");
            let path = json::str_at(r, "/path");
            let cluster = if path.is_empty() {
                Some(key.cluster.clone())
            } else {
                hub.workspaces.resolve(path).map(|lc| lc.name)
            };
            Some((cluster?, name.to_string()))
        })
        .collect()
}

/// Every resource of every export `spec.supportedAPIExports` names (the
/// local `kubernetes` export when it names none), first export first.
fn upstream_resources(hub: &Hub, key: &ObjectKey, target: &Value) -> Vec<Upstream> {
    upstream_resources_except(hub, key, target, None)
}

fn upstream_resources_except(
    hub: &Hub,
    key: &ObjectKey,
    target: &Value,
    local_except: Option<&str>,
) -> Vec<Upstream> {
    let mut out: Vec<Upstream> = Vec::new();
    for (export_cluster, name) in supported_exports(hub, key, target) {
        let name = name.as_str();
        if local_except == Some(name) && export_cluster == key.cluster {
            continue;
        }
        let Some(export) = hub.store.get(&apis::key(&export_cluster, apis::EXPORTS, name)) else {
            continue;
        };
        let export = export.value();
        let identity_hash = match json::str_at(&export, "/status/identityHash") {
            "" => apis::identity_hash(&export_cluster, name, json::str_at(&export, "/metadata/uid")),
            h => h.to_string(),
        };
        for schema in apis::listed_schemas(hub, &export_cluster, &export) {
            let (group, resource) = apis::schema_group_resource(&schema);
            if ALWAYS_SYNCED.contains(&(group.as_str(), resource.as_str()))
                || out.iter().any(|u| u.group == group && u.resource == resource)
            {
                continue;
            }
            let versions = schema
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|v| v.get("served") != Some(&Value::Bool(false)))
                .map(|v| {
                    (
                        json::str_at(v, "/name").to_string(),
                        v.get("schema").cloned().unwrap_or(Value::Null),
                    )
                })
                .filter(|(n, _)| !n.is_empty())
                .collect();
            out.push(Upstream {
                group,
                resource,
                identity_hash: identity_hash.clone(),
                versions,
            });
        }
    }
    out.sort_by(|a, b| (&a.group, &a.resource).cmp(&(&b.group, &b.resource)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types(conditions: &[Value]) -> Vec<(&str, &str)> {
        conditions
            .iter()
            .map(|c| (json::str_at(c, "/type"), json::str_at(c, "/status")))
            .collect()
    }

    #[test]
    fn no_heartbeat_is_neither_ready_nor_healthy() {
        let (c, recheck) = heartbeat_conditions(&json!({}), DEFAULT_HEARTBEAT_THRESHOLD, Utc::now());
        assert_eq!(
            types(&c),
            [("HeartbeatHealthy", "False"), ("SyncerReady", "False")]
        );
        assert_eq!(json::str_at(&c[0], "/reason"), "ErrorHeartbeat");
        assert!(recheck.is_none());
    }

    #[test]
    fn a_fresh_heartbeat_is_healthy_until_the_threshold_passes() {
        let now = Utc::now();
        let at = (now - chrono::Duration::seconds(20)).to_rfc3339();
        let (c, recheck) = heartbeat_conditions(
            &json!({"lastSyncerHeartbeatTime": at}),
            Duration::from_secs(60),
            now,
        );
        assert_eq!(types(&c), [("HeartbeatHealthy", "True"), ("SyncerReady", "True")]);
        let recheck = recheck.unwrap();
        assert!(
            recheck > Duration::from_secs(39) && recheck <= Duration::from_secs(40),
            "{recheck:?}"
        );

        let later = now + chrono::Duration::seconds(41);
        let (c, recheck) = heartbeat_conditions(
            &json!({"lastSyncerHeartbeatTime": at}),
            Duration::from_secs(60),
            later,
        );
        assert_eq!(
            types(&c),
            [("HeartbeatHealthy", "False"), ("SyncerReady", "True")]
        );
        assert_eq!(json::str_at(&c[0], "/reason"), "ErrorHeartbeat");
        assert!(json::str_at(&c[0], "/message").contains(&at));
        assert!(recheck.is_none());
    }

    #[test]
    fn a_long_list_of_differences_is_cut_short_and_counted() {
        let diffs: Vec<String> = (0..12)
            .map(|i| format!("spec.f{i}: missing downstream"))
            .collect();
        let s = summary(&diffs);
        assert!(s.starts_with("spec.f0: missing downstream, spec.f1"), "{s}");
        assert!(s.ends_with("(and 7 more)") && !s.contains("spec.f5"), "{s}");
        assert_eq!(summary(&diffs[..1]), "spec.f0: missing downstream");
    }

    #[test]
    fn ready_summarises_the_first_false_condition() {
        let ok = |t: &str| condition(t, true, "", "", "");
        let all_ok = [
            ok("SyncerReady"),
            ok("HeartbeatHealthy"),
            ok("ResourcesCompatible"),
        ];
        assert_eq!(json::str_at(&ready(&all_ok), "/status"), "True");
        let unauthorized = condition(
            "SyncerAuthorized",
            false,
            "Error",
            "SyncerUnauthorized",
            "SSAR check failed for gvrs: x",
        );
        let c = ready(&[ok("SyncerReady"), ok("HeartbeatHealthy"), unauthorized]);
        assert_eq!(json::str_at(&c, "/status"), "False");
        assert_eq!(json::str_at(&c, "/reason"), "SyncerUnauthorized");
        // Incompatible resources do not make the target unready.
        let incompatible = condition("ResourcesCompatible", false, "Warning", "IncompatibleSchema", "x");
        assert_eq!(
            json::str_at(&ready(&[ok("SyncerReady"), incompatible]), "/status"),
            "True"
        );
    }
}
