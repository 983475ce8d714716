//! Objects as the server sent them: the JSON text plus the few metadata fields the
//! engine routes by.
//!
//! Every list item and watch event of every flow passes through here, and most of them
//! are never looked at again (the echo of the syncer's own write, a source already
//! copied). Decoding each into a `DynamicObject` and re-encoding it for the store cost a
//! third of the syncer's CPU in the initial sync; a [`RawObject`] is one scan for name,
//! namespace and resourceVersion plus one copy of the text. The JSON is parsed into a
//! `serde_json::Value` only when an object is reconciled.
//!
//! A [`RawObject`] serializes back to its text verbatim, so it is also the body of the
//! syncer's writes through `kube::Api<RawObject>`.

use std::borrow::Cow;
use std::ops::Range;

use kube::api::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::de::{Deserializer, Error as _, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use ferry_api::well_known::KCP_CLUSTER_ANNOTATION;

/// One object of any resource type, kept as JSON text.
#[derive(Clone, Debug)]
pub struct RawObject {
    /// Name, namespace, resourceVersion and the `kcp.io/cluster` annotation only;
    /// everything else is in [`RawObject::json`].
    pub metadata: ObjectMeta,
    json: Box<RawValue>,
}

impl RawObject {
    /// The object as JSON text, exactly as received (`managedFields` included).
    pub fn json(&self) -> &str {
        self.json.get()
    }

    /// The object as a `Value`, without `managedFields` (never compared or copied).
    pub fn to_value(&self) -> Value {
        parse_without_managed_fields(self.json.get())
    }

    /// The body for a write of `obj`.
    pub fn from_value(obj: &Value) -> Result<RawObject, serde_json::Error> {
        let meta = |field: &str| obj.get("metadata")?.get(field)?.as_str().map(str::to_owned);
        let metadata = ObjectMeta {
            name: meta("name"),
            namespace: meta("namespace"),
            resource_version: meta("resourceVersion"),
            annotations: cluster_annotation(
                obj.pointer("/metadata/annotations")
                    .and_then(|a| a.get(KCP_CLUSTER_ANNOTATION))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            ),
            ..ObjectMeta::default()
        };
        let json = RawValue::from_string(serde_json::to_string(obj)?)?;
        Ok(RawObject { metadata, json })
    }
}

/// `json` (an object's text) without `metadata.managedFields`: a large share of a small
/// object's bytes, never compared or copied, so not worth keeping in memory. Text the
/// walk does not understand is returned whole ([`parse_without_managed_fields`] drops
/// the field again when parsing).
pub fn strip_managed_fields(json: &str) -> Cow<'_, str> {
    strip_metadata_member(json, "managedFields")
}

/// Metadata a stored object is kept without: set by the server, never read by a
/// reconcile and never copied (a copy strips them too, see
/// [`crate::transform::SERVER_SET_METADATA`]), yet some 60 bytes of every object.
const UNKEPT_METADATA: &[&str] = &["managedFields", "creationTimestamp", "generation", "selfLink"];

/// `json` without the metadata a store need not keep ([`UNKEPT_METADATA`]):
/// [`strip_managed_fields`] and the server's timestamps and counters.
pub fn strip_unkept_metadata(json: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(json);
    for member in UNKEPT_METADATA {
        if let Cow::Owned(stripped) = strip_metadata_member(&out, member) {
            out = Cow::Owned(stripped);
        }
    }
    out
}

/// Whether two texts of one object (as a store keeps them) differ only in their
/// resourceVersion and in the entries of `metadata.finalizers` (a list in both), and
/// not in whether `own` is among them: what other controllers' finalizers come and go
/// by, which no copy carries (see [`crate::transform`]'s stripping) and no reconcile
/// reads. kcp TMC's syncers each append their own finalizer to every object they sync,
/// so each such append reaches every other syncer. One walk over each text's metadata,
/// no parse: this runs for every watch event of a source. A list that appears or goes,
/// a difference anywhere else, or text the walk does not understand, is a change.
pub fn only_others_finalizers_differ(old: &str, new: &str, own: Option<&str>) -> bool {
    const MEMBERS: [&str; 2] = ["resourceVersion", "finalizers"];
    let (Some(old_values), Some(new_values)) = (metadata_values(old, MEMBERS), metadata_values(new, MEMBERS))
    else {
        return false;
    };
    if let Some(own) = own {
        let holds = |json: &str, values: &[Option<Range<usize>>; 2]| {
            values[1]
                .as_ref()
                .is_some_and(|list| lists(&json[list.clone()], own))
        };
        if holds(old, &old_values) != holds(new, &new_values) {
            return false;
        }
    }
    // Both texts must have the same members, equal around those values.
    if old_values
        .iter()
        .map(Option::is_some)
        .ne(new_values.iter().map(Option::is_some))
    {
        return false;
    }
    let in_order = |mut values: [Option<Range<usize>>; 2]| {
        values.sort_by_key(|v| v.as_ref().map(|r| r.start));
        values
    };
    let (mut old_at, mut new_at) = (0, 0);
    for (o, n) in in_order(old_values)
        .iter()
        .flatten()
        .zip(in_order(new_values).iter().flatten())
    {
        if old[old_at..o.start] != new[new_at..n.start] {
            return false;
        }
        (old_at, new_at) = (o.end, n.end);
    }
    old[old_at..] == new[new_at..]
}

/// Whether the JSON array text `list` holds the string `name`. Finalizers are qualified
/// names, never escaped in JSON, so one is found as is between quotes.
fn lists(list: &str, name: &str) -> bool {
    let bytes = list.as_bytes();
    list.match_indices(name)
        .any(|(at, _)| at > 0 && bytes[at - 1] == b'"' && bytes.get(at + name.len()) == Some(&b'"'))
}

/// Where the values of the top-level `metadata` members `names` are in `json`, read in
/// one walk over the metadata; `None` if the walk does not understand the text.
fn metadata_values<const N: usize>(json: &str, names: [&str; N]) -> Option<[Option<Range<usize>>; N]> {
    let mut found = std::array::from_fn(|_| None);
    let mut pos = skip_ws(json, member_value(json, 0, "metadata")?);
    if json.as_bytes().get(pos) != Some(&b'{') {
        return None;
    }
    pos = skip_ws(json, pos + 1);
    if json.as_bytes().get(pos) == Some(&b'}') {
        return Some(found);
    }
    loop {
        if json.as_bytes().get(pos) != Some(&b'"') {
            return None;
        }
        let key_end = skip_value(json, pos)?;
        let key = &json[pos + 1..key_end - 1];
        pos = skip_ws(json, key_end);
        if json.as_bytes().get(pos) != Some(&b':') {
            return None;
        }
        let start = skip_ws(json, pos + 1);
        let end = skip_value(json, start)?;
        if let Some(i) = names.iter().position(|n| *n == key) {
            found[i] = Some(start..end);
        }
        pos = skip_ws(json, end);
        match json.as_bytes().get(pos) {
            Some(b',') => pos = skip_ws(json, pos + 1),
            Some(b'}') => return Some(found),
            _ => return None,
        }
    }
}

/// `json` without the member `name` of its top-level `metadata`.
fn strip_metadata_member<'a>(json: &'a str, name: &str) -> Cow<'a, str> {
    match metadata_member_span(json, name) {
        Some(span) => {
            let mut out = String::with_capacity(json.len() - span.len());
            out.push_str(&json[..span.start]);
            out.push_str(&json[span.end..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(json),
    }
}

/// The bytes of the member `"<name>": ...` of the top-level `metadata`, including one
/// separating comma, if there is such a member.
fn metadata_member_span(json: &str, name: &str) -> Option<std::ops::Range<usize>> {
    let quoted = format!("\"{name}\"");
    let metadata = member_value(json, 0, "metadata")?;
    let mut pos = skip_ws(json, metadata);
    if json.as_bytes().get(pos) != Some(&b'{') {
        return None;
    }
    pos += 1;
    // Where the previous member ended (just before its comma), if any.
    let mut previous_end = None;
    loop {
        pos = skip_ws(json, pos);
        let key_start = pos;
        if json.as_bytes().get(pos) != Some(&b'"') {
            return None;
        }
        let is_target = json[pos..].starts_with(&quoted);
        pos = skip_ws(json, skip_value(json, pos)?);
        if json.as_bytes().get(pos) != Some(&b':') {
            return None;
        }
        let value_end = skip_value(json, skip_ws(json, pos + 1))?;
        let next = skip_ws(json, value_end);
        let comma = json.as_bytes().get(next) == Some(&b',');
        if is_target {
            return match (comma, previous_end) {
                (true, _) => Some(key_start..skip_ws(json, next + 1)),
                (false, Some(end)) => Some(end..value_end),
                (false, None) => Some(key_start..value_end),
            };
        }
        if !comma {
            return None;
        }
        previous_end = Some(value_end);
        pos = next + 1;
    }
}

/// Where the value of the top-level member `name` of the object at `pos` starts.
fn member_value(json: &str, pos: usize, name: &str) -> Option<usize> {
    let mut pos = skip_ws(json, pos);
    if json.as_bytes().get(pos) != Some(&b'{') {
        return None;
    }
    pos += 1;
    loop {
        pos = skip_ws(json, pos);
        let key = json.get(pos..)?;
        let is_target = key.len() > name.len() + 1
            && key.as_bytes()[0] == b'"'
            && key[1..].starts_with(name)
            && key.as_bytes()[name.len() + 1] == b'"';
        pos = skip_ws(json, skip_value(json, pos)?);
        if json.as_bytes().get(pos) != Some(&b':') {
            return None;
        }
        pos = skip_ws(json, pos + 1);
        if is_target {
            return Some(pos);
        }
        pos = skip_ws(json, skip_value(json, pos)?);
        if json.as_bytes().get(pos) != Some(&b',') {
            return None;
        }
        pos += 1;
    }
}

fn skip_ws(json: &str, mut pos: usize) -> usize {
    while json.as_bytes().get(pos).is_some_and(u8::is_ascii_whitespace) {
        pos += 1;
    }
    pos
}

/// The end of the JSON value starting at `pos`.
fn skip_value(json: &str, pos: usize) -> Option<usize> {
    let mut values = serde_json::Deserializer::from_str(json.get(pos..)?).into_iter::<IgnoredAny>();
    values.next()?.ok()?;
    Some(pos + values.byte_offset())
}

/// Parses an object, dropping `metadata.managedFields`.
pub fn parse_without_managed_fields(json: &str) -> Value {
    let mut value: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.shift_remove("managedFields");
    }
    value
}

/// The metadata fields the engine routes by; serde skips the rest without allocating.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeadMeta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    annotations: Option<HeadAnnotations>,
}

/// The one annotation the engine routes by: an object's logical cluster, on an upstream
/// that spans several (see [`super::ObjectRef::cluster`]).
#[derive(Default, Deserialize)]
struct HeadAnnotations {
    #[serde(rename = "kcp.io/cluster")]
    cluster: Option<String>,
}

/// `kcp.io/cluster` alone, as [`RawObject::metadata`] holds it.
fn cluster_annotation(cluster: Option<String>) -> Option<std::collections::BTreeMap<String, String>> {
    cluster.map(|c| [(KCP_CLUSTER_ANNOTATION.to_string(), c)].into())
}

impl From<HeadMeta> for ObjectMeta {
    fn from(meta: HeadMeta) -> ObjectMeta {
        ObjectMeta {
            name: meta.name,
            namespace: meta.namespace,
            resource_version: meta.resource_version,
            annotations: cluster_annotation(meta.annotations.and_then(|a| a.cluster)),
            ..ObjectMeta::default()
        }
    }
}

/// Reads `metadata` from an object's JSON text, which has already been checked to be
/// well-formed, and stops there: the fields after it (`data`, `spec`, `status`: most of
/// the bytes) are not scanned a second time.
fn scan_metadata(json: &str) -> Result<HeadMeta, serde_json::Error> {
    struct UntilMetadata<'a>(&'a mut Option<HeadMeta>);

    #[derive(Deserialize)]
    #[serde(field_identifier, rename_all = "lowercase")]
    enum Field {
        Metadata,
        #[serde(other)]
        Other,
    }

    impl<'de> Visitor<'de> for UntilMetadata<'_> {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a Kubernetes object")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<Field>()? {
                if let Field::Metadata = key {
                    *self.0 = Some(map.next_value()?);
                    return Ok(());
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }

    let mut metadata = None;
    let mut scan = serde_json::Deserializer::from_str(json);
    let scanned = scan.deserialize_map(UntilMetadata(&mut metadata));
    match (scanned, metadata) {
        (_, Some(metadata)) => Ok(metadata),
        // Leaving the map unread makes serde_json report an error; it means nothing here.
        (Ok(()), None) => Ok(HeadMeta::default()),
        (Err(e), None) => Err(e),
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = Box::<RawValue>::deserialize(deserializer)?;
        let metadata = scan_metadata(json.get()).map_err(D::Error::custom)?;
        Ok(RawObject {
            metadata: metadata.into(),
            json,
        })
    }
}

impl Serialize for RawObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(serializer)
    }
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{ObjectList, WatchEvent};
    use serde_json::json;

    const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"7","managedFields":[{"manager":"x","fieldsV1":{"f:data":{}}}],"labels":{"k":"v"}},"data":{"x":"1"}}"#;

    #[test]
    fn reads_identity_and_keeps_the_text() {
        let obj: RawObject = serde_json::from_str(CM).unwrap();
        assert_eq!(obj.metadata.name.as_deref(), Some("a"));
        assert_eq!(obj.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(obj.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(obj.json(), CM);
        assert_eq!(serde_json::to_string(&obj).unwrap(), CM, "written back verbatim");
    }

    #[test]
    fn values_leave_out_managed_fields() {
        let obj: RawObject = serde_json::from_str(CM).unwrap();
        let value = obj.to_value();
        assert!(value["metadata"].get("managedFields").is_none());
        assert_eq!(value["metadata"]["labels"]["k"], "v");
        assert_eq!(value["data"]["x"], "1");
    }

    #[test]
    fn decodes_inside_lists_and_watch_events() {
        let list = format!(
            r#"{{"kind":"List","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{CM}]}}"#
        );
        let list: ObjectList<RawObject> = serde_json::from_str(&list).unwrap();
        assert_eq!(list.items[0].metadata.name.as_deref(), Some("a"));
        let event = format!(r#"{{"type":"MODIFIED","object":{CM}}}"#);
        match serde_json::from_slice::<WatchEvent<RawObject>>(event.as_bytes()).unwrap() {
            WatchEvent::Modified(obj) => assert_eq!(obj.json(), CM),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn metadata_is_found_wherever_it_is() {
        for json in [
            r#"{"data":{"x":"{\"metadata\":1}"},"metadata":{"name":"late","resourceVersion":"3"}}"#,
            r#"{"metadata":{"name":"early","namespace":"n"},"spec":{"metadata":{"name":"inner"}}}"#,
            r#"{"kind":"Thing"}"#,
        ] {
            let obj: RawObject = serde_json::from_str(json).unwrap();
            assert_eq!(obj.json(), json);
            let value: Value = serde_json::from_str(json).unwrap();
            assert_eq!(
                obj.metadata.name.as_deref(),
                value["metadata"]["name"].as_str(),
                "{json}"
            );
            assert_eq!(
                obj.metadata.namespace.as_deref(),
                value["metadata"]["namespace"].as_str()
            );
        }
        assert!(serde_json::from_str::<RawObject>(r#"{"metadata":{"name":5}}"#).is_err());
        assert!(serde_json::from_str::<RawObject>(r#"{"metadata":"#).is_err());
    }

    #[test]
    fn managed_fields_are_cut_out_of_the_text() {
        let mf = r#""managedFields":[{"manager":"x","fieldsV1":{"f:data":{}}}]"#;
        let cases = [
            (
                format!(r#"{{"metadata":{{"name":"a",{mf},"labels":{{}}}},"data":{{}}}}"#),
                r#"{"metadata":{"name":"a","labels":{}},"data":{}}"#,
            ),
            (
                format!(r#"{{"metadata":{{"name":"a",{mf}}}}}"#),
                r#"{"metadata":{"name":"a"}}"#,
            ),
            (format!(r#"{{"metadata":{{{mf}}}}}"#), r#"{"metadata":{}}"#),
            (
                format!(r#"{{"metadata":{{{mf},"name":"a"}}}}"#),
                r#"{"metadata":{"name":"a"}}"#,
            ),
            (
                format!(r#"{{ "kind" : "X", "metadata" : {{ "name" : "a" , {mf} , "uid" : "u" }} }}"#),
                r#"{ "kind" : "X", "metadata" : { "name" : "a" , "uid" : "u" } }"#,
            ),
        ];
        for (json, want) in &cases {
            let got = strip_managed_fields(json);
            assert_eq!(got, *want);
            let mut value: Value = serde_json::from_str(json).unwrap();
            value["metadata"]
                .as_object_mut()
                .unwrap()
                .shift_remove("managedFields");
            assert_eq!(serde_json::from_str::<Value>(&got).unwrap(), value, "{json}");
        }
        // Only the top-level metadata's member is cut.
        for json in [
            r#"{"data":{"managedFields":"keep"},"metadata":{"name":"a"}}"#,
            r#"{"spec":{"metadata":{"managedFields":[]}},"metadata":{"name":"a"}}"#,
            r#"{"metadata":{"name":"a","labels":{"managedFields":"keep"}}}"#,
            r#"{"kind":"X"}"#,
            r#"not json"#,
        ] {
            assert!(matches!(strip_managed_fields(json), Cow::Borrowed(_)), "{json}");
        }
    }

    #[test]
    fn from_value_round_trips() {
        let value = json!({ "metadata": { "name": "b" }, "data": { "y": "2" } });
        let obj = RawObject::from_value(&value).unwrap();
        assert_eq!(obj.metadata.name.as_deref(), Some("b"));
        assert_eq!(obj.to_value(), value);
    }

    #[test]
    fn stores_keep_no_server_timestamps_or_counters() {
        let json = r#"{"metadata":{"name":"a","creationTimestamp":"2026-01-01T00:00:00Z","generation":4,"managedFields":[{}],"uid":"u","labels":{"generation":"keep"}},"spec":{"generation":1}}"#;
        let got = strip_unkept_metadata(json);
        assert_eq!(
            got,
            r#"{"metadata":{"name":"a","uid":"u","labels":{"generation":"keep"}},"spec":{"generation":1}}"#
        );
        let plain = r#"{"metadata":{"name":"a"}}"#;
        assert!(matches!(strip_unkept_metadata(plain), Cow::Borrowed(_)));
    }

    #[test]
    fn only_others_finalizers_differ_when_the_rest_and_the_own_finalizer_stay() {
        let own = Some("workload.kcp.io/syncer-a");
        let obj = |finalizers: Option<&str>, data: &str| {
            let finalizers = finalizers.map_or(String::new(), |f| format!(r#","finalizers":{f}"#));
            format!(
                r#"{{"metadata":{{"name":"a","namespace":"ns"{finalizers},"labels":{{"k":"v"}}}},"spec":{{"template":{{"metadata":{{"finalizers":["x"]}}}}}},"data":{data}}}"#
            )
        };
        let none = obj(None, r#"{"x":"1"}"#);
        let others = obj(Some(r#"["example.com/b"]"#), r#"{"x":"1"}"#);
        let mine = obj(Some(r#"["workload.kcp.io/syncer-a"]"#), r#"{"x":"1"}"#);
        let mine_and_others = obj(
            Some(r#"["workload.kcp.io/syncer-a","example.com/b"]"#),
            r#"{"x":"1"}"#,
        );
        // Another's finalizer added beside this syncer's, and removed.
        assert!(only_others_finalizers_differ(&mine, &mine_and_others, own));
        assert!(only_others_finalizers_differ(&mine_and_others, &mine, own));
        // Nothing but the resourceVersion changed, or that and another's finalizer.
        assert!(only_others_finalizers_differ(&mine, &mine, own));
        let at = |json: &str, rv: &str| {
            json.replacen(
                r#""name":"a","#,
                &format!(r#""name":"a","resourceVersion":"{rv}","#),
                1,
            )
        };
        assert!(only_others_finalizers_differ(
            &at(&mine, "7"),
            &at(&mine, "8"),
            own
        ));
        assert!(only_others_finalizers_differ(
            &at(&mine, "7"),
            &at(&mine_and_others, "8"),
            own
        ));
        assert!(!only_others_finalizers_differ(
            &at(&others, "7"),
            &at(&mine_and_others, "8"),
            own
        ));
        // This syncer's own added or removed.
        assert!(!only_others_finalizers_differ(&none, &mine, own));
        assert!(!only_others_finalizers_differ(&others, &mine_and_others, own));
        assert!(!only_others_finalizers_differ(&mine_and_others, &others, own));
        // Anything else changed too.
        let changed = obj(Some(r#"["example.com/b"]"#), r#"{"x":"2"}"#);
        assert!(!only_others_finalizers_differ(&none, &changed, own));
        let nested = none.replace(r#"["x"]"#, r#"["y"]"#);
        assert!(!only_others_finalizers_differ(&none, &nested, own));
        // The list as the last member of metadata, first of it, no finalizer of its own.
        let last = r#"{"metadata":{"name":"a","finalizers":["example.com/b"]},"data":{}}"#;
        let longer = r#"{"metadata":{"name":"a","finalizers":["example.com/b","c/d"]},"data":{}}"#;
        assert!(only_others_finalizers_differ(last, longer, None));
        assert!(only_others_finalizers_differ(last, longer, own));
        let first = r#"{"metadata":{"finalizers":["c/d"],"name":"a"},"data":{}}"#;
        let emptied = r#"{"metadata":{"finalizers":[],"name":"a"},"data":{}}"#;
        assert!(only_others_finalizers_differ(first, emptied, own));
        // A list that appears or goes is a change, as is text the walk cannot read.
        let bare = r#"{"metadata":{"name":"a"},"data":{}}"#;
        assert!(!only_others_finalizers_differ(&none, &others, own));
        assert!(!only_others_finalizers_differ(bare, last, None));
        assert!(!only_others_finalizers_differ(last, bare, None));
        assert!(!only_others_finalizers_differ(
            bare,
            r#"{"metadata":{"name":"a""#,
            None
        ));
        // A key that only ends like one of the members is none of them.
        let lookalike = r#"{"metadata":{"name":"a","xfinalizers":["p/q"]},"data":{}}"#;
        let lookalike2 = r#"{"metadata":{"name":"a","xfinalizers":["p/r"]},"data":{}}"#;
        assert!(!only_others_finalizers_differ(lookalike, lookalike2, None));
    }
}
