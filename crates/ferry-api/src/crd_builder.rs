//! How one CRD is built from a kind's Rust types (or written by hand): the
//! schema as kube-derive would make it, descriptions cleaned for `kubectl
//! explain`, printer columns and subresources. The kinds' modules call this;
//! [`crate::crds`] lists them all.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::schema::{OptionalEnum, OptionalIntOrString, StructuralSchemaRewriter};
use schemars::generate::SchemaSettings;
use schemars::transform::AddNullable;
use schemars::JsonSchema;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

use crate::well_known;

/// Names and options of one CRD; filled in by the `cluster_resource!` macro.
#[doc(hidden)]
pub struct CrdInfo {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub status_subresource: bool,
    /// `(name, type, jsonPath)`
    pub printer_columns: &'static [(&'static str, &'static str, &'static str)],
}

/// The schema of `T` as kube-derive would produce it: inlined, OpenAPI v3, structural.
fn schema_for<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .with_transform(AddNullable::default())
        .with_transform(StructuralSchemaRewriter)
        .with_transform(OptionalEnum)
        .with_transform(OptionalIntOrString)
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("title");
        obj.remove("$schema");
    }
    strip_defaults(&mut value);
    value
}

/// Removes every `default` keyword from a schema.
///
/// schemars records serde defaults (`""`, `[]`, `false`) as schema defaults, and the API
/// server would then write them into every stored object. The types already treat a
/// missing field as its default when decoding, so the schema does not need them, and
/// objects round-trip exactly as written.
fn strip_defaults(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    obj.remove("default");
    for (key, child) in obj.iter_mut() {
        match key.as_str() {
            // Maps from property name to schema: the names are not keywords.
            "properties" | "patternProperties" => {
                if let Some(props) = child.as_object_mut() {
                    props.values_mut().for_each(strip_defaults);
                }
            }
            "items" | "additionalProperties" | "not" => strip_defaults(child),
            "allOf" | "anyOf" | "oneOf" => {
                if let Some(list) = child.as_array_mut() {
                    list.iter_mut().for_each(strip_defaults);
                }
            }
            _ => {}
        }
    }
}

/// `text` (a doc comment) as `kubectl explain` should show it: intra-doc links
/// become plain names (``[`Spec::field`]`` reads `` `field` ``, `[text](url)`
/// reads text) and the lines of a paragraph are joined into one; paragraphs
/// stay a blank line apart and list items (`- `, `* `, `| `) start a line.
pub fn clean_description(text: &str) -> String {
    let text = strip_links(text);
    let mut paragraphs = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
            continue;
        }
        if !current.is_empty() {
            let item = ["- ", "* ", "| "].iter().any(|m| line.starts_with(m));
            current.push(if item { '\n' } else { ' ' });
        }
        current.push_str(line);
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    paragraphs.join("\n\n")
}

/// Rustdoc's link syntax out of `text`: ``[`a::B`]`` → `` `B` ``, `[B]` → B
/// (for a Rust path), `[text](url)` → text; other brackets stay.
fn strip_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else {
            out.push('[');
            rest = after;
            continue;
        };
        let inner = &after[..close];
        let mut next = &after[close + 1..];
        let mut has_url = false;
        if let Some(url) = next.strip_prefix('(') {
            if let Some(end) = url.find(')') {
                next = &url[end + 1..];
                has_url = true;
            }
        }
        let name = inner.trim_matches('`');
        let last = name.rsplit("::").next().unwrap_or(name);
        let rust_path = !name.is_empty()
            && name.chars().all(|c| c.is_alphanumeric() || c == '_' || c == ':')
            && (name.contains("::") || name.starts_with(char::is_uppercase));
        let code = inner.len() > 2 && inner.starts_with('`') && inner.ends_with('`');
        if code && rust_path {
            out.push('`');
            out.push_str(last);
            out.push('`');
        } else if has_url {
            out.push_str(inner);
        } else if rust_path {
            out.push_str(last);
        } else {
            out.push('[');
            rest = after;
            continue;
        }
        rest = next;
    }
    out.push_str(rest);
    out
}

/// Cleans every `description` in `schema` (see [`clean_description`]).
fn clean_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(obj) => {
            for (key, child) in obj.iter_mut() {
                match (key.as_str(), child) {
                    ("description", Value::String(text)) => *text = clean_description(text),
                    (_, child) => clean_descriptions(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(clean_descriptions),
        _ => {}
    }
}

/// Builds the CRD for a root object whose spec is `Spec` and status is `Status`.
///
/// Neither `spec` nor `status` is required, matching the reference objects.
#[doc(hidden)]
pub fn build_crd<Spec: JsonSchema, Status: JsonSchema>(info: &CrdInfo) -> CustomResourceDefinition {
    let mut properties = Map::new();
    properties.insert("apiVersion".into(), json!({ "type": "string" }));
    properties.insert("kind".into(), json!({ "type": "string" }));
    properties.insert("metadata".into(), json!({ "type": "object" }));
    properties.insert("spec".into(), schema_for::<Spec>());
    properties.insert("status".into(), schema_for::<Status>());
    let mut root = json!({ "type": "object", "properties": properties });
    clean_descriptions(&mut root);
    let schema: JSONSchemaProps =
        serde_json::from_value(root).expect("generated schema fits JSONSchemaProps");

    let opt_vec = |items: &[&str]| -> Option<Vec<String>> {
        (!items.is_empty()).then(|| items.iter().map(|s| s.to_string()).collect())
    };
    let printer_columns: Vec<CustomResourceColumnDefinition> = info
        .printer_columns
        .iter()
        .map(|(name, type_, path)| CustomResourceColumnDefinition {
            name: name.to_string(),
            type_: type_.to_string(),
            json_path: path.to_string(),
            ..Default::default()
        })
        .collect();

    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{}.{}", info.plural, info.group)),
            labels: Some(BTreeMap::from([(
                well_known::KUBE_BIND_EXPORTED_LABEL.to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: info.group.to_string(),
            names: CustomResourceDefinitionNames {
                kind: info.kind.to_string(),
                list_kind: Some(format!("{}List", info.kind)),
                plural: info.plural.to_string(),
                singular: Some(info.kind.to_lowercase()),
                short_names: opt_vec(info.short_names),
                categories: opt_vec(info.categories),
            },
            scope: "Cluster".to_string(),
            versions: vec![CustomResourceDefinitionVersion {
                name: info.version.to_string(),
                served: true,
                storage: true,
                schema: Some(CustomResourceValidation {
                    open_api_v3_schema: Some(schema),
                }),
                subresources: info.status_subresource.then(|| CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(json!({}))),
                    scale: None,
                }),
                additional_printer_columns: (!printer_columns.is_empty()).then_some(printer_columns),
                ..Default::default()
            }],
            ..Default::default()
        },
        status: None,
    }
}

/// A CRD for a kind whose schema is written by hand (no `spec`/`status`
/// split to derive): one served and stored `version`, labelled for kube-bind
/// like the generated ones. `scope` is `Cluster` or `Namespaced`.
#[doc(hidden)]
pub fn hand_written_crd(
    (group, version, kind, plural): (&str, &str, &str, &str),
    scope: &str,
    mut schema: Value,
    columns: Value,
) -> CustomResourceDefinition {
    clean_descriptions(&mut schema);
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": format!("{plural}.{group}"),
            "labels": {well_known::KUBE_BIND_EXPORTED_LABEL: "true"},
        },
        "spec": {
            "group": group,
            "names": {
                "kind": kind, "listKind": format!("{kind}List"),
                "plural": plural, "singular": kind.to_lowercase(),
            },
            "scope": scope,
            "versions": [{
                "name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
                "additionalPrinterColumns": columns,
            }],
        },
    }))
    .expect("a hand-written CRD is a valid CRD")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_read_as_prose() {
        assert_eq!(
            clean_description(
                "Objects placed here; see\n[`EdgePlacementSpec::effective_downsync`] and\n[Location].\n\nSecond [kcp](https://kcp.io)."
            ),
            "Objects placed here; see `effective_downsync` and Location.\n\nSecond kcp."
        );
        assert_eq!(
            clean_description("Absent keeps; `[]` removes [all of them]."),
            "Absent keeps; `[]` removes [all of them]."
        );
        assert_eq!(clean_description("One of:\n- a\n- b"), "One of:\n- a\n- b");
    }
}
