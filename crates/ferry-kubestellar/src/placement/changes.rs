//! What one watch event calls for. The translator stays level-based (every
//! pass computes what it writes from the stored objects alone), but a pass
//! need not look at more than the changes since the last one can affect:
//!
//! - a WMW object ([`Change::Object`]): only its copies (and its
//!   Namespace's), in the mailboxes whose plans want it or that hold it;
//! - what the translator wrote itself and what syncers write in mailboxes
//!   (copies' status, `the-one`'s acknowledgements), a SyncTarget's
//!   heartbeat ([`Change::Reported`]): only the reported state, refreshed
//!   by the next full pass, at most a settling time later;
//! - an EdgePlacement's status written back ([`Change::Nothing`]);
//! - anything else (a placement's spec, a Location, a SyncTarget's labels,
//!   a Customizer, a CustomTransform, a Namespace, a CRD, a grant, a
//!   mailbox workspace, a workspace going) ([`Change::Everything`]): a full
//!   pass, as at start;
//! - anything else in a workspace the last full pass did not know as a WMW
//!   or a mailbox ([`Change::Nothing`]): a pass reads nothing else there.

use std::collections::{HashMap, HashSet};

use ferry_api::edge::{PlacementSummary, SinglePlacementSlice};
use ferry_server::kinds::edge::PLACED_BY_ANNOTATION;
use ferry_server::storage::{EventType, ObjectKey, StoredObject, WatchEvent};
use serde_json::Value;

use super::{
    EDGE_GROUP, EDGE_PLACEMENTS, LOCATIONS, MAILBOX_PARENT, NEVER_PLACED_GROUPS, RETURNED_LABEL,
    SYNC_TARGETS, SYNC_TARGET_UID_ANNOTATION,
};
use ferry_server::workspace::WORKSPACES;

/// What a change calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A full pass.
    Everything,
    /// The copies of this WMW object.
    Object(ObjectKey),
    /// The reported state (executing counts, summaries, statuses, returned
    /// upsyncs), within the settling time.
    Reported,
    /// Nothing.
    Nothing,
}

/// What the last full pass saw, to tell changes apart.
#[derive(Debug, Default)]
pub struct Known {
    /// Logical clusters of the mailbox workspaces.
    pub mailboxes: HashSet<String>,
    /// Logical clusters holding EdgePlacements (the WMWs that place something).
    pub wmws: HashSet<String>,
    /// Each EdgePlacement, by `(cluster, name)`, as far as a pass reads it.
    pub placements: HashMap<(String, String), PlacementMark>,
}

/// What of an EdgePlacement a pass depends on, beyond its status: its spec
/// (by generation), whether it is being deleted, and who placed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementMark {
    generation: i64,
    deleting: bool,
    placer: Option<String>,
}

impl PlacementMark {
    pub fn of(placement: &Value) -> PlacementMark {
        PlacementMark {
            generation: placement
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            deleting: placement.pointer("/metadata/deletionTimestamp").is_some(),
            placer: placement
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(PLACED_BY_ANNOTATION))
                .and_then(Value::as_str)
                .map(String::from),
        }
    }
}

/// What `event` calls for; `target_changed`: it changed a SyncTarget as the
/// inventory index sees it (its name, uid, labels, annotations, or whether
/// it exists), not only its status.
pub fn classify(known: &Known, event: &WatchEvent, target_changed: bool) -> Change {
    let key = &event.key;
    let resource = key.resource.as_str();
    match resource {
        LOCATIONS => return Change::Everything,
        SYNC_TARGETS if target_changed => return Change::Everything,
        SYNC_TARGETS => return Change::Reported,
        EDGE_PLACEMENTS => {
            let known_mark = known.placements.get(&(key.cluster.clone(), key.name.clone()));
            let unchanged = event.kind != EventType::Deleted
                && known_mark.is_some_and(|m| *m == PlacementMark::of(&event.object.value()));
            return if unchanged {
                Change::Nothing
            } else {
                Change::Everything
            };
        }
        _ => {}
    }
    if known.mailboxes.contains(&key.cluster) {
        return Change::Reported;
    }
    if !known.wmws.contains(&key.cluster) {
        return elsewhere(event);
    }
    if event.object.labels.contains_key(RETURNED_LABEL) {
        return Change::Reported;
    }
    let group = resource.split('/').next().unwrap_or_default();
    let own = [
        format!("{}/{}", PlacementSummary::GROUP, PlacementSummary::PLURAL),
        format!("{EDGE_GROUP}/{}", SinglePlacementSlice::PLURAL),
    ];
    if own.iter().any(|o| o == resource) {
        return Change::Reported;
    }
    let selection_changes = matches!(
        resource,
        "/namespaces" | "apiextensions.k8s.io/customresourcedefinitions" | "/events"
    ) || group == "rbac.authorization.k8s.io"
        || NEVER_PLACED_GROUPS.contains(&group);
    if selection_changes {
        Change::Everything
    } else if copies_unchanged(event) {
        // Its status or an annotation the copies leave out (the executing
        // count the translator writes): the copies stay as they are.
        Change::Reported
    } else {
        Change::Object(key.clone())
    }
}

/// A change in a workspace that is neither a WMW nor a mailbox. A pass reads
/// nothing there but Locations and SyncTargets (judged above), the RBAC
/// that grants placers `bind` on them, and the Workspaces that are mailboxes
/// (under [`MAILBOX_PARENT`], annotated with their SyncTarget's uid); any
/// other workspace matters only when it goes, taking its placements,
/// Locations or targets with it. Everything else there — a tenant's own
/// objects, a new workspace's Namespaces, ServiceAccounts and `kubernetes`
/// Service — calls for nothing, so making workspaces and writing in them
/// costs the translator no pass.
fn elsewhere(event: &WatchEvent) -> Change {
    let key = &event.key;
    let group = key.resource.split('/').next().unwrap_or_default();
    let holds = |o: &StoredObject, what: &str| memchr::memmem::find(&o.json, what.as_bytes()).is_some();
    let going = event.kind == EventType::Deleted || holds(&event.object, "deletionTimestamp");
    let mailbox = key.cluster == MAILBOX_PARENT
        && std::iter::once(&event.object)
            .chain(&event.previous)
            .any(|o| holds(o, SYNC_TARGET_UID_ANNOTATION));
    let matters = group == "rbac.authorization.k8s.io" || (key.resource == WORKSPACES && (going || mailbox));
    if matters {
        Change::Everything
    } else {
        Change::Nothing
    }
}

/// Whether a modification leaves the object's copies as they were: the
/// same content (all but status, server metadata and what copies leave
/// out), and not newly being deleted.
fn copies_unchanged(event: &WatchEvent) -> bool {
    let Some(previous) = event
        .previous
        .as_ref()
        .filter(|_| event.kind == EventType::Modified)
    else {
        return false;
    };
    let (before, after) = (previous.value(), event.object.value());
    let deleting = |v: &Value| v.pointer("/metadata/deletionTimestamp").is_some();
    deleting(&before) == deleting(&after) && super::copy::content(&before) == super::copy::content(&after)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn stored(value: &Value) -> Arc<StoredObject> {
        Arc::new(StoredObject {
            rv: 7,
            json: serde_json::to_vec(value).unwrap().into(),
            labels: Default::default(),
        })
    }

    fn event(cluster: &str, resource: &str, name: &str, value: Value) -> WatchEvent {
        let key = ObjectKey {
            cluster: cluster.into(),
            resource: resource.into(),
            namespace: String::new(),
            name: name.into(),
        };
        WatchEvent::new(EventType::Modified, key, stored(&value), None)
    }

    fn known() -> Known {
        let placement = json!({"metadata": {"name": "p", "generation": 2}});
        Known {
            mailboxes: HashSet::from(["mb".to_string()]),
            wmws: HashSet::from(["wmw".to_string()]),
            placements: HashMap::from([(("wmw".into(), "p".into()), PlacementMark::of(&placement))]),
        }
    }

    #[test]
    fn a_wmw_object_calls_for_its_copies_only() {
        let mut e = event(
            "wmw",
            "/configmaps",
            "c",
            json!({"metadata": {"name": "c"}, "data": {"a": "2"}}),
        );
        assert_eq!(classify(&known(), &e, false), Change::Object(e.key.clone()));
        e.previous = Some(stored(&json!({"metadata": {"name": "c"}, "data": {"a": "1"}})));
        assert_eq!(classify(&known(), &e, false), Change::Object(e.key.clone()));
        // Only the count the translator writes on it: its copies stay.
        e.previous = Some(stored(
            &json!({"metadata": {"name": "c", "annotations": {"kubestellar.io/executing-count": "1"}},
                    "data": {"a": "2"}}),
        ));
        assert_eq!(classify(&known(), &e, false), Change::Reported);
        // Being deleted: its copies go.
        e.object = stored(
            &json!({"metadata": {"name": "c", "deletionTimestamp": "2026-11-28T00:00:00Z"},
                                  "data": {"a": "2"}}),
        );
        assert_eq!(classify(&known(), &e, false), Change::Object(e.key.clone()));
    }

    #[test]
    fn echoes_call_for_the_reported_state_or_nothing() {
        let k = known();
        let copy = event("mb", "/configmaps", "c", json!({"metadata": {"name": "c"}}));
        assert_eq!(classify(&k, &copy, false), Change::Reported);
        let summary = event("wmw", "edge.ferry.dev/placementsummaries", "s", json!({}));
        assert_eq!(classify(&k, &summary, false), Change::Reported);
        let heartbeat = event("inv", SYNC_TARGETS, "t", json!({}));
        assert_eq!(classify(&k, &heartbeat, false), Change::Reported);
        let status = event(
            "wmw",
            EDGE_PLACEMENTS,
            "p",
            json!({"metadata": {"name": "p", "generation": 2}, "status": {"executingCount": 3}}),
        );
        assert_eq!(classify(&k, &status, false), Change::Nothing);
    }

    #[test]
    fn what_changes_selection_or_destinations_calls_for_a_full_pass() {
        let k = known();
        let spec = event(
            "wmw",
            EDGE_PLACEMENTS,
            "p",
            json!({"metadata": {"name": "p", "generation": 3}}),
        );
        let new = event(
            "wmw",
            EDGE_PLACEMENTS,
            "q",
            json!({"metadata": {"name": "q", "generation": 1}}),
        );
        let ns = event("wmw", "/namespaces", "n", json!({"metadata": {"name": "n"}}));
        let customizer = event("wmw", "edge.kubestellar.io/customizers", "c", json!({}));
        let transform = event("wmw", "control.kubestellar.io/customtransforms", "t", json!({}));
        let location = event("inv", LOCATIONS, "l", json!({}));
        let grant = event(
            "inv",
            "rbac.authorization.k8s.io/clusterrolebindings",
            "b",
            json!({}),
        );
        let mailbox = event(
            MAILBOX_PARENT,
            WORKSPACES,
            "mb",
            json!({"metadata": {"name": "mb", "annotations": {SYNC_TARGET_UID_ANNOTATION: "u"}}}),
        );
        let mut gone = event("other", WORKSPACES, "w", json!({"metadata": {"name": "w"}}));
        gone.kind = EventType::Deleted;
        let going = event(
            MAILBOX_PARENT,
            WORKSPACES,
            "w",
            json!({"metadata": {"name": "w", "deletionTimestamp": "2026-11-28T00:00:00Z"}}),
        );
        for e in [
            spec, new, ns, customizer, transform, location, grant, mailbox, gone, going,
        ] {
            assert_eq!(classify(&k, &e, false), Change::Everything, "{}", e.key.resource);
        }
        let relabelled = event("inv", SYNC_TARGETS, "t", json!({}));
        assert_eq!(classify(&k, &relabelled, true), Change::Everything);
    }

    #[test]
    fn workspaces_and_what_is_in_them_elsewhere_call_for_nothing() {
        let k = known();
        let tenant_object = event("other", "/configmaps", "c", json!({"metadata": {"name": "c"}}));
        let new_namespace = event(
            "other",
            "/namespaces",
            "default",
            json!({"metadata": {"name": "default"}}),
        );
        let new_workspace = event(
            MAILBOX_PARENT,
            WORKSPACES,
            "w",
            json!({"metadata": {"name": "w"}}),
        );
        let nested = event("other", WORKSPACES, "w", json!({"metadata": {"name": "w"}}));
        for e in [tenant_object, new_namespace, new_workspace, nested] {
            assert_eq!(
                classify(&k, &e, false),
                Change::Nothing,
                "{} in {}",
                e.key.resource,
                e.key.cluster
            );
        }
        // A workspace that was a mailbox and no longer says so still counts.
        let mut unmarked = event(
            MAILBOX_PARENT,
            WORKSPACES,
            "mb",
            json!({"metadata": {"name": "mb"}}),
        );
        unmarked.previous = Some(stored(
            &json!({"metadata": {"name": "mb", "annotations": {SYNC_TARGET_UID_ANNOTATION: "u"}}}),
        ));
        assert_eq!(classify(&k, &unmarked, false), Change::Everything);
    }
}
