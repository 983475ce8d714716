//! When each SyncTarget's heartbeat turns stale: the deadlines both SyncTarget
//! controllers (kcp's and KubeStellar's) keep, so that Ready turns False when
//! a syncer stops writing even though nothing else is written. The
//! controller's loop waits for the next one ([`Deadlines::next`]) between
//! changes, and looks at the targets whose deadline passed in a pass.

use std::collections::HashMap;

use ferry_server::follow::Due;
use ferry_server::storage::ObjectKey;
use tokio::time::Instant;

/// The deadlines of one SyncTarget controller's targets.
#[derive(Default)]
pub struct Deadlines {
    /// When each target's heartbeat turns stale, for those fresh now.
    at: parking_lot::Mutex<HashMap<ObjectKey, Instant>>,
}

impl Deadlines {
    /// `key`'s heartbeat turns stale at `at`.
    pub fn set(&self, key: &ObjectKey, at: Instant) {
        self.at.lock().insert(key.clone(), at);
    }

    /// `key` has no fresh heartbeat to watch (stale already, or gone).
    pub fn clear(&self, key: &ObjectKey) {
        self.at.lock().remove(key);
    }

    /// Wait until the earliest deadline (never, without one); for
    /// [`ferry_server::follow::Follower::wait`].
    pub async fn next(&self) -> Due {
        let next = self.at.lock().values().min().copied();
        match next {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
        Due::Pass
    }

    /// The targets whose deadline has passed, no longer watched.
    pub fn take_due(&self) -> Vec<ObjectKey> {
        let now = Instant::now();
        let mut at = self.at.lock();
        let due: Vec<ObjectKey> = at
            .iter()
            .filter(|(_, when)| **when <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &due {
            at.remove(k);
        }
        due
    }
}
