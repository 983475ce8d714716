//! kcp's Workspaces: the hub assigns the logical cluster (kept on update),
//! the URL, the default type, and marks it Ready.

use serde_json::{json, Value};

use crate::json;
use crate::service::Request;
use crate::status::ApiError;
use crate::strategy::Strategy;
use crate::workspace::cluster_name_for;

pub struct WorkspaceStrategy;

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
    let spec = json::object_mut(obj, &["spec"])?;
    spec.insert("cluster".into(), json!(cluster));
    spec.insert(
        "URL".into(),
        json!(format!("{}/clusters/{path}", r.hub.external_url())),
    );
    spec.entry("type")
        .or_insert_with(|| json!({"name": "universal", "path": "root"}));
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
}
