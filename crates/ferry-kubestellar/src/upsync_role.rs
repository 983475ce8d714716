//! The KubeStellar syncer's write rights. In every workspace holding
//! SyncerConfigs or EdgeSyncConfigs (a mailbox, or a workspace set up by hand
//! for a syncer), the ClusterRole [`UPSYNC_ROLE`] grants
//!
//! - `create`, `update`, `patch` and `delete` on exactly the resources those
//!   configs upsync (SyncerConfig `upsync` sets, EdgeSyncConfig
//!   `upSyncedResources` by kind; a `*` expanded to what the workspace serves);
//! - `get`, `update` and `patch` on the `status` subresource of every served
//!   resource that has one, so the syncer reports the state of what it
//!   downsyncs;
//!
//! and nothing else: never ServiceAccounts or their tokens, Secrets, RBAC,
//! workspaces, bindings or certificates — nor their status — whatever a config
//! says. `ferry syncer-gen` binds the syncer to it beside a fixed role that
//! only reads (and reports on the configs themselves), so a stolen syncer
//! token can neither grant rights nor rewrite what decides its own.

use std::collections::{BTreeMap, BTreeSet};

use ferry_api::edge::{EdgeSyncConfigResource, UpsyncSet};
use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::follow::Follower;
use ferry_server::controller::ControllerContext;
use ferry_server::service;
use ferry_server::storage::{ClusterScope, ObjectKey, WatchEvent};

/// The ClusterRole this controller keeps in each workspace with SyncerConfigs.
pub use ferry_api::edge::mailbox::UPSYNC_ROLE;
/// Label on [`UPSYNC_ROLE`]: kept by the hub (value `true`).
pub const MANAGED_LABEL: &str = "ferry.dev/upsync-role";
const SYNCER_CONFIGS: &str = "edge.kubestellar.io/syncerconfigs";
const EDGE_SYNC_CONFIGS: &str = "edge.kubestellar.io/edgesyncconfigs";
const CLUSTER_ROLES: &str = "rbac.authorization.k8s.io/clusterroles";
/// What a workspace serves changes with these (a `*` and the status rules follow it).
const CRDS: &str = "apiextensions.k8s.io/customresourcedefinitions";
const MANAGER: &str = "ferry-upsync-role";

/// API groups whose objects (and their status) the generated identity never
/// writes: identities, credentials, rights and the tenancy machinery.
const NEVER_GROUPS: &[&str] = &[
    "rbac.authorization.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "certificates.k8s.io",
    "admissionregistration.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "tenancy.kcp.io",
    "core.kcp.io",
    "apis.kcp.io",
    "workload.kcp.io",
    "scheduling.kcp.io",
    "edge.kubestellar.io",
];
/// Core resources never written by it: a ServiceAccount or a Secret could
/// carry a token for any identity in the workspace.
const NEVER_CORE: &[&str] = &["serviceaccounts", "secrets"];

/// Whether the generated identity may be given create/update/patch/delete on
/// `group`/`resource`.
pub fn upsync_writable(group: &str, resource: &str) -> bool {
    let never_core = group.is_empty() && NEVER_CORE.contains(&resource);
    !resource.contains('/') && !NEVER_GROUPS.contains(&group) && !never_core
}

/// One resource a workspace serves, as far as the role is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub group: String,
    pub resource: String,
    pub kind: String,
    /// Whether it has a `status` subresource.
    pub status: bool,
}

/// Verbs on the resources the syncer upsyncs: it creates, updates (its
/// copy follows the edge object) and deletes them.
const UPSYNC_VERBS: [&str; 4] = ["create", "delete", "patch", "update"];
/// Verbs on `<resource>/status`: the syncer reports state there.
const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];

/// The upsync sets EdgeSyncConfig entries `resources` (by kind) stand for,
/// resolved against `served`; a kind the workspace does not serve is left
/// out (the controller looks again when a CRD arrives).
pub fn edge_upsync_sets(resources: &[EdgeSyncConfigResource], served: &[Served]) -> Vec<UpsyncSet> {
    resources
        .iter()
        .map(|r| UpsyncSet {
            api_group: r.group.clone(),
            resources: served
                .iter()
                .filter(|s| s.group == r.group && (r.kind == "*" || s.kind == r.kind))
                .map(|s| s.resource.clone())
                .collect(),
            namespaces: vec!["*".into()],
            names: vec!["*".into()],
        })
        .filter(|set| !set.resources.is_empty())
        .collect()
}

/// The rules for `sets`, with `served` resources standing in for `*`: one
/// upsync rule per group, then one status rule per group; resources sorted.
/// Pure, so it is tested without a hub.
pub fn upsync_rules<'a>(sets: impl IntoIterator<Item = &'a UpsyncSet>, served: &[Served]) -> Vec<Value> {
    let mut by_group: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for set in sets {
        let groups: BTreeSet<&str> = if set.api_group == "*" {
            served.iter().map(|s| s.group.as_str()).collect()
        } else {
            BTreeSet::from([set.api_group.as_str()])
        };
        for group in groups {
            for resource in &set.resources {
                if resource == "*" {
                    for s in served.iter().filter(|s| s.group == group) {
                        if upsync_writable(&s.group, &s.resource) {
                            by_group
                                .entry(s.group.clone())
                                .or_default()
                                .insert(s.resource.clone());
                        }
                    }
                } else if upsync_writable(group, resource) {
                    by_group
                        .entry(group.to_string())
                        .or_default()
                        .insert(resource.clone());
                }
            }
        }
    }
    let mut status: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in served
        .iter()
        .filter(|s| s.status && upsync_writable(&s.group, &s.resource))
    {
        status
            .entry(s.group.clone())
            .or_default()
            .insert(format!("{}/status", s.resource));
    }
    let rules = |map: BTreeMap<String, BTreeSet<String>>, verbs: &[&str]| -> Vec<Value> {
        map.into_iter()
            .filter(|(_, resources)| !resources.is_empty())
            .map(|(group, resources)| json!({"apiGroups": [group], "resources": resources, "verbs": verbs}))
            .collect()
    };
    let mut all = rules(by_group, &UPSYNC_VERBS);
    all.extend(rules(status, &STATUS_VERBS));
    all
}

/// The controller as a watch follower (started by [`crate::spawn`]).
pub struct UpsyncRoles;

impl Follower for UpsyncRoles {
    fn follows(&self, storage_key: &str) -> bool {
        [
            SYNCER_CONFIGS,
            EDGE_SYNC_CONFIGS,
            CLUSTER_ROLES,
            CRDS,
            ferry_server::apis::BINDINGS,
        ]
        .contains(&storage_key)
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let mut clusters = BTreeSet::new();
            for resource in [SYNCER_CONFIGS, EDGE_SYNC_CONFIGS] {
                let (configs, _) = ctx.list(&ClusterScope::All, resource, None, None);
                clusters.extend(configs.into_iter().map(|(k, _)| k.cluster));
            }
            for cluster in clusters {
                keep(ctx, &cluster).await;
            }
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // A change to the role itself is put back; other roles are none of ours.
            if event.key.resource == CLUSTER_ROLES && event.key.name != UPSYNC_ROLE {
                return;
            }
            keep(ctx, &event.key.cluster).await;
        })
    }
}

/// Make [`UPSYNC_ROLE`] in `cluster` grant what its configs upsync and the
/// status of what it serves. A workspace without SyncerConfigs or
/// EdgeSyncConfigs and without the role is left alone.
async fn keep(ctx: &ControllerContext, cluster: &str) {
    let scope = ClusterScope::One(cluster.into());
    let (configs, _) = ctx.list(&scope, SYNCER_CONFIGS, None, None);
    let (edge_configs, _) = ctx.list(&scope, EDGE_SYNC_CONFIGS, None, None);
    let key = ObjectKey {
        cluster: cluster.into(),
        resource: CLUSTER_ROLES.into(),
        namespace: String::new(),
        name: UPSYNC_ROLE.into(),
    };
    let existing = ctx.get(&key);
    if configs.is_empty() && edge_configs.is_empty() && existing.is_none() {
        return;
    }
    let mut served: Vec<Served> = ctx
        .served_resources(Some(cluster))
        .into_iter()
        .map(|r| Served {
            group: r.group,
            resource: r.resource,
            kind: r.kind,
            status: r.status_subresource,
        })
        .collect();
    // One entry per resource, whichever versions serve it.
    served.sort_by(|a, b| (&a.group, &a.resource, !a.status).cmp(&(&b.group, &b.resource, !b.status)));
    served.dedup_by(|a, b| a.group == b.group && a.resource == b.resource);
    let mut sets: Vec<UpsyncSet> = configs
        .iter()
        .filter_map(|(_, obj)| {
            let upsync = obj.value().pointer("/spec/upsync").cloned()?;
            serde_json::from_value::<Vec<UpsyncSet>>(upsync).ok()
        })
        .flatten()
        .collect();
    for (_, obj) in &edge_configs {
        let Some(up) = obj.value().pointer("/spec/upSyncedResources").cloned() else {
            continue;
        };
        if let Ok(up) = serde_json::from_value::<Vec<EdgeSyncConfigResource>>(up) {
            sets.extend(edge_upsync_sets(&up, &served));
        }
    }
    let rules = Value::Array(upsync_rules(&sets, &served));
    let resource = ("rbac.authorization.k8s.io", "v1", "clusterroles");
    match existing {
        None => {
            let role = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": UPSYNC_ROLE, "labels": {MANAGED_LABEL: "true"}},
                "rules": rules,
            });
            match ctx.create(cluster, resource, None, role).await {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => tracing::warn!(
                    cluster,
                    "creating ClusterRole {UPSYNC_ROLE} failed: {}",
                    e.message
                ),
            }
        }
        Some(existing) => {
            let mut role = existing.value();
            if role.get("rules") == Some(&rules) && role.get("aggregationRule").is_none() {
                return;
            }
            role["rules"] = rules;
            if let Some(meta) = role.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            if let Some(obj) = role.as_object_mut() {
                obj.remove("aggregationRule");
            }
            let request = match ctx.request(cluster, resource, None, Some(UPSYNC_ROLE), "update", MANAGER) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(
                        cluster,
                        "updating ClusterRole {UPSYNC_ROLE} failed: {}",
                        e.message
                    );
                    return;
                }
            };
            match service::update(&request, role).await {
                Ok(_) => {}
                // Someone wrote it meanwhile: the watch brings that write back here.
                Err(e) if e.code == 409 || e.code == 404 => {}
                Err(e) => tracing::warn!(
                    cluster,
                    "updating ClusterRole {UPSYNC_ROLE} failed: {}",
                    e.message
                ),
            }
        }
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

    /// `(group, resource, kind, status subresource)`.
    fn served() -> Vec<Served> {
        [
            ("", "configmaps", "ConfigMap", false),
            ("", "namespaces", "Namespace", true),
            ("", "secrets", "Secret", false),
            ("", "serviceaccounts", "ServiceAccount", false),
            ("apps", "deployments", "Deployment", true),
            (
                "certificates.k8s.io",
                "certificatesigningrequests",
                "CertificateSigningRequest",
                true,
            ),
            (
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
            ),
            ("tenancy.kcp.io", "workspaces", "Workspace", true),
            ("apis.kcp.io", "apibindings", "APIBinding", true),
            ("edge.kubestellar.io", "syncerconfigs", "SyncerConfig", true),
            ("wgpolicyk8s.io", "policyreports", "PolicyReport", false),
        ]
        .iter()
        .map(|(g, r, k, status)| Served {
            group: g.to_string(),
            resource: r.to_string(),
            kind: k.to_string(),
            status: *status,
        })
        .collect()
    }

    /// The rules without the status rules every workspace gets.
    fn upsync_only(rules: Vec<Value>) -> Vec<Value> {
        rules
            .into_iter()
            .filter(|r| r["verbs"] != json!(STATUS_VERBS))
            .collect()
    }

    #[test]
    fn named_resources_are_granted_create_update_and_delete() {
        let rules = upsync_rules(&[set("wgpolicyk8s.io", &["policyreports"])], &served());
        assert_eq!(
            upsync_only(rules),
            vec![
                json!({"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports"],
                "verbs": ["create", "delete", "patch", "update"]})
            ]
        );
    }

    #[test]
    fn status_is_granted_where_served_but_never_of_identities_rights_or_tenancy() {
        let rules = upsync_rules(&[], &served());
        assert_eq!(
            rules,
            vec![
                json!({"apiGroups": [""], "resources": ["namespaces/status"], "verbs": ["get", "patch", "update"]}),
                json!({"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["get", "patch", "update"]}),
            ]
        );
    }

    #[test]
    fn edge_sync_config_kinds_resolve_to_served_resources() {
        let entry = |group: &str, kind: &str| EdgeSyncConfigResource {
            kind: kind.into(),
            group: group.into(),
            name: "*".into(),
            namespace: "*".into(),
            ..Default::default()
        };
        let sets = edge_upsync_sets(
            &[
                entry("wgpolicyk8s.io", "PolicyReport"),
                entry("", "Secret"),
                entry("example.com", "Unserved"),
            ],
            &served(),
        );
        assert_eq!(sets.len(), 2, "an unserved kind stands for nothing: {sets:?}");
        assert_eq!(
            upsync_only(upsync_rules(&sets, &served())),
            vec![
                json!({"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports"],
                "verbs": ["create", "delete", "patch", "update"]})
            ]
        );
    }

    #[test]
    fn wildcards_never_reach_credentials_rights_or_workspaces() {
        let rules = upsync_rules(&[set("*", &["*"])], &served());
        let text = serde_json::to_string(&rules).unwrap();
        for never in [
            "secrets",
            "serviceaccounts",
            "clusterrolebindings",
            "workspaces",
            "apibindings",
            "syncerconfigs",
            "certificatesigningrequests",
            "token",
        ] {
            assert!(!text.contains(never), "{never} in {text}");
        }
        assert!(
            text.contains("configmaps") && text.contains("deployments") && text.contains("policyreports")
        );
    }

    #[test]
    fn naming_a_sensitive_resource_outright_grants_nothing() {
        let sets = [
            set("", &["secrets", "serviceaccounts"]),
            set("rbac.authorization.k8s.io", &["*"]),
            set("tenancy.kcp.io", &["workspaces"]),
        ];
        assert!(upsync_only(upsync_rules(&sets, &served())).is_empty());
    }
}
