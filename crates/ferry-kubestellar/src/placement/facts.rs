//! What the translator reads of each copy in a mailbox, kept across passes
//! by the copy's resourceVersion. A full pass looks at every copy at every
//! destination (objects × destinations) several times — who placed it, from
//! which version, whether its content is what is wanted, the status that
//! came back — and parsing each copy again each time was most of a pass's
//! work at fleet scale, while between two passes nearly every copy is
//! unchanged.

use std::collections::HashMap;
use std::sync::Arc;

use ferry_server::storage::{ObjectKey, StoredObject};
use parking_lot::Mutex;
use serde_json::Value;

use super::{copy, reported, str_at, summary, transform, SOURCE_ANNOTATION, SOURCE_RV_ANNOTATION};

/// A digest of a copy's content ([`copy::content`]): equal exactly when the
/// contents are equal as JSON values (object members in any order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentDigest([u8; 32]);

impl ContentDigest {
    /// The digest of the content of copy `v`.
    pub fn of_copy(v: &Value) -> ContentDigest {
        ContentDigest(reported::canonical_digest(&copy::content(v)))
    }
}

/// What the translator reads of one copy at one resourceVersion.
#[derive(Debug)]
pub struct CopyFacts {
    pub rv: u64,
    /// The workspace it was placed from ([`SOURCE_ANNOTATION`]).
    pub source: String,
    /// The source's resourceVersion it was made from ([`SOURCE_RV_ANNOTATION`]).
    pub source_rv: String,
    /// The transforms that shaped it ([`transform::TRANSFORMED_BY_ANNOTATION`]).
    pub transformed_by: String,
    pub content: ContentDigest,
    /// [`summary::status_digest`].
    pub status_digest: String,
    /// The status its cluster returned ([`reported::reported`]).
    pub reported: Option<Value>,
}

impl CopyFacts {
    fn read(copy: &StoredObject) -> CopyFacts {
        let v = copy.value();
        let annotation = |name: &str| {
            str_at(&v, &format!("/metadata/annotations/{}", name.replace('/', "~1"))).to_string()
        };
        CopyFacts {
            rv: copy.rv,
            source: annotation(SOURCE_ANNOTATION),
            source_rv: annotation(SOURCE_RV_ANNOTATION),
            transformed_by: annotation(transform::TRANSFORMED_BY_ANNOTATION),
            content: ContentDigest::of_copy(&v),
            status_digest: summary::status_digest(&v),
            reported: reported::reported(&v).cloned(),
        }
    }
}

/// [`CopyFacts`] by copy, each with the pass that last asked for it.
#[derive(Default)]
pub struct CopyMemo {
    inner: Mutex<Memo>,
}

#[derive(Default)]
struct Memo {
    pass: u64,
    facts: HashMap<ObjectKey, (u64, Arc<CopyFacts>)>,
}

impl CopyMemo {
    /// The facts of `copy`, stored at `key`: read again only when its
    /// resourceVersion moved since they were last read.
    pub fn facts(&self, key: &ObjectKey, copy: &StoredObject) -> Arc<CopyFacts> {
        {
            let mut memo = self.inner.lock();
            let pass = memo.pass;
            if let Some((seen, facts)) = memo.facts.get_mut(key) {
                if facts.rv == copy.rv {
                    *seen = pass;
                    return facts.clone();
                }
            }
        }
        // Parsed outside the lock: mailboxes are applied several at once.
        let facts = Arc::new(CopyFacts::read(copy));
        let mut memo = self.inner.lock();
        let pass = memo.pass;
        memo.facts.insert(key.clone(), (pass, facts.clone()));
        facts
    }

    /// A full pass begins: [`CopyMemo::forget_unseen`] at its end keeps
    /// what it asked for.
    pub fn begin_full_pass(&self) {
        self.inner.lock().pass += 1;
    }

    /// Forget the copies the full pass now ending did not look at (gone,
    /// or no longer placed).
    pub fn forget_unseen(&self) {
        let mut memo = self.inner.lock();
        let pass = memo.pass;
        memo.facts.retain(|_, (seen, _)| *seen == pass);
    }

    /// How many copies it remembers.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.inner.lock().facts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(rv: u64, v: &Value) -> StoredObject {
        StoredObject {
            rv,
            json: serde_json::to_vec(v).unwrap().into(),
            labels: Default::default(),
        }
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            cluster: "mb".into(),
            resource: "/configmaps".into(),
            namespace: "shop".into(),
            name: name.into(),
        }
    }

    #[test]
    fn contents_equal_in_any_member_order_have_one_digest_and_unequal_ones_differ() {
        let a = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1", "y": "2"}});
        let b = json!({"data": {"y": "2", "x": "1"}, "metadata": {"name": "a"}, "kind": "ConfigMap", "apiVersion": "v1"});
        assert_eq!(a, b);
        assert_eq!(ContentDigest::of_copy(&a), ContentDigest::of_copy(&b));
        // Status and the placement's own annotations are not content.
        let mut c = a.clone();
        c["status"] = json!({"phase": "x"});
        c["metadata"]["annotations"] = json!({SOURCE_ANNOTATION: "root:w", SOURCE_RV_ANNOTATION: "7"});
        assert_eq!(ContentDigest::of_copy(&a), ContentDigest::of_copy(&c));
        for changed in [
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1", "y": "3"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": "1"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x1": "", "y": "2"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"x": 1, "y": "2"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": ["x", "1", "y", "2"]}),
        ] {
            assert_ne!(
                ContentDigest::of_copy(&a),
                ContentDigest::of_copy(&changed),
                "{changed}"
            );
        }
    }

    #[test]
    fn facts_are_read_again_only_when_the_copy_moves_and_unseen_copies_are_forgotten() {
        let memo = CopyMemo::default();
        let v = json!({"metadata": {"name": "a", "annotations": {SOURCE_ANNOTATION: "root:w1"}}});
        let first = memo.facts(&key("a"), &stored(5, &v));
        assert_eq!(first.source, "root:w1");
        // The same version: the same facts, even from other bytes.
        let again = memo.facts(&key("a"), &stored(5, &json!({})));
        assert!(Arc::ptr_eq(&first, &again));
        // A new version is read.
        let moved = json!({"metadata": {"name": "a", "annotations": {SOURCE_ANNOTATION: "root:w2"}}});
        assert_eq!(memo.facts(&key("a"), &stored(6, &moved)).source, "root:w2");

        memo.facts(&key("b"), &stored(1, &v));
        memo.begin_full_pass();
        memo.facts(&key("a"), &stored(6, &moved));
        memo.forget_unseen();
        assert_eq!(memo.len(), 1, "b was not looked at in the last full pass");
        assert_eq!(memo.facts(&key("a"), &stored(6, &json!({}))).source, "root:w2");
    }
}
