//! Copies someone other than the syncer changed in their cluster, which the
//! syncer restored ([`ferry_api::drift`]): the last drift of each, by the
//! upstream object it copies, and how many corrections so far — kept so a
//! profile can show them where the object's owner looks (KubeStellar: on the
//! mailbox's SyncerConfigs). Forgotten when the copy goes; at most
//! [`MAX_KEPT`] are kept, the oldest dropped first.

use std::collections::BTreeMap;

use ferry_api::drift::Drift;
use ferry_api::edge::DriftedObject;
use parking_lot::Mutex;

use super::UpstreamObject;

/// Most drifted objects kept.
pub const MAX_KEPT: usize = 1000;

/// The drift of each copy that drifted.
#[derive(Default)]
pub struct Drifts {
    map: Mutex<BTreeMap<UpstreamObject, Drift>>,
}

impl Drifts {
    /// Records that the copy of `source` was restored at `time`, where `fields`
    /// had changed; returns the drift as now recorded (its corrections counted).
    pub fn record(&self, source: UpstreamObject, fields: Vec<String>, time: &str) -> Drift {
        let mut map = self.map.lock();
        let corrections = map.get(&source).map_or(0, |d| d.corrections).saturating_add(1);
        let drift = Drift {
            time: time.to_string(),
            fields,
            corrections,
        };
        map.insert(source, drift.clone());
        if map.len() > MAX_KEPT {
            let oldest = map
                .iter()
                .min_by(|a, b| a.1.time.cmp(&b.1.time))
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        drift
    }

    /// Forgets the copy of `source` (it is gone); returns whether it had drifted.
    pub fn forget(&self, source: &UpstreamObject) -> bool {
        let mut map = self.map.lock();
        !map.is_empty() && map.remove(source).is_some()
    }

    /// Adds what an earlier run of the syncer reported (the profile's status as
    /// it finds it at start), so counts go on from there: an object recorded
    /// meanwhile keeps its newer drift, with both counts.
    pub fn carry_over(&self, reported: Vec<(UpstreamObject, Drift)>) {
        let mut map = self.map.lock();
        for (source, earlier) in reported.into_iter().take(MAX_KEPT) {
            match map.get_mut(&source) {
                Some(now) => now.corrections = now.corrections.saturating_add(earlier.corrections),
                None => {
                    map.insert(source, earlier);
                }
            }
        }
    }

    /// The `limit` most recent drifts, newest first, as a SyncerConfig lists them.
    pub fn recent(&self, limit: usize) -> Vec<DriftedObject> {
        let map = self.map.lock();
        let mut all: Vec<(&UpstreamObject, &Drift)> = map.iter().collect();
        all.sort_by(|a, b| b.1.time.cmp(&a.1.time).then_with(|| a.0.cmp(b.0)));
        all.into_iter()
            .take(limit)
            .map(|(source, drift)| DriftedObject {
                resource: source.resource.clone(),
                namespace: source.namespace.clone(),
                name: source.name.clone(),
                drift: drift.clone(),
            })
            .collect()
    }

    /// How many drifted objects are kept.
    pub fn len(&self) -> usize {
        self.map.lock().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn web(name: &str) -> UpstreamObject {
        UpstreamObject {
            resource: "apps/deployments".into(),
            cluster: None,
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    #[test]
    fn corrections_count_per_object_and_the_newest_come_first() {
        let drifts = Drifts::default();
        drifts.record(web("a"), vec!["$.spec.replicas".into()], "2026-11-27T10:00:00Z");
        let again = drifts.record(web("a"), vec!["$.data.x".into()], "2026-11-27T10:05:00Z");
        assert_eq!(again.corrections, 2);
        assert_eq!(again.fields, vec!["$.data.x"]);
        drifts.record(web("b"), vec!["$.spec.paused".into()], "2026-11-27T10:01:00Z");
        let listed = drifts.recent(50);
        assert_eq!(
            listed.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(drifts.recent(1).len(), 1);
        assert!(drifts.forget(&web("a")));
        assert!(!drifts.forget(&web("a")));
        assert_eq!(drifts.len(), 1);
    }

    #[test]
    fn counts_go_on_from_what_an_earlier_run_reported() {
        let drifts = Drifts::default();
        drifts.record(web("a"), vec!["$.spec.replicas".into()], "2026-11-27T10:05:00Z");
        let earlier = |n| Drift {
            time: "2026-11-27T09:00:00Z".into(),
            fields: vec!["$.spec.paused".into()],
            corrections: n,
        };
        drifts.carry_over(vec![(web("a"), earlier(3)), (web("b"), earlier(2))]);
        let listed = drifts.recent(50);
        assert_eq!(listed[0].drift.corrections, 4);
        assert_eq!(listed[0].drift.fields, vec!["$.spec.replicas"]);
        assert_eq!(listed[1].drift.corrections, 2);
    }

    #[test]
    fn the_oldest_drift_goes_when_too_many_are_kept() {
        let drifts = Drifts::default();
        for i in 0..=MAX_KEPT {
            drifts.record(
                web(&format!("w{i:05}")),
                vec![],
                &format!("2026-11-27T10:00:00.{i:05}Z"),
            );
        }
        assert_eq!(drifts.len(), MAX_KEPT);
        assert!(!drifts.forget(&web("w00000")), "the oldest was dropped");
    }
}
