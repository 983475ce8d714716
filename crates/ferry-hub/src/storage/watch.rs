//! The event history watches replay from, and the live fan-out.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::broadcast;

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
}

struct Inner {
    events: VecDeque<Arc<WatchEvent>>,
    /// Every event after this revision is in `events`.
    floor: u64,
    /// The newest revision published.
    latest: u64,
}

/// Why a watch cannot start at the revision asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchError {
    /// Older than the history holds: the client relists (410).
    Expired { floor: u64 },
    /// Newer than anything published: the hub has not reached it.
    TooLarge { current: u64 },
}

pub(crate) struct History {
    inner: Mutex<Inner>,
    capacity: usize,
    live: broadcast::Sender<Arc<WatchEvent>>,
}

impl History {
    pub(crate) fn new(capacity: usize, current_rv: u64) -> Self {
        let (live, _) = broadcast::channel(16_384);
        History {
            inner: Mutex::new(Inner {
                events: VecDeque::new(),
                floor: current_rv,
                latest: current_rv,
            }),
            capacity,
            live,
        }
    }

    pub(crate) fn publish(&self, events: impl Iterator<Item = Arc<WatchEvent>>) {
        let mut inner = self.inner.lock();
        for e in events {
            inner.latest = inner.latest.max(e.object.rv);
            inner.events.push_back(e.clone());
            while inner.events.len() > self.capacity {
                if let Some(old) = inner.events.pop_front() {
                    inner.floor = old.object.rv;
                }
            }
            // No receivers is fine: nobody is watching.
            let _ = self.live.send(e);
        }
    }

    pub(crate) fn subscribe(&self, from_rv: u64) -> Result<WatchSubscription, WatchError> {
        let inner = self.inner.lock();
        if from_rv < inner.floor {
            return Err(WatchError::Expired { floor: inner.floor });
        }
        if from_rv > inner.latest {
            // Accepting it would drop every event up to `from_rv` unseen.
            return Err(WatchError::TooLarge {
                current: inner.latest,
            });
        }
        let replay: VecDeque<_> = inner
            .events
            .iter()
            .filter(|e| e.object.rv > from_rv)
            .cloned()
            .collect();
        let live = self.live.subscribe();
        Ok(WatchSubscription {
            replay,
            live,
            last_rv: from_rv,
        })
    }
}

/// Events after a resourceVersion: first the replayed history, then live ones.
pub struct WatchSubscription {
    replay: VecDeque<Arc<WatchEvent>>,
    live: broadcast::Receiver<Arc<WatchEvent>>,
    last_rv: u64,
}

impl WatchSubscription {
    /// The next event, or `None` when this watcher fell too far behind the
    /// live stream (the client re-watches from its last resourceVersion).
    pub async fn next(&mut self) -> Option<Arc<WatchEvent>> {
        loop {
            let event = match self.replay.pop_front() {
                Some(e) => e,
                None => match self.live.recv().await {
                    Ok(e) => e,
                    Err(broadcast::error::RecvError::Lagged(_)) => return None,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            };
            if event.object.rv > self.last_rv {
                self.last_rv = event.object.rv;
                return Some(event);
            }
        }
    }
}
