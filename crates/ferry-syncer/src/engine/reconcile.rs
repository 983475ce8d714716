//! Reconciling one object, level-based and idempotent: desired (the transformed source)
//! against actual (this syncer's copy) → create, adopt, update, delete, or write status.
//! Nothing is written when nothing changed.

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::Value;

use ferry_api::well_known::DESIRED_HASH_ANNOTATION;

use super::events::{self, EventType};
use super::flow::Flow;
use super::problems::{permission_message, Problem, ProblemKey};
use super::raw::RawObject;
use super::store::{ObjectRef, ObjectStore};
use super::{Engine, Key};
use crate::metrics::SyncDirection;
use crate::selection::{is_cluster_local, Direction};
use crate::side::Side;
use crate::transform::{
    desired_copy, merge_for_update, needs_update, status_differs, status_for_upstream, with_status,
};

/// Field manager of every write.
pub const FIELD_MANAGER: &str = "ferry-syncer";

/// Why reconciling an object failed. Every message names the object and the side.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A request failed.
    #[error("{action} {resource} {object} on the {side} side: {source}")]
    Request {
        /// What was attempted (`create`, `update`, `delete`, `get`, `update status of`).
        action: &'static str,
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
    /// The copy's namespace does not exist yet.
    #[error("namespace {namespace:?} does not exist on the {side} side yet; {object} waits for it")]
    NamespaceMissing {
        /// Where.
        side: Side,
        /// The namespace.
        namespace: String,
        /// The waiting object.
        object: String,
    },
}

impl SyncError {
    /// The HTTP status from the server, if the server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            SyncError::Request {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }

    /// Whether the server was not reached.
    pub fn is_transport(&self) -> bool {
        matches!(self, SyncError::Request { source, .. } if !matches!(source, kube::Error::Api(_) | kube::Error::SerdeError(_)))
    }

    /// The side that did not answer, if that is why reconciling failed.
    pub fn unreachable_side(&self) -> Option<Side> {
        match self {
            SyncError::Request { side, .. } if self.is_transport() => Some(*side),
            _ => None,
        }
    }
}

fn code_of(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Requests against one side for one flow, rate-limited, with errors that name the object.
struct Writer<'a> {
    engine: &'a Engine,
    flow: &'a Flow,
    side: Side,
    object: &'a ObjectRef,
}

impl Writer<'_> {
    /// The client for the object's logical cluster (see [`ObjectRef::cluster`]).
    fn client(&self) -> kube::Client {
        self.engine
            .side(self.side)
            .client_in(self.object.cluster.as_deref())
    }

    fn api(&self) -> Api<RawObject> {
        let client = self.client();
        let resource = self.flow.api_resource(self.side);
        match &self.object.namespace {
            Some(ns) if self.flow.resource_id(self.side).namespaced => {
                Api::namespaced_with(client, ns, resource)
            }
            _ => Api::all_with(client, resource),
        }
    }

    /// The resource a request addresses: the flow's, or its subresource (`.../status`).
    fn resource(&self, subresource: Option<&str>) -> String {
        let resource = &self.flow.resource_id(self.side).resource;
        match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.clone(),
        }
    }

    fn fail(
        &self,
        action: &'static str,
        verb: &str,
        subresource: Option<&str>,
        source: kube::Error,
    ) -> SyncError {
        let id = self.flow.resource_id(self.side);
        match code_of(&source) {
            Some(403) => {
                let shown = match subresource {
                    Some(sub) => format!("{id}/{sub}"),
                    None => id.to_string(),
                };
                let new = self.engine.problems.set(
                    ProblemKey {
                        side: self.side,
                        group: id.group.clone(),
                        resource: self.resource(subresource),
                        verb: verb.into(),
                    },
                    Problem {
                        permission: true,
                        message: permission_message(self.side, verb, &shown, &source.to_string()),
                    },
                );
                if new {
                    self.engine.status_now.notify_one();
                }
            }
            None if !matches!(source, kube::Error::SerdeError(_)) => {
                self.engine.lost_contact(self.side, &source);
            }
            _ => {}
        }
        SyncError::Request {
            action,
            side: self.side,
            resource: id.to_string(),
            object: self.object.to_string(),
            source,
        }
    }

    /// The store that holds this side's objects of the flow.
    fn store(&self) -> &ObjectStore {
        if self.side == self.flow.dest_side() {
            &self.flow.copies
        } else {
            &self.flow.sources
        }
    }

    fn succeeded(&self, verb: &str, subresource: Option<&str>) {
        let id = self.flow.resource_id(self.side);
        let resource = self.resource(subresource);
        if self.engine.problems.clear(self.side, &id.group, &resource, verb) {
            self.engine.status_now.notify_one();
        }
    }

    async fn send<T>(
        &self,
        action: &'static str,
        verb: &str,
        subresource: Option<&str>,
        request: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, SyncError> {
        self.engine.side(self.side).limiter.acquire().await;
        match request.await {
            Ok(v) => {
                self.succeeded(verb, subresource);
                Ok(v)
            }
            Err(e) => Err(self.fail(action, verb, subresource, e)),
        }
    }

    async fn create(&self, obj: &Value) -> Result<RawObject, SyncError> {
        let body = encode(obj).map_err(|e| self.fail("create", "create", None, e))?;
        let pp = post_params();
        let api = self.api();
        let created = self
            .send("create", "create", None, api.create(&pp, &body))
            .await?;
        self.store().written(&created, based_on(obj));
        Ok(created)
    }

    async fn get(&self) -> Result<Value, SyncError> {
        let api = self.api();
        let got = self.send("get", "get", None, api.get(&self.object.name)).await?;
        Ok(got.to_value())
    }

    async fn replace(&self, obj: &Value) -> Result<RawObject, SyncError> {
        let body = encode(obj).map_err(|e| self.fail("update", "update", None, e))?;
        let pp = post_params();
        let api = self.api();
        let name = &self.object.name;
        let replaced = self
            .send("update", "update", None, api.replace(name, &pp, &body))
            .await?;
        self.store().written(&replaced, based_on(obj));
        Ok(replaced)
    }

    async fn replace_status(&self, obj: &Value) -> Result<RawObject, SyncError> {
        let body = encode(obj).map_err(|e| self.fail("update status of", "update", Some("status"), e))?;
        let pp = post_params();
        let api = self.api();
        let name = &self.object.name;
        let replaced = self
            .send(
                "update status of",
                "update",
                Some("status"),
                api.replace_status(name, &pp, &body),
            )
            .await?;
        self.store().written(&replaced, based_on(obj));
        Ok(replaced)
    }

    async fn delete(&self, actual: &Value) -> Result<(), SyncError> {
        let uid = actual
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            ..Default::default()
        };
        let api = self.api();
        match self
            .send("delete", "delete", None, api.delete(&self.object.name, &dp))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code() == Some(404) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Removes this syncer's marks from its copy, which stays as a plain object.
    async fn release(&self) -> Result<(), SyncError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let api = self.api();
        let patch = Patch::Merge(self.engine.profile.marks.release_patch());
        self.send(
            "update",
            "patch",
            None,
            api.patch(&self.object.name, &params, &patch),
        )
        .await?;
        Ok(())
    }

    /// Creates the namespace the object goes into, unless selection downsyncs that
    /// Namespace object itself (then its own flow creates it, as a marked copy).
    /// `source_namespace` is the namespace of the object's source.
    async fn ensure_namespace(&self, source_namespace: Option<&str>) -> Result<(), SyncError> {
        let Some(namespace) = self.object.namespace.clone() else {
            return Ok(());
        };
        let waits = SyncError::NamespaceMissing {
            side: self.side,
            namespace: namespace.clone(),
            object: self.object.to_string(),
        };
        let copied = |ns: &str| self.engine.profile.selection.copies_namespace(ns);
        if self.side == Side::Downstream && source_namespace.is_some_and(copied) {
            return Err(waits);
        }
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client());
        let ns = k8s_openapi::api::core::v1::Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(namespace.clone()),
                ..Default::default()
            },
            ..Default::default()
        };
        self.engine.side(self.side).limiter.acquire().await;
        match api.create(&post_params(), &ns).await {
            Ok(_) => {
                tracing::info!(side = %self.side, %namespace, "created namespace for {}", self.object);
                Ok(())
            }
            Err(e) if code_of(&e) == Some(409) => Ok(()),
            Err(e) => Err(SyncError::Request {
                action: "create",
                side: self.side,
                resource: "v1/namespaces".into(),
                object: namespace,
                source: e,
            }),
        }
    }
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    }
}

/// The resourceVersion a write of `obj` is based on (`None` for a create).
fn based_on(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str)
}

/// The body of a write.
fn encode(obj: &Value) -> Result<RawObject, kube::Error> {
    RawObject::from_value(obj).map_err(kube::Error::SerdeError)
}

/// The destination's object after reconciling: unchanged, or as a write returned it
/// (parsed only if needed).
enum Written {
    Unchanged(Value),
    Raw(Box<RawObject>),
}

impl Written {
    fn into_value(self) -> Value {
        match self {
            Written::Unchanged(value) => value,
            Written::Raw(raw) => raw.to_value(),
        }
    }
}

fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// Brings the copy of `key`'s source in line with it.
pub async fn reconcile(engine: &Engine, flow: &Flow, key: &Key) -> Result<(), SyncError> {
    if !flow.copies.is_synced() {
        // Absence of a copy means nothing until the copies are listed; the list
        // completing queues the keys again.
        return Ok(());
    }
    let source = key.source().and_then(|s| flow.sources.get(s));
    let source_alive = source.as_deref().is_some_and(|s| !is_deleting(s));
    if source.is_none() && !flow.sources.is_synced() {
        // Nor does absence of a source while the sources are still being listed. A source
        // already seen can be copied, though (the first list streams).
        return Ok(());
    }
    let profile = &engine.profile;
    let marks = &*profile.marks;
    let id = &flow.target.id;
    let direction = flow.target.direction;
    let source = match (key.source(), source) {
        (Some(source_key), Some(s))
            if !is_deleting(&s)
                // Never send a copy back where it came from.
                && !marks.is_own_copy(&s)
                && !is_cluster_local(id, &source_key.name, &s)
                && profile.selection.wants(&flow.target, source_key, &s) =>
        {
            Some(s)
        }
        _ => None,
    };
    let copy = flow.copies.get_checked(key.dest());
    let dest = Writer {
        engine,
        flow,
        side: flow.dest_side(),
        object: key.dest(),
    };
    let metric = direction_of(flow);
    let resource = flow.resource_name();

    let Some(source) = source else {
        // Not wanted (any more): delete this syncer's copy, unless create-only.
        if let Some((copy, _)) = &copy {
            if marks.is_create_only(copy, direction) || is_deleting(copy) {
                return Ok(());
            }
            let holds_wanted_copies = direction == Direction::Downsync
                && flow.dest.id.is_namespaces()
                && source_alive
                && engine.keeps_copies_in(&key.dest().name);
            if holds_wanted_copies {
                dest.release().await?;
                tracing::info!(namespace = %key.dest(), "released the namespace copy (no longer wanted, but it holds other copies)");
            } else {
                dest.delete(copy).await?;
                engine.metrics.synced(metric, &resource);
                tracing::debug!(%resource, object = %key, side = %dest.side, "deleted copy");
            }
        }
        return Ok(());
    };

    let desired = desired_copy(
        &source,
        direction,
        key.dest(),
        flow.object_type(flow.dest_side()),
        marks,
    );
    let written = match &copy {
        Some((actual, verified)) => update(engine, flow, &dest, &source, &desired, actual, *verified).await?,
        None => create_or_adopt(engine, flow, key, &dest, &source, &desired).await?,
    };

    match direction {
        Direction::Downsync => {
            // Reported state: the copy's status goes back to the source. The copy in the
            // store is what the destination last reported. CRDs keep their own status.
            let returnable = engine.return_status && id.group != "apiextensions.k8s.io";
            if let (true, Some((actual, _)), Some(source_key)) = (returnable, &copy, key.source()) {
                if let Some(status) = status_for_upstream(actual) {
                    if status_differs(&source, &status) {
                        let up = Writer {
                            engine,
                            flow,
                            side: Side::Upstream,
                            object: source_key,
                        };
                        let body = with_status(&source, status);
                        if flow.status_subresource {
                            up.replace_status(&body).await?;
                        } else {
                            up.replace(&body).await?;
                        }
                        engine.metrics.synced(SyncDirection::status, &resource);
                    }
                }
            }
        }
        Direction::Upsync => {
            // With a status subresource the main write ignored status: write it too.
            if let (true, Some(written), Some(status)) =
                (flow.status_subresource, written, desired.get("status"))
            {
                let written = written.into_value();
                if status_differs(&written, status) {
                    dest.replace_status(&with_status(&written, status.clone()))
                        .await?;
                    engine.metrics.synced(SyncDirection::status, &resource);
                }
            }
        }
    }
    Ok(())
}

/// Updates this syncer's copy if it differs. Returns the object as written, if written.
/// `verified`: the store holds `actual` without its content, because it was found to
/// match the desired object whose hash it carries (see [`ObjectStore::keep_verified`]).
async fn update(
    engine: &Engine,
    flow: &Flow,
    dest: &Writer<'_>,
    source: &Value,
    desired: &Value,
    actual: &Value,
    verified: bool,
) -> Result<Option<Written>, SyncError> {
    let create_only = engine.profile.marks.is_create_only(source, flow.target.direction);
    // The hash covers everything `needs_update` compares, so a verified copy still
    // matches a desired object with the same hash.
    let matches = if verified {
        desired_hash(desired).is_some() && desired_hash(desired) == desired_hash(actual)
    } else {
        !needs_update(desired, actual)
    };
    if matches && !verified {
        keep_if_verified(flow, desired, actual);
    }
    if create_only || matches {
        return Ok(Some(Written::Unchanged(actual.clone())));
    }
    let written = dest.replace(&merge_for_update(desired, actual)).await?;
    engine.metrics.synced(direction_of(flow), &flow.resource_name());
    tracing::debug!(resource = %flow.target.id, object = %dest.object, side = %dest.side, "updated copy");
    keep_if_verified(flow, desired, &written.to_value());
    Ok(Some(Written::Raw(Box::new(written))))
}

/// The `ferry.dev/desired-hash` annotation of `obj`.
fn desired_hash(obj: &Value) -> Option<&str> {
    obj.get("metadata")?
        .get("annotations")?
        .get(DESIRED_HASH_ANNOTATION)?
        .as_str()
}

/// Lets the copies' store keep `copy` without its content if it matches `desired`.
/// Downsync only: an upsynced copy with a status subresource is the body of the
/// status write that follows, so it stays whole.
fn keep_if_verified(flow: &Flow, desired: &Value, copy: &Value) {
    if flow.target.direction == Direction::Downsync && !needs_update(desired, copy) {
        flow.copies.keep_verified(copy);
    }
}

fn direction_of(flow: &Flow) -> SyncDirection {
    match flow.target.direction {
        Direction::Downsync => SyncDirection::downsync,
        Direction::Upsync => SyncDirection::upsync,
    }
}

/// Creates the copy; if an object with that identity already exists, adopts it
/// (overwriting it, as KubeStellar does since its PR #1105) unless the source is
/// create-only, and records an Event on it.
async fn create_or_adopt(
    engine: &Engine,
    flow: &Flow,
    key: &Key,
    dest: &Writer<'_>,
    source: &Value,
    desired: &Value,
) -> Result<Option<Written>, SyncError> {
    let marks = &*engine.profile.marks;
    let direction = flow.target.direction;
    let mut created = dest.create(desired).await;
    if let Err(e) = &created {
        if e.code() == Some(404) && dest.object.namespace.is_some() {
            let source_namespace = key.source().and_then(|s| s.namespace.as_deref());
            dest.ensure_namespace(source_namespace).await?;
            created = dest.create(desired).await;
        }
    }
    match created {
        Ok(written) => {
            engine.metrics.synced(direction_of(flow), &flow.resource_name());
            tracing::debug!(resource = %flow.target.id, object = %dest.object, side = %dest.side, "created copy");
            keep_if_verified(flow, desired, &written.to_value());
            Ok(Some(Written::Raw(Box::new(written))))
        }
        Err(e) if e.code() == Some(409) => {
            let existing = dest.get().await?;
            let ours = marks.is_own_copy(&existing);
            if !ours && marks.is_create_only(source, direction) {
                tracing::debug!(object = %dest.object, "create-only object already exists downstream; leaving it alone");
                return Ok(None);
            }
            if ours && !needs_update(desired, &existing) {
                return Ok(Some(Written::Unchanged(existing)));
            }
            let written = dest.replace(&merge_for_update(desired, &existing)).await?;
            engine.metrics.synced(direction_of(flow), &flow.resource_name());
            if !ours {
                let mark = marks.describe(direction);
                let dest_ty = flow.object_type(flow.dest_side());
                let message = format!(
                    "syncer {} adopted this pre-existing {} as the {} copy of {} {} and now keeps it in sync (marked {mark})",
                    engine.name,
                    dest_ty.kind,
                    flow.dest_side(),
                    flow.source_side(),
                    key.source().unwrap_or(key.dest()),
                );
                tracing::info!(resource = %flow.target.id, object = %dest.object, side = %dest.side, "adopted an existing object");
                events::post(
                    dest.client(),
                    &written.to_value(),
                    dest_ty,
                    EventType::Normal,
                    "Adopted",
                    message,
                    &engine.name,
                );
            }
            Ok(Some(Written::Raw(Box::new(written))))
        }
        Err(e) => Err(e),
    }
}

/// Posts a Warning Event on the upstream object for a failure the user can act on
/// (once per distinct message; unreachable servers are not reported this way).
pub fn report_failure(engine: &Engine, flow: &Flow, key: &Key, error: &SyncError) {
    if error.is_transport() || matches!(error.code(), Some(409)) {
        return;
    }
    let message = error.to_string();
    {
        let mut last = engine.last_errors.lock();
        if last.get(key) == Some(&message) {
            return;
        }
        last.insert(key.clone(), message.clone());
    }
    let upstream_obj = match flow.target.direction {
        Direction::Downsync => key.source().and_then(|s| flow.sources.get(s)),
        Direction::Upsync => flow.copies.get(key.dest()),
    };
    let upstream_key = match flow.target.direction {
        Direction::Downsync => key.source(),
        Direction::Upsync => Some(key.dest()),
    };
    let cluster = upstream_key.and_then(|k| k.cluster.as_deref());
    if let Some(obj) = upstream_obj {
        events::post(
            engine.up.client_in(cluster),
            &obj,
            flow.object_type(Side::Upstream),
            EventType::Warning,
            "SyncFailed",
            message,
            &engine.name,
        );
    }
}
