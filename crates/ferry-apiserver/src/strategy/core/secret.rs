//! Secrets: `stringData` is write-only (merged into `data` as base64 and
//! dropped); `type` defaults to `Opaque`.

use base64::Engine;
use serde_json::{json, Value};

use crate::json;
use crate::request::Request;
use crate::status::ApiError;
use crate::strategy::Strategy;

pub struct SecretStrategy;

fn defaults(obj: &mut Value) -> Result<(), ApiError> {
    if let Some(Value::Object(sd)) = json::remove(obj, &["stringData"]) {
        let data = json::object_mut(obj, &["data"])?;
        for (k, v) in sd {
            let text = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
            data.insert(
                k,
                Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
    if obj.get("type").is_none() {
        json::set(obj, &["type"], json!("Opaque"))?;
    }
    Ok(())
}

impl Strategy for SecretStrategy {
    fn prepare_for_create(&self, _r: &Request, obj: &mut Value) -> Result<(), ApiError> {
        defaults(obj)
    }

    fn prepare_for_update(&self, _r: &Request, _old: &Value, obj: &mut Value) -> Result<(), ApiError> {
        defaults(obj)
    }
}
