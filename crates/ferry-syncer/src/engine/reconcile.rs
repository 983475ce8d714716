//! Reconciling one object, level-based and idempotent: desired (the transformed source)
//! against actual (this syncer's copy) → create, adopt, update, delete, or write status.
//! Nothing is written when nothing changed.

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use serde_json::Value;

use ferry_api::drift::MAX_DRIFT_FIELDS;
use ferry_api::well_known::DESIRED_HASH_ANNOTATION;

use super::events::{self, EventType};
use super::finalizer_patch;
use super::flow::Flow;
use super::problems::{permission_message, Problem, ProblemKey};
use super::raw::RawObject;
use super::store::{ObjectRef, ObjectStore};
use super::{Engine, Key, NamespaceAt, SYNC_LOG};
use crate::metrics::SyncDirection;
use crate::selection::Direction;
use crate::side::Side;
use crate::transform::{
    desired_copy_with, has_owned_downstream, keep_owned_downstream, merge_for_update, needs_update,
    restored_fields, status_differs, three_way_update, with_status,
};

/// Field manager of every write.
pub const FIELD_MANAGER: &str = "ferry-syncer";

/// Why reconciling an object failed. Every message names the object and the side.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A request failed.
    #[error("{action} {resource} {object} on the {side} side: {}", super::refusals::server_message(.source))]
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
    /// The destination namespace exists but is not the one this syncer maps the source's
    /// namespace to (kcp TMC: its `kcp.io/namespace-locator` differs or is missing).
    #[error("namespace collision: the {side} namespace {namespace:?} {found}, so {object} (from upstream namespace {source_namespace}) is not synced into it; delete or rename that namespace, and the syncer creates its own")]
    NamespaceCollision {
        /// Where.
        side: Side,
        /// The destination namespace.
        namespace: String,
        /// What the namespace holds instead (`has no kcp.io/namespace-locator annotation`).
        found: String,
        /// The object that was to be synced.
        object: String,
        /// The source's namespace, with its logical cluster.
        source_namespace: String,
    },
    /// A cluster-scoped destination object of the copy's name exists but is not that
    /// copy (kcp TMC: a PersistentVolume of another workspace, or nobody's).
    #[error("collision: the {side} {resource} {object:?} {found}, so {source_object} is not synced onto it; delete or rename one of them")]
    Collision {
        /// Where.
        side: Side,
        /// The resource (`v1/persistentvolumes`).
        resource: String,
        /// The destination object's name.
        object: String,
        /// What it holds instead (`belongs to {...} (kcp.io/namespace-locator)`).
        found: String,
        /// The source, with its logical cluster.
        source_object: String,
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

/// How often [`Writer::change_finalizer`] sends a patch that keeps losing races: more
/// than any object's writers but a few.
const FINALIZER_ATTEMPTS: u32 = 16;

/// A patch of an upstream object's finalizers.
enum FinalizerPatch {
    /// RFC 6902 (`application/json-patch+json`).
    Json(Value),
    /// RFC 7386 (`application/merge-patch+json`), conditional on a `resourceVersion`.
    Merge(Value),
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
            .client_for(self.flow.target.direction, self.object.cluster.as_deref())
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
                        message: permission_message(
                            self.side,
                            verb,
                            &shown,
                            &super::refusals::server_message(&source),
                        ),
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

    /// Sends `request`, a write of this object based on its version `replaced`, and
    /// records the answer in the store (see [`ObjectStore::written`]). Watch events of
    /// the object that arrive meanwhile wait for the answer: the write's own echo then
    /// queues nothing, anything else queues the object again.
    async fn write(
        &self,
        action: &'static str,
        verb: &str,
        subresource: Option<&str>,
        replaced: Option<&str>,
        request: impl std::future::Future<Output = Result<RawObject, kube::Error>>,
    ) -> Result<RawObject, SyncError> {
        let mut in_flight = WriteInFlight::begin(self);
        let result = self.send(action, verb, subresource, request).await;
        if let Ok(written) = &result {
            self.store().written(written, replaced);
            in_flight.answered = written.metadata.resource_version.clone();
        }
        result
    }

    async fn create(&self, obj: &Value) -> Result<RawObject, SyncError> {
        let body = encode(obj).map_err(|e| self.fail("create", "create", None, e))?;
        let pp = post_params();
        let api = self.api();
        self.write("create", "create", None, based_on(obj), api.create(&pp, &body))
            .await
    }

    async fn get(&self) -> Result<Value, SyncError> {
        let api = self.api();
        let got = self.send("get", "get", None, api.get(&self.object.name)).await?;
        Ok(got.to_value())
    }

    /// A JSON patch (RFC 6902) of this object based on its version `replaced`, recorded
    /// in the store as [`Writer::write`] does.
    async fn json_patch_recorded(
        &self,
        patch: &Value,
        replaced: Option<&str>,
    ) -> Result<RawObject, SyncError> {
        let url = format!(
            "{}/{}?fieldManager={FIELD_MANAGER}",
            self.api().resource_url(),
            self.object.name
        );
        let request = http::Request::patch(url)
            .header(http::header::CONTENT_TYPE, "application/json-patch+json")
            .body(patch.to_string().into_bytes());
        let client = self.client();
        let sent = async move {
            client
                .request::<RawObject>(request.map_err(kube::Error::HttpError)?)
                .await
        };
        self.write("update", "patch", None, replaced, sent).await
    }

    /// Changes this syncer's finalizer on this upstream object, read as `read`, with
    /// the patch `change` makes of the object as last read (`None`: nothing left to
    /// change), without losing a race to the other clusters' syncers changing theirs
    /// (see [`finalizer_patch`]): a patch refused because the object changed since it
    /// was read (409, or 422 for a failed `test`) reads it again and is made anew.
    /// A refusal on an object that did not change stands, as does one after
    /// [`FINALIZER_ATTEMPTS`].
    ///
    /// Returns the object as written, or `None` if nothing was: nothing left to change,
    /// or the object read is gone (deleted, or deleted and made again, which a patch
    /// made for the old one never touches); its watch event brings its key back.
    async fn change_finalizer(
        &self,
        read: &Value,
        change: impl Fn(&Value) -> Option<FinalizerPatch>,
    ) -> Result<Option<RawObject>, SyncError> {
        let mut fresh = None;
        for attempt in 1.. {
            let current = fresh.as_ref().unwrap_or(read);
            let written = match change(current) {
                None => return Ok(None),
                Some(FinalizerPatch::Json(patch)) => {
                    self.json_patch_recorded(&patch, based_on(current)).await
                }
                Some(FinalizerPatch::Merge(patch)) => {
                    self.merge_patch_recorded(&patch, based_on(current)).await
                }
            };
            let refused = match written {
                Err(e) if matches!(e.code(), Some(409 | 422)) && attempt < FINALIZER_ATTEMPTS => e,
                Err(e) if e.code() == Some(404) => return Ok(None),
                other => return other.map(Some),
            };
            let again = match self.get().await {
                Err(e) if e.code() == Some(404) => return Ok(None),
                other => other?,
            };
            if uid_of(&again) != uid_of(read) {
                return Ok(None);
            }
            if based_on(&again) == based_on(current) {
                return Err(refused);
            }
            fresh = Some(again);
        }
        unreachable!("the loop returns by its last attempt")
    }

    async fn replace(&self, obj: &Value) -> Result<RawObject, SyncError> {
        let body = encode(obj).map_err(|e| self.fail("update", "update", None, e))?;
        let pp = post_params();
        let api = self.api();
        let name = &self.object.name;
        self.write(
            "update",
            "update",
            None,
            based_on(obj),
            api.replace(name, &pp, &body),
        )
        .await
    }

    async fn replace_status(&self, obj: &Value) -> Result<RawObject, SyncError> {
        let body = encode(obj).map_err(|e| self.fail("update status of", "update", Some("status"), e))?;
        let pp = post_params();
        let api = self.api();
        let name = &self.object.name;
        self.write(
            "update status of",
            "update",
            Some("status"),
            based_on(obj),
            api.replace_status(name, &pp, &body),
        )
        .await
    }

    async fn delete(&self, actual: &Value) -> Result<(), SyncError> {
        // A copy that carries this syncer's finalizer (an upsynced copy under kcp TMC)
        // would wait for it forever: it goes first.
        if let Some(finalizer) = self.engine.profile.marks.finalizer() {
            if has_finalizer(actual, &finalizer) {
                let remaining: Vec<Value> = finalizers_of(actual)
                    .into_iter()
                    .filter(|f| f.as_str() != Some(finalizer.as_str()))
                    .collect();
                let patch = serde_json::json!({ "metadata": {
                    "finalizers": remaining,
                    "resourceVersion": based_on(actual),
                } });
                match self.merge_patch(&patch).await {
                    Err(e) if e.code() == Some(404) => return Ok(()),
                    other => other.map(drop)?,
                }
            }
        }
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
    /// `source` is the object's source. A profile that owns its destination namespaces
    /// ([`crate::profile::Mapping::dest_namespace`]) gets its namespace object created,
    /// and an existing one is checked for a collision.
    async fn ensure_namespace(&self, source: Option<&ObjectRef>) -> Result<(), SyncError> {
        let Some(namespace) = self.object.namespace.clone() else {
            return Ok(());
        };
        if self.namespace_is_copied(source) {
            return Err(SyncError::NamespaceMissing {
                side: self.side,
                namespace,
                object: self.object.to_string(),
            });
        }
        let owned = self.owned_namespace(source, &namespace);
        match self.create_namespace(&namespace, owned.as_ref()).await {
            Ok(()) => Ok(()),
            Err(e) if code_of(&e) == Some(409) => match (owned, source) {
                (Some(wanted), Some(source)) => self.check_namespace(&namespace, &wanted, source).await,
                _ => Ok(()),
            },
            Err(e) => Err(self.namespace_failed("create", &namespace, e)),
        }
    }

    /// Before the first create into a namespace of the workload cluster: creates it,
    /// once per namespace for all the objects going there (see
    /// [`Engine::namespace_cell`]). A namespace that is there already counts as made;
    /// any other answer is left to the object's own create, which then fails and
    /// ensures the namespace as before. Upstream namespaces are the workspace owners'
    /// to make: nothing is created there ahead of need.
    async fn namespace_first(&self, source: Option<&ObjectRef>) {
        let Some(namespace) = &self.object.namespace else {
            return;
        };
        if self.side != Side::Downstream
            || !self.flow.resource_id(self.side).namespaced
            || self.namespace_is_copied(source)
        {
            return;
        }
        let cell = self.engine.namespace_cell(NamespaceAt {
            side: self.side,
            direction: self.flow.target.direction,
            cluster: self.object.cluster.clone(),
            name: namespace.clone(),
        });
        let owned = self.owned_namespace(source, namespace);
        let _ = cell
            .get_or_try_init(|| async {
                match self.create_namespace(namespace, owned.as_ref()).await {
                    Err(e) if code_of(&e) != Some(409) => Err(e),
                    _ => Ok(()),
                }
            })
            .await;
    }

    /// Whether selection downsyncs the source's Namespace object itself, so its own
    /// flow creates the namespace, as a marked copy.
    fn namespace_is_copied(&self, source: Option<&ObjectRef>) -> bool {
        let source_namespace = source.and_then(|s| s.namespace.as_deref());
        self.side == Side::Downstream
            && source_namespace.is_some_and(|ns| self.engine.profile.selection.copies_namespace(ns))
    }

    /// The namespace object the profile wants for `namespace`, if it owns it.
    fn owned_namespace(&self, source: Option<&ObjectRef>, namespace: &str) -> Option<Value> {
        source.and_then(|s| {
            self.engine
                .profile
                .mapping
                .dest_namespace(&self.flow.target, s, namespace)
        })
    }

    /// Creates `namespace` (as `owned`, if the profile owns it).
    async fn create_namespace(&self, namespace: &str, owned: Option<&Value>) -> Result<(), kube::Error> {
        let body = owned.cloned().unwrap_or_else(|| {
            serde_json::json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": namespace } })
        });
        let api: Api<RawObject> = Api::all_with(self.client(), &namespaces_resource());
        self.engine.side(self.side).limiter.acquire().await;
        api.create(&post_params(), &encode(&body)?).await?;
        tracing::info!(side = %self.side, %namespace, "created namespace for {}", self.object);
        Ok(())
    }

    fn namespace_failed(&self, action: &'static str, namespace: &str, source: kube::Error) -> SyncError {
        SyncError::Request {
            action,
            side: self.side,
            resource: "v1/namespaces".into(),
            object: namespace.to_string(),
            source,
        }
    }

    /// Checks that the existing namespace `namespace` is `wanted` (every annotation of
    /// `wanted` has its value there): otherwise it is a namespace collision.
    async fn check_namespace(
        &self,
        namespace: &str,
        wanted: &Value,
        source: &ObjectRef,
    ) -> Result<(), SyncError> {
        // A namespace this syncer made (and still holds as a copy) is its own.
        let ours = self.engine.flows().iter().any(|flow| {
            flow.target.direction == Direction::Downsync
                && flow.dest.id.is_namespaces()
                && flow.copies.get(&ObjectRef::new(None, namespace)).is_some()
        });
        if ours {
            return Ok(());
        }
        let api: Api<RawObject> = Api::all_with(self.client(), &namespaces_resource());
        self.engine.side(self.side).limiter.acquire().await;
        let existing = match api.get(namespace).await {
            Ok(ns) => ns.to_value(),
            Err(e) if code_of(&e) == Some(404) => return Ok(()),
            Err(e) => return Err(self.namespace_failed("get", namespace, e)),
        };
        let Some(found) = claim_mismatch(&existing, wanted) else {
            return Ok(());
        };
        let source_namespace = match (&source.cluster, &source.namespace) {
            (Some(cluster), Some(ns)) => format!("{cluster}|{ns}"),
            (_, Some(ns)) => ns.clone(),
            (Some(cluster), None) => format!("{cluster}|{}", source.name),
            (None, None) => source.name.clone(),
        };
        Err(SyncError::NamespaceCollision {
            side: self.side,
            namespace: namespace.to_string(),
            found,
            object: self.object.to_string(),
            source_namespace,
        })
    }

    /// Checks that the existing cluster-scoped object `existing` at this writer's key
    /// carries every annotation of `wanted` ([`crate::profile::Mapping::dest_claim`]).
    // The error is as large as every other reconcile step's (all async, where the lint
    // does not look); boxing it here alone would buy nothing.
    #[allow(clippy::result_large_err)]
    fn check_claim(&self, existing: &Value, wanted: &Value, source: &ObjectRef) -> Result<(), SyncError> {
        match claim_mismatch(existing, wanted) {
            None => Ok(()),
            Some(found) => Err(SyncError::Collision {
                side: self.side,
                resource: self.resource(None),
                object: self.object.name.clone(),
                found,
                source_object: match &source.cluster {
                    Some(cluster) => format!("{cluster}|{}", source.name),
                    None => source.name.clone(),
                },
            }),
        }
    }

    /// A JSON merge patch based on version `replaced` of the object, recorded in the
    /// store as [`Writer::write`] does.
    async fn merge_patch_recorded(
        &self,
        patch: &Value,
        replaced: Option<&str>,
    ) -> Result<RawObject, SyncError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let api = self.api();
        let patch = Patch::Merge(patch);
        let request = api.patch(&self.object.name, &params, &patch);
        self.write("update", "patch", None, replaced, request).await
    }

    /// A JSON merge patch (a `resourceVersion` in it makes it conditional).
    async fn merge_patch(&self, patch: &Value) -> Result<RawObject, SyncError> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        let api = self.api();
        let patch = Patch::Merge(patch);
        let written = self
            .send(
                "update",
                "patch",
                None,
                api.patch(&self.object.name, &params, &patch),
            )
            .await?;
        Ok(written)
    }

    /// Server-side apply of `obj` by `manager`, forced (kcp TMC's writes).
    async fn apply(&self, obj: &Value, manager: &str) -> Result<RawObject, SyncError> {
        let mut body = obj.clone();
        if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
        }
        let params = PatchParams::apply(manager).force();
        let api = self.api();
        let patch = Patch::Apply(&body);
        // What the store held when the apply was sent, not when its answer is handled:
        // the watch may deliver a newer version first (a controller's status on the
        // object just written), which the older answer must not replace.
        let held = self.store().resource_version(self.object);
        self.write(
            "apply",
            "patch",
            None,
            held.as_deref(),
            api.patch(&self.object.name, &params, &patch),
        )
        .await
    }
}

/// A write of a [`Writer`]'s object in flight (see [`ObjectStore::begin_write`]); when
/// it ends (answered, failed or given up) a change its watch held back that was not
/// the write's echo queues the object.
struct WriteInFlight<'a> {
    writer: &'a Writer<'a>,
    /// The resourceVersion the write's answer carried.
    answered: Option<String>,
}

impl<'a> WriteInFlight<'a> {
    fn begin(writer: &'a Writer<'a>) -> Self {
        writer.store().begin_write(writer.object);
        WriteInFlight {
            writer,
            answered: None,
        }
    }
}

impl Drop for WriteInFlight<'_> {
    fn drop(&mut self) {
        let w = self.writer;
        if w.store().end_write(w.object, self.answered.as_deref()) {
            let mapping = &*w.engine.profile.mapping;
            let key = if w.side == w.flow.dest_side() {
                w.flow.copy_key(mapping, w.object.clone())
            } else {
                w.flow.source_key(mapping, w.object.clone())
            };
            w.engine.queue.add(key);
        }
    }
}

/// How `existing` fails to carry every annotation of `wanted`'s metadata
/// (`belongs to X (annotation)`), or `None` if it carries them all.
fn claim_mismatch(existing: &Value, wanted: &Value) -> Option<String> {
    let existing_annotations = existing.pointer("/metadata/annotations");
    let wanted_annotations = wanted.pointer("/metadata/annotations").and_then(Value::as_object);
    let (annotation, _) = wanted_annotations
        .into_iter()
        .flatten()
        .find(|(k, v)| existing_annotations.and_then(|a| a.get(k.as_str())) != Some(*v))?;
    Some(
        match existing_annotations
            .and_then(|a| a.get(annotation.as_str()))
            .and_then(Value::as_str)
        {
            Some(other) => format!("belongs to {other} ({annotation})"),
            None => format!("exists without a {annotation} annotation"),
        },
    )
}

fn namespaces_resource() -> kube::core::ApiResource {
    kube::core::ApiResource {
        group: String::new(),
        version: "v1".into(),
        api_version: "v1".into(),
        kind: "Namespace".into(),
        plural: "namespaces".into(),
    }
}

/// The finalizers of `obj`.
fn finalizers_of(obj: &Value) -> Vec<Value> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn uid_of(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/uid").and_then(Value::as_str)
}

fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    finalizers_of(obj).iter().any(|f| f.as_str() == Some(finalizer))
}

/// Releases the upstream source `raw` (key `source_key`) whose copy is gone: its
/// finalizer (and the profile's other marks of responsibility) removed, once the
/// destination confirms the copy is not there (the copies' store only holds objects
/// carrying this syncer's label).
async fn release_source(
    engine: &Engine,
    flow: &Flow,
    key: &Key,
    source_key: &ObjectRef,
    dest: &Writer<'_>,
    raw: &Value,
) -> Result<(), SyncError> {
    let marks = &*engine.profile.marks;
    if held_with(engine, raw).is_none() {
        return Ok(());
    }
    match dest.get().await {
        Err(e) if e.code() == Some(404) => {}
        Err(e) => return Err(e),
        // Still there (not labelled as this syncer's any more, or being deleted): its
        // deletion event brings the key back.
        Ok(copy) => {
            if !is_deleting(&copy) && !marks.is_own_copy(&copy) {
                tracing::info!(object = %dest.object, "the copy lost this syncer's label; the source stays held until it is gone");
            }
            return Ok(());
        }
    }
    if !engine
        .profile
        .mapping
        .before_release(&flow.target, source_key, raw)
        .await
    {
        engine.queue_after(key.clone(), std::time::Duration::from_millis(200));
        return Ok(());
    }
    release_source_now(engine, flow, source_key, raw).await
}

/// This syncer's finalizer, if the upstream source `raw` carries it (the syncer then
/// holds the source until it lets go).
fn held_with(engine: &Engine, raw: &Value) -> Option<String> {
    engine
        .profile
        .marks
        .finalizer()
        .filter(|finalizer| has_finalizer(raw, finalizer))
}

/// Removes this syncer's finalizer (and the profile's other marks of responsibility)
/// from the upstream source `raw` (key `source_key`), if it carries it. While the
/// source stays, the patch is based on `raw`'s resourceVersion, so a newer source
/// (scheduled here again, say) is a conflict and a retry. A source being deleted is
/// scheduled nowhere again, and every cluster's syncer lets go of it at once: there
/// only this syncer's marks are taken out, by a JSON patch that races no other syncer
/// ([`finalizer_patch::remove`]).
async fn release_source_now(
    engine: &Engine,
    flow: &Flow,
    source_key: &ObjectRef,
    raw: &Value,
) -> Result<(), SyncError> {
    let marks = &*engine.profile.marks;
    let Some(finalizer) = held_with(engine, raw) else {
        return Ok(());
    };
    let pinned = |read: &Value| {
        let remaining: Vec<Value> = finalizers_of(read)
            .into_iter()
            .filter(|f| f.as_str() != Some(finalizer.as_str()))
            .collect();
        let mut patch = marks.release_source_patch(remaining);
        patch["metadata"]["resourceVersion"] = based_on(read).map(Value::from).unwrap_or(Value::Null);
        patch
    };
    let up = Writer {
        engine,
        flow,
        side: Side::Upstream,
        object: source_key,
    };
    let released = if is_deleting(raw) {
        up.change_finalizer(raw, |read| {
            if !has_finalizer(read, &finalizer) {
                return None;
            }
            let release = marks.release_source_patch(vec![]);
            Some(match finalizer_patch::remove(read, &finalizer, &release) {
                Some(patch) => FinalizerPatch::Json(patch),
                None => FinalizerPatch::Merge(pinned(read)),
            })
        })
        .await
        .map(drop)
    } else {
        up.merge_patch(&pinned(raw)).await.map(drop)
    };
    match released {
        Ok(()) => {
            tracing::debug!(object = %source_key, "released the source; this cluster no longer holds it");
            Ok(())
        }
        Err(e) if e.code() == Some(404) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The status held, as JSON text, in `source`'s annotation `name`.
fn annotated_status(source: &Value, name: &str) -> Option<Value> {
    let text = source.pointer("/metadata/annotations")?.get(name)?.as_str()?;
    serde_json::from_str(text).ok()
}

/// Whether the upstream object reports state this syncer returned: status
/// goes back from copies only where the profile returns it, and never for CRDs
/// (they keep their own).
fn returns_status(engine: &Engine, flow: &Flow) -> bool {
    engine.return_status
        && flow.target.id.group != "apiextensions.k8s.io"
        && engine
            .profile
            .mapping
            .returns_status(&flow.target, flow.status_subresource)
}

/// The source `raw` (key `source_key`) stays but leaves this cluster (kcp TMC:
/// drained, rescheduled or unscheduled from the SyncTarget): what this
/// cluster reported into its status (a Service's load-balancer ingress, a
/// Deployment's replicas) is cleared, so the object does not keep the old
/// cluster's state; the cluster it moves to reports its own. Only a status
/// that is still this copy's is cleared — one the new cluster already wrote
/// stays (the write is based on the source's resourceVersion, so a concurrent
/// report makes it a conflict and a retry).
async fn clear_reported_status(
    engine: &Engine,
    flow: &Flow,
    source_key: &ObjectRef,
    raw: &Value,
    copy: &Value,
) -> Result<(), SyncError> {
    if !returns_status(engine, flow) {
        return Ok(());
    }
    let Some(reported) = engine
        .profile
        .mapping
        .returned_status(&flow.target, source_key, raw, copy)
    else {
        return Ok(());
    };
    let current = raw.get("status");
    if current.is_none_or(|s| s.as_object().is_some_and(|o| o.is_empty())) || current != Some(&reported) {
        return Ok(());
    }
    let up = Writer {
        engine,
        flow,
        side: Side::Upstream,
        object: source_key,
    };
    let body = with_status(raw, serde_json::json!({}));
    let written = if flow.status_subresource {
        up.replace_status(&body).await
    } else {
        up.replace(&body).await
    };
    match written {
        Ok(_) => {
            tracing::debug!(object = %source_key, "cleared the status this cluster reported; the object left it");
            Ok(())
        }
        Err(e) if e.code() == Some(404) => Ok(()),
        Err(e) => Err(e),
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
    let raw_source = source.clone();
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
                && !profile.selection.is_cluster_local(id, &source_key.name, &s)
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
            if direction == Direction::Downsync && !profile.mapping.propagates_deletion() {
                // Kept, and still this syncer's: deletion turned back on removes it.
                return Ok(());
            }
            let namespace_copy = direction == Direction::Downsync && flow.dest.id.is_namespaces();
            if let (true, Some(delay)) = (namespace_copy, profile.namespace_clean_delay) {
                if !engine.namespace_may_go(&key.dest().name, delay, key) {
                    // The namespace left this target but lives on upstream: it is let go
                    // now, and its copy stays for the delay (kept track of by its
                    // label). Held for the delay, it would stay "leaving" this target
                    // that long, so scheduling it back here would wait it out too.
                    if let (true, Some(source_key), Some(raw)) = (source_alive, key.source(), &raw_source) {
                        release_source_now(engine, flow, source_key, raw).await?;
                    }
                    return Ok(());
                }
            }
            let holds_wanted_copies =
                namespace_copy && source_alive && engine.keeps_copies_in(&key.dest().name);
            if let (Direction::Downsync, false, true, Some(source_key), Some(raw)) = (
                direction,
                namespace_copy,
                source_alive,
                key.source(),
                raw_source.as_deref(),
            ) {
                clear_reported_status(engine, flow, source_key, raw, copy).await?;
            }
            if holds_wanted_copies {
                dest.release().await?;
                tracing::info!(namespace = %key.dest(), "released the namespace copy (no longer wanted, but it holds other copies)");
            } else {
                dest.delete(copy).await?;
                if !engine.drifts.is_empty() && engine.drifts.forget(&engine.upstream_object(flow, key)) {
                    engine.status_now.notify_one();
                }
                engine.metrics.synced(metric, &resource);
                tracing::info!(target: SYNC_LOG, %resource, object = %key, side = %dest.side, "deleted copy");
            }
        } else if let (Direction::Downsync, Some(source_key), Some(raw)) =
            (direction, key.source(), &raw_source)
        {
            // The copy is gone: the source no longer waits for it.
            release_source(engine, flow, key, source_key, &dest, raw).await?;
        }
        return Ok(());
    };
    if let Some(source_key) = key.source() {
        if profile.mapping.dest_ref(&flow.target, source_key) != *key.dest() {
            // Queued before the object's copy was given another name (an api-syncagent
            // PublishedResource replaced while this key waited out a backoff): writing
            // the copy it names would bring back one already moved. The current key
            // does the work; the copy under the old name is judged on its own (the
            // profile deletes it once the copy under the new name exists).
            engine
                .queue
                .add(flow.source_key(&*profile.mapping, source_key.clone()));
            if flow.copies.get(key.dest()).is_some() {
                let copy_key = flow.copy_key(&*profile.mapping, key.dest().clone());
                if copy_key.source().is_none() {
                    engine.queue.add(copy_key);
                }
            }
            return Ok(());
        }
    }
    if direction == Direction::Downsync && flow.dest.id.is_namespaces() {
        engine.namespace_wanted(&key.dest().name);
    }
    // The source carries this syncer's finalizer before its copy exists, so that its
    // deletion waits for the copy's.
    let source = match (direction, marks.finalizer(), key.source()) {
        (Direction::Downsync, Some(finalizer), Some(_)) if has_finalizer(&source, &finalizer) => {
            if let Some(uid) = uid_of(&source) {
                let mut appended = flow.appended.lock();
                if !appended.is_empty() {
                    appended.remove(uid);
                }
            }
            source
        }
        (Direction::Downsync, Some(finalizer), Some(source_key)) => {
            let up = Writer {
                engine,
                flow,
                side: Side::Upstream,
                object: source_key,
            };
            let uid = uid_of(&source).map(str::to_string);
            // Appended before, but the store does not show it yet: read the object
            // rather than append a second time.
            let appended_before = uid.as_ref().is_some_and(|u| flow.appended.lock().contains(u));
            if appended_before {
                let read = match up.get().await {
                    Err(e) if e.code() == Some(404) => return Ok(()),
                    other => other?,
                };
                if uid_of(&read) == uid.as_deref() && has_finalizer(&read, &finalizer) {
                    if let Some(u) = &uid {
                        flow.appended.lock().remove(u);
                    }
                    return Ok(());
                }
            }
            let added = up
                .change_finalizer(&source, |read| {
                    if has_finalizer(read, &finalizer) {
                        return None;
                    }
                    Some(match finalizer_patch::append(read, &finalizer) {
                        Some(patch) => FinalizerPatch::Json(patch),
                        None => {
                            let mut finalizers = finalizers_of(read);
                            finalizers.push(Value::String(finalizer.clone()));
                            FinalizerPatch::Merge(serde_json::json!({ "metadata": {
                                "finalizers": finalizers,
                                "resourceVersion": based_on(read),
                            } }))
                        }
                    })
                })
                .await?;
            // Held as the source now (recorded in the store), so its watch event is an
            // echo, not a change that reconciles the object a second time. Nothing
            // written: the object changed under this reconcile, and its watch event
            // brings the key back.
            let Some(patched) = added else {
                return Ok(());
            };
            if let Some(u) = uid {
                flow.appended.lock().insert(u);
            }
            std::sync::Arc::new(patched.to_value())
        }
        _ => source,
    };

    let desired = desired_copy_with(
        &source,
        direction,
        key.dest(),
        flow.object_type(flow.dest_side()),
        marks,
        |copy| {
            if let Some(source_key) = key.source() {
                profile.mapping.transform(&flow.target, source_key, &source, copy);
            }
        },
    );
    let written = match &copy {
        Some((actual, verified)) => {
            // A cluster-wide copy of this name may be another source's (kcp TMC: another
            // workspace's volume): never written over.
            // A verified copy is kept without the marks that say whose it is: one
            // matching the desired hash is this source's; any other is read whole.
            if let Some(source_key) = key.source() {
                if let Some(wanted) = cluster_wide_claim(engine, flow, source_key) {
                    if !*verified {
                        dest.check_claim(actual, &wanted, source_key)?;
                    } else if desired_hash(&desired) != desired_hash(actual) {
                        dest.check_claim(&dest.get().await?, &wanted, source_key)?;
                    }
                }
            }
            update(engine, flow, key, &dest, &source, &desired, actual, *verified).await?
        }
        None => create_or_adopt(engine, flow, key, &dest, &source, &desired).await?,
    };

    match direction {
        Direction::Downsync => {
            if let Some(source_key) = key.source() {
                profile.mapping.copy_synced(&flow.target, source_key);
            }
            // Reported state: the copy's status goes back to the source. The copy in the
            // store is what the destination last reported. CRDs keep their own status.
            let returnable = returns_status(engine, flow);
            if let (true, Some((actual, _)), Some(source_key)) = (returnable, &copy, key.source()) {
                if let Some(status) =
                    profile
                        .mapping
                        .returned_status(&flow.target, source_key, &source, actual)
                {
                    let up = Writer {
                        engine,
                        flow,
                        side: Side::Upstream,
                        object: source_key,
                    };
                    if let Some(annotation) = profile.mapping.status_annotation(&flow.target, &source) {
                        if annotated_status(&source, &annotation).as_ref() != Some(&status) {
                            let patch = serde_json::json!({ "metadata": { "annotations": {
                                annotation.as_str(): status.to_string(),
                            } } });
                            up.merge_patch(&patch).await?;
                            engine.metrics.synced(SyncDirection::status, &resource);
                            tracing::info!(target: SYNC_LOG, resource = %flow.target.id, object = %source_key, side = %Side::Upstream, %annotation, "wrote status back into this cluster's annotation");
                        }
                    } else if status_differs(&source, &status) {
                        let body = with_status(&source, status);
                        if flow.status_subresource {
                            up.replace_status(&body).await?;
                        } else {
                            up.replace(&body).await?;
                        }
                        engine.metrics.synced(SyncDirection::status, &resource);
                        tracing::info!(target: SYNC_LOG, resource = %flow.target.id, object = %source_key, side = %Side::Upstream, "wrote status back");
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
#[allow(clippy::too_many_arguments)]
async fn update(
    engine: &Engine,
    flow: &Flow,
    key: &Key,
    dest: &Writer<'_>,
    source: &Value,
    desired: &Value,
    actual: &Value,
    verified: bool,
) -> Result<Option<Written>, SyncError> {
    let create_only = engine.profile.marks.is_create_only(source, flow.target.direction);
    // Fields the workload cluster owns come from the copy, which must be whole for
    // that; a verified copy with the same hash was verified against them already.
    let (whole, kept);
    let (desired, actual, verified) =
        if has_owned_downstream(desired) && !(verified && desired_hash(desired) == desired_hash(actual)) {
            whole = if verified {
                dest.get().await?
            } else {
                actual.clone()
            };
            kept = keep_owned_downstream(desired, &whole);
            (&kept, &whole, false)
        } else {
            (desired, actual, verified)
        };
    // The hash covers everything `needs_update` compares, so a verified copy still
    // matches a desired object with the same hash.
    let matches = if verified {
        desired_hash(desired).is_some() && desired_hash(desired) == desired_hash(actual)
    } else {
        !needs_update(desired, actual)
    };
    if matches && !verified {
        keep_if_verified(engine, flow, desired, actual);
    }
    // A profile writing by server-side apply (kcp TMC) makes destination namespaces
    // and deletes them, but never rewrites one: kcp's syncer does not, and the
    // cluster role kcp's plugin grants allows no more.
    let namespace_by_apply = apply_manager(engine, flow).is_some() && flow.dest.id.is_namespaces();
    let mapping = &*engine.profile.mapping;
    let source_key = key
        .source()
        .filter(|_| flow.target.direction == Direction::Downsync);
    if create_only || matches || namespace_by_apply {
        // The copy is right, but its last-known state may not be: the state is
        // written beside the create, so a syncer killed in between left a copy
        // without one. Recorded now, or the next update of the source would be a
        // plain one that drops what the service's controllers set.
        if let (Some(s), true, false) = (source_key, mapping.keeps_last_known(), create_only) {
            if !mapping.has_last_known(&flow.target, s).await {
                mapping.remember(&flow.target, s, desired).await;
            }
        }
        return Ok(Some(Written::Unchanged(actual.clone())));
    }
    let last = match source_key {
        Some(s) => mapping.last_known(&flow.target, s).await,
        None => None,
    };
    // Someone else changed the copy since this syncer wrote it for this very
    // source (the copy's desired hash is the source's): what the write puts
    // back is drift. Not where the profile merges three ways (api-syncagent):
    // that keeps such a change until the source changes, as kcp's agent does.
    let drifted = flow.target.direction == Direction::Downsync
        && desired_hash(desired).is_some()
        && desired_hash(desired) == desired_hash(actual)
        && (apply_manager(engine, flow).is_some() || last.is_none());
    let written = match (apply_manager(engine, flow), &last) {
        (Some(manager), _) => dest.apply(desired, manager).await?,
        (None, Some(last)) => {
            // A three-way merge needs the whole copy, not a verified stand-in.
            let whole = if verified {
                dest.get().await?
            } else {
                actual.clone()
            };
            dest.replace(&three_way_update(desired, &whole, last)).await?
        }
        (None, None) => dest.replace(&merge_for_update(desired, actual)).await?,
    };
    if let Some(s) = source_key {
        mapping.remember(&flow.target, s, desired).await;
    }
    engine.metrics.synced(direction_of(flow), &flow.resource_name());
    tracing::info!(target: SYNC_LOG, resource = %flow.target.id, object = %dest.object, side = %dest.side, "updated copy");
    let written_value = written.to_value();
    if drifted {
        record_drift(engine, flow, key, desired, actual, &written_value).await;
    }
    keep_if_verified(engine, flow, desired, &written_value);
    Ok(Some(Written::Raw(Box::new(written))))
}

/// Counts and records the drift a write of `desired` restored
/// ([`restored_fields`] of the copy `before` and as `written`). Logs the
/// fields (never their values, which may be secret), and has the profile mark
/// the upstream object.
async fn record_drift(
    engine: &Engine,
    flow: &Flow,
    key: &Key,
    desired: &Value,
    before: &Value,
    written: &Value,
) {
    let restored = restored_fields(desired, before, written, MAX_DRIFT_FIELDS);
    if restored.is_empty() {
        return;
    }
    let now = ferry_api::timestamp::now();
    let drift = engine
        .drifts
        .record(engine.upstream_object(flow, key), restored, &now);
    engine.metrics.drift_corrected(&flow.resource_name());
    engine.status_now.notify_one();
    tracing::info!(
        resource = %flow.target.id,
        object = %key,
        fields = %drift.fields.join(", "),
        corrections = drift.corrections,
        "restored the copy in the cluster, which someone other than the syncer had changed (drift)"
    );
    let (Some(patch), Some(source_key)) = (engine.profile.marks.drift_mark(&drift), key.source()) else {
        return;
    };
    let up = Writer {
        engine,
        flow,
        side: Side::Upstream,
        object: source_key,
    };
    if let Err(e) = up.merge_patch(&patch).await {
        tracing::debug!(object = %source_key, "recording the drift on the upstream object failed: {e}");
    }
}

/// The field manager of server-side apply, when the profile writes this flow's copies
/// that way (downsync only).
fn apply_manager<'a>(engine: &'a Engine, flow: &Flow) -> Option<&'a str> {
    engine
        .profile
        .marks
        .apply_manager()
        .filter(|_| flow.target.direction == Direction::Downsync)
}

/// Writes a copy this syncer does not hold yet by server-side apply: into a namespace
/// the profile owns (created if missing, refused on a collision), and a Namespace copy
/// only over a namespace that is its own.
async fn apply_new(
    engine: &Engine,
    flow: &Flow,
    key: &Key,
    dest: &Writer<'_>,
    desired: &Value,
    manager: &str,
) -> Result<Option<Written>, SyncError> {
    if let Some(source) = key.source() {
        let mapping = &*engine.profile.mapping;
        let claim = if flow.dest.id.is_namespaces() {
            Some(dest.object.name.clone())
        } else {
            dest.object.namespace.clone()
        };
        if let Some(namespace) = claim {
            if let Some(wanted) = mapping.dest_namespace(&flow.target, source, &namespace) {
                dest.check_namespace(&namespace, &wanted, source).await?;
            }
        }
        if let Some(wanted) = cluster_wide_claim(engine, flow, source) {
            match dest.get().await {
                Ok(existing) => dest.check_claim(&existing, &wanted, source)?,
                Err(e) if e.code() == Some(404) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let mut written = if flow.dest.id.is_namespaces() {
        // Created, never applied (see `update`); one that appeared meanwhile is
        // checked for a collision on the next pass.
        dest.create(desired).await
    } else {
        dest.apply(desired, manager).await
    };
    if let Err(e) = &written {
        if e.code() == Some(404) && dest.object.namespace.is_some() {
            dest.ensure_namespace(key.source()).await?;
            written = dest.apply(desired, manager).await;
        }
    }
    let written = written?;
    engine.metrics.synced(direction_of(flow), &flow.resource_name());
    tracing::info!(target: SYNC_LOG, resource = %flow.target.id, object = %dest.object, side = %dest.side, "applied copy");
    keep_if_verified(engine, flow, desired, &written.to_value());
    Ok(Some(Written::Raw(Box::new(written))))
}

/// What an existing cluster-scoped destination object must carry to be the copy of
/// `source` ([`crate::profile::Mapping::dest_claim`]); never for Namespaces, which
/// [`crate::profile::Mapping::dest_namespace`] covers.
fn cluster_wide_claim(engine: &Engine, flow: &Flow, source: &ObjectRef) -> Option<Value> {
    if flow.dest.id.namespaced || flow.dest.id.is_namespaces() {
        return None;
    }
    engine.profile.mapping.dest_claim(&flow.target, source)
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
/// status write that follows, so it stays whole. Nor where the profile keeps a
/// last-known state: its updates are three-way merges into the whole copy, which a
/// reduced one would have to read back first (a round trip in every update).
fn keep_if_verified(engine: &Engine, flow: &Flow, desired: &Value, copy: &Value) {
    if flow.target.direction == Direction::Downsync
        && !engine.profile.mapping.keeps_last_known()
        && !needs_update(desired, copy)
    {
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
    if let Some(manager) = apply_manager(engine, flow) {
        return apply_new(engine, flow, key, dest, desired, manager).await;
    }
    // The last-known state is recorded beside the create, not after it: the source
    // already holds the finalizer (so a state left by a create that failed goes with
    // it), a retried create records the same state again (a no-op), and an adopted
    // copy is overwritten with `desired`, which is then what the state says. One round
    // trip per object fewer on the way to its copy.
    let remember = match (direction, key.source()) {
        (Direction::Downsync, Some(s)) => Some(engine.profile.mapping.remember(&flow.target, s, desired)),
        _ => None,
    };
    dest.namespace_first(key.source()).await;
    let (mut created, ()) = tokio::join!(dest.create(desired), async {
        if let Some(remember) = remember {
            remember.await;
        }
    });
    if let Err(e) = &created {
        if e.code() == Some(404) && dest.object.namespace.is_some() {
            dest.ensure_namespace(key.source()).await?;
            created = dest.create(desired).await;
        }
    }
    match created {
        Ok(written) => {
            engine.metrics.synced(direction_of(flow), &flow.resource_name());
            tracing::info!(target: SYNC_LOG, resource = %flow.target.id, object = %dest.object, side = %dest.side, "created copy");
            keep_if_verified(engine, flow, desired, &written.to_value());
            Ok(Some(Written::Raw(Box::new(written))))
        }
        Err(e) if e.code() == Some(409) => {
            let existing = dest.get().await?;
            let ours = marks.is_own_copy(&existing);
            let desired = &keep_owned_downstream(desired, &existing);
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
    // A namespace collision is the physical cluster's admin's to resolve: it is
    // reported there too, on the namespace (an upstream virtual workspace may not
    // take Events at all).
    if let SyncError::NamespaceCollision { namespace, .. } = error {
        events::post(
            engine.down.client.clone(),
            &serde_json::json!({ "metadata": { "name": namespace } }),
            &crate::transform::ObjectType::new("v1", "Namespace"),
            EventType::Warning,
            "NamespaceCollision",
            message.clone(),
            &engine.name,
        );
    }
    // So is a cluster-wide collision, on the object in the way.
    if let SyncError::Collision {
        side: Side::Downstream,
        object,
        ..
    } = error
    {
        events::post(
            engine.down.client.clone(),
            &serde_json::json!({ "metadata": { "name": object } }),
            flow.object_type(Side::Downstream),
            EventType::Warning,
            "Collision",
            message.clone(),
            &engine.name,
        );
    }
    if let (Some(obj), true) = (upstream_obj, engine.profile.upstream_takes_events) {
        // A copy refused as sent stays refused until someone changes something:
        // its own reason, so the owner tells it from a passing failure.
        let reason = match error.code() {
            Some(code) if super::refusals::is_refusal(code) => "CopyRefused",
            _ => "SyncFailed",
        };
        events::post(
            engine.up.client_in(cluster),
            &obj,
            flow.object_type(Side::Upstream),
            EventType::Warning,
            reason,
            message,
            &engine.name,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ResourceType;
    use crate::selection::{ResourceId, WatchTarget};
    use serde_json::json;

    fn configmap(rv: &str, data: Value) -> Value {
        json!({ "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": { "name": "c", "namespace": "app", "uid": "u1", "resourceVersion": rv },
                "data": data })
    }

    /// The answer to an apply can be handled after the watch has delivered a newer
    /// version (on a busy machine, a controller's status on the object just written):
    /// the store keeps the newer one. Holding the older one would hide that change
    /// from every later reconcile, as nothing else changes the copy again (a kcp TMC
    /// Deployment whose status never came back after a drain).
    #[tokio::test]
    async fn an_apply_answered_after_a_newer_watch_event_does_not_replace_it() {
        let target = WatchTarget {
            id: ResourceId::new("", "v1", "configmaps", true),
            kind: "ConfigMap".into(),
            direction: Direction::Downsync,
        };
        let flow = Flow::new(1, target.clone(), ResourceType::from(&target), false, false);
        flow.copies.begin_list();
        flow.copies
            .list_item(&RawObject::from_value(&configmap("10", json!({}))).unwrap());
        flow.copies.finish_list();

        // The server: the apply is written as version 11, and before its answer is
        // handled the watch delivers version 12.
        let watched = flow.clone();
        let server = tower::service_fn(move |_request: http::Request<kube::client::Body>| {
            let newer = configmap("12", json!({ "reported": "by a controller" }));
            watched.copies.apply(&RawObject::from_value(&newer).unwrap());
            let answer = serde_json::to_vec(&configmap("11", json!({ "k": "v" }))).unwrap();
            async move {
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .header("content-type", "application/json")
                        .body(kube::client::Body::from(answer))
                        .unwrap(),
                )
            }
        });
        let engine = super::super::tests::engine_with_downstream(Some(kube::Client::new(server, "default")));
        let object = ObjectRef::new(Some("app"), "c");
        let writer = Writer {
            engine: &engine,
            flow: &flow,
            side: Side::Downstream,
            object: &object,
        };
        let written = writer
            .apply(&configmap("10", json!({ "k": "v" })), "syncer")
            .await
            .unwrap();
        assert_eq!(written.metadata.resource_version.as_deref(), Some("11"));
        let held = flow.copies.get(&object).unwrap();
        assert_eq!(held["metadata"]["resourceVersion"], "12", "{held}");
        assert_eq!(held["data"]["reported"], "by a controller");
    }
}
