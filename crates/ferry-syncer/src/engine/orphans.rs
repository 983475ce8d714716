//! The orphan cleaner: deletes this syncer's copies of resource types it no longer copies.
//!
//! Two things leave such copies behind, and both end here:
//! - a resource type dropped from the selection while the syncer runs: the resolver stops
//!   its flow at once and hands the type over ([`OrphanCleaner::clean`]);
//! - a type dropped while the syncer was down: no flow is ever started for it, so once
//!   the initial sync is done every type each side serves is looked at, and those no
//!   flow copies are cleaned the same way.
//!
//! Cleaning a type lists this syncer's copies of it on that side (the profile's copy
//! selector, metadata only), keeps those the profile's marks call orphaned
//! ([`crate::profile::Marks::is_orphaned_copy`]: never a create-only copy, never a
//! source), and deletes each with a uid precondition. A Namespace copy that still holds
//! wanted copies is released instead (see [`Engine::keeps_copies_in`]). A type that is
//! copied again by the time its turn comes is left to its flow; a side that does not
//! answer is waited for, and the work resumes when it does.
//!
//! What to clean is decided by pure functions ([`orphan_types`], [`is_copied`] and the
//! profile's marks); the rest is listing and deleting.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams, Preconditions,
};
use parking_lot::Mutex;
use serde_json::{json, Value};

use super::queue::backoff;
use super::Engine;
use crate::metrics::SyncDirection;
use crate::profile::{Plan, ResourceType};
use crate::selection::{Direction, DiscoveredResource, ResourceId};
use crate::side::Side;

/// Objects per list request.
const PAGE: u32 = 500;

/// Why cleaning one resource type on one side stopped short.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
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

impl CleanError {
    fn source_error(&self) -> &kube::Error {
        match self {
            CleanError::List { source, .. }
            | CleanError::Delete { source, .. }
            | CleanError::Release { source, .. } => source,
        }
    }

    /// The HTTP status from the server, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self.source_error() {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        }
    }

    /// Whether the server was not reached, so a later attempt may do better.
    pub fn is_transport(&self) -> bool {
        !matches!(
            self.source_error(),
            kube::Error::Api(_) | kube::Error::SerdeError(_)
        )
    }
}

/// Resource types whose copies are to be cleaned, by side.
#[derive(Default)]
pub struct OrphanCleaner {
    pending: Mutex<BTreeSet<(Side, ResourceType)>>,
    wake: tokio::sync::Notify,
}

impl OrphanCleaner {
    /// Asks for this syncer's copies of `ty` on `side` to be deleted (once; asking again
    /// before that happens changes nothing).
    pub fn clean(&self, side: Side, ty: ResourceType) {
        if self.pending.lock().insert((side, ty)) {
            self.wake.notify_one();
        }
    }

    /// Types waiting to be cleaned.
    pub fn pending(&self) -> usize {
        self.pending.lock().len()
    }

    fn take(&self) -> Vec<(Side, ResourceType)> {
        std::mem::take(&mut *self.pending.lock()).into_iter().collect()
    }
}

/// Cleans what is handed over, and once the initial sync is done, every type no flow
/// copies. Never fails: what it cannot delete is logged; a side that does not answer is
/// waited for and the work retried.
pub async fn run(engine: Arc<Engine>) {
    let mut swept_all = false;
    let mut attempt = 0;
    loop {
        if !swept_all && engine.initial_sync_done() {
            swept_all = true;
            queue_orphan_types(&engine);
        }
        let mut unreachable = false;
        let mut deleted = 0;
        for (side, ty) in engine.orphans.take() {
            if unreachable {
                engine.orphans.clean(side, ty);
                continue;
            }
            // The selection may have changed meanwhile: a type copied again is its flow's.
            if still_copied(&engine, side, &ty) {
                continue;
            }
            // Downsynced copies stay while the profile's config keeps them.
            if side == Side::Downstream && !engine.profile.mapping.propagates_deletion() {
                continue;
            }
            yield_to(&engine.queue).await;
            match clean_type(&engine, side, &ty).await {
                Ok(n) => deleted += n,
                Err(e) if e.is_transport() => {
                    // Said once for the side; this type and the rest wait for it.
                    engine.lost_contact(side, &e);
                    tracing::debug!(%side, "cleaning orphaned copies stopped: {e}");
                    unreachable = true;
                    engine.orphans.clean(side, ty);
                }
                // Many types are not listable by a restricted syncer, and some vanish.
                Err(e) if matches!(e.code(), Some(403 | 404)) => {
                    tracing::debug!(%side, "skipped cleaning a resource type: {e}");
                }
                Err(e) => tracing::warn!(%side, "skipped cleaning a resource type: {e}"),
            }
        }
        if deleted > 0 {
            tracing::info!(
                deleted,
                "deleted copies of resource types that are no longer synced"
            );
        }
        if unreachable {
            tokio::time::sleep(backoff(Duration::from_secs(1), Duration::from_secs(30), attempt)).await;
            attempt = attempt.saturating_add(1);
            engine.up.reachable().await;
            engine.down.reachable().await;
            continue;
        }
        attempt = 0;
        if swept_all {
            engine.orphans.wake.notified().await;
        } else {
            tokio::select! {
                _ = engine.orphans.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    }
}

/// The longest the cleaner waits for the work queue to empty before cleaning a type,
/// so that a queue that never empties does not keep orphans forever.
const YIELD_AT_MOST: Duration = Duration::from_secs(5);

/// Waits (up to [`YIELD_AT_MOST`]) until no object is queued or being copied. Cleaning is
/// a list per resource type on a side; a syncer that became ready with nothing to copy
/// sweeps every type the servers serve (68 on a hub) just as its first configuration
/// arrives, and those lists took the downstream server's time from the copies (152 ms
/// of server time in a 1,000-object initial sync of `ferry bench sync`).
async fn yield_to<K: Clone + Eq + std::hash::Hash + Send + Sync + 'static>(
    queue: &super::queue::WorkQueue<K>,
) {
    let deadline = tokio::time::Instant::now() + YIELD_AT_MOST;
    while !queue.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Hands every type of both sides' discovery that no flow copies to the cleaner.
fn queue_orphan_types(engine: &Engine) {
    let Some(discovery) = engine.discovery.read().clone() else {
        return;
    };
    for side in [Side::Downstream, Side::Upstream] {
        let here = match side {
            Side::Downstream => &discovery.downstream,
            Side::Upstream => &discovery.upstream,
        };
        let copied = copied_types(engine, side, &discovery.upstream, &discovery.downstream);
        for found in orphan_types(here, &copied) {
            engine.orphans.clean(side, resource_type(found));
        }
    }
}

/// Whether `ty` on `side` is (again) a type whose copies are wanted.
fn still_copied(engine: &Engine, side: Side, ty: &ResourceType) -> bool {
    let Some(discovery) = engine.discovery.read().clone() else {
        return false;
    };
    let copied = copied_types(engine, side, &discovery.upstream, &discovery.downstream);
    is_copied(ty, &copied)
}

/// The direction whose copies live on `side`.
fn copies_on(side: Side) -> Direction {
    match side {
        Side::Downstream => Direction::Downsync,
        Side::Upstream => Direction::Upsync,
    }
}

/// The resource types whose copies live on `side` and are still wanted: the destination
/// types of the live flows, and of those the current selection resolves to (whose flows
/// may be about to start).
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
        .filter(|flow| flow.target.direction == direction)
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

/// Whether `ty` is one of `copied`, matched by group and resource whatever the version.
///
/// A type with the plural and kind of a copied type in another group counts too: the
/// same objects can be served under two groups (core `events` and `events.k8s.io`
/// `events`), and cleaning the alias would delete live copies.
pub fn is_copied(ty: &ResourceType, copied: &[ResourceType]) -> bool {
    copied
        .iter()
        .any(|t| t.id.resource == ty.id.resource && (t.id.group == ty.id.group || t.kind == ty.kind))
}

/// The resource types of `discovered` (one side's discovery) to look at for orphaned
/// copies: the group's preferred version, not a subresource, `list` and `delete`
/// allowed, and not [copied](is_copied).
pub fn orphan_types<'a>(
    discovered: &'a [DiscoveredResource],
    copied: &[ResourceType],
) -> Vec<&'a DiscoveredResource> {
    let allows = |d: &DiscoveredResource, verb: &str| d.verbs.iter().any(|v| v == verb);
    discovered
        .iter()
        .filter(|d| d.preferred && !d.resource.contains('/') && allows(d, "list") && allows(d, "delete"))
        .filter(|d| !is_copied(&resource_type(d), copied))
        .collect()
}

fn resource_type(resource: &DiscoveredResource) -> ResourceType {
    ResourceType {
        id: ResourceId::new(
            &resource.group,
            &resource.version,
            &resource.resource,
            resource.namespaced,
        ),
        kind: resource.kind.clone(),
    }
}

/// A listed object's metadata as an object of `ty` (metadata-only list items say
/// `kind: PartialObjectMetadata`).
fn listed_object(ty: &ResourceType, meta: &ObjectMeta) -> Value {
    json!({
        "apiVersion": ty.id.api_version(),
        "kind": ty.kind,
        "metadata": meta,
    })
}

/// A copy found by the cleaner.
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

/// Lists this syncer's copies of `ty` on `side` and deletes the orphaned ones. Returns
/// how many it deleted.
async fn clean_type(engine: &Engine, side: Side, ty: &ResourceType) -> Result<usize, CleanError> {
    let id = ty.id.to_string();
    let client = engine.side(side);
    let ar = ty.api_resource();
    let all: Api<DynamicObject> = Api::all_with(client.client.clone(), &ar);
    let marks = &engine.profile.marks;
    let selector = marks.copy_selector(side);
    let mut params = ListParams::default().labels(&selector).limit(PAGE);
    // Every page first, then the deletes: deleting between pages could shift what a
    // continue token points at.
    let mut orphans = vec![];
    loop {
        client.limiter.acquire().await;
        let page = all
            .list_metadata(&params)
            .await
            .map_err(|source| CleanError::List {
                side,
                resource: id.clone(),
                source,
            })?;
        for item in &page.items {
            let meta = &item.metadata;
            if !marks.is_orphaned_copy(&listed_object(ty, meta), side) {
                continue;
            }
            // Deleting needs a uid precondition: without one, never.
            if let (Some(name), Some(uid)) = (&meta.name, &meta.uid) {
                orphans.push(Orphan {
                    namespace: meta.namespace.clone().filter(|_| ty.id.namespaced),
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
        if side == Side::Downstream && ty.id.is_namespaces() && engine.keeps_copies_in(&orphan.name) {
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
                    return Err(CleanError::Release {
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
                tracing::info!(%side, resource = %id, object = %orphan, "deleted a copy whose resource type is no longer synced");
            }
            // Gone already, or replaced by another object since it was listed.
            Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {}
            Err(source) => {
                return Err(CleanError::Delete {
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

    #[tokio::test(start_paused = true)]
    async fn cleaning_waits_for_queued_copies_but_not_forever() {
        let queue = super::super::queue::WorkQueue::new(Duration::from_millis(10), Duration::from_secs(1));
        let start = tokio::time::Instant::now();
        yield_to(&queue).await;
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "an empty queue is not waited for"
        );

        queue.add("copy");
        let waiting = tokio::spawn({
            let queue = queue.clone();
            async move { yield_to(&queue).await }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "cleaning went ahead of a queued copy");
        let key = queue.next().await.expect("the queued copy");
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "cleaning went ahead of a copy in process");
        queue.done(&key);
        tokio::time::timeout(Duration::from_millis(100), waiting)
            .await
            .expect("cleaning resumes once the queue is empty")
            .unwrap();

        queue.add("never done");
        let start = tokio::time::Instant::now();
        yield_to(&queue).await;
        let waited = start.elapsed();
        assert!(
            waited >= YIELD_AT_MOST && waited < YIELD_AT_MOST + Duration::from_millis(100),
            "a queue that never empties is waited for {YIELD_AT_MOST:?}, not {waited:?}"
        );
    }

    fn target(group: &str, version: &str, resource: &str, kind: &str) -> ResourceType {
        ResourceType {
            id: ResourceId::new(group, version, resource, true),
            kind: kind.into(),
        }
    }

    fn names(types: Vec<&DiscoveredResource>) -> Vec<String> {
        types.iter().map(|d| resource_type(d).id.to_string()).collect()
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
        let obj = listed_object(&resource_type(&resource), &meta);
        assert_eq!(obj["apiVersion"], "apps/v1");
        assert_eq!(obj["kind"], "Deployment");
        assert_eq!(obj["metadata"]["name"], "web");
    }

    #[test]
    fn a_type_is_cleaned_once_however_often_it_is_handed_over() {
        let cleaner = OrphanCleaner::default();
        let secrets = target("", "v1", "secrets", "Secret");
        cleaner.clean(Side::Downstream, secrets.clone());
        cleaner.clean(Side::Downstream, secrets.clone());
        cleaner.clean(Side::Upstream, secrets.clone());
        assert_eq!(cleaner.pending(), 2, "once per side");
        assert_eq!(cleaner.take().len(), 2);
        assert_eq!(cleaner.pending(), 0);
    }

    #[test]
    fn a_retired_type_that_is_copied_again_is_left_to_its_flow() {
        let copied = [target("apps", "v1", "deployments", "Deployment")];
        assert!(is_copied(
            &target("apps", "v1beta1", "deployments", "Deployment"),
            &copied
        ));
        assert!(!is_copied(&target("", "v1", "secrets", "Secret"), &copied));
    }
}
