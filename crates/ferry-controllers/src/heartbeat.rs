//! When each SyncTarget's heartbeat turns stale: the deadlines both SyncTarget
//! controllers (kcp's and KubeStellar's) keep, so that Ready turns False when
//! a syncer stops writing even though nothing else is written.

use std::collections::HashMap;

use ferry_server::controller::Lease;
use ferry_server::storage::ObjectKey;
use tokio::sync::Notify;
use tokio::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct Deadlines {
    /// When each target's heartbeat turns stale, for those fresh now.
    at: parking_lot::Mutex<HashMap<ObjectKey, Instant>>,
    /// Wakes the waiter when a deadline is added.
    wake: Notify,
}

impl Deadlines {
    /// `key`'s heartbeat turns stale at `at`.
    pub(crate) fn set(&self, key: &ObjectKey, at: Instant) {
        self.at.lock().insert(key.clone(), at);
        self.wake.notify_one();
    }

    /// `key` has no fresh heartbeat to watch (stale already, or gone).
    pub(crate) fn clear(&self, key: &ObjectKey) {
        self.at.lock().remove(key);
    }

    /// Wait until some deadlines pass and return their targets (no longer
    /// watched); `None` once `lease` is lost.
    pub(crate) async fn due(&self, lease: &mut Lease) -> Option<Vec<ObjectKey>> {
        loop {
            let next = self.at.lock().values().min().copied();
            let sleep =
                tokio::time::sleep_until(next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600)));
            tokio::select! {
                _ = lease.lost() => return None,
                _ = self.wake.notified() => {}
                _ = sleep => {
                    let now = Instant::now();
                    let mut at = self.at.lock();
                    let due: Vec<ObjectKey> =
                        at.iter().filter(|(_, when)| **when <= now).map(|(k, _)| k.clone()).collect();
                    for k in &due {
                        at.remove(k);
                    }
                    return Some(due);
                }
            }
        }
    }
}
