//! The collector's work queue, with client-go workqueue semantics: an item
//! is queued at most once, never processed twice at the same time (added
//! while in process, it runs again afterwards), and retried after failures
//! with per-item exponential backoff.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// First retry delay; it doubles with every further failure.
const BASE_DELAY: Duration = Duration::from_millis(50);
/// Longest retry delay.
const MAX_DELAY: Duration = Duration::from_secs(60);

/// Delay before retry number `failures` (1 for the first).
pub fn backoff(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    BASE_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

pub struct WorkQueue<T> {
    ready: VecDeque<T>,
    queued: HashSet<T>,
    processing: HashSet<T>,
    /// Added again while processing: queue once done.
    dirty: HashSet<T>,
    delayed: BinaryHeap<Reverse<(Instant, T)>>,
    failures: HashMap<T, u32>,
}

impl<T: Clone + Eq + Hash + Ord> Default for WorkQueue<T> {
    fn default() -> Self {
        WorkQueue {
            ready: VecDeque::new(),
            queued: HashSet::new(),
            processing: HashSet::new(),
            dirty: HashSet::new(),
            delayed: BinaryHeap::new(),
            failures: HashMap::new(),
        }
    }
}

impl<T: Clone + Eq + Hash + Ord> WorkQueue<T> {
    pub fn add(&mut self, item: T) {
        if self.processing.contains(&item) {
            self.dirty.insert(item);
        } else if self.queued.insert(item.clone()) {
            self.ready.push_back(item);
        }
    }

    /// The next item to process, if one is ready at `now` (delayed items
    /// whose time has come are queued first).
    pub fn next(&mut self, now: Instant) -> Option<T> {
        while let Some(Reverse((at, _))) = self.delayed.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((_, item))) = self.delayed.pop() else {
                break;
            };
            self.add(item);
        }
        let item = self.ready.pop_front()?;
        self.queued.remove(&item);
        self.processing.insert(item.clone());
        Some(item)
    }

    /// `item` was processed; `ok: false` schedules a retry after its
    /// backoff, which is returned.
    pub fn done(&mut self, item: T, ok: bool, now: Instant) -> Option<Duration> {
        self.processing.remove(&item);
        let retry = if ok {
            self.failures.remove(&item);
            None
        } else {
            let n = self.failures.entry(item.clone()).or_default();
            *n += 1;
            let delay = backoff(*n);
            self.delayed.push(Reverse((now + delay, item.clone())));
            Some(delay)
        };
        if self.dirty.remove(&item) {
            self.add(item);
        }
        retry
    }

    /// How many times in a row `item` has failed.
    pub fn failures(&self, item: &T) -> u32 {
        self.failures.get(item).copied().unwrap_or(0)
    }

    /// When the earliest delayed item becomes ready.
    pub fn next_retry(&self) -> Option<Instant> {
        self.delayed.peek().map(|Reverse((at, _))| *at)
    }

    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Drop everything queued or delayed, and the failure counts (a reset
    /// re-adds what matters); items in process finish normally.
    pub fn clear(&mut self) {
        self.ready.clear();
        self.queued.clear();
        self.delayed.clear();
        self.failures.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_queued_once_and_never_processed_twice_at_a_time() {
        let now = Instant::now();
        let mut q = WorkQueue::default();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.next(now), Some("a"));
        q.add("a"); // while in process
        assert_eq!(q.next(now), Some("b"));
        assert_eq!(q.next(now), None, "a waits for its own run to finish");
        q.done("a", true, now);
        assert_eq!(q.next(now), Some("a"));
    }

    #[test]
    fn failures_back_off_exponentially_and_success_resets() {
        let now = Instant::now();
        let mut q = WorkQueue::default();
        q.add("a");
        q.next(now);
        assert_eq!(q.done("a", false, now), Some(BASE_DELAY));
        assert_eq!(q.next(now), None, "not before its backoff");
        assert_eq!(q.next_retry(), Some(now + BASE_DELAY));
        assert_eq!(q.next(now + BASE_DELAY), Some("a"));
        assert_eq!(q.done("a", false, now), Some(BASE_DELAY * 2));
        assert_eq!(q.failures(&"a"), 2);
        q.next(now + BASE_DELAY * 2);
        assert_eq!(q.done("a", true, now), None);
        assert_eq!(q.failures(&"a"), 0);
        assert_eq!(backoff(100), MAX_DELAY);
    }
}
