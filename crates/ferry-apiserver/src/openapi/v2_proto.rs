//! The Swagger 2.0 document in gnostic's protobuf encoding
//! (`openapi.v2.Document` from gnostic's `openapiv2/OpenAPIv2.proto`), which
//! is what kubectl requests from `/openapi/v2`.
//!
//! Only the messages and fields [`super::v2`] produces are defined; field
//! numbers are gnostic's, so a Go client decodes them and ignores nothing it
//! needs. Vendor extensions travel as YAML text (`Any.yaml`), which JSON is.

use prost::Message;
use serde_json::{Map, Value};

#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

/// Always empty: the document has no paths.
#[derive(Clone, PartialEq, Message)]
struct Paths {}

#[derive(Clone, PartialEq, Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Schema {
    #[prost(string, tag = "1")]
    xref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, optional, boxed, tag = "21")]
    additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    items: Option<ItemsItem>,
    #[prost(message, optional, tag = "25")]
    properties: Option<Properties>,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct AdditionalPropertiesItem {
    #[prost(oneof = "AdditionalProperties", tags = "1, 2")]
    oneof: Option<AdditionalProperties>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum AdditionalProperties {
    #[prost(message, tag = "1")]
    Schema(Schema),
    #[prost(bool, tag = "2")]
    Boolean(bool),
}

#[derive(Clone, PartialEq, Message)]
struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Properties {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

/// Encodes a Swagger 2.0 JSON document built by [`super::v2`].
pub(super) fn encode(doc: &Value) -> Vec<u8> {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    Document {
        swagger: text(doc, "swagger"),
        info: Some(Info {
            title: text(&doc["info"], "title"),
            version: text(&doc["info"], "version"),
        }),
        paths: Some(Paths {}),
        definitions: Some(Definitions {
            additional_properties: named_schemas(doc.get("definitions")),
        }),
    }
    .encode_to_vec()
}

fn named_schemas(map: Option<&Value>) -> Vec<NamedSchema> {
    map.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(name, value)| NamedSchema {
                    name: name.clone(),
                    value: Some(schema(value)),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn schema(value: &Value) -> Schema {
    let empty = Map::new();
    let s = value.as_object().unwrap_or(&empty);
    let text = |key: &str| s.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    let additional_properties = match s.get("additionalProperties") {
        Some(Value::Bool(b)) => Some(AdditionalProperties::Boolean(*b)),
        Some(v @ Value::Object(_)) => Some(AdditionalProperties::Schema(schema(v))),
        _ => None,
    };
    Schema {
        xref: text("$ref"),
        format: text("format"),
        description: text("description"),
        required: s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(String::from).collect())
            .unwrap_or_default(),
        additional_properties: additional_properties
            .map(|a| Box::new(AdditionalPropertiesItem { oneof: Some(a) })),
        r#type: s.get("type").and_then(Value::as_str).map(|t| TypeItem {
            value: vec![t.to_string()],
        }),
        items: s.get("items").filter(|i| i.is_object()).map(|i| ItemsItem {
            schema: vec![schema(i)],
        }),
        // Present even when empty: kube-openapi tells objects with fields
        // ("kinds") from maps by whether `properties` is set.
        properties: s.get("properties").map(|p| Properties {
            additional_properties: named_schemas(Some(p)),
        }),
        vendor_extension: s
            .iter()
            .filter(|(k, _)| k.starts_with("x-"))
            .map(|(k, v)| NamedAny {
                name: k.clone(),
                value: Some(Any { yaml: v.to_string() }),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encodes_with_gnostic_field_numbers() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0"},
            "paths": {},
            "definitions": {"a.B": {
                "type": "object",
                "required": ["spec"],
                "properties": {"spec": {"type": "array", "items": {"$ref": "#/definitions/c.D"}}},
                "x-kubernetes-group-version-kind": [{"group": "a", "version": "v1", "kind": "B"}],
            }},
        });
        let bytes = encode(&doc);
        // Document.swagger (field 1, length-delimited) comes first.
        assert_eq!(&bytes[..5], b"\x0a\x032.0");
        let decoded = Document::decode(bytes.as_slice()).unwrap();
        let b = &decoded.definitions.unwrap().additional_properties[0];
        assert_eq!(b.name, "a.B");
        let schema = b.value.as_ref().unwrap();
        assert_eq!(schema.r#type.as_ref().unwrap().value, vec!["object"]);
        assert_eq!(schema.required, vec!["spec"]);
        let spec = &schema.properties.as_ref().unwrap().additional_properties[0];
        let items = &spec.value.as_ref().unwrap().items.as_ref().unwrap().schema;
        assert_eq!(items[0].xref, "#/definitions/c.D");
        let ext = &schema.vendor_extension[0];
        assert_eq!(ext.name, "x-kubernetes-group-version-kind");
        let yaml: Value = serde_json::from_str(&ext.value.as_ref().unwrap().yaml).unwrap();
        assert_eq!(yaml[0]["kind"], "B");
    }

    #[test]
    fn empty_properties_stay_present() {
        let s = schema(&json!({"type": "object", "properties": {}}));
        assert_eq!(s.properties, Some(Properties::default()));
        let map = schema(&json!({"type": "object", "additionalProperties": {"type": "string"}}));
        assert!(map.properties.is_none());
        assert!(matches!(
            map.additional_properties.unwrap().oneof,
            Some(AdditionalProperties::Schema(_))
        ));
    }
}
