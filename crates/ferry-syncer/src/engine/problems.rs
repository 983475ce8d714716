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
    /// Records (or replaces) a problem. Returns whether it is new.
    pub fn set(&self, key: ProblemKey, problem: Problem) -> bool {
        self.map.lock().insert(key, problem.clone()).as_ref() != Some(&problem)
    }

    /// Forgets the problem of `verb` on `group/resource` on `side` after a success.
    /// Returns whether there was one.
    pub fn clear(&self, side: Side, group: &str, resource: &str, verb: &str) -> bool {
        let mut map = self.map.lock();
        if map.is_empty() {
            return false;
        }
        let before = map.len();
        map.retain(|k, _| !(k.side == side && k.group == group && k.resource == resource && k.verb == verb));
        map.len() != before
    }

    /// Problems about `group/resource` or its subresources (`resource/status`), on
    /// either side.
    pub fn for_resource(&self, group: &str, resource: &str) -> Vec<Problem> {
        let of_resource =
            |r: &str| r == resource || r.strip_prefix(resource).is_some_and(|rest| rest.starts_with('/'));
        self.map
            .lock()
            .iter()
            .filter(|(k, _)| k.group == group && of_resource(&k.resource))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(resource: &str, verb: &str) -> ProblemKey {
        ProblemKey {
            side: Side::Upstream,
            group: "apps".into(),
            resource: resource.into(),
            verb: verb.into(),
        }
    }

    fn denied(message: &str) -> Problem {
        Problem {
            permission: true,
            message: message.into(),
        }
    }

    #[test]
    fn a_subresource_problem_belongs_to_its_resource_and_clears_on_its_own() {
        let problems = Problems::default();
        assert!(problems.set(key("deployments/status", "update"), denied("status")));
        assert!(!problems.set(key("deployments/status", "update"), denied("status")));
        assert!(problems.set(key("deployments", "update"), denied("main")));
        assert_eq!(problems.for_resource("apps", "deployments").len(), 2);
        assert!(problems.for_resource("apps", "deploy").is_empty());
        assert!(problems.clear(Side::Upstream, "apps", "deployments", "update"));
        assert_eq!(
            problems.for_resource("apps", "deployments"),
            vec![denied("status")]
        );
        assert!(!problems.clear(Side::Downstream, "apps", "deployments/status", "update"));
        assert!(problems.clear(Side::Upstream, "apps", "deployments/status", "update"));
        assert!(problems.all().is_empty());
    }
}
