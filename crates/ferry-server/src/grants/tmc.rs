//! Who may schedule onto whose compute: a Placement uses the Locations of
//! another workspace only while the owners of that workspace grant it.
//!
//! - **The grant** is RBAC in the location workspace: verb `bind` on
//!   `locations` (group `scheduling.kcp.io`), for every Location or, with
//!   `resourceNames`, for some (a role binding there also makes the user a
//!   member of that workspace, which the hub asks first). A Placement whose
//!   `spec.locationWorkspace` is its own workspace (or empty) needs none.
//! - **Whose grant**: the user who last wrote the Placement's spec, recorded
//!   at admission in [`REQUESTER_ANNOTATION`] (kcp records the requesting
//!   user of a Workspace the same way). The Placement strategy refuses a
//!   spec whose writer holds no grant and sets the annotation; clients
//!   cannot choose it.
//! - **Re-checked** by the scheduler on every pass, and when RBAC changes in
//!   a location workspace: revoking the grant unschedules the namespaces,
//!   and the syncer virtual workspace stops serving the Placement's
//!   workspace.
//! - A workspace that does not exist and one the requester may not use
//!   read the same ([`not_usable`]).

use serde_json::{json, Value};

use crate::auth::authorize::{self, Attributes};
use crate::auth::rbac::Request as RbacRequest;
use crate::auth::UserInfo;
use crate::hub::Hub;
use crate::storage::ClusterScope;
use crate::workspace::LogicalCluster;

/// Storage key of kcp Locations.
pub const LOCATIONS: &str = "scheduling.kcp.io/locations";
/// Storage key of kcp Placements.
pub const PLACEMENTS: &str = "scheduling.kcp.io/placements";
/// kcp's annotation on a namespace that some Placement selects (the
/// scheduler writes it; clients may not).
pub use ferry_api::scheduling::PLACEMENT_ANNOTATION;

/// Annotation on a Placement: the user whose grant it uses, as JSON
/// `{"username", "uid", "groups", "cluster"}` (cluster: the workspace a
/// ServiceAccount belongs to). Set by the hub on every write of the spec.
pub const REQUESTER_ANNOTATION: &str = "scheduling.ferry.dev/requester";

/// The RBAC verb, group and resource a grant names.
pub const VERB: &str = "bind";
pub const GROUP: &str = "scheduling.kcp.io";
pub const RESOURCE: &str = "locations";

/// Why a Placement may not use the location workspace `path`, in the same
/// words whether it exists or not (`user`: the recorded requester).
pub fn not_usable(path: &str, user: &str) -> String {
    format!(
        "location workspace {path:?} not found, or {user:?} (who wrote the Placement's spec) may not use its \
         Locations: set spec.locationWorkspace to a workspace whose admin grants \"bind\" on \
         locations.scheduling.kcp.io there"
    )
}

/// The annotation's value for `user`.
pub fn record(user: &UserInfo) -> String {
    json!({"username": user.name, "uid": user.uid, "groups": user.groups, "cluster": user.cluster})
        .to_string()
}

/// The requester recorded on `placement` (`None`: none, or unreadable).
pub fn requester(placement: &Value) -> Option<UserInfo> {
    let raw = placement
        .pointer("/metadata/annotations")?
        .get(REQUESTER_ANNOTATION)?
        .as_str()?;
    let v: Value = serde_json::from_str(raw).ok()?;
    let mut user = UserInfo::new(
        v.get("username")?.as_str()?,
        v.get("uid").and_then(Value::as_str).unwrap_or_default(),
        Vec::new(),
    );
    // The groups as recorded (`new` adds system:authenticated; keep it once).
    user.groups = v
        .get("groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect();
    user.cluster = v.get("cluster").and_then(Value::as_str).map(String::from);
    Some(user)
}

/// Whether `user` may bind Location `name` (`None`: every Location) in `lc`.
pub fn may_bind(hub: &Hub, user: &UserInfo, lc: &LogicalCluster, name: Option<&str>) -> bool {
    let attrs = Attributes {
        request: RbacRequest::Resource {
            verb: VERB.into(),
            group: GROUP.into(),
            resource: RESOURCE.into(),
            subresource: String::new(),
            namespace: String::new(),
            name: name.unwrap_or_default().into(),
        },
        workspace: Some(lc.clone()),
    };
    authorize::authorize(hub, user, &attrs).allowed()
}

/// The Locations of `lc` that `user` may bind (all of them with a grant
/// for every Location), `None` when it may bind none — not even one that
/// does not exist yet.
pub fn bindable_locations(hub: &Hub, user: &UserInfo, lc: &LogicalCluster) -> Option<Vec<Value>> {
    let (objs, _) = hub
        .store
        .list(&ClusterScope::One(lc.name.clone()), LOCATIONS, None, None);
    let all: Vec<Value> = objs.iter().map(|(_, o)| o.value()).collect();
    if may_bind(hub, user, lc, None) {
        return Some(all);
    }
    let some: Vec<Value> = all
        .into_iter()
        .filter(|l| may_bind(hub, user, lc, Some(name_of(l))))
        .collect();
    (!some.is_empty()).then_some(some)
}

/// What a Placement in `cluster` may take Locations from.
#[derive(Debug, Clone)]
pub enum LocationSource {
    /// The location workspace, and the Locations of it the Placement may use.
    Usable(LogicalCluster, Vec<Value>),
    /// It does not exist, or the requester holds no grant there: one answer.
    NotUsable { requester: String },
}

/// The location workspace of the Placement `placement` in `cluster`, if
/// it exists: `spec.locationWorkspace`, or the Placement's own workspace.
fn location_workspace(hub: &Hub, cluster: &str, placement: &Value) -> Option<LogicalCluster> {
    let path = placement
        .pointer("/spec/locationWorkspace")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    match path {
        Some(p) => hub.workspaces.resolve(p),
        None => hub.workspaces.by_name(cluster),
    }
}

/// The location workspace of the Placement `placement` in `cluster`, if
/// the Placement may use it, with the Locations it may use.
pub fn location_source(hub: &Hub, cluster: &str, placement: &Value) -> LocationSource {
    let requester = requester(placement);
    let requester_name = requester.as_ref().map(|u| u.name.clone()).unwrap_or_default();
    let not_usable = || LocationSource::NotUsable {
        requester: requester_name.clone(),
    };
    let Some(lc) = location_workspace(hub, cluster, placement) else {
        return not_usable();
    };
    if lc.name == cluster {
        let (objs, _) = hub
            .store
            .list(&ClusterScope::One(lc.name.clone()), LOCATIONS, None, None);
        return LocationSource::Usable(lc, objs.iter().map(|(_, o)| o.value()).collect());
    }
    // A Placement written before grants were recorded has no requester:
    // it uses nothing of another workspace until someone writes its spec.
    let Some(user) = requester else {
        return not_usable();
    };
    match bindable_locations(hub, &user, &lc) {
        Some(locations) => LocationSource::Usable(lc, locations),
        None => not_usable(),
    }
}

/// Whether workspace `cluster` may have work on the SyncTargets of
/// `location_cluster`: it is that workspace, or one of its Placements may
/// use Locations there. What the syncer virtual workspace checks besides
/// the state label, on every request of every syncer: it answers as
/// [`location_source`] would without reading the Locations themselves
/// (a fleet has one per cluster, and one Placement per Location).
pub fn workspace_granted(hub: &Hub, cluster: &str, location_cluster: &str) -> bool {
    if cluster == location_cluster {
        return true;
    }
    let (placements, _) = hub
        .store
        .list(&ClusterScope::One(cluster.into()), PLACEMENTS, None, None);
    placements.iter().any(|(_, p)| {
        let placement = p.value();
        match location_workspace(hub, cluster, &placement) {
            Some(lc) if lc.name == location_cluster => {
                requester(&placement).is_some_and(|user| may_bind_any(hub, &user, &lc))
            }
            _ => false,
        }
    })
}

/// Whether `user` may bind some Location of `lc` ([`bindable_locations`]
/// is `Some`), by the Locations' names alone.
fn may_bind_any(hub: &Hub, user: &UserInfo, lc: &LogicalCluster) -> bool {
    if may_bind(hub, user, lc, None) {
        return true;
    }
    let (objs, _) = hub
        .store
        .list(&ClusterScope::One(lc.name.clone()), LOCATIONS, None, None);
    objs.iter()
        .any(|(key, _)| may_bind(hub, user, lc, Some(&key.name)))
}

fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requester_round_trips_through_the_annotation() {
        let mut user = UserInfo::new("mal", "u-mal", vec!["devs".into()]);
        user.cluster = Some("c1".into());
        let p = json!({"metadata": {"annotations": {REQUESTER_ANNOTATION: record(&user)}}});
        let back = requester(&p).expect("recorded");
        assert_eq!(back.name, "mal");
        assert_eq!(back.uid, "u-mal");
        assert_eq!(back.groups, user.groups);
        assert_eq!(back.cluster.as_deref(), Some("c1"));
        assert!(requester(&json!({"metadata": {}})).is_none());
        let garbage = json!({"metadata": {"annotations": {REQUESTER_ANNOTATION: "{"}}});
        assert!(requester(&garbage).is_none());
    }

    #[test]
    fn not_usable_reads_the_same_for_any_workspace() {
        let m = not_usable("root:victim", "mal");
        assert!(m.contains("\"root:victim\"") && m.contains("\"mal\""), "{m}");
        assert!(m.contains("bind"), "{m}");
    }
}
