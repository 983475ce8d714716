//! What the owners of an inventory workspace grant to placements.
//!
//! - **Placing**: an EdgePlacement reaches a Location only when the
//!   Location's workspace grants the placement's placer (the user the hub
//!   recorded as having written its spec,
//!   [`crate::kinds::edge::PLACED_BY_ANNOTATION`]) RBAC `bind` on
//!   `locations.edge.kubestellar.io` — that Location by name, or all of
//!   them — as kcp asks `bind` on an APIExport of whoever binds it. Checked
//!   on every pass, so deleting the grant removes the copies. A placement
//!   with no placer recorded (written before placers were) reaches nothing
//!   until it is applied again.
//! - **Upsync**: only granted destinations are a placement's, so nothing
//!   comes up from a cluster its placer may not place onto. The SyncTarget's
//!   owner narrows what comes up from its cluster with
//!   [`UPSYNC_ALLOW_ANNOTATION`] ([`UpsyncAllow`]); Secrets come up only
//!   when that list names them.

use ferry_api::edge::UpsyncSet;

use crate::auth::authorize::{authorize, Attributes};
use crate::auth::rbac::Request as RbacRequest;
use crate::auth::UserInfo;
use crate::hub::Hub;
use crate::storage::ClusterScope;

/// The verb a Location's workspace grants to let a user place onto it.
/// KubeStellar's API group of Locations and EdgePlacements.
pub const EDGE_GROUP: &str = "edge.kubestellar.io";
/// Storage key of KubeStellar Locations.
pub const LOCATIONS: &str = "edge.kubestellar.io/locations";

pub const BIND_VERB: &str = "bind";

/// Annotation on a SyncTarget: what may come up from its cluster, as
/// comma-separated `resource` (core group) or `group/resource` entries, `*`
/// standing for any group or resource (`apps/*`, `*`). Without it,
/// everything a granted placement asks for but Secrets.
pub const UPSYNC_ALLOW_ANNOTATION: &str = "ferry.dev/upsync-allow";

/// Whether `placer` may place onto Location `location` of logical cluster
/// `cluster`: RBAC `bind` on it there (always, for the superuser group).
pub fn may_place(hub: &Hub, placer: &UserInfo, cluster: &str, location: &str) -> bool {
    let Some(workspace) = hub.workspaces.by_name(cluster) else {
        return false;
    };
    let attrs = Attributes {
        request: RbacRequest::Resource {
            verb: BIND_VERB.into(),
            group: EDGE_GROUP.into(),
            resource: "locations".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: location.into(),
        },
        workspace: Some(workspace),
    };
    authorize(hub, placer, &attrs).allowed()
}

/// Whether any Location, in any workspace, is granted to `placer`.
pub fn may_place_somewhere(hub: &Hub, placer: &UserInfo) -> bool {
    let (locations, _) = hub.store.list(&ClusterScope::All, LOCATIONS, None, None);
    locations
        .iter()
        .any(|(key, _)| may_place(hub, placer, &key.cluster, &key.name))
}

/// What a SyncTarget's owner lets come up from its cluster.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum UpsyncAllow {
    /// No list: whatever granted placements ask for, but Secrets.
    #[default]
    AllButSecrets,
    /// Only these `(group, resource)`s; `*` matches any.
    Only(Vec<(String, String)>),
}

fn is_secrets(group: &str, resource: &str) -> bool {
    group.is_empty() && resource == "secrets"
}

impl UpsyncAllow {
    /// The SyncTarget annotation's value, if it has one.
    pub fn parse(annotation: Option<&str>) -> UpsyncAllow {
        let Some(list) = annotation else {
            return UpsyncAllow::AllButSecrets;
        };
        let entries = list
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(|e| match e.split_once('/') {
                Some((group, resource)) => (group.trim().to_string(), resource.trim().to_string()),
                None if e == "*" => ("*".to_string(), "*".to_string()),
                None => (String::new(), e.to_string()),
            })
            .collect();
        UpsyncAllow::Only(entries)
    }

    /// Whether objects of `resource` in `group` may come up. Secrets only
    /// when named: a `*` never stands for them.
    pub fn permits(&self, group: &str, resource: &str) -> bool {
        match self {
            UpsyncAllow::AllButSecrets => !is_secrets(group, resource),
            UpsyncAllow::Only(entries) => entries.iter().any(|(g, r)| {
                (g == "*" || g == group) && (r == resource || (r == "*" && !is_secrets(group, resource)))
            }),
        }
    }

    /// `set` with only the resources that may come up (`None`: none may):
    /// what the mailbox's SyncerConfig asks the syncer for. A `*` stays a
    /// `*` where the list allows any resource of the group, else becomes
    /// the resources it names.
    pub fn narrow(&self, set: &UpsyncSet) -> Option<UpsyncSet> {
        let group = set.api_group.as_str();
        let mut resources: Vec<String> = Vec::new();
        for r in &set.resources {
            let allowed: Vec<String> = match (self, r.as_str()) {
                (UpsyncAllow::AllButSecrets, _) if !is_secrets(group, r) => vec![r.clone()],
                (UpsyncAllow::AllButSecrets, _) => Vec::new(),
                (UpsyncAllow::Only(entries), "*") => {
                    let of_group = entries.iter().filter(|(g, _)| g == "*" || g == group);
                    let mut named: Vec<String> = Vec::new();
                    for (_, er) in of_group {
                        if er == "*" {
                            named = vec!["*".to_string()];
                            break;
                        }
                        named.push(er.clone());
                    }
                    named
                }
                (UpsyncAllow::Only(_), _) if self.permits(group, r) => vec![r.clone()],
                (UpsyncAllow::Only(_), _) => Vec::new(),
            };
            for a in allowed {
                if !resources.contains(&a) {
                    resources.push(a);
                }
            }
        }
        (!resources.is_empty()).then(|| UpsyncSet {
            resources,
            ..set.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(group: &str, resources: &[&str]) -> UpsyncSet {
        UpsyncSet {
            api_group: group.into(),
            resources: resources.iter().map(|r| r.to_string()).collect(),
            namespaces: vec!["*".into()],
            names: vec!["*".into()],
        }
    }

    #[test]
    fn without_a_list_everything_but_secrets_comes_up() {
        let allow = UpsyncAllow::parse(None);
        assert!(allow.permits("", "configmaps"));
        assert!(allow.permits("apps", "deployments"));
        assert!(!allow.permits("", "secrets"));
        assert_eq!(allow.narrow(&set("", &["*"])), Some(set("", &["*"])));
        assert_eq!(
            allow.narrow(&set("", &["secrets", "pods"])),
            Some(set("", &["pods"]))
        );
        assert_eq!(allow.narrow(&set("", &["secrets"])), None);
    }

    #[test]
    fn a_list_narrows_what_comes_up_and_names_secrets_to_let_them() {
        let allow = UpsyncAllow::parse(Some("apps/deployments, pods"));
        assert!(allow.permits("apps", "deployments"));
        assert!(allow.permits("", "pods"));
        assert!(!allow.permits("", "configmaps"));
        assert_eq!(allow.narrow(&set("", &["*"])), Some(set("", &["pods"])));
        assert_eq!(
            allow.narrow(&set("apps", &["*", "deployments"])),
            Some(set("apps", &["deployments"]))
        );
        assert_eq!(allow.narrow(&set("batch", &["*"])), None);

        let everything = UpsyncAllow::parse(Some("*"));
        assert!(everything.permits("batch", "jobs"));
        assert!(!everything.permits("", "secrets"), "a * never stands for Secrets");
        assert_eq!(everything.narrow(&set("", &["*"])), Some(set("", &["*"])));
        let secrets = UpsyncAllow::parse(Some("secrets"));
        assert!(secrets.permits("", "secrets"));
        assert_eq!(secrets.narrow(&set("", &["*"])), Some(set("", &["secrets"])));

        assert!(
            !UpsyncAllow::parse(Some("")).permits("", "pods"),
            "an empty list: nothing"
        );
    }
}
