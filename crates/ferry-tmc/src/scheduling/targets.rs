//! What the scheduler needs to know of SyncTargets and Locations, and the
//! choice of a target for a namespace. Pure: values in, decisions out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use ferry_api::workload::sync_target_key;
use serde_json::Value;
use sha2::{Digest, Sha256};

use ferry_server::selector::LabelSelector;

/// One SyncTarget as the scheduler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The logical cluster (name) of its workspace.
    pub cluster: String,
    pub name: String,
    /// `sync_target_key(cluster, name)`.
    pub key: String,
    /// Its labels, and its `spec.capabilities` as labels
    /// `capabilities.workload.kcp.io/<resource>: <capacity>` (what a
    /// Location's `instanceSelector` selects on).
    pub labels: BTreeMap<String, String>,
    /// The `(group, resource)`s it takes when its `supportedAPIExports` list
    /// resources (its `status.syncedResources` and what always syncs);
    /// `None`: every resource.
    pub resources: Option<BTreeSet<(String, String)>>,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
    /// Its `SyncerAuthorized` condition is `True`: its syncer has asked its
    /// cluster and may manage every type it syncs there.
    pub authorized: bool,
    /// The `(group, resource)`s of its `status.syncedResources` in state
    /// `Accepted`: what its syncer copies, besides what always syncs.
    pub accepted: BTreeSet<(String, String)>,
    /// `spec.unschedulable` (cordoned): no new namespaces.
    pub unschedulable: bool,
    /// `spec.evictAfter`: from then on, its namespaces move elsewhere.
    pub evict_after: Option<DateTime<Utc>>,
}

impl Target {
    /// The SyncTarget `obj` stored in `cluster`.
    pub fn from_object(cluster: &str, obj: &Value) -> Option<Target> {
        let name = obj.pointer("/metadata/name")?.as_str()?.to_string();
        let mut labels = labels_of(obj);
        for capability in obj
            .pointer("/spec/capabilities")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let str_of = |f: &str| capability.get(f).and_then(Value::as_str).unwrap_or_default();
            if !str_of("resource").is_empty() {
                labels
                    .entry(format!("{CAPABILITY_LABEL_PREFIX}{}", str_of("resource")))
                    .or_insert_with(|| str_of("capacity").to_string());
            }
        }
        let resources = ferry_server::synctarget::lists_resources(obj).then(|| {
            obj.pointer("/status/syncedResources")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|r| {
                    let f = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                    (f("group"), f("resource"))
                })
                .collect()
        });
        let condition_true = |type_: &str| {
            obj.pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| {
                    c.get("type").and_then(Value::as_str) == Some(type_)
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
        };
        let accepted = obj
            .pointer("/status/syncedResources")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|r| r.get("state").and_then(Value::as_str) == Some("Accepted"))
            .map(|r| {
                let f = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
                (f("group"), f("resource"))
            })
            .collect();
        let unschedulable = obj
            .pointer("/spec/unschedulable")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let evict_after = obj
            .pointer("/spec/evictAfter")
            .and_then(Value::as_str)
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&Utc));
        Some(Target {
            key: sync_target_key(cluster, &name),
            cluster: cluster.to_string(),
            name,
            labels,
            resources,
            ready: condition_true("Ready"),
            authorized: condition_true("SyncerAuthorized"),
            accepted,
            unschedulable,
            evict_after,
        })
    }

    /// Whether objects of `resource` (a storage key: `apps/deployments`,
    /// `/services`) may be scheduled onto it.
    pub fn takes(&self, resource: &str) -> bool {
        let Some(only) = &self.resources else {
            return true;
        };
        let (group, resource) = resource.split_once('/').unwrap_or(("", resource));
        ferry_server::synctarget::always_synced(group, resource)
            || only.contains(&(group.to_string(), resource.to_string()))
    }

    /// Whether its syncer copies the object `name` of `resource` (a storage key)
    /// in `namespace`, so that the object can carry the syncer's finalizer from
    /// the moment it is labelled for it: the target is Ready and its syncer
    /// authorized for every type it syncs, the type always syncs or is
    /// accepted, and the object is not one the syncer leaves to each cluster
    /// (`ferry_api::cluster_local::tmc_leaves_to_cluster`: the syncer never copies
    /// nor releases those).
    pub fn syncer_copies(&self, resource: &str, namespace: &str, name: &str) -> bool {
        let (group, resource) = resource.split_once('/').unwrap_or(("", resource));
        self.ready
            && self.authorized
            && !ferry_api::cluster_local::tmc_leaves_to_cluster(group, resource, namespace, name)
            && (ferry_server::synctarget::always_synced(group, resource)
                || self.accepted.contains(&(group.to_string(), resource.to_string())))
    }

    /// Whether its namespaces must leave it (`evictAfter` has passed).
    pub fn evicting(&self, now: DateTime<Utc>) -> bool {
        self.evict_after.is_some_and(|t| t <= now)
    }

    /// Counted in a Location's `availableInstances` (kcp's `FilterReady`).
    pub fn available(&self) -> bool {
        self.ready && !self.unschedulable
    }
}

/// An object's `metadata.labels` (values that are not strings left out).
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

/// The prefix of the labels a SyncTarget's capabilities are selected by.
pub const CAPABILITY_LABEL_PREFIX: &str = "capabilities.workload.kcp.io/";

/// A selector field as the scheduler reads it: absent selects everything
/// (kcp documents "all by default"), malformed selects nothing.
pub fn selector(v: Option<&Value>) -> LabelSelector {
    match v {
        None | Some(Value::Null) => LabelSelector::parse("").unwrap_or_else(|_| LabelSelector::nothing()),
        Some(v) => LabelSelector::from_label_selector_json(v).unwrap_or_else(|_| LabelSelector::nothing()),
    }
}

/// The targets of `targets` that the Location `location` selects
/// (`spec.instanceSelector` on their labels).
pub fn members<'a>(targets: &'a [Target], location: &Value) -> Vec<&'a Target> {
    let sel = selector(location.pointer("/spec/instanceSelector"));
    targets.iter().filter(|t| sel.matches(&t.labels)).collect()
}

/// The target a namespace should be on, among a Location's `members`.
///
/// - It stays where it is (`current`) while that target is a member and is
///   not evicting: a cordoned (`unschedulable`) or not-Ready target keeps
///   what it has.
/// - Otherwise: among members that are not cordoned nor evicting, the
///   Ready ones (or, when none is Ready, all of them), the one with the
///   fewest namespaces (`load`), ties broken by a hash of the namespace and
///   the target key (rendezvous hashing: the same namespace makes the same
///   choice, and only the namespaces of a removed target move).
pub fn choose(
    namespace_id: &str,
    members: &[&Target],
    current: Option<&str>,
    load: &HashMap<String, usize>,
    now: DateTime<Utc>,
) -> Option<String> {
    if let Some(cur) = staying(members, current, now) {
        return Some(cur.to_string());
    }
    let open: Vec<&&Target> = members
        .iter()
        .filter(|t| !t.unschedulable && !t.evicting(now))
        .collect();
    let ready: Vec<&&Target> = open.iter().copied().filter(|t| t.ready).collect();
    let pool = if ready.is_empty() { open } else { ready };
    pool.into_iter()
        .min_by_key(|t| {
            let weight = rendezvous(namespace_id, &t.key);
            (load.get(&t.key).copied().unwrap_or(0), std::cmp::Reverse(weight))
        })
        .map(|t| t.key.clone())
}

/// The target a namespace has (`current`), if it stays there: while it is
/// one of the Location's `members` and not evicting ([`choose`]'s first rule).
pub fn staying<'a>(members: &[&Target], current: Option<&'a str>, now: DateTime<Utc>) -> Option<&'a str> {
    current.filter(|cur| members.iter().any(|t| t.key == *cur && !t.evicting(now)))
}

fn rendezvous(namespace_id: &str, key: &str) -> u64 {
    let digest = Sha256::digest(format!("{namespace_id}/{key}").as_bytes());
    u64::from_be_bytes(digest[..8].try_into().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target(name: &str, ready: bool) -> Target {
        Target::from_object(
            "c1",
            &json!({"metadata": {"name": name, "labels": {"region": name}},
                    "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}}),
        )
        .unwrap()
    }

    fn now() -> DateTime<Utc> {
        Utc::now()
    }

    #[test]
    fn a_targets_syncer_is_said_to_copy_only_what_it_does_copy_and_only_once_it_says_it_may() {
        let status = |ready: &str, authorized: Option<&str>| {
            let mut conditions = vec![json!({"type": "Ready", "status": ready})];
            if let Some(a) = authorized {
                conditions.push(json!({"type": "SyncerAuthorized", "status": a}));
            }
            json!({"metadata": {"name": "east"},
                   "status": {"conditions": conditions, "syncedResources": [
                       {"group": "apps", "resource": "deployments", "state": "Accepted"},
                       {"group": "", "resource": "services", "state": "Accepted"},
                       {"group": "batch", "resource": "jobs", "state": "Incompatible"}]}})
        };
        let t = Target::from_object("c1", &status("True", Some("True"))).unwrap();
        assert!(t.syncer_copies("/configmaps", "demo", "settings"));
        assert!(t.syncer_copies("/serviceaccounts", "demo", "builder"));
        assert!(t.syncer_copies("apps/deployments", "demo", "web"));
        assert!(t.syncer_copies("/services", "demo", "kubernetes"));
        // Not accepted, or not synced at all.
        assert!(!t.syncer_copies("batch/jobs", "demo", "nightly"));
        assert!(!t.syncer_copies("networking.k8s.io/ingresses", "demo", "web"));
        // What every cluster has of its own: never copied, never released.
        assert!(!t.syncer_copies("/serviceaccounts", "demo", "default"));
        assert!(!t.syncer_copies("/services", "default", "kubernetes"));
        assert!(!t.syncer_copies("discovery.k8s.io/endpointslices", "default", "kubernetes"));
        // A syncer not running, not yet checked, or refused in its cluster: it
        // appends its own finalizer if and when it copies.
        for (ready, authorized) in [("False", Some("True")), ("True", None), ("True", Some("False"))] {
            let t = Target::from_object("c1", &status(ready, authorized)).unwrap();
            assert!(
                !t.syncer_copies("/configmaps", "demo", "settings"),
                "{ready} {authorized:?}"
            );
        }
    }

    #[test]
    fn capabilities_are_selectable_and_listed_resources_limit_what_is_taken() {
        let t = Target::from_object(
            "c1",
            &json!({"metadata": {"name": "east", "labels": {"env": "prod"}},
                    "spec": {"supportedAPIExports": [{"export": "kubernetes", "resource": "apps/v1/deployments"}],
                             "capabilities": [{"type": "compute", "resource": "cpu", "capacity": "1000"},
                                              {"type": "compute", "resource": "memory", "capacity": "4000Gi"}]},
                    "status": {"syncedResources": [{"group": "apps", "resource": "deployments", "state": "Accepted"}]}}),
        )
        .unwrap();
        let loc = |sel: Value| json!({"spec": {"instanceSelector": sel}});
        let targets = [t.clone()];
        let memory = loc(
            json!({"matchExpressions": [{"key": "capabilities.workload.kcp.io/memory", "operator": "Exists"}]}),
        );
        assert_eq!(members(&targets, &memory).len(), 1);
        let cpu = loc(json!({"matchLabels": {"capabilities.workload.kcp.io/cpu": "1000", "env": "prod"}}));
        assert_eq!(members(&targets, &cpu).len(), 1);
        let gpu = loc(
            json!({"matchExpressions": [{"key": "capabilities.workload.kcp.io/gpu", "operator": "Exists"}]}),
        );
        assert!(members(&targets, &gpu).is_empty());

        assert!(t.takes("apps/deployments"));
        assert!(t.takes("/configmaps") && t.takes("/secrets"));
        assert!(!t.takes("/services"));
        // Without resource entries, everything.
        assert!(target("west", true).takes("/services"));
    }

    #[test]
    fn a_target_reads_its_readiness_cordon_and_eviction() {
        let t = Target::from_object(
            "c1",
            &json!({"metadata": {"name": "east"},
                    "spec": {"unschedulable": true, "evictAfter": "2020-01-01T00:00:00Z"},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .unwrap();
        assert!(t.ready && t.unschedulable && !t.available());
        assert!(t.evicting(now()));
        assert_eq!(t.key, sync_target_key("c1", "east"));
        assert!(!target("west", true).evicting(now()));
    }

    #[test]
    fn a_location_selects_by_instance_selector_and_all_when_absent() {
        let ts = vec![target("east", true), target("west", true)];
        let east = json!({"spec": {"instanceSelector": {"matchLabels": {"region": "east"}}}});
        assert_eq!(members(&ts, &east).len(), 1);
        assert_eq!(members(&ts, &json!({"spec": {"instanceSelector": {}}})).len(), 2);
        assert_eq!(members(&ts, &json!({"spec": {}})).len(), 2);
        let bad = json!({"spec": {"instanceSelector": {"matchLabels": "x"}}});
        assert!(members(&ts, &bad).is_empty());
    }

    #[test]
    fn namespaces_spread_by_load_and_stay_put() {
        let ts = [target("east", true), target("west", true)];
        let m: Vec<&Target> = ts.iter().collect();
        let mut load = HashMap::new();
        let first = choose("c/a", &m, None, &load, now()).unwrap();
        *load.entry(first.clone()).or_default() += 1;
        let second = choose("c/b", &m, None, &load, now()).unwrap();
        assert_ne!(first, second, "the less loaded target is chosen");
        // Same inputs, same choice.
        assert_eq!(choose("c/b", &m, None, &load, now()).unwrap(), second);
        // A namespace keeps its target even when it is the busier one.
        *load.entry(first.clone()).or_default() += 5;
        assert_eq!(choose("c/a", &m, Some(&first), &load, now()).unwrap(), first);
    }

    #[test]
    fn cordoned_targets_get_nothing_new_and_evicting_ones_lose_what_they_have() {
        let mut east = target("east", true);
        east.unschedulable = true;
        let west = target("west", true);
        let m = vec![&east, &west];
        let load = HashMap::new();
        for ns in ["c/a", "c/b", "c/c", "c/d"] {
            assert_eq!(choose(ns, &m, None, &load, now()).unwrap(), west.key);
        }
        assert_eq!(
            choose("c/a", &m, Some(&east.key), &load, now()).unwrap(),
            east.key
        );
        east.evict_after = Some(now() - chrono::Duration::seconds(1));
        let m = vec![&east, &west];
        assert_eq!(
            choose("c/a", &m, Some(&east.key), &load, now()).unwrap(),
            west.key
        );
        // Nowhere to go: no target.
        let m = vec![&east];
        assert_eq!(choose("c/a", &m, Some(&east.key), &load, now()), None);
    }

    #[test]
    fn ready_targets_are_preferred_but_not_required() {
        let east = target("east", false);
        let west = target("west", true);
        let load = HashMap::new();
        for ns in ["c/a", "c/b", "c/c"] {
            assert_eq!(choose(ns, &[&east, &west], None, &load, now()).unwrap(), west.key);
        }
        assert_eq!(choose("c/a", &[&east], None, &load, now()).unwrap(), east.key);
    }
}
