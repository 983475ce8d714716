//! The where-resolver: which SyncTargets an EdgePlacement's
//! `locationSelectors` reach. A Location (in any inventory workspace)
//! matches when any selector matches its labels (no selector: none); its
//! SyncTargets are those of its workspace that its `instanceSelector`
//! selects (absent: all). Each SyncTarget is one destination, named with
//! the first (by name) matching Location that reaches it, among the
//! Locations the placement is granted ([`super::grant`]). Pure.

use std::collections::BTreeMap;

use ferry_api::edge::SinglePlacement;
use serde_json::Value;

use ferry_server::selector::LabelSelector;

/// A Location as the resolver needs it.
#[derive(Debug, Clone)]
pub struct Location {
    pub cluster: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// Parameters for customization, after the labels.
    pub annotations: BTreeMap<String, String>,
    pub instance_selector: LabelSelector,
}

/// A SyncTarget as the resolver needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    pub cluster: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    /// Parameters for customization, after the labels.
    pub annotations: BTreeMap<String, String>,
}

impl Location {
    pub fn from_object(cluster: &str, obj: &Value) -> Option<Location> {
        let name = obj.pointer("/metadata/name")?.as_str()?.to_string();
        let instance_selector = match obj.pointer("/spec/instanceSelector") {
            None | Some(Value::Null) => LabelSelector::default(),
            Some(v) => {
                LabelSelector::from_label_selector_json(v).unwrap_or_else(|_| LabelSelector::nothing())
            }
        };
        Some(Location {
            cluster: cluster.to_string(),
            name,
            labels: labels_of(obj),
            annotations: string_map(obj, "/metadata/annotations"),
            instance_selector,
        })
    }
}

impl Target {
    /// `None` for a SyncTarget being deleted: it is no destination.
    pub fn from_object(cluster: &str, obj: &Value) -> Option<Target> {
        if obj.pointer("/metadata/deletionTimestamp").is_some() {
            return None;
        }
        Some(Target {
            cluster: cluster.to_string(),
            name: obj.pointer("/metadata/name")?.as_str()?.to_string(),
            uid: obj.pointer("/metadata/uid")?.as_str()?.to_string(),
            labels: labels_of(obj),
            annotations: string_map(obj, "/metadata/annotations"),
        })
    }
}

pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj, "/metadata/labels")
}

fn string_map(obj: &Value, pointer: &str) -> BTreeMap<String, String> {
    obj.pointer(pointer)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect()
}

/// The number of matching Locations, and the destinations (sorted). Only
/// Locations `granted` says the placement may use count: the others are
/// neither matched nor reached (nor said to exist).
pub fn resolve(
    selectors: &[LabelSelector],
    locations: &[Location],
    targets: &[Target],
    granted: impl Fn(&Location) -> bool,
) -> (usize, Vec<SinglePlacement>) {
    let mut matching: Vec<&Location> = locations
        .iter()
        .filter(|l| selectors.iter().any(|s| s.matches(&l.labels)) && granted(l))
        .collect();
    matching.sort_by(|a, b| (&a.cluster, &a.name).cmp(&(&b.cluster, &b.name)));
    let mut by_target: BTreeMap<(String, String), SinglePlacement> = BTreeMap::new();
    for loc in &matching {
        for t in targets
            .iter()
            .filter(|t| t.cluster == loc.cluster && loc.instance_selector.matches(&t.labels))
        {
            by_target
                .entry((t.cluster.clone(), t.name.clone()))
                .or_insert_with(|| SinglePlacement {
                    cluster: t.cluster.clone(),
                    location_name: loc.name.clone(),
                    sync_target_name: t.name.clone(),
                    sync_target_uid: t.uid.clone(),
                });
        }
    }
    (matching.len(), by_target.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn loc(name: &str, labels: Value) -> Location {
        Location::from_object(
            "imw",
            &json!({"metadata": {"name": name, "labels": labels},
                    "spec": {"instanceSelector": {"matchLabels": {"id": name}}}}),
        )
        .unwrap()
    }

    fn target(name: &str) -> Target {
        Target::from_object(
            "imw",
            &json!({"metadata": {"name": name, "uid": format!("uid-{name}"), "labels": {"id": name}}}),
        )
        .unwrap()
    }

    #[test]
    fn locations_select_their_sync_targets() {
        let locations = [
            loc("florin", json!({"env": "prod"})),
            loc("guilder", json!({"env": "prod", "extended": "yes"})),
        ];
        let targets = [target("florin"), target("guilder")];
        let prod = LabelSelector::parse("env=prod").unwrap();
        let (n, dests) = resolve(std::slice::from_ref(&prod), &locations, &targets, |_| true);
        assert_eq!(n, 2);
        assert_eq!(dests.len(), 2);
        assert_eq!(dests[1].sync_target_uid, "uid-guilder");
        let extended = LabelSelector::parse("extended=yes").unwrap();
        let (n, dests) = resolve(&[extended], &locations, &targets, |_| true);
        assert_eq!((n, dests[0].location_name.as_str()), (1, "guilder"));
        assert_eq!(
            resolve(&[], &locations, &targets, |_| true).0,
            0,
            "no selector, no Location"
        );
    }

    #[test]
    fn locations_not_granted_are_neither_counted_nor_reached() {
        let locations = [
            loc("florin", json!({"env": "prod"})),
            loc("guilder", json!({"env": "prod"})),
        ];
        let targets = [target("florin"), target("guilder")];
        let prod = LabelSelector::parse("env=prod").unwrap();
        let (n, dests) = resolve(std::slice::from_ref(&prod), &locations, &targets, |l| {
            l.name == "guilder"
        });
        assert_eq!(n, 1);
        assert_eq!(dests.len(), 1);
        assert_eq!(dests[0].sync_target_name, "guilder");
        assert_eq!(resolve(&[prod], &locations, &targets, |_| false), (0, Vec::new()));
    }
}
