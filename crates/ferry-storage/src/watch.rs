//! The event history watches replay from, and the live fan-out.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::{ObjectKey, StoredObject};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change. `previous` lets a selector-filtered watch tell that
/// an object left (or entered) its selection.
#[derive(Debug)]
pub struct WatchEvent {
    pub kind: EventType,
    pub key: ObjectKey,
    pub object: Arc<StoredObject>,
    pub previous: Option<Arc<StoredObject>>,
    /// [`WatchEvent::changes`], worked out once for every watcher (boxed: most
    /// events in the history are never asked, and each costs a word, not the
    /// struct).
    changes: OnceLock<Box<Changes>>,
}

impl WatchEvent {
    pub fn new(
        kind: EventType,
        key: ObjectKey,
        object: Arc<StoredObject>,
        previous: Option<Arc<StoredObject>>,
    ) -> Self {
        WatchEvent {
            kind,
            key,
            object,
            previous,
            changes: OnceLock::new(),
        }
    }

    /// What the change did to the object's metadata entries, read the first time a
    /// watcher asks and kept for the others: one modification reaches every watcher
    /// of its resource, so a view deciding whether its watcher cares asks once per
    /// event, not once per watcher.
    pub fn changes(&self) -> &Changes {
        self.changes.get_or_init(|| {
            Box::new(match self.kind {
                EventType::Modified => Changes::between(self.previous.as_deref(), &self.object),
                EventType::Added | EventType::Deleted => Changes::ANYTHING,
            })
        })
    }
}

/// What one change did to an object, in the terms a view filters by: which entries
/// of `metadata.labels`, `metadata.annotations` and `metadata.finalizers` it
/// touched, and whether it changed anything else. `resourceVersion` and
/// `managedFields` are not changes here (every write moves them).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    /// Anything else changed: the spec, the data, the status, other metadata, the
    /// order of the finalizers; also a create, a delete, or a text that could not be
    /// read.
    pub other: bool,
    /// Label keys added, removed or given another value.
    pub labels: Vec<String>,
    /// Annotation keys added, removed or given another value.
    pub annotations: Vec<String>,
    /// Finalizers added or removed.
    pub finalizers: Vec<String>,
    /// How many finalizers the object had before and has after.
    pub finalizer_count: (usize, usize),
}

impl Changes {
    const ANYTHING: Changes = Changes {
        other: true,
        labels: Vec::new(),
        annotations: Vec::new(),
        finalizers: Vec::new(),
        finalizer_count: (0, 0),
    };

    /// The change from `previous` (`None`: a create) to `object`. Members are
    /// compared by their stored text, which the store writes one way for one
    /// value, so equal text is an unchanged member; unequal text is a change even
    /// where the values would compare equal (the safe side for a filter).
    pub fn between(previous: Option<&StoredObject>, object: &StoredObject) -> Changes {
        let Some(previous) = previous else {
            return Changes::ANYTHING;
        };
        if previous.json == object.json {
            return Changes::default();
        }
        Self::read(&previous.json, &object.json).unwrap_or(Changes::ANYTHING)
    }

    fn read(old: &[u8], new: &[u8]) -> Option<Changes> {
        type Members<'a> = BTreeMap<String, &'a RawValue>;
        fn text<'a>(m: &Members<'a>, k: &str) -> Option<&'a str> {
            m.get(k).map(|v| v.get())
        }
        fn members<'a>(m: &Members<'a>, k: &str) -> Option<Members<'a>> {
            m.get(k)
                .map_or(Some(Members::new()), |v| serde_json::from_str(v.get()).ok())
        }
        fn touched(old: &Members, new: &Members, k: &str) -> Option<Vec<String>> {
            let (a, b) = (members(old, k)?, members(new, k)?);
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            Some(keys.filter(|k| text(&a, k) != text(&b, k)).cloned().collect())
        }
        fn list(m: &Members, k: &str) -> Option<Vec<String>> {
            match m.get(k) {
                None => Some(Vec::new()),
                Some(v) => Some(
                    serde_json::from_str::<Option<Vec<String>>>(v.get())
                        .ok()?
                        .unwrap_or_default(),
                ),
            }
        }
        const ENTRIES: [&str; 3] = ["labels", "annotations", "finalizers"];
        const MOVED_BY_EVERY_WRITE: [&str; 2] = ["resourceVersion", "managedFields"];

        let (old, new): (Members, Members) = (
            serde_json::from_slice(old).ok()?,
            serde_json::from_slice(new).ok()?,
        );
        if old
            .keys()
            .chain(new.keys())
            .any(|k| k != "metadata" && text(&old, k) != text(&new, k))
        {
            return Some(Changes::ANYTHING);
        }
        let (old, new) = (members(&old, "metadata")?, members(&new, "metadata")?);
        let other = old.keys().chain(new.keys()).any(|k| {
            !ENTRIES.contains(&k.as_str())
                && !MOVED_BY_EVERY_WRITE.contains(&k.as_str())
                && text(&old, k) != text(&new, k)
        });
        if other {
            return Some(Changes::ANYTHING);
        }
        let (before, after) = (list(&old, "finalizers")?, list(&new, "finalizers")?);
        // Sets, so a list of any length costs n log n (a client decides its length).
        let (had, has): (BTreeSet<&String>, BTreeSet<&String>) =
            (before.iter().collect(), after.iter().collect());
        // The same finalizers in another order, or one listed twice: not a change of
        // entries alone.
        let in_order_kept = before
            .iter()
            .filter(|f| has.contains(f))
            .eq(after.iter().filter(|f| had.contains(f)));
        if had.len() != before.len() || has.len() != after.len() || !in_order_kept {
            return Some(Changes::ANYTHING);
        }
        Some(Changes {
            other: false,
            labels: touched(&old, &new, "labels")?,
            annotations: touched(&old, &new, "annotations")?,
            finalizers: had.symmetric_difference(&has).map(|f| f.to_string()).collect(),
            finalizer_count: (before.len(), after.len()),
        })
    }
}

/// Which events a subscriber wants: one resource or all, in one logical
/// cluster or all. Events are routed by it, so a write wakes only the
/// watchers of its resource and workspace (and the catch-all ones).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct EventFilter {
    /// Storage key of the resource (`group/plural`); `None`: every resource.
    pub resource: Option<String>,
    /// Logical cluster name; `None`: every cluster.
    pub cluster: Option<String>,
}

impl EventFilter {
    /// Every event (controllers).
    pub fn all() -> Self {
        EventFilter::default()
    }

    /// The routing keys an event for `resource` in `cluster` is sent to.
    fn keys_for(resource: &str, cluster: &str) -> [EventFilter; 4] {
        let r = || Some(resource.to_string());
        let c = || Some(cluster.to_string());
        [
            EventFilter {
                resource: r(),
                cluster: c(),
            },
            EventFilter {
                resource: r(),
                cluster: None,
            },
            EventFilter {
                resource: None,
                cluster: c(),
            },
            EventFilter::all(),
        ]
    }
}

/// How many events a subscriber may fall behind before it is dropped (the
/// client re-watches from its last resourceVersion).
const SUBSCRIBER_BUFFER: usize = 16_384;

struct Inner {
    events: VecDeque<Arc<WatchEvent>>,
    /// Bytes of object JSON held by `events`.
    bytes: usize,
    /// Every event after this revision is in `events`.
    floor: u64,
    /// The newest revision published.
    latest: u64,
    /// Live subscribers by what they want.
    subscribers: HashMap<EventFilter, Vec<mpsc::Sender<Arc<WatchEvent>>>>,
}

/// Why a watch cannot start at the revision asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchError {
    /// Older than the history holds: the client relists (410).
    Expired { floor: u64 },
    /// Newer than anything published: the hub has not reached it.
    TooLarge { current: u64 },
}

/// How much history is kept, in events and in bytes of object JSON; the
/// oldest events go first when either is exceeded.
#[derive(Debug, Clone, Copy)]
pub struct HistoryLimits {
    pub events: usize,
    pub bytes: usize,
}

pub(crate) struct History {
    inner: Mutex<Inner>,
    limits: HistoryLimits,
}

impl History {
    pub(crate) fn new(limits: HistoryLimits, current_rv: u64) -> Self {
        History {
            inner: Mutex::new(Inner {
                events: VecDeque::new(),
                bytes: 0,
                floor: current_rv,
                latest: current_rv,
                subscribers: HashMap::new(),
            }),
            limits,
        }
    }

    pub(crate) fn publish(&self, events: impl Iterator<Item = Arc<WatchEvent>>) {
        let mut inner = self.inner.lock();
        for e in events {
            inner.latest = inner.latest.max(e.object.rv);
            inner.bytes += e.object.json.len();
            inner.events.push_back(e.clone());
            while inner.events.len() > self.limits.events
                || (inner.bytes > self.limits.bytes && inner.events.len() > 1)
            {
                if let Some(old) = inner.events.pop_front() {
                    inner.bytes -= old.object.json.len();
                    inner.floor = old.object.rv;
                }
            }
            for key in EventFilter::keys_for(&e.key.resource, &e.key.cluster) {
                let Some(subscribers) = inner.subscribers.get_mut(&key) else {
                    continue;
                };
                // A full buffer means the watcher fell too far behind: drop it,
                // its stream ends and the client re-watches.
                subscribers.retain(|tx| tx.try_send(e.clone()).is_ok());
                if subscribers.is_empty() {
                    inner.subscribers.remove(&key);
                }
            }
        }
    }

    pub(crate) fn subscribe(
        this: &Arc<History>,
        from_rv: u64,
        filter: EventFilter,
    ) -> Result<WatchSubscription, WatchError> {
        let mut inner = this.inner.lock();
        if from_rv < inner.floor {
            return Err(WatchError::Expired { floor: inner.floor });
        }
        if from_rv > inner.latest {
            // Accepting it would drop every event up to `from_rv` unseen.
            return Err(WatchError::TooLarge {
                current: inner.latest,
            });
        }
        let wanted = |e: &WatchEvent| {
            filter.resource.as_ref().is_none_or(|r| *r == e.key.resource)
                && filter.cluster.as_ref().is_none_or(|c| *c == e.key.cluster)
        };
        let replay: VecDeque<_> = inner
            .events
            .iter()
            .filter(|e| e.object.rv > from_rv && wanted(e))
            .cloned()
            .collect();
        let (tx, live) = mpsc::channel(SUBSCRIBER_BUFFER);
        let subscribers = inner.subscribers.entry(filter).or_default();
        subscribers.retain(|tx| !tx.is_closed());
        subscribers.push(tx);
        Ok(WatchSubscription {
            replay,
            live,
            last_rv: from_rv,
            history: this.clone(),
        })
    }

    /// Nothing changed up to `rv` beyond what was published: subscribers
    /// may start from it.
    pub(crate) fn advance(&self, rv: u64) {
        let mut inner = self.inner.lock();
        inner.latest = inner.latest.max(rv);
    }

    /// Forget every event and end every subscriber: the store was read
    /// afresh at `rv` and nothing before it can be replayed.
    pub(crate) fn reset(&self, rv: u64) {
        let mut inner = self.inner.lock();
        inner.events.clear();
        inner.bytes = 0;
        inner.floor = rv;
        inner.latest = rv;
        inner.subscribers.clear();
    }

    fn latest(&self) -> u64 {
        self.inner.lock().latest
    }

    /// How many subscribers are registered (for tests).
    #[cfg(test)]
    pub(crate) fn subscriber_count(&self) -> usize {
        self.inner.lock().subscribers.values().map(Vec::len).sum()
    }
}

/// Events after a resourceVersion: first the replayed history, then live ones.
pub struct WatchSubscription {
    replay: VecDeque<Arc<WatchEvent>>,
    live: mpsc::Receiver<Arc<WatchEvent>>,
    last_rv: u64,
    history: Arc<History>,
}

impl WatchSubscription {
    /// A resourceVersion this subscriber has seen everything it wants up to,
    /// for bookmarks: with routed events, a quiet watcher's own last event
    /// can be far behind the hub, and its bookmark should not be.
    pub fn caught_up_to(&self) -> u64 {
        // Read the newest revision first: every event up to it was already
        // handed to this subscriber's buffer, so an empty buffer after the
        // read means all of them were taken.
        let latest = self.history.latest();
        if self.replay.is_empty() && self.live.is_empty() {
            self.last_rv.max(latest)
        } else {
            self.last_rv
        }
    }

    /// The next event, or `None` when this watcher fell too far behind the
    /// live stream (the client re-watches from its last resourceVersion).
    pub async fn next(&mut self) -> Option<Arc<WatchEvent>> {
        loop {
            let event = match self.replay.pop_front() {
                Some(e) => e,
                // `None`: dropped for falling behind.
                None => self.live.recv().await?,
            };
            if event.object.rv > self.last_rv {
                self.last_rv = event.object.rv;
                return Some(event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn event(rv: u64, cluster: &str, resource: &str, size: usize) -> Arc<WatchEvent> {
        Arc::new(WatchEvent::new(
            EventType::Added,
            ObjectKey {
                cluster: cluster.into(),
                resource: resource.into(),
                namespace: "default".into(),
                name: format!("o{rv}"),
            },
            Arc::new(StoredObject {
                rv,
                json: Bytes::from(vec![b' '; size]),
                labels: Default::default(),
            }),
            None,
        ))
    }

    fn stored(rv: u64, value: serde_json::Value) -> StoredObject {
        StoredObject {
            rv,
            json: Bytes::from(serde_json::to_vec(&value).unwrap()),
            labels: Default::default(),
        }
    }

    fn changes(old: serde_json::Value, new: serde_json::Value) -> Changes {
        Changes::between(Some(&stored(1, old)), &stored(2, new))
    }

    fn object(
        labels: serde_json::Value,
        annotations: serde_json::Value,
        finalizers: serde_json::Value,
    ) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "1", "labels": labels, "annotations": annotations, "finalizers": finalizers},
            "data": {"k": "v"},
        })
    }

    #[test]
    fn a_change_of_metadata_entries_names_each_entry_touched_and_nothing_else() {
        let old = object(
            serde_json::json!({"a": "1", "b": "2"}),
            serde_json::json!({"x": "1"}),
            serde_json::json!(["f/one", "f/two"]),
        );
        let mut new = object(
            serde_json::json!({"a": "1", "b": "3", "c": "4"}),
            serde_json::json!({}),
            serde_json::json!(["f/two", "f/three"]),
        );
        new["metadata"]["resourceVersion"] = "2".into();
        new["metadata"]["managedFields"] = serde_json::json!([{"manager": "m"}]);
        assert_eq!(
            changes(old, new),
            Changes {
                other: false,
                labels: vec!["b".into(), "c".into()],
                annotations: vec!["x".into()],
                finalizers: vec!["f/one".into(), "f/three".into()],
                finalizer_count: (2, 2),
            }
        );
        // The resourceVersion alone: nothing.
        let a = object(
            serde_json::json!({}),
            serde_json::json!({}),
            serde_json::json!([]),
        );
        let mut b = a.clone();
        b["metadata"]["resourceVersion"] = "9".into();
        assert_eq!(changes(a, b), Changes::default());
    }

    #[test]
    fn a_change_beyond_the_entries_is_anything() {
        let base = || {
            object(
                serde_json::json!({"a": "1"}),
                serde_json::json!({}),
                serde_json::json!(["f/one", "f/two"]),
            )
        };
        let anything = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut new = base();
            edit(&mut new);
            changes(base(), new).other
        };
        assert!(anything(&|v| v["data"]["k"] = "w".into()));
        assert!(anything(&|v| v["status"] = serde_json::json!({"phase": "x"})));
        assert!(anything(
            &|v| v["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z".into()
        ));
        assert!(anything(&|v| v["metadata"]["generation"] = 2.into()));
        assert!(anything(
            &|v| v["metadata"]["finalizers"] = serde_json::json!(["f/two", "f/one"])
        ));
        assert!(anything(
            &|v| v["metadata"]["finalizers"] = serde_json::json!(["f/one", "f/two", "f/two"])
        ));
        assert!(anything(&|v| v["metadata"]["labels"] = serde_json::Value::Null));
        assert!(!anything(&|v| v["metadata"]["labels"]["b"] = "2".into()));
        // A create, a delete, unreadable text.
        let obj = stored(1, base());
        let key = ObjectKey {
            cluster: "a".into(),
            resource: "/configmaps".into(),
            namespace: "default".into(),
            name: "a".into(),
        };
        let event = |kind| {
            WatchEvent::new(
                kind,
                key.clone(),
                Arc::new(stored(2, base())),
                Some(Arc::new(stored(1, base()))),
            )
        };
        assert!(event(EventType::Added).changes().other);
        assert!(event(EventType::Deleted).changes().other);
        assert!(!event(EventType::Modified).changes().other);
        assert!(Changes::between(None, &obj).other);
        let garbled = StoredObject {
            rv: 2,
            json: Bytes::from_static(b"{not json"),
            labels: Default::default(),
        };
        assert!(Changes::between(Some(&obj), &garbled).other);
    }

    fn history(events: usize, bytes: usize) -> Arc<History> {
        Arc::new(History::new(HistoryLimits { events, bytes }, 0))
    }

    fn filter(resource: Option<&str>, cluster: Option<&str>) -> EventFilter {
        EventFilter {
            resource: resource.map(String::from),
            cluster: cluster.map(String::from),
        }
    }

    #[tokio::test]
    async fn events_reach_only_the_watchers_of_their_resource_and_workspace() {
        let h = history(100, 1 << 20);
        let mut cms_a = History::subscribe(&h, 0, filter(Some("/configmaps"), Some("a"))).unwrap();
        let mut cms_all = History::subscribe(&h, 0, filter(Some("/configmaps"), None)).unwrap();
        let mut in_b = History::subscribe(&h, 0, filter(None, Some("b"))).unwrap();
        let mut everything = History::subscribe(&h, 0, EventFilter::all()).unwrap();
        h.publish(
            [
                event(1, "a", "/configmaps", 10),
                event(2, "b", "/configmaps", 10),
                event(3, "a", "/secrets", 10),
                event(4, "b", "/secrets", 10),
            ]
            .into_iter(),
        );
        let take = |sub: &mut WatchSubscription| {
            let mut rvs = Vec::new();
            while let Ok(e) = sub.live.try_recv() {
                rvs.push(e.object.rv);
            }
            rvs
        };
        assert_eq!(take(&mut cms_a), vec![1]);
        assert_eq!(take(&mut cms_all), vec![1, 2]);
        assert_eq!(take(&mut in_b), vec![2, 4]);
        assert_eq!(take(&mut everything), vec![1, 2, 3, 4]);
        // Replay honours the filter too.
        let mut late = History::subscribe(&h, 1, filter(Some("/secrets"), None)).unwrap();
        assert_eq!(late.next().await.unwrap().object.rv, 3);
        assert_eq!(late.next().await.unwrap().object.rv, 4);
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_is_dropped_and_others_go_on() {
        let h = history(SUBSCRIBER_BUFFER * 2, usize::MAX);
        let mut slow = History::subscribe(&h, 0, EventFilter::all()).unwrap();
        let mut quick = History::subscribe(&h, 0, EventFilter::all()).unwrap();
        let n = SUBSCRIBER_BUFFER as u64 + 1;
        for rv in 1..=n {
            h.publish(std::iter::once(event(rv, "a", "/configmaps", 1)));
            assert_eq!(quick.next().await.unwrap().object.rv, rv);
        }
        // The slow one gets what fit in its buffer, then the end of its stream.
        let mut got = 0;
        while slow.next().await.is_some() {
            got += 1;
        }
        assert_eq!(got, SUBSCRIBER_BUFFER);
        assert_eq!(h.subscriber_count(), 1);
    }

    #[test]
    fn history_is_bounded_in_bytes_as_well_as_events() {
        let h = history(1000, 100);
        h.publish((1..=5).map(|rv| event(rv, "a", "/configmaps", 30)));
        // 5 x 30 bytes > 100: the two oldest went; 3 and later remain.
        assert_eq!(
            History::subscribe(&h, 1, EventFilter::all()).err(),
            Some(WatchError::Expired { floor: 2 })
        );
        assert!(History::subscribe(&h, 2, EventFilter::all()).is_ok());
        // One object larger than the bound still stays (the newest is kept).
        h.publish(std::iter::once(event(6, "a", "/configmaps", 500)));
        assert!(History::subscribe(&h, 5, EventFilter::all()).is_ok());
    }

    #[tokio::test]
    async fn a_quiet_watcher_is_caught_up_to_the_newest_revision() {
        let h = history(100, 1 << 20);
        let mut quiet = History::subscribe(&h, 0, filter(Some("/secrets"), None)).unwrap();
        h.publish((1..=3).map(|rv| event(rv, "a", "/configmaps", 1)));
        assert_eq!(quiet.caught_up_to(), 3);
        h.publish(std::iter::once(event(4, "a", "/secrets", 1)));
        // Its own event is still buffered: not caught up past what it has taken.
        assert_eq!(quiet.caught_up_to(), 0);
        assert_eq!(quiet.next().await.unwrap().object.rv, 4);
        assert_eq!(quiet.caught_up_to(), 4);
    }
}
