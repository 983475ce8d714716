//! Standing problems a user must fix (permission denied, resource not served), kept
//! until the operation succeeds, so the SyncerConfig conditions can name them.

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::side::Side;

/// What failed: a verb on a resource on one side.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProblemKey {
    /// Where.
    pub side: Side,
    /// API group of the resource.
    pub group: String,
    /// Resource name (plural).
    pub resource: String,
    /// The verb (`list`, `watch`, `create`, ...).
    pub verb: String,
}

/// A standing problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// True for 403s: the fix is RBAC.
    pub permission: bool,
    /// The message for the condition, with the fix.
    pub message: String,
}

/// Problems by what failed.
#[derive(Default)]
pub struct Problems {
    map: Mutex<BTreeMap<ProblemKey, Problem>>,
}

impl Problems {
    /// Records (or replaces) a problem.
    pub fn set(&self, key: ProblemKey, problem: Problem) {
        self.map.lock().insert(key, problem);
    }

    /// Forgets the problem of `verb` on `group/resource` on `side` after a success.
    pub fn clear(&self, side: Side, group: &str, resource: &str, verb: &str) {
        let mut map = self.map.lock();
        if map.is_empty() {
            return;
        }
        map.retain(|k, _| !(k.side == side && k.group == group && k.resource == resource && k.verb == verb));
    }

    /// Problems about `group/resource`, on either side.
    pub fn for_resource(&self, group: &str, resource: &str) -> Vec<Problem> {
        self.map
            .lock()
            .iter()
            .filter(|(k, _)| k.group == group && k.resource == resource)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// Every standing problem.
    pub fn all(&self) -> Vec<(ProblemKey, Problem)> {
        self.map
            .lock()
            .iter()
            .map(|(k, p)| (k.clone(), p.clone()))
            .collect()
    }
}

/// The message for a 403.
pub fn permission_message(side: Side, verb: &str, resource: &str, server: &str) -> String {
    format!(
        "permission denied: the syncer cannot {verb} {resource} on the {side} side ({server}); \
         grant its identity `{verb}` on `{resource}` there"
    )
}
