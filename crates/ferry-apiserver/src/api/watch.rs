//! Watch: newline-delimited JSON events over a streaming response.
//!
//! Semantics follow kube-apiserver: no resourceVersion (or "0") first sends the
//! current objects as ADDED events; `sendInitialEvents=true` does the same and
//! ends them with a BOOKMARK annotated `k8s.io/initial-events-end`; a
//! resourceVersion older than the retained history gets HTTP 200 and an
//! in-stream ERROR event carrying a 410 Expired Status.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use serde_json::{json, Map, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::negotiate::Format;
use super::objects::{columns, served_value, Scope, Selectors};
use crate::status::ApiError;
use crate::storage::{EventFilter, EventType, ObjectKey, StoredObject, WatchError};
use crate::table::{render_table, IncludeObject};

/// How often a watch that asked for bookmarks gets one.
const BOOKMARK_PERIOD: Duration = Duration::from_secs(5);
/// How long a change a view kept from a watcher ([`ScopeFilter::hears`]) waits
/// for one it is sent: past it, the watcher gets the object's state as it is
/// then, so a client's cache is never left behind (a write pinned to the version
/// it holds would be refused for ever). Changes coming faster are sent at most
/// once per object per this delay.
///
/// [`ScopeFilter::hears`]: crate::storage::ScopeFilter::hears
const UNHEARD_DELAY: Duration = Duration::from_secs(1);
/// Longest watch when the client gives no timeoutSeconds (kube-apiserver's
/// --min-request-timeout default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long a read at a resourceVersion the hub has not reached waits for it
/// (kube-apiserver's watch cache waits 3 s).
pub(crate) const FUTURE_RV_WAIT: Duration = Duration::from_secs(3);

struct Encoder {
    format: Format,
    info: crate::registry::ResourceInfo,
    /// `info`'s served apiVersion.
    api_version: String,
    include_object: IncludeObject,
    sent_columns: bool,
}

impl Encoder {
    fn object(&mut self, obj: &StoredObject) -> Value {
        let v = served_value(obj, &self.info);
        match self.format {
            Format::Object => v,
            Format::Metadata => {
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": v["metadata"]})
            }
            Format::Table => {
                let mut t = render_table(
                    &columns(&self.info),
                    std::slice::from_ref(&v),
                    self.include_object,
                    Map::new(),
                    chrono::Utc::now(),
                );
                if self.sent_columns {
                    if let Some(m) = t.as_object_mut() {
                        m.remove("columnDefinitions");
                    }
                }
                self.sent_columns = true;
                t
            }
        }
    }

    fn event(&mut self, kind: &str, obj: &StoredObject) -> Bytes {
        // Fast path: the stored bytes are already the served object.
        let served = match self.format {
            Format::Object => crate::service::served_json(obj, &self.info, &self.api_version),
            _ => None,
        };
        if let Some(json) = served {
            let mut out = Vec::with_capacity(json.len() + 32);
            out.extend_from_slice(b"{\"type\":\"");
            out.extend_from_slice(kind.as_bytes());
            out.extend_from_slice(b"\",\"object\":");
            out.extend_from_slice(json);
            out.extend_from_slice(b"}\n");
            return Bytes::from(out);
        }
        line(&json!({"type": kind, "object": self.object(obj)}))
    }

    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Bytes {
        let (api_version, kind) = match self.format {
            Format::Object => (self.info.api_version(), self.info.kind.clone()),
            Format::Metadata => ("meta.k8s.io/v1".to_string(), "PartialObjectMetadata".to_string()),
            Format::Table => ("meta.k8s.io/v1".to_string(), "Table".to_string()),
        };
        let meta = if initial_events_end {
            json!({"resourceVersion": rv.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}})
        } else {
            json!({"resourceVersion": rv.to_string()})
        };
        line(
            &json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version, "metadata": meta}}),
        )
    }
}

fn line(v: &Value) -> Bytes {
    let mut out = serde_json::to_vec(v).unwrap_or_default();
    out.push(b'\n');
    Bytes::from(out)
}

fn expired(rv: u64, floor: u64) -> Bytes {
    let status = ApiError::gone(format!("too old resource version: {rv} ({floor})")).to_status();
    line(&json!({"type": "ERROR", "object": status}))
}

pub async fn watch(s: Scope) -> Result<Response, ApiError> {
    let sel = Selectors::parse(&s.query, &s.info)?;
    let rv_param = s.query.resource_version.clone();
    let initial = match s.query.send_initial_events {
        Some(v) => v,
        None => rv_param.as_deref().is_none_or(|rv| rv == "0"),
    };
    if s.query.send_initial_events == Some(true) && !s.query.allow_watch_bookmarks {
        return Err(ApiError::invalid(
            "meta.k8s.io",
            "ListOptions",
            "",
            vec![crate::status::Cause::forbidden(
                "allowWatchBookmarks",
                "sendInitialEvents requires allowWatchBookmarks=true",
            )],
        ));
    }
    if rv_param.is_none() {
        super::objects::read_current(&s).await?;
    }
    let resource = s.info.storage_key();
    let scope = s.scope();
    let namespace = s.namespace.clone();
    let (initial_objects, start_rv) = if initial {
        let (objs, rv) = s.hub.store.list(&scope, &resource, namespace.as_deref(), None);
        (objs, rv)
    } else {
        let rv = match rv_param.as_deref() {
            Some(r) => r
                .parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("resourceVersion: invalid value {r:?}")))?,
            None => s.hub.store.resource_version(),
        };
        // A revision the hub has not reached yet: wait briefly, as
        // kube-apiserver's watch cache does, then refuse; never start a watch
        // that would skip events silently.
        if rv > s.hub.store.resource_version() {
            s.hub
                .store
                .wait_for(rv, FUTURE_RV_WAIT)
                .await
                .map_err(|current| ApiError::resource_version_too_large(rv, current))?;
        }
        (Vec::new(), rv)
    };
    let timeout = s
        .query
        .timeout_seconds
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let bookmarks = s.query.allow_watch_bookmarks;
    let send_initial_end = s.query.send_initial_events == Some(true);
    let mut encoder = Encoder {
        format: s.format,
        info: s.info.clone(),
        api_version: s.info.api_version(),
        include_object: match s.query.include_object.as_deref() {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        },
        sent_columns: false,
    };
    let filter = EventFilter {
        resource: Some(resource.clone()),
        cluster: scope.single().map(String::from),
    };
    let subscription = s.hub.store.watch_filtered(start_rv, filter);
    let store = s.hub.store.clone();
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    tokio::spawn(async move {
        let mut sub = match subscription {
            Ok(sub) => sub,
            Err(WatchError::Expired { floor }) => {
                let _ = tx.send(Ok(expired(start_rv, floor))).await;
                return;
            }
            Err(WatchError::TooLarge { current }) => {
                let status = ApiError::resource_version_too_large(start_rv, current).to_status();
                let _ = tx
                    .send(Ok(line(&json!({"type": "ERROR", "object": status}))))
                    .await;
                return;
            }
        };
        for (key, obj) in &initial_objects {
            if sel.matches(key, obj) && tx.send(Ok(encoder.event("ADDED", obj))).await.is_err() {
                return;
            }
        }
        if send_initial_end && tx.send(Ok(encoder.bookmark(start_rv, true))).await.is_err() {
            return;
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_PERIOD);
        ticker.tick().await;
        let mut last_rv = start_rv;
        // Objects whose latest change the view kept from this watcher, since when.
        let mut unheard: HashMap<ObjectKey, Instant> = HashMap::new();
        let mut catch_up = tokio::time::interval(UNHEARD_DELAY / 4);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = ticker.tick(), if bookmarks => {
                    last_rv = last_rv.max(sub.caught_up_to());
                    if tx.send(Ok(encoder.bookmark(last_rv, false))).await.is_err() { return; }
                }
                _ = catch_up.tick(), if !unheard.is_empty() => {
                    let due: Vec<ObjectKey> = unheard
                        .iter()
                        .filter(|(_, since)| since.elapsed() >= UNHEARD_DELAY)
                        .map(|(key, _)| key.clone())
                        .collect();
                    for key in due {
                        unheard.remove(&key);
                        // Gone or out of view since: that change is heard on its own.
                        let Some(obj) = store.get_committed(&key) else { continue };
                        if sel.matches(&key, &obj)
                            && scope.shows(&key, &obj)
                            && tx.send(Ok(encoder.event("MODIFIED", &obj))).await.is_err()
                        {
                            return;
                        }
                    }
                }
                _ = tx.closed() => return,
                event = sub.next() => {
                    let Some(event) = event else { return };
                    last_rv = event.object.rv;
                    if event.key.resource != resource || !scope.admits(&event.key) {
                        continue;
                    }
                    if namespace.as_ref().is_some_and(|ns| *ns != event.key.namespace) {
                        continue;
                    }
                    let visible = |o: &StoredObject| sel.matches(&event.key, o) && scope.shows(&event.key, o);
                    let Some(kind) = classify(&visible, event.kind, &event.object, event.previous.as_deref()) else { continue };
                    if kind == "MODIFIED" && !scope.hears(&event.key, &event) {
                        unheard.entry(event.key.clone()).or_insert_with(Instant::now);
                        continue;
                    }
                    if !unheard.is_empty() {
                        unheard.remove(&event.key);
                    }
                    if tx.send(Ok(encoder.event(kind, &event.object))).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let response = Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::CACHE_CONTROL, "no-cache, private")
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(response)
}

/// The event a selector-filtered watcher sees (`visible`: the selectors
/// and the view's own selection): an object entering the selection is
/// ADDED, one leaving it is DELETED.
fn classify(
    visible: &dyn Fn(&StoredObject) -> bool,
    kind: EventType,
    object: &StoredObject,
    previous: Option<&StoredObject>,
) -> Option<&'static str> {
    let now = visible(object);
    let before = previous.is_some_and(visible);
    match kind {
        EventType::Added => now.then_some("ADDED"),
        EventType::Deleted => (before || now).then_some("DELETED"),
        EventType::Modified => match (before, now) {
            (true, true) => Some("MODIFIED"),
            (false, true) => Some("ADDED"),
            (true, false) => Some("DELETED"),
            (false, false) => None,
        },
    }
}
