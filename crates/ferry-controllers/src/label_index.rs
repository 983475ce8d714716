//! Looking objects up by label: what the KubeStellar placement index and
//! the kcp TMC scheduler's index share.

use std::collections::BTreeSet;

use ferry_server::selector::{LabelSelector, Operator};

/// The candidates of the most selective equality requirement (`=`, `==`,
/// `in`) of `s`, looked up with `by_label`; `None` when `s` has none, and
/// every object in scope is a candidate. A superset of what `s` matches:
/// the caller still checks `s`.
pub fn narrowest<'a, T: Ord + 'a>(
    s: &LabelSelector,
    by_label: impl Fn(&str, &str) -> Option<&'a BTreeSet<T>>,
) -> Option<BTreeSet<&'a T>> {
    s.requirements()
        .iter()
        .filter(|r| {
            matches!(
                r.operator(),
                Operator::Equals | Operator::DoubleEquals | Operator::In
            )
        })
        .map(|r| {
            r.values()
                .iter()
                .filter_map(|v| by_label(r.key(), v))
                .flatten()
                .collect::<BTreeSet<&T>>()
        })
        .min_by_key(BTreeSet::len)
}
