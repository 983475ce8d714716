//! TokenRequest (`POST serviceaccounts/<name>/token`, what `kubectl create
//! token` sends): a token the hub signs for a ServiceAccount, optionally
//! bound to a Secret or Pod. Nothing is stored.

use serde_json::{json, Value};

use super::Request;
use crate::auth::service_account::{
    ObjectRef, TokenSpec, API_AUDIENCE, DEFAULT_EXPIRATION_SECONDS, MAX_EXPIRATION_SECONDS,
    MIN_EXPIRATION_SECONDS,
};
use crate::hub::Hub;
use crate::json::str_at;
use crate::status::{ApiError, Cause};
use crate::storage::ObjectKey;

fn stored(hub: &Hub, cluster: &str, resource: &str, namespace: &str, name: &str) -> Option<Value> {
    hub.store
        .get(&ObjectKey {
            cluster: cluster.into(),
            resource: resource.into(),
            namespace: namespace.into(),
            name: name.into(),
        })
        .map(|o| o.value())
}

fn string_list(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn rfc3339(secs: i64) -> String {
    ferry_api::timestamp::from_unix_seconds(secs).unwrap_or_default()
}

/// `POST .../serviceaccounts/<name>/token` (what `kubectl create token` sends).
pub fn token_request(s: &Request, req: &Value) -> Result<Value, ApiError> {
    let cluster = s.cluster()?;
    let namespace = s.namespace.clone().unwrap_or_default();
    let name = s.name.clone().unwrap_or_default();
    let invalid = |field: &str, message: String| {
        ApiError::invalid(
            "authentication.k8s.io",
            "TokenRequest",
            &name,
            vec![Cause::invalid(field, message)],
        )
    };
    let sa = stored(&s.hub, &cluster.name, "/serviceaccounts", &namespace, &name)
        .filter(|v| v.pointer("/metadata/deletionTimestamp").is_none())
        .ok_or_else(|| ApiError::not_found("", "serviceaccounts", &name))?;
    let mut audiences = string_list(req, "/spec/audiences");
    if audiences.is_empty() {
        audiences = vec![API_AUDIENCE.to_string()];
    }
    let expiration = match req.pointer("/spec/expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(v) => v.as_i64().ok_or_else(|| {
            invalid(
                "spec.expirationSeconds",
                format!("Invalid value: {v}: must be an integer"),
            )
        })?,
    };
    if expiration < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {expiration}: may not specify a duration less than 10 minutes"),
        ));
    }
    if expiration > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            "spec.expirationSeconds",
            format!("Invalid value: {expiration}: may not specify a duration larger than 2^32 seconds"),
        ));
    }
    let (mut secret, mut pod) = (None, None);
    if let Some(bound) = req.pointer("/spec/boundObjectRef").filter(|v| v.is_object()) {
        let kind = str_at(bound, "/kind");
        let bound_name = str_at(bound, "/name");
        let resource = match kind {
            "Secret" => "secrets",
            "Pod" => "pods",
            other => {
                return Err(invalid(
                    "spec.boundObjectRef.kind",
                    format!("Unsupported value: {other:?}: supported values: \"Pod\", \"Secret\""),
                ))
            }
        };
        let obj = stored(
            &s.hub,
            &cluster.name,
            &format!("/{resource}"),
            &namespace,
            bound_name,
        )
        .ok_or_else(|| ApiError::not_found("", resource, bound_name))?;
        let uid = str_at(&obj, "/metadata/uid").to_string();
        let wanted = str_at(bound, "/uid");
        if !wanted.is_empty() && wanted != uid {
            return Err(ApiError::conflict(
                "",
                resource,
                bound_name,
                &format!("the UID in the bound object reference ({wanted}) does not match the UID in record ({uid}); the object might have been deleted and then recreated"),
            ));
        }
        let r = Some(ObjectRef {
            name: bound_name.to_string(),
            uid,
        });
        if kind == "Secret" {
            secret = r;
        } else {
            pod = r;
        }
    }
    let now = chrono::Utc::now().timestamp();
    let spec = TokenSpec {
        cluster: &cluster.name,
        namespace: &namespace,
        name: &name,
        uid: str_at(&sa, "/metadata/uid"),
        audiences: audiences.clone(),
        expiration_seconds: Some(expiration),
        secret,
        pod,
    };
    let (token, exp) = s.hub.security.service_accounts.mint(&spec, now);
    let bound = req
        .pointer("/spec/boundObjectRef")
        .filter(|v| v.is_object())
        .cloned()
        .unwrap_or(Value::Null);
    let spec_out = json!({"audiences": audiences, "expirationSeconds": expiration, "boundObjectRef": bound});
    Ok(json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(now)},
            "spec": spec_out,
            "status": {"token": token, "expirationTimestamp": rfc3339(exp.unwrap_or(now))},
    }))
}
