//! kcp's Workspaces: the hub assigns the logical cluster (kept on update),
//! the URL, the type (kcp's `{name, path}`, `root:universal` by default), and
//! marks it Ready.

use serde_json::{json, Value};

use crate::json;
use crate::request::Request;
use crate::status::{ApiError, Cause};
use crate::strategy::Strategy;
use crate::workspace::{cluster_name_for, ROOT};

pub struct WorkspaceStrategy;

/// The workspace types the hub knows, all in `root` as kcp's built-in ones:
/// `root:universal` (the default), `root:organization` and `root:team`.
/// kcp's `root:root` and `root:home` cannot be given to a child workspace.
pub const WORKSPACE_TYPES: &[&str] = &["universal", "organization", "team"];

/// The type every Workspace gets when it names none.
pub const DEFAULT_TYPE: &str = "universal";

/// `spec.type` with kcp's admission defaults: absent means
/// `{name: universal, path: root}`; a name without a path means `path: root`
/// (the only place the hub has workspace types). A type that is not an
/// object is left for [`type_causes`] to refuse.
fn default_type(obj: &mut Value) -> Result<(), ApiError> {
    let spec = json::object_mut(obj, &["spec"])?;
    let ty = spec
        .entry("type")
        .or_insert_with(|| json!({"name": DEFAULT_TYPE, "path": ROOT}));
    if let Some(ty) = ty.as_object_mut() {
        let empty_path = ty.get("path").and_then(Value::as_str).is_none_or(str::is_empty);
        if empty_path {
            ty.insert("path".into(), json!(ROOT));
        }
    }
    Ok(())
}

/// Why `spec.type` names no workspace type the hub has, if it does not.
fn type_causes(obj: &Value) -> Vec<Cause> {
    let known = WORKSPACE_TYPES
        .iter()
        .map(|t| format!("\"root:{t}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let Some(ty) = obj.pointer("/spec/type").and_then(Value::as_object) else {
        return vec![Cause::type_invalid(
            "spec.type",
            "must be an object {name, path}, e.g. {\"name\": \"universal\", \"path\": \"root\"}",
        )];
    };
    let name = ty.get("name").and_then(Value::as_str).unwrap_or_default();
    let path = ty.get("path").and_then(Value::as_str).unwrap_or_default();
    if name.is_empty() {
        return vec![Cause::required("spec.type.name")];
    }
    if path == ROOT && WORKSPACE_TYPES.contains(&name) {
        return Vec::new();
    }
    vec![Cause::unsupported(
        "spec.type",
        format!("workspace type \"{path}:{name}\" does not exist; the hub has {known}"),
    )]
}

fn assign(r: &Request, old: Option<&Value>, obj: &mut Value) -> Result<(), ApiError> {
    let Some(parent) = &r.cluster else { return Ok(()) };
    let name = json::str_at(obj, "/metadata/name").to_string();
    let path = format!("{}:{name}", parent.path);
    let cluster = match old
        .and_then(|o| o.pointer("/spec/cluster"))
        .and_then(Value::as_str)
    {
        Some(c) => c.to_string(),
        None => cluster_name_for(&path, json::str_at(obj, "/metadata/uid")),
    };
    // An update that leaves the type out keeps the one it has.
    if let Some(old_type) = old.and_then(|o| o.pointer("/spec/type")) {
        json::object_mut(obj, &["spec"])?
            .entry("type")
            .or_insert_with(|| old_type.clone());
    }
    default_type(obj)?;
    let spec = json::object_mut(obj, &["spec"])?;
    spec.insert("cluster".into(), json!(cluster));
    spec.insert(
        "URL".into(),
        json!(format!("{}/clusters/{path}", r.hub().external_url())),
    );
    json::set(
        obj,
        &["status"],
        json!({
            "phase": "Ready",
            "conditions": [{"type": "WorkspaceScheduled", "status": "True", "lastTransitionTime": ferry_api::timestamp::now()}],
        }),
    )?;
    Ok(())
}

impl Strategy for WorkspaceStrategy {
    fn prepare_for_create(&self, r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        assign(r, None, obj)
    }

    fn prepare_for_update(&self, r: &Request, old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        assign(r, Some(old), obj)
    }

    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        type_causes(obj)
    }

    fn validate_update(&self, _r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        // kcp: the type is immutable. Workspaces stored before types were
        // checked keep whatever they have.
        match (old.pointer("/spec/type"), obj.pointer("/spec/type")) {
            (Some(before), Some(after)) if before != after => {
                vec![Cause::invalid("spec.type", "field is immutable")]
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(ty: Value) -> Value {
        let mut obj = json!({"metadata": {"name": "w"}, "spec": {"type": ty}});
        default_type(&mut obj).unwrap();
        obj
    }

    #[test]
    fn type_defaults_to_root_universal() {
        let mut obj = json!({"metadata": {"name": "w"}});
        default_type(&mut obj).unwrap();
        assert_eq!(obj["spec"]["type"], json!({"name": "universal", "path": "root"}));
        assert!(type_causes(&obj).is_empty());
    }

    #[test]
    fn a_type_name_alone_is_found_in_root() {
        let obj = typed(json!({"name": "organization"}));
        assert_eq!(
            obj["spec"]["type"],
            json!({"name": "organization", "path": "root"})
        );
        assert!(type_causes(&obj).is_empty());
        assert!(type_causes(&typed(json!({"name": "team", "path": "root"}))).is_empty());
    }

    #[test]
    fn unknown_types_are_refused_naming_the_known_ones() {
        let causes = type_causes(&typed(json!({"name": "galaxy"})));
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.type");
        assert!(
            causes[0].message.contains("\"root:galaxy\""),
            "{}",
            causes[0].message
        );
        assert!(causes[0].message.contains("\"root:organization\""));
        assert!(!type_causes(&typed(json!({"name": "organization", "path": "root:org"}))).is_empty());
        assert!(!type_causes(&typed(json!({"name": "root", "path": "root"}))).is_empty());
        assert_eq!(
            type_causes(&typed(json!("organization")))[0].reason,
            "FieldValueTypeInvalid"
        );
        assert_eq!(
            type_causes(&typed(json!({"path": "root"})))[0].field,
            "spec.type.name"
        );
    }
}
