//! The KubeStellar syncer's upsync rights. In every workspace holding
//! SyncerConfigs (a mailbox, or a workspace set up by hand for a syncer),
//! the ClusterRole [`UPSYNC_ROLE`] grants `create` and `delete` on exactly
//! the resources those SyncerConfigs' `upsync` sets name (a `*` expanded to
//! what the workspace serves), and nothing else. `ferry syncer-gen` binds
//! the syncer to it beside a fixed role that reads everything and updates
//! what it reports status on, so the syncer's token can make only the kinds
//! it is asked to bring up — never ServiceAccounts or their tokens, Secrets,
//! RBAC, workspaces, bindings or certificates, whatever a SyncerConfig says.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferry_api::edge::UpsyncSet;
use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::follow::Follower;
use crate::hub::Hub;
use crate::service::{self, create_internal, Request};
use crate::storage::{ClusterScope, ObjectKey, WatchEvent};

/// The ClusterRole this controller keeps in each workspace with SyncerConfigs.
pub const UPSYNC_ROLE: &str = "kubestellar-syncer-upsync";
/// Label on [`UPSYNC_ROLE`]: kept by the hub (value `true`).
pub const MANAGED_LABEL: &str = "ferry.dev/upsync-role";
const SYNCER_CONFIGS: &str = "edge.kubestellar.io/syncerconfigs";
const CLUSTER_ROLES: &str = "rbac.authorization.k8s.io/clusterroles";
const MANAGER: &str = "ferry-upsync-role";

/// API groups whose objects the generated identity never creates or deletes:
/// identities, credentials, rights and the tenancy machinery.
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
/// Core resources never created or deleted by it: a ServiceAccount or a
/// Secret could carry a token for any identity in the workspace.
const NEVER_CORE: &[&str] = &["serviceaccounts", "secrets"];

/// Whether the generated identity may be given create/delete on `group`/`resource`.
pub fn upsync_writable(group: &str, resource: &str) -> bool {
    let never_core = group.is_empty() && NEVER_CORE.contains(&resource);
    !resource.contains('/') && !NEVER_GROUPS.contains(&group) && !never_core
}

/// The rules for `sets`, with `served` (group, resource) pairs standing in
/// for `*`: one rule per group, resources sorted. Pure, so it is tested
/// without a hub.
pub fn upsync_rules<'a>(
    sets: impl IntoIterator<Item = &'a UpsyncSet>,
    served: &[(String, String)],
) -> Vec<Value> {
    let mut by_group: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for set in sets {
        let groups: Vec<&str> = if set.api_group == "*" {
            served.iter().map(|(g, _)| g.as_str()).collect()
        } else {
            vec![set.api_group.as_str()]
        };
        for group in groups {
            for resource in &set.resources {
                if resource == "*" {
                    for (g, r) in served.iter().filter(|(g, _)| g == group) {
                        if upsync_writable(g, r) {
                            by_group.entry(g.clone()).or_default().insert(r.clone());
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
    by_group
        .into_iter()
        .filter(|(_, resources)| !resources.is_empty())
        .map(|(group, resources)| json!({"apiGroups": [group], "resources": resources, "verbs": ["create", "delete"]}))
        .collect()
}

/// The controller as a watch follower (started by `controllers::spawn`).
pub struct UpsyncRoles;

impl Follower for UpsyncRoles {
    fn follows(&self, storage_key: &str) -> bool {
        storage_key == SYNCER_CONFIGS || storage_key == CLUSTER_ROLES
    }

    fn resync<'a>(&'a self, hub: &'a Arc<Hub>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let (configs, _) = hub.store.list(&ClusterScope::All, SYNCER_CONFIGS, None, None);
            let clusters: BTreeSet<String> = configs.into_iter().map(|(k, _)| k.cluster).collect();
            for cluster in clusters {
                keep(hub, &cluster).await;
            }
        })
    }

    fn changed<'a>(&'a self, hub: &'a Arc<Hub>, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // A change to the role itself is put back; other roles are none of ours.
            if event.key.resource == CLUSTER_ROLES && event.key.name != UPSYNC_ROLE {
                return;
            }
            keep(hub, &event.key.cluster).await;
        })
    }
}

/// Make [`UPSYNC_ROLE`] in `cluster` grant what its SyncerConfigs upsync.
/// A workspace without SyncerConfigs and without the role is left alone.
async fn keep(hub: &Arc<Hub>, cluster: &str) {
    let (configs, _) = hub
        .store
        .list(&ClusterScope::One(cluster.into()), SYNCER_CONFIGS, None, None);
    let key = ObjectKey {
        cluster: cluster.into(),
        resource: CLUSTER_ROLES.into(),
        namespace: String::new(),
        name: UPSYNC_ROLE.into(),
    };
    let existing = hub.store.get(&key);
    if configs.is_empty() && existing.is_none() {
        return;
    }
    let sets: Vec<UpsyncSet> = configs
        .iter()
        .filter_map(|(_, obj)| {
            let upsync = obj.value().pointer("/spec/upsync").cloned()?;
            serde_json::from_value::<Vec<UpsyncSet>>(upsync).ok()
        })
        .flatten()
        .collect();
    let served: Vec<(String, String)> = hub
        .registry
        .resources(Some(cluster))
        .into_iter()
        .map(|r| (r.group, r.resource))
        .collect();
    let rules = Value::Array(upsync_rules(&sets, &served));
    let resource = ("rbac.authorization.k8s.io", "v1", "clusterroles");
    match existing {
        None => {
            let role = json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": UPSYNC_ROLE, "labels": {MANAGED_LABEL: "true"}},
                "rules": rules,
            });
            match create_internal(hub, cluster, resource, None, role).await {
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
            let request =
                match Request::internal(hub, cluster, resource, None, Some(UPSYNC_ROLE), "update", MANAGER) {
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

    fn served() -> Vec<(String, String)> {
        [
            ("", "configmaps"),
            ("", "secrets"),
            ("", "serviceaccounts"),
            ("", "serviceaccounts/token"),
            ("apps", "deployments"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
            ("tenancy.kcp.io", "workspaces"),
            ("wgpolicyk8s.io", "policyreports"),
        ]
        .iter()
        .map(|(g, r)| (g.to_string(), r.to_string()))
        .collect()
    }

    #[test]
    fn named_resources_are_granted_create_and_delete() {
        let rules = upsync_rules(&[set("wgpolicyk8s.io", &["policyreports"])], &served());
        assert_eq!(
            rules,
            vec![
                json!({"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports"], "verbs": ["create", "delete"]})
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
        assert!(upsync_rules(&sets, &served()).is_empty());
    }
}
