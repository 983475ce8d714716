//! Building JSON the way Go's `encoding/json` writes Kubernetes objects: an
//! object builder that follows `omitempty`, and the JSON forms of the wire
//! types that are not plain scalars (Time, MicroTime, Quantity, IntOrString,
//! bytes).

use std::collections::BTreeMap;

use base64::Engine;
use chrono::{DateTime, SecondsFormat};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Value};

/// `time.Time{}.Unix()` in Go: a zero time that was sent with its seconds.
const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

/// A JSON object under construction, one field per call. A field is left out
/// exactly when Go's JSON encoder would leave it out (or write `null`, which
/// Kubernetes decodes the same way).
///
/// Go's protobuf encoder always writes value-typed fields and writes pointer
/// fields only when set, so a scalar arrives as `Some` either way; which
/// method a converter picks says which kind of Go field it is.
#[derive(Debug, Default)]
pub(super) struct Fields(Map<String, Value>);

impl Fields {
    pub fn new() -> Self {
        Self::default()
    }

    /// A string; an empty one is left out (every string in the converted kinds
    /// is either `omitempty` or meaningless when empty).
    pub fn str(self, key: &str, value: &Option<String>) -> Self {
        match value.as_deref() {
            Some(s) if !s.is_empty() => self.with(key, Value::String(s.to_owned())),
            _ => self,
        }
    }

    /// A scalar that is a pointer, or not `omitempty`, in Go: kept whenever
    /// the sender set it, zero included (`replicas: 0`, `port: 0`).
    pub fn opt<T: Into<Value>>(self, key: &str, value: Option<T>) -> Self {
        match value {
            Some(v) => self.with(key, v.into()),
            None => self,
        }
    }

    /// An `omitempty` scalar held by value in Go: left out when zero or false.
    pub fn nonzero<T: Into<Value> + Default + PartialEq>(self, key: &str, value: Option<T>) -> Self {
        self.opt(key, value.filter(|v| *v != T::default()))
    }

    /// A list of scalars, left out when empty.
    pub fn list<T: Into<Value> + Clone>(self, key: &str, values: &[T]) -> Self {
        if values.is_empty() {
            return self;
        }
        self.with(
            key,
            Value::Array(values.iter().cloned().map(Into::into).collect()),
        )
    }

    /// A `map[string]string`, left out when empty. Empty values are kept.
    pub fn string_map(self, key: &str, map: &BTreeMap<String, String>) -> Self {
        self.map(key, map, |v| Value::String(v.clone()))
    }

    /// A map of messages or special values, left out when empty.
    pub fn map<V>(self, key: &str, map: &BTreeMap<String, V>, convert: impl Fn(&V) -> Value) -> Self {
        if map.is_empty() {
            return self;
        }
        let object = map.iter().map(|(k, v)| (k.clone(), convert(v))).collect();
        self.with(key, Value::Object(object))
    }

    /// A nested message, converted when present. Go always sends struct
    /// fields held by value, so those come out as `{}` when empty, as in Go.
    pub fn message<M>(self, key: &str, value: &Option<M>, convert: impl Fn(&M) -> Value) -> Self {
        match value {
            Some(m) => self.with(key, convert(m)),
            None => self,
        }
    }

    /// A list of messages, left out when empty.
    pub fn messages<M>(self, key: &str, values: &[M], convert: impl Fn(&M) -> Value) -> Self {
        if values.is_empty() {
            return self;
        }
        self.with(key, Value::Array(values.iter().map(convert).collect()))
    }

    /// The fields of an embedded Go struct, which JSON flattens into this
    /// object (e.g. `LocalObjectReference` inside `SecretKeySelector`).
    pub fn inline<M>(mut self, value: &Option<M>, convert: impl Fn(&M) -> Value) -> Self {
        if let Some(Value::Object(fields)) = value.as_ref().map(convert) {
            self.0.extend(fields);
        }
        self
    }

    /// A `metav1.Time`; the zero time is left out.
    pub fn time(self, key: &str, value: &Option<Time>) -> Self {
        let text = value.as_ref().and_then(|t| format_time(t.seconds, None));
        self.opt(key, text)
    }

    /// A `metav1.MicroTime`; the zero time is left out.
    pub fn micro_time(self, key: &str, value: &Option<MicroTime>) -> Self {
        let text = value
            .as_ref()
            .and_then(|t| format_time(t.seconds, Some(t.nanos.unwrap_or(0))));
        self.opt(key, text)
    }

    /// A `resource.Quantity`.
    pub fn quantity(self, key: &str, value: &Option<Quantity>) -> Self {
        self.message(key, value, quantity)
    }

    /// A `map[ResourceName]resource.Quantity` (`ResourceList`).
    pub fn quantities(self, key: &str, map: &BTreeMap<String, Quantity>) -> Self {
        self.map(key, map, quantity)
    }

    /// An `intstr.IntOrString`.
    pub fn int_or_string(self, key: &str, value: &Option<IntOrString>) -> Self {
        self.message(key, value, int_or_string)
    }

    /// A `[]byte`, as base64; left out when empty.
    pub fn bytes(self, key: &str, value: &Option<Vec<u8>>) -> Self {
        match value {
            Some(b) if !b.is_empty() => self.with(key, base64(b)),
            _ => self,
        }
    }

    /// A `map[string][]byte`, values as base64; left out when empty.
    pub fn bytes_map(self, key: &str, map: &BTreeMap<String, Vec<u8>>) -> Self {
        self.map(key, map, |v| base64(v))
    }

    pub fn build(self) -> Value {
        Value::Object(self.0)
    }

    fn with(mut self, key: &str, value: Value) -> Self {
        self.0.insert(key.to_owned(), value);
        self
    }
}

/// RFC 3339 in UTC: whole seconds for `Time` (`nanos: None`), microseconds
/// for `MicroTime`. `None` for the zero time, which Go writes as `null`.
fn format_time(seconds: Option<i64>, nanos: Option<i32>) -> Option<String> {
    let seconds = seconds.filter(|s| *s != GO_ZERO_TIME_SECONDS)?;
    match nanos {
        None => {
            let t = DateTime::from_timestamp(seconds, 0)?;
            Some(t.to_rfc3339_opts(SecondsFormat::Secs, true))
        }
        Some(nanos) => {
            let t = DateTime::from_timestamp(seconds, u32::try_from(nanos).unwrap_or(0))?;
            Some(t.to_rfc3339_opts(SecondsFormat::Micros, true))
        }
    }
}

/// A Quantity is its canonical string (`"500m"`, `"1Gi"`).
pub(super) fn quantity(q: &Quantity) -> Value {
    Value::String(q.string.clone().unwrap_or_else(|| "0".to_owned()))
}

/// IntOrString is a JSON number (type 0) or string (type 1).
pub(super) fn int_or_string(v: &IntOrString) -> Value {
    const STRING: i64 = 1;
    if v.r#type == Some(STRING) {
        Value::String(v.str_val.clone().unwrap_or_default())
    } else {
        Value::from(v.int_val.unwrap_or(0))
    }
}

/// Go writes `[]byte` as standard, padded base64.
pub(super) fn base64(bytes: &[u8]) -> Value {
    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_is_rfc3339_in_whole_seconds() {
        assert_eq!(
            format_time(Some(1_136_214_245), None).as_deref(),
            Some("2006-01-02T15:04:05Z")
        );
    }

    #[test]
    fn micro_time_keeps_microseconds() {
        assert_eq!(
            format_time(Some(1_136_214_245), Some(123_456_789)).as_deref(),
            Some("2006-01-02T15:04:05.123456Z")
        );
    }

    #[test]
    fn zero_time_is_left_out() {
        assert_eq!(format_time(None, None), None);
        assert_eq!(format_time(Some(GO_ZERO_TIME_SECONDS), None), None);
        let fields = Fields::new().time("t", &Some(Time::default())).build();
        assert_eq!(fields, serde_json::json!({}));
    }

    #[test]
    fn int_or_string_follows_its_type() {
        let int = IntOrString {
            r#type: Some(0),
            int_val: Some(8080),
            str_val: Some(String::new()),
        };
        let string = IntOrString {
            r#type: Some(1),
            int_val: Some(0),
            str_val: Some("50%".into()),
        };
        assert_eq!(int_or_string(&int), serde_json::json!(8080));
        assert_eq!(int_or_string(&string), serde_json::json!("50%"));
    }

    #[test]
    fn omitempty_scalars_drop_zero_but_pointers_keep_it() {
        let fields = Fields::new()
            .nonzero("hostPort", Some(0))
            .opt("replicas", Some(0))
            .str("namespace", &Some(String::new()))
            .build();
        assert_eq!(fields, serde_json::json!({"replicas": 0}));
    }
}
