//! The work queue: object keys waiting to be reconciled.
//!
//! Semantics follow client-go's workqueue, which controllers rely on:
//! - a key is queued at most once, however often it is added;
//! - a key is never processed by two workers at once: added while in process, it is
//!   queued again when [`WorkQueue::done`] is called;
//! - [`WorkQueue::retry`] re-adds a failed key after an exponential per-key delay,
//!   which [`WorkQueue::forget`] resets after a success.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

struct Inner<K> {
    queue: VecDeque<K>,
    /// Keys waiting to be processed (queued, or to be re-queued when done).
    dirty: HashSet<K>,
    processing: HashSet<K>,
    failures: HashMap<K, u32>,
    shut_down: bool,
}

/// Capacity (in keys) above which a drained queue gives its memory back: an initial
/// sync or a full resync queues every key at once (100k keys are some 20 MB of
/// collections), and a steady state needs a few.
const KEPT_CAPACITY: usize = 1024;

impl<K: Eq + Hash> Inner<K> {
    /// Once nothing is queued, lets collections grown by a burst go back to a small size.
    fn trim_if_drained(&mut self) {
        if !self.queue.is_empty() {
            return;
        }
        if self.queue.capacity() > KEPT_CAPACITY {
            self.queue = VecDeque::new();
        }
        if self.dirty.capacity() > KEPT_CAPACITY {
            self.dirty.shrink_to(KEPT_CAPACITY.max(self.dirty.len()));
        }
        if self.processing.capacity() > KEPT_CAPACITY {
            self.processing
                .shrink_to(KEPT_CAPACITY.max(self.processing.len()));
        }
        if self.failures.capacity() > KEPT_CAPACITY {
            self.failures.shrink_to(KEPT_CAPACITY.max(self.failures.len()));
        }
    }
}

/// A deduplicating queue of keys with per-key exponential backoff.
pub struct WorkQueue<K> {
    inner: Mutex<Inner<K>>,
    notify: Notify,
    min_backoff: Duration,
    max_backoff: Duration,
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    /// An empty queue whose retries wait `min_backoff · 2^failures`, at most `max_backoff`.
    pub fn new(min_backoff: Duration, max_backoff: Duration) -> Arc<Self> {
        Arc::new(WorkQueue {
            inner: Mutex::new(Inner {
                queue: VecDeque::new(),
                dirty: HashSet::new(),
                processing: HashSet::new(),
                failures: HashMap::new(),
                shut_down: false,
            }),
            notify: Notify::new(),
            min_backoff,
            max_backoff,
        })
    }

    /// Queues `key` unless it is already waiting.
    pub fn add(&self, key: K) {
        self.push(key, false);
    }

    /// Queues `key` ahead of every waiting key (unless it is already waiting): for
    /// what others wait for, such as the Namespace their objects go into.
    pub fn add_first(&self, key: K) {
        self.push(key, true);
    }

    fn push(&self, key: K, first: bool) {
        let mut inner = self.inner.lock();
        if inner.shut_down || !inner.dirty.insert(key.clone()) {
            return;
        }
        if !inner.processing.contains(&key) {
            if first {
                inner.queue.push_front(key);
            } else {
                inner.queue.push_back(key);
            }
            drop(inner);
            self.notify.notify_one();
        }
    }

    /// Queues many keys.
    pub fn add_all(&self, keys: impl IntoIterator<Item = K>) {
        for key in keys {
            self.add(key);
        }
    }

    /// The next key to process, waiting for one; `None` once shut down.
    pub async fn next(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            {
                let mut inner = self.inner.lock();
                if inner.shut_down {
                    return None;
                }
                if let Some(key) = inner.queue.pop_front() {
                    inner.dirty.remove(&key);
                    inner.processing.insert(key.clone());
                    let more = !inner.queue.is_empty();
                    drop(inner);
                    if more {
                        // Another worker may be waiting: pass the wake-up on.
                        self.notify.notify_one();
                    }
                    return Some(key);
                }
            }
            notified.await;
        }
    }

    /// Marks `key` processed; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &K) {
        let mut inner = self.inner.lock();
        inner.processing.remove(key);
        if inner.dirty.contains(key) && !inner.shut_down {
            inner.queue.push_back(key.clone());
            drop(inner);
            self.notify.notify_one();
        } else {
            inner.trim_if_drained();
        }
    }

    /// Re-adds `key` after its backoff delay, which doubles with each consecutive failure.
    pub fn retry(self: &Arc<Self>, key: K) {
        self.retry_with(key, self.min_backoff, self.max_backoff);
    }

    /// [`WorkQueue::retry`] with its own bounds (slower, for a refused object).
    pub fn retry_with(self: &Arc<Self>, key: K, min: Duration, max: Duration) {
        let delay = {
            let mut inner = self.inner.lock();
            let failures = inner.failures.entry(key.clone()).or_insert(0);
            let delay = backoff(min, max, *failures);
            *failures = failures.saturating_add(1);
            delay
        };
        let queue = Arc::downgrade(self);
        crate::spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(queue) = queue.upgrade() {
                queue.add(key);
            }
        });
    }

    /// Clears `key`'s failure count after a success.
    pub fn forget(&self, key: &K) {
        self.inner.lock().failures.remove(key);
    }

    /// Consecutive failures of `key` so far.
    pub fn failures(&self, key: &K) -> u32 {
        self.inner.lock().failures.get(key).copied().unwrap_or(0)
    }

    /// Keys queued or in process.
    pub fn len(&self) -> usize {
        let inner = self.inner.lock();
        inner.queue.len() + inner.processing.len()
    }

    /// Whether no key is queued or in process.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops handing out keys; waiting workers get `None`.
    pub fn shut_down(&self) {
        self.inner.lock().shut_down = true;
        self.notify.notify_waiters();
    }
}

/// `min · 2^failures`, capped at `max`.
pub fn backoff(min: Duration, max: Duration, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.min(30));
    min.saturating_mul(factor).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue() -> Arc<WorkQueue<&'static str>> {
        WorkQueue::new(Duration::from_millis(10), Duration::from_secs(1))
    }

    #[tokio::test]
    async fn a_key_added_first_is_handed_out_before_those_waiting() {
        let q = queue();
        q.add_all(["a", "b"]);
        q.add_first("namespace");
        q.add_first("b"); // already waiting: keeps its place
        assert_eq!(q.next().await, Some("namespace"));
        assert_eq!(q.next().await, Some("a"));
        assert_eq!(q.next().await, Some("b"));
        assert_eq!(q.len(), 3, "three keys in process");
    }

    #[tokio::test]
    async fn a_key_is_queued_once() {
        let q = queue();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.next().await, Some("a"));
        assert_eq!(q.next().await, Some("b"));
        assert_eq!(q.len(), 2, "both in process");
        q.done(&"a");
        q.done(&"b");
        assert!(q.is_empty());
    }

    #[tokio::test]
    async fn a_key_added_while_in_process_comes_back_after_done() {
        let q = queue();
        q.add("a");
        let key = q.next().await.unwrap();
        q.add("a");
        assert_eq!(q.inner.lock().queue.len(), 0, "not handed to a second worker");
        q.done(&key);
        assert_eq!(q.next().await, Some("a"));
    }

    #[tokio::test]
    async fn a_drained_queue_gives_back_what_a_burst_grew() {
        let q: Arc<WorkQueue<u32>> = WorkQueue::new(Duration::from_millis(10), Duration::from_secs(1));
        q.add_all(0..20_000);
        assert!(q.inner.lock().queue.capacity() >= 20_000);
        while let Some(key) = q.next().await {
            q.done(&key);
            if q.is_empty() {
                break;
            }
        }
        let inner = q.inner.lock();
        assert!(
            inner.queue.capacity() <= KEPT_CAPACITY,
            "{}",
            inner.queue.capacity()
        );
        // A HashSet keeps a power-of-two bucket count for its length, so up to twice.
        assert!(
            inner.dirty.capacity() <= 2 * KEPT_CAPACITY,
            "{}",
            inner.dirty.capacity()
        );
    }

    #[tokio::test]
    async fn shut_down_wakes_waiting_workers() {
        let q = queue();
        let waiter = crate::spawn({
            let q = q.clone();
            async move { q.next().await }
        });
        tokio::task::yield_now().await;
        q.shut_down();
        assert_eq!(waiter.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_back_off_exponentially_until_forgotten() {
        let q = queue();
        q.retry("a");
        q.retry("a");
        assert_eq!(q.failures(&"a"), 2);
        q.forget(&"a");
        assert_eq!(q.failures(&"a"), 0);
        tokio::time::sleep(Duration::from_millis(25)).await;
        assert_eq!(q.next().await, Some("a"));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let min = Duration::from_millis(50);
        let max = Duration::from_secs(10);
        assert_eq!(backoff(min, max, 0), min);
        assert_eq!(backoff(min, max, 3), Duration::from_millis(400));
        assert_eq!(backoff(min, max, 40), max);
    }
}
