//! The sweep after a start: copies of resource types that no SyncerConfig names any more.
//!
//! While the syncer runs, dropping a resource type from every SyncerConfig retires its
//! flow, and the retiring flow deletes the copies it watches. A type dropped while the
//! syncer was down gets no flow after the restart, so nothing would ever look at its
//! copies again. Once the initial sync is done, [`sweep`] lists this syncer's labelled
//! objects (`ferry.dev/syncer=<name>`, metadata only) of every *other* type on each side
//! and deletes those that are its copies, as the retiring flow would have.
//!
//! What to delete is decided by pure functions ([`orphan_types`], the profile's
//! [`crate::profile::Marks::is_orphaned_copy`]);
//! the rest is listing and deleting.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, Preconditions,
};
use kube::core::ApiResource;
use serde_json::{json, Value};

use super::queue::backoff;
use super::Engine;
use crate::metrics::SyncDirection;
use crate::profile::{Plan, ResourceType};
use crate::selection::{Direction, DiscoveredResource, ResourceId};
use crate::side::Side;

/// Sweeps attempted in all while a server cannot be reached.
const ATTEMPTS: u32 = 5;

/// Objects per list request.
const PAGE: u32 = 500;

/// Why sweeping one resource type on one side stopped short.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// Listing this syncer's labelled objects failed.
    #[error("list the syncer's {resource} on the {side} side: {source}")]
    List {
        /// Where.
        side: Side,
        /// The resource (`apps/v1/deployments`).
        resource: String,
        /// The error from the server or the connection.
        #[source]
        source: kube::Error,
    },
    /// Deleting one copy failed.
    #[error("delete {resource} {object} on the {side} side: {source}")]
    Delete {
        /// Where.
        side: Side,
        /// The resource (`apps/v1/deployments`).
        resource: String,
        /// The object (`namespace/name`).
        object: String,
        /// The error from the server or the connection.
        #[source]
        source: kube::Error,
    },
    /// Removing this syncer's marks from a Namespace copy failed.
    #[error("release namespace {object} on the {side} side (remove this syncer's marks): {source}")]
    Release {
        /// Where.
        side: Side,
        /// The namespace.
        object: String,
        /// The error from the server or the connection.
        #[source]
        source: kube::Error,
    },
}

impl SweepError {
    fn source_error(&self) -> &kube::Error {
        match self {
            SweepError::List { source, .. }
            | SweepError::Delete { source, .. }
            | SweepError::Release { source, .. } => source,
        }
    }

    /// The HTTP status from the server, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self.source_error() {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        }
    }

    /// Whether the server was not reached, so a later sweep may do better.
    pub fn is_transport(&self) -> bool {
        !matches!(
            self.source_error(),
            kube::Error::Api(_) | kube::Error::SerdeError(_)
        )
    }
}

/// What one sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepOutcome {
    /// Copies deleted.
    pub deleted: usize,
    /// Whether some resource type was skipped because a server could not be reached.
    pub unreachable: bool,
}

/// Waits for the initial sync, then sweeps once; again (with backoff, a few times) while
/// a server could not be reached. Never fails: what it cannot delete stays, and is logged.
pub async fn sweep_after_initial_sync(engine: Arc<Engine>) {
    while !engine.initial_sync_done() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for attempt in 0..ATTEMPTS {
        if !sweep(&engine).await.unreachable {
            return;
        }
        tokio::time::sleep(backoff(Duration::from_secs(1), Duration::from_secs(30), attempt)).await;
        // An outage does not use up the attempts: the next one waits for both sides.
        engine.up.reachable().await;
        engine.down.reachable().await;
    }
    tracing::warn!(
        "gave up sweeping copies of resource types no SyncerConfig names: a server kept failing to answer"
    );
}

/// Deletes this syncer's copies of every resource type it no longer copies, on both
/// sides, using the discovery the engine last read.
pub async fn sweep(engine: &Engine) -> SweepOutcome {
    let mut outcome = SweepOutcome::default();
    let Some(discovery) = engine.discovery.read().clone() else {
        return outcome;
    };
    for side in [Side::Downstream, Side::Upstream] {
        let here = match side {
            Side::Downstream => &discovery.downstream,
            Side::Upstream => &discovery.upstream,
        };
        let copied = || copied_types(engine, side, &discovery.upstream, &discovery.downstream);
        let orphaned = |resource: &DiscoveredResource| {
            !orphan_types(std::slice::from_ref(resource), &copied()).is_empty()
        };
        let candidates: Vec<DiscoveredResource> =
            orphan_types(here, &copied()).into_iter().cloned().collect();
        for resource in candidates {
            // The configs may have changed while sweeping: a type copied again is its flow's.
            if !orphaned(&resource) {
                continue;
            }
            match sweep_type(engine, side, &resource).await {
                Ok(deleted) => outcome.deleted += deleted,
                Err(e) if e.is_transport() => {
                    // Said once for the side; the rest of it waits for the next sweep.
                    outcome.unreachable = true;
                    engine.lost_contact(side, &e);
                    tracing::debug!(%side, "sweep stopped on this side: {e}");
                    break;
                }
                Err(e) => {
                    // Many types are not listable by a restricted syncer, and some vanish.
                    if matches!(e.code(), Some(403 | 404)) {
                        tracing::debug!(%side, "sweep skipped a resource type: {e}");
                    } else {
                        tracing::warn!(%side, "sweep skipped a resource type: {e}");
                    }
                }
            }
        }
    }
    if outcome.deleted > 0 {
        tracing::info!(
            deleted = outcome.deleted,
            "deleted copies of resource types no SyncerConfig names any more"
        );
    } else {
        tracing::debug!("no copies of resource types no SyncerConfig names any more");
    }
    outcome
}

/// The direction whose copies live on `side`.
fn copies_on(side: Side) -> Direction {
    match side {
        Side::Downstream => Direction::Downsync,
        Side::Upstream => Direction::Upsync,
    }
}

/// The resource types whose copies live on `side` and are still wanted: those of the live,
/// non-retiring flows, and those the current selection resolves to against `sources` (the
/// other side's discovery), whose flows may be about to start.
fn copied_types(
    engine: &Engine,
    side: Side,
    upstream: &[DiscoveredResource],
    downstream: &[DiscoveredResource],
) -> Vec<ResourceType> {
    let direction = copies_on(side);
    let mut types: Vec<ResourceType> = engine
        .flows()
        .iter()
        .filter(|flow| flow.target.direction == direction && !flow.is_retiring())
        .map(|flow| flow.dest.clone())
        .collect();
    let Plan { downsync, upsync } = engine.profile.selection.resolve(upstream, downstream);
    let resolved = match direction {
        Direction::Downsync => downsync,
        Direction::Upsync => upsync,
    };
    let mapping = &engine.profile.mapping;
    types.extend(resolved.targets.iter().map(|t| mapping.dest_type(t)));
    types
}

/// The resource types of `discovered` (one side's discovery) to sweep for orphaned copies:
/// the group's preferred version, not a subresource, `list` and `delete` allowed, and not
/// one of `copied` (the types whose copies live on that side, matched by group and
/// resource whatever the version).
///
/// A type with the plural and kind of a copied type in another group is skipped too: the
/// same objects can be served under two groups (core `events` and `events.k8s.io`
/// `events`), and sweeping the alias would delete live copies.
pub fn orphan_types<'a>(
    discovered: &'a [DiscoveredResource],
    copied: &[ResourceType],
) -> Vec<&'a DiscoveredResource> {
    let allows = |d: &DiscoveredResource, verb: &str| d.verbs.iter().any(|v| v == verb);
    discovered
        .iter()
        .filter(|d| d.preferred && !d.resource.contains('/') && allows(d, "list") && allows(d, "delete"))
        .filter(|d| {
            !copied
                .iter()
                .any(|t| t.id.resource == d.resource && (t.id.group == d.group || t.kind == d.kind))
        })
        .collect()
}

/// A listed object's metadata as an object of `resource` (metadata-only list items say
/// `kind: PartialObjectMetadata`).
fn listed_object(resource: &DiscoveredResource, meta: &ObjectMeta) -> Value {
    json!({
        "apiVersion": resource_id(resource).api_version(),
        "kind": resource.kind,
        "metadata": meta,
    })
}

fn resource_id(resource: &DiscoveredResource) -> ResourceId {
    ResourceId::new(
        &resource.group,
        &resource.version,
        &resource.resource,
        resource.namespaced,
    )
}

fn api_resource(resource: &DiscoveredResource) -> ApiResource {
    ApiResource {
        group: resource.group.clone(),
        version: resource.version.clone(),
        api_version: resource_id(resource).api_version(),
        kind: resource.kind.clone(),
        plural: resource.resource.clone(),
    }
}

/// A copy found by the sweep.
struct Orphan {
    namespace: Option<String>,
    name: String,
    uid: String,
}

impl std::fmt::Display for Orphan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Lists this syncer's labelled objects of `resource` on `side` and deletes its copies.
/// Returns how many it deleted.
async fn sweep_type(engine: &Engine, side: Side, resource: &DiscoveredResource) -> Result<usize, SweepError> {
    let id = resource_id(resource).to_string();
    let client = engine.side(side);
    let ar = api_resource(resource);
    let all: Api<DynamicObject> = Api::all_with(client.client.clone(), &ar);
    let marks = &engine.profile.marks;
    let selector = marks.copy_selector();
    let mut params = ListParams::default().labels(&selector).limit(PAGE);
    // Every page first, then the deletes: deleting between pages could shift what a
    // continue token points at.
    let mut orphans = vec![];
    loop {
        client.limiter.acquire().await;
        let page = all
            .list_metadata(&params)
            .await
            .map_err(|source| SweepError::List {
                side,
                resource: id.clone(),
                source,
            })?;
        for item in &page.items {
            let meta = &item.metadata;
            if !marks.is_orphaned_copy(&listed_object(resource, meta), side) {
                continue;
            }
            // Deleting needs a uid precondition: without one, never.
            if let (Some(name), Some(uid)) = (&meta.name, &meta.uid) {
                orphans.push(Orphan {
                    namespace: meta.namespace.clone().filter(|_| resource.namespaced),
                    name: name.clone(),
                    uid: uid.clone(),
                });
            }
        }
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params.continue_token = Some(token),
            _ => break,
        }
    }

    let direction = match copies_on(side) {
        Direction::Downsync => SyncDirection::downsync,
        Direction::Upsync => SyncDirection::upsync,
    };
    let mut deleted = 0;
    for orphan in orphans {
        let api: Api<DynamicObject> = match &orphan.namespace {
            Some(ns) => Api::namespaced_with(client.client.clone(), ns, &ar),
            None => Api::all_with(client.client.clone(), &ar),
        };
        let is_namespace = resource.group.is_empty() && resource.resource == "namespaces";
        if side == Side::Downstream && is_namespace && engine.keeps_copies_in(&orphan.name) {
            // Deleting it would delete the copies it still holds (see Engine::keeps_copies_in).
            client.limiter.acquire().await;
            let release = api
                .patch(
                    &orphan.name,
                    &PatchParams::default(),
                    &Patch::Merge(marks.release_patch()),
                )
                .await;
            match release {
                Ok(_) => {
                    tracing::info!(namespace = %orphan, "released a namespace copy that still holds wanted copies")
                }
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(source) => {
                    return Err(SweepError::Release {
                        side,
                        object: orphan.to_string(),
                        source,
                    })
                }
            }
            continue;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(orphan.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        client.limiter.acquire().await;
        match api.delete(&orphan.name, &params).await {
            Ok(_) => {
                deleted += 1;
                engine.metrics.synced(direction, &id);
                tracing::info!(%side, resource = %id, object = %orphan, "deleted a copy whose resource type no SyncerConfig names any more");
            }
            // Gone already, or replaced by another object since it was listed.
            Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {}
            Err(source) => {
                return Err(SweepError::Delete {
                    side,
                    resource: id,
                    object: orphan.to_string(),
                    source,
                })
            }
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn discovered(
        group: &str,
        version: &str,
        resource: &str,
        kind: &str,
        verbs: &[&str],
    ) -> DiscoveredResource {
        DiscoveredResource {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            kind: kind.into(),
            namespaced: true,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            preferred: true,
        }
    }

    const ALL: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete"];

    fn target(group: &str, version: &str, resource: &str, kind: &str) -> ResourceType {
        ResourceType {
            id: ResourceId::new(group, version, resource, true),
            kind: kind.into(),
        }
    }

    fn names(types: Vec<&DiscoveredResource>) -> Vec<String> {
        types.iter().map(|d| resource_id(d).to_string()).collect()
    }

    #[test]
    fn only_listable_deletable_preferred_types_without_a_flow_are_swept() {
        let mut old_widgets = discovered("example.com", "v1beta1", "widgets", "Widget", ALL);
        old_widgets.preferred = false;
        let found = vec![
            discovered("", "v1", "configmaps", "ConfigMap", ALL),
            discovered("", "v1", "secrets", "Secret", ALL),
            discovered("", "v1", "secrets/status", "Secret", ALL),
            discovered("", "v1", "bindings", "Binding", &["create"]),
            discovered("", "v1", "componentstatuses", "ComponentStatus", &["get", "list"]),
            discovered("example.com", "v1", "widgets", "Widget", ALL),
            old_widgets,
        ];
        let copied = [target("", "v1", "configmaps", "ConfigMap")];
        assert_eq!(
            names(orphan_types(&found, &copied)),
            ["v1/secrets", "example.com/v1/widgets"]
        );
    }

    #[test]
    fn a_copied_type_is_matched_whatever_its_version() {
        let found = vec![discovered("example.com", "v2", "widgets", "Widget", ALL)];
        let copied = [target("example.com", "v1", "widgets", "Widget")];
        assert!(orphan_types(&found, &copied).is_empty());
    }

    #[test]
    fn an_alias_of_a_copied_type_in_another_group_is_not_swept() {
        let found = vec![
            discovered("", "v1", "events", "Event", ALL),
            discovered("events.k8s.io", "v1", "events", "Event", ALL),
            discovered("other.example.com", "v1", "events", "Happening", ALL),
        ];
        let copied = [target("", "v1", "events", "Event")];
        assert_eq!(
            names(orphan_types(&found, &copied)),
            ["other.example.com/v1/events"]
        );
    }

    #[test]
    fn a_listed_object_takes_its_kind_from_discovery() {
        let resource = discovered("apps", "v1", "deployments", "Deployment", ALL);
        let meta = ObjectMeta {
            name: Some("web".into()),
            namespace: Some("app".into()),
            ..Default::default()
        };
        let obj = listed_object(&resource, &meta);
        assert_eq!(obj["apiVersion"], "apps/v1");
        assert_eq!(obj["kind"], "Deployment");
        assert_eq!(obj["metadata"]["name"], "web");
    }
}
