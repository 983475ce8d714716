//! The patches that put a syncer's finalizer on an upstream object and take it off,
//! written so that the syncers of many clusters changing the same object at once do not
//! refuse each other.
//!
//! Under kcp TMC every cluster's syncer holds each object it copies with a finalizer of
//! its own (`workload.kcp.io/syncer-<key>`), all on the same upstream object, and they
//! all see a new object within a few milliseconds of each other. A write of the whole
//! list conditional on the resourceVersion read (kcp's syncer updates the object) lets
//! one of them through and refuses the rest (409), which read again and race again:
//! with N clusters about N²/2 refused writes per object.
//!
//! A JSON patch (`application/json-patch+json`) says what to change in the list
//! rather than what the list becomes, and kube-apiserver (hence kcp, and the hub)
//! applies it to the object as stored, retrying its own storage conflicts; it takes
//! one for every kind, custom resources included, which a strategic merge patch does
//! not (415 for a custom resource). So:
//! - **add**: `test` the uid read (a stale patch never lands on an object deleted and
//!   made again), then `add` at `/metadata/finalizers/-`, the end of the list, whatever
//!   others appended meanwhile. `-` needs the list to exist: on an object without
//!   finalizers the list is written whole by a merge patch conditional on the version
//!   read, so of syncers racing there the first wins and the others read again and
//!   append (one refusal each at most, not one per round of a race).
//! - **remove**: `test` the uid and that the finalizer is at the index read, then
//!   `remove` it there (each occurrence, last first). If another writer moved it (by
//!   taking out one before it), the test fails (422) and the syncer reads again.
//!
//! Nothing else in the list is written, so another's finalizer can be neither lost nor
//! duplicated. The syncer's own is not appended twice either: its store may still show
//! a version from before its append (another syncer's append that arrived while its
//! patch was on the way), so until the store shows the finalizer the flow remembers the
//! append (`Flow::appended`) and reads the object before appending again. Through kcp's own syncer virtual workspace a syncer sees only its own
//! finalizer, so it always finds the list absent there and takes the merge patch; the
//! JSON patch is what a view showing every finalizer (Ferry's hub) gets.

use serde_json::{json, Value};

/// `token` escaped for a JSON pointer (RFC 6901).
fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn uid_test(read: &Value) -> Option<Value> {
    let uid = read.pointer("/metadata/uid")?.as_str()?;
    Some(json!({ "op": "test", "path": "/metadata/uid", "value": uid }))
}

/// The JSON patch appending `finalizer` to the finalizers of the object read as `read`,
/// or `None` if that object has no finalizer list (or no uid) to append to.
pub fn append(read: &Value, finalizer: &str) -> Option<Value> {
    read.pointer("/metadata/finalizers")?.as_array()?;
    Some(json!([
        uid_test(read)?,
        { "op": "add", "path": "/metadata/finalizers/-", "value": finalizer },
    ]))
}

/// The JSON patch removing every occurrence of `finalizer` from the object read as
/// `read`, each where it was read, along with what `release` (a profile's merge patch
/// releasing the object, [`crate::profile::Marks::release_source_patch`]) deletes from
/// its labels and annotations. `None` if `release` asks for more than such deletions
/// (then only a merge patch says it), or `read` has no uid.
pub fn remove(read: &Value, finalizer: &str, release: &Value) -> Option<Value> {
    let mut ops = vec![uid_test(read)?];
    let finalizers = read
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, f) in finalizers.iter().enumerate().rev() {
        if f.as_str() == Some(finalizer) {
            let path = format!("/metadata/finalizers/{i}");
            ops.push(json!({ "op": "test", "path": path, "value": finalizer }));
            ops.push(json!({ "op": "remove", "path": path }));
        }
    }
    let meta = release.get("metadata")?.as_object()?;
    for (field, value) in meta {
        match (field.as_str(), value) {
            ("finalizers", _) => {}
            ("labels" | "annotations", Value::Object(deleted)) => {
                for (name, value) in deleted {
                    if !value.is_null() {
                        return None;
                    }
                    let present = read
                        .pointer(&format!("/metadata/{field}"))
                        .and_then(|m| m.get(name));
                    if present.is_some() {
                        let path = format!("/metadata/{field}/{}", pointer_token(name));
                        ops.push(json!({ "op": "remove", "path": path }));
                    }
                }
            }
            _ => return None,
        }
    }
    if release.as_object().is_some_and(|o| o.len() > 1) {
        return None;
    }
    Some(Value::Array(ops))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(doc: &Value, patch: &Value) -> Result<Value, json_patch::PatchError> {
        let mut doc = doc.clone();
        let patch: json_patch::Patch = serde_json::from_value(patch.clone()).unwrap();
        json_patch::patch(&mut doc, &patch)?;
        Ok(doc)
    }

    fn object(finalizers: &[&str]) -> Value {
        json!({ "metadata": {
            "name": "a", "uid": "u1",
            "finalizers": finalizers,
            "labels": { "state.workload.kcp.io/k1": "Sync", "app": "web" },
            "annotations": { "note": "x" },
        } })
    }

    #[test]
    fn appending_keeps_what_others_appended_since_the_read() {
        let read = object(&["other/a"]);
        let patch = append(&read, "mine").unwrap();
        // Two others appended after this syncer read the object.
        let now = object(&["other/a", "other/b", "other/c"]);
        let out = apply(&now, &patch).unwrap();
        assert_eq!(
            out["metadata"]["finalizers"],
            json!(["other/a", "other/b", "other/c", "mine"])
        );
    }

    #[test]
    fn appending_needs_a_list_and_the_uid_read() {
        let mut bare = object(&[]);
        bare["metadata"].as_object_mut().unwrap().remove("finalizers");
        assert!(append(&bare, "mine").is_none());
        // The name made again: the patch based on the old object does not apply.
        let patch = append(&object(&["other/a"]), "mine").unwrap();
        let mut recreated = object(&["other/a"]);
        recreated["metadata"]["uid"] = json!("u2");
        assert!(apply(&recreated, &patch).is_err());
    }

    #[test]
    fn removing_takes_out_only_this_finalizer_where_it_was_read() {
        let release = json!({ "metadata": {
            "finalizers": [],
            "labels": { "state.workload.kcp.io/k1": null, "absent": null },
            "annotations": { "deletion.internal.workload.kcp.io/k1": null },
        } });
        let read = object(&["other/a", "mine", "other/b", "mine"]);
        let patch = remove(&read, "mine", &release).unwrap();
        let out = apply(&read, &patch).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["other/a", "other/b"]));
        assert_eq!(out["metadata"]["labels"], json!({ "app": "web" }));
        assert_eq!(out["metadata"]["annotations"], json!({ "note": "x" }));
        // Another writer took out a finalizer before this one: its index moved, so the
        // test refuses the patch rather than removing someone else's.
        let moved = object(&["mine", "other/b", "mine"]);
        assert!(apply(&moved, &patch).is_err());
    }

    #[test]
    fn a_release_that_sets_something_is_left_to_a_merge_patch() {
        let read = object(&["mine"]);
        let sets = json!({ "metadata": { "labels": { "state.workload.kcp.io/k1": "Gone" } } });
        assert!(remove(&read, "mine", &sets).is_none());
        let elsewhere = json!({ "metadata": { "finalizers": [] }, "spec": {} });
        assert!(remove(&read, "mine", &elsewhere).is_none());
    }
}
