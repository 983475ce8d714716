//! What the combined status ([`ferry_multicluster::combined_status`]) needs from a
//! translator pass: per placement, its objects with the StatusCollectors
//! their matching downsync members name, and per destination its labels
//! and the status each of this placement's copies returned.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use ferry_api::drift::Drift;
use ferry_api::edge::PlacementSummary;
use serde_json::Value;

use super::facts::CopyMemo;
use super::{mailbox_path, ns_key, select, Inventory, Placement, PLACED_LABEL};
use ferry_multicluster::combined_status::{self, Destination, PlacedObject, PlacedObjects};
use ferry_server::controller::ControllerContext;
use ferry_server::storage::ObjectKey;

pub(super) async fn write(
    ctx: &ControllerContext,
    placements: &[Placement],
    wmws: &[String],
    inventory: &Inventory<'_>,
    copies: &CopyMemo,
) -> bool {
    let resolved: Vec<PlacedObjects> = placements
        .iter()
        .filter(|p| !p.deleting)
        .map(|p| placed_objects(ctx, p, inventory, copies))
        .collect();
    combined_status::write(ctx, &resolved, wmws).await
}

fn labels_of(value: &Value) -> BTreeMap<String, String> {
    value
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn placed_objects(
    ctx: &ControllerContext,
    p: &Placement,
    inventory: &Inventory<'_>,
    copies: &CopyMemo,
) -> PlacedObjects {
    let tests = select::compile(&p.spec, &mut Vec::new());
    let mut objects = Vec::new();
    for s in &p.selected {
        if s.key.namespace.is_empty() {
            continue; // a CombinedStatus lives in its object's namespace
        }
        let labels = labels_of(&s.value);
        let ns_labels = ctx
            .get(&ns_key(&p.cluster, &s.key.namespace))
            .map(|ns| ns.labels.clone());
        let collectors: BTreeSet<String> = tests
            .iter()
            .filter(|t| {
                t.wants_resource(&s.info.group, &s.info.resource)
                    && t.matches(true, &s.key.namespace, &s.key.name, &labels, ns_labels.as_ref())
            })
            .flat_map(|t| t.status_collectors.iter().cloned())
            .collect();
        objects.push(PlacedObject {
            key: s.key.clone(),
            group: s.info.group.clone(),
            resource: s.info.resource.clone(),
            value: s.value.clone(),
            collectors,
        });
    }
    // When each destination's returned status last changed, and its last
    // drift, as the object's PlacementSummary (written earlier in the pass)
    // recorded them.
    let mut last_update: HashMap<(ObjectKey, String, String), String> = HashMap::new();
    let mut drifts: HashMap<(ObjectKey, String, String), Drift> = HashMap::new();
    for o in &objects {
        let name = PlacementSummary::name_for(&o.group, &o.resource, &o.key.namespace, &o.key.name);
        let key = ObjectKey {
            cluster: p.cluster.clone(),
            resource: format!("{}/{}", PlacementSummary::GROUP, PlacementSummary::PLURAL),
            namespace: String::new(),
            name,
        };
        let Some(summary) = ctx.get(&key) else {
            continue;
        };
        let Ok(summary) = serde_json::from_value::<PlacementSummary>(summary.value()) else {
            continue;
        };
        for d in summary.destinations {
            let at = (o.key.clone(), d.cluster, d.inventory);
            if let Some(drift) = d.drift {
                drifts.insert(at.clone(), drift);
            }
            last_update.insert(at, d.last_update);
        }
    }
    let destinations = p
        .destinations
        .iter()
        .map(|d| {
            let mut labels = BTreeMap::new();
            if let Some(l) = inventory.index.location(&d.cluster, &d.location_name) {
                labels.extend(l.labels.clone());
            }
            if let Some(t) = inventory.index.target(&d.cluster, &d.sync_target_name) {
                labels.extend(t.labels.clone());
            }
            let mailbox = ctx.resolve_workspace(&mailbox_path(d)).map(|lc| lc.name);
            let mut returned = HashMap::new();
            for o in mailbox.iter().flat_map(|mb| objects.iter().map(move |o| (mb, o))) {
                let (mb, o) = o;
                let key = ObjectKey {
                    cluster: mb.clone(),
                    ..o.key.clone()
                };
                let Some(copy) = ctx.get(&key) else {
                    continue;
                };
                if !copy.labels.contains_key(PLACED_LABEL) {
                    continue;
                }
                let copy = copies.facts(&key, &copy);
                // Only this workspace's copy: another workspace's object of
                // the same name in the mailbox is none of this placement's business.
                if copy.source != p.path {
                    continue;
                }
                if let Some(status) = &copy.reported {
                    let at = last_update
                        .get(&(o.key.clone(), d.sync_target_name.clone(), d.cluster.clone()))
                        .cloned()
                        .unwrap_or_default();
                    returned.insert(o.key.clone(), (status.clone(), at));
                }
            }
            let drift = objects
                .iter()
                .filter_map(|o| {
                    let at = (o.key.clone(), d.sync_target_name.clone(), d.cluster.clone());
                    Some((o.key.clone(), drifts.get(&at)?.clone()))
                })
                .collect();
            Destination {
                target: d.sync_target_name.clone(),
                labels,
                returned,
                drift,
            }
        })
        .collect();
    PlacedObjects {
        cluster: p.cluster.clone(),
        name: p.name.clone(),
        uid: p.uid.clone(),
        objects,
        destinations,
    }
}
