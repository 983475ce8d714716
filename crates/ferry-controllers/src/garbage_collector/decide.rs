//! The collector's decision for one dependent, from what its owner
//! references point at (looked up live by the caller). Mirrors
//! kube-controller-manager's `attemptToDeleteItem`.

use super::owners::{OwnerRef, Ownership};
use super::policy::PropagationPolicy;

/// What one owner reference points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerState {
    /// An object of that kind and name with that uid exists.
    Alive,
    /// It exists and is being deleted in the foreground: it waits for its dependents.
    DeletingDependents,
    /// Nothing of that kind and name exists, or something with another uid.
    Absent,
    /// The kind is not served in the workspace (perhaps not yet): undecidable for now.
    Unresolvable(String),
    /// A cluster-scoped dependent naming a namespaced kind: a reference that
    /// can never resolve, which Kubernetes ignores rather than acting on.
    Invalid(String),
}

/// What to do with the dependent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It has an owner that lives on; nothing to change.
    Keep,
    /// It has an owner that lives on; drop the references (by uid) to owners
    /// that are gone or waiting for their dependents to go.
    RemoveReferences(Vec<String>),
    /// No owner lives on: delete it with this propagation. `unblock` first
    /// clears `blockOwnerDeletion` on its references (a foreground cycle).
    Delete {
        policy: PropagationPolicy,
        unblock: bool,
    },
    /// Cannot decide yet; try again later.
    Retry(String),
    /// Leave it alone for good (and say why).
    Ignore(String),
}

/// What the dependent's own dependents look like (from the collector's index).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Descendants {
    /// It owns something.
    pub exist: bool,
    /// One of them is itself being deleted in the foreground.
    pub one_deleting_dependents: bool,
}

/// Decide for `dependent`, whose references resolve through `lookup`.
pub fn decide(
    dependent: &Ownership,
    descendants: Descendants,
    mut lookup: impl FnMut(&OwnerRef) -> OwnerState,
) -> Verdict {
    if dependent.owners.is_empty() {
        return Verdict::Keep;
    }
    let mut solid = 0;
    let mut gone = Vec::new();
    let mut waiting = 0;
    for r in &dependent.owners {
        match lookup(r) {
            OwnerState::Alive => solid += 1,
            OwnerState::Absent => gone.push(r.uid.clone()),
            OwnerState::DeletingDependents => {
                waiting += 1;
                gone.push(r.uid.clone());
            }
            OwnerState::Invalid(why) => return Verdict::Ignore(why),
            OwnerState::Unresolvable(why) => return Verdict::Retry(why),
        }
    }
    if solid > 0 {
        return if gone.is_empty() {
            Verdict::Keep
        } else {
            Verdict::RemoveReferences(gone)
        };
    }
    if waiting > 0 && descendants.exist {
        return Verdict::Delete {
            policy: PropagationPolicy::Foreground,
            unblock: descendants.one_deleting_dependents,
        };
    }
    let policy = if dependent.has_finalizer(super::policy::ORPHAN_FINALIZER) {
        PropagationPolicy::Orphan
    } else if dependent.has_finalizer(super::policy::FOREGROUND_FINALIZER) {
        PropagationPolicy::Foreground
    } else {
        PropagationPolicy::Background
    };
    Verdict::Delete {
        policy,
        unblock: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(uid: &str) -> OwnerRef {
        OwnerRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: format!("owner-{uid}"),
            uid: uid.into(),
            block_owner_deletion: false,
        }
    }

    fn dependent(uids: &[&str]) -> Ownership {
        Ownership {
            uid: "dep".into(),
            owners: uids.iter().map(|u| owner(u)).collect(),
            ..Default::default()
        }
    }

    fn states<'a>(table: &'a [(&'a str, OwnerState)]) -> impl FnMut(&OwnerRef) -> OwnerState + 'a {
        move |r| {
            table
                .iter()
                .find(|(u, _)| *u == r.uid)
                .map(|(_, s)| s.clone())
                .unwrap_or(OwnerState::Absent)
        }
    }

    const BACKGROUND: Verdict = Verdict::Delete {
        policy: PropagationPolicy::Background,
        unblock: false,
    };

    #[test]
    fn a_dependent_whose_only_owner_is_gone_is_deleted_in_the_background() {
        let v = decide(&dependent(&["a"]), Descendants::default(), states(&[]));
        assert_eq!(v, BACKGROUND);
    }

    #[test]
    fn one_live_owner_keeps_it_and_references_to_gone_owners_are_dropped() {
        let d = dependent(&["a", "b"]);
        assert_eq!(
            decide(
                &d,
                Descendants::default(),
                states(&[("a", OwnerState::Alive), ("b", OwnerState::Alive)])
            ),
            Verdict::Keep
        );
        assert_eq!(
            decide(&d, Descendants::default(), states(&[("b", OwnerState::Alive)])),
            Verdict::RemoveReferences(vec!["a".into()])
        );
    }

    #[test]
    fn a_dependent_without_owners_is_kept() {
        assert_eq!(
            decide(&dependent(&[]), Descendants::default(), states(&[])),
            Verdict::Keep
        );
    }

    #[test]
    fn foreground_owner_deletes_a_dependent_with_dependents_in_the_foreground() {
        let d = dependent(&["a"]);
        let waiting = [("a", OwnerState::DeletingDependents)];
        assert_eq!(decide(&d, Descendants::default(), states(&waiting)), BACKGROUND);
        let with_children = Descendants {
            exist: true,
            one_deleting_dependents: false,
        };
        assert_eq!(
            decide(&d, with_children, states(&waiting)),
            Verdict::Delete {
                policy: PropagationPolicy::Foreground,
                unblock: false
            }
        );
        let cycle = Descendants {
            exist: true,
            one_deleting_dependents: true,
        };
        assert_eq!(
            decide(&d, cycle, states(&waiting)),
            Verdict::Delete {
                policy: PropagationPolicy::Foreground,
                unblock: true
            }
        );
    }

    #[test]
    fn the_dependents_own_finalizer_picks_the_propagation() {
        let mut d = dependent(&["a"]);
        d.finalizers = vec!["orphan".into()];
        assert_eq!(
            decide(&d, Descendants::default(), states(&[])),
            Verdict::Delete {
                policy: PropagationPolicy::Orphan,
                unblock: false
            }
        );
    }

    #[test]
    fn unknown_kinds_are_retried_and_invalid_references_ignored() {
        let d = dependent(&["a", "b"]);
        let unknown = [("a", OwnerState::Unresolvable("no kind".into()))];
        assert!(matches!(
            decide(&d, Descendants::default(), states(&unknown)),
            Verdict::Retry(_)
        ));
        let invalid = [
            ("b", OwnerState::Invalid("namespaced".into())),
            ("a", OwnerState::Absent),
        ];
        assert!(matches!(
            decide(&d, Descendants::default(), states(&invalid)),
            Verdict::Ignore(_)
        ));
    }
}
