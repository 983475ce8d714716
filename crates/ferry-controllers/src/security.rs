//! Security controllers: the default RBAC objects of every workspace (stored
//! when a client first asks for its ClusterRoles or bindings), legacy
//! ServiceAccount token Secrets (filled with a token the hub signs), the
//! clean-up of those Secrets when their ServiceAccount goes, and signing of
//! approved CertificateSigningRequests with the hub CA (bound to the CSR's
//! workspace, never for `system:` users or groups).
//!
//! They run within the write that concerns them (`controllers::BuiltIn`), so
//! the effect is visible to the client's next request, and write through
//! the object service like any client. Tokens are never logged.

use base64::Engine;
use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::follow::Follower;
use ferry_server::auth::defaults::{default_rbac_objects, is_default};
use ferry_server::auth::rbac::{CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS, RBAC_GROUP};
use ferry_server::auth::service_account::{ObjectRef, TokenSpec};
use ferry_server::controller::ControllerContext;
use ferry_server::json;
use ferry_server::registry::ResourceInfo;
use ferry_server::service::{self, DeleteOptions};
use ferry_server::storage::{ClusterScope, EventType, ObjectKey, StoredObject, WatchEvent};

/// Storage key of CertificateSigningRequests.
pub const CSRS: &str = "certificates.k8s.io/certificatesigningrequests";
/// Secret type of legacy ServiceAccount tokens.
pub const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";
/// Annotation naming the ServiceAccount of a token Secret.
pub const SERVICE_ACCOUNT_NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
/// Annotation recording the ServiceAccount's uid on a token Secret.
pub const SERVICE_ACCOUNT_UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";
/// The signer the hub CA signs for: client certificates for this hub.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
/// Validity of CSR-signed certificates when the CSR does not ask (kube's default).
const DEFAULT_CERT_DAYS: u32 = 365;

/// Whether [`object_written`] wants writes to `storage_key`.
pub fn watches(storage_key: &str) -> bool {
    matches!(storage_key, "/secrets" | "/serviceaccounts" | CSRS)
}

/// The security controllers as a watch follower: at start, every token
/// Secret still without its token is filled, every approved CSR still
/// unsigned is signed, and token Secrets whose ServiceAccount is gone are
/// removed; then each change is handled as [`object_written`] does.
pub struct SecurityControllers;

impl Follower for SecurityControllers {
    fn follows(&self, storage_key: &str) -> bool {
        watches(storage_key)
    }

    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let (secrets, _) = ctx.list(&ClusterScope::All, "/secrets", None, None);
            for (key, obj) in secrets {
                if !may_be_token_secret(&obj) {
                    continue;
                }
                let secret = obj.value();
                if token_owner_gone(ctx, &key, &secret) {
                    delete_token_secret(ctx, &key, &secret).await;
                } else {
                    fill_token_secret(ctx, &key, &secret).await;
                }
            }
            let (csrs, _) = ctx.list(&ClusterScope::All, CSRS, None, None);
            for (key, obj) in csrs {
                sign_if_approved(ctx, &key, &obj.value()).await;
            }
        })
    }

    fn changed<'a>(&'a mut self, ctx: &'a ControllerContext, event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // Only a token Secret is ever filled: the others are not parsed (every
            // Secret a busy hub stores comes by here).
            if event.key.resource == "/secrets" && !may_be_token_secret(&event.object) {
                return;
            }
            let value = (event.kind != EventType::Deleted).then(|| event.object.value());
            object_written(ctx, &event.key.resource, &event.key, value.as_ref()).await;
        })
    }
}

/// Whether a stored Secret may be a ServiceAccount token Secret, read from its
/// bytes without parsing it: the stored JSON is the hub's own, which never
/// escapes the type's characters, so one without them is not.
fn may_be_token_secret(secret: &StoredObject) -> bool {
    memchr::memmem::find(&secret.json, SERVICE_ACCOUNT_TOKEN_TYPE.as_bytes()).is_some()
}

/// Whether `secret` is a filled token Secret whose ServiceAccount (the one
/// whose uid it recorded) no longer exists.
fn token_owner_gone(ctx: &ControllerContext, key: &ObjectKey, secret: &Value) -> bool {
    let annotation = |name: &str| {
        secret
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(name))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (sa_name, sa_uid) = (
        annotation(SERVICE_ACCOUNT_NAME_ANNOTATION),
        annotation(SERVICE_ACCOUNT_UID_ANNOTATION),
    );
    if str_at(secret, "/type") != SERVICE_ACCOUNT_TOKEN_TYPE || sa_name.is_empty() || sa_uid.is_empty() {
        return false;
    }
    let sa_key = ObjectKey {
        cluster: key.cluster.clone(),
        resource: "/serviceaccounts".into(),
        namespace: key.namespace.clone(),
        name: sa_name,
    };
    ctx.get(&sa_key)
        .is_none_or(|sa| str_at(&sa.value(), "/metadata/uid") != sa_uid)
}

/// An object under a watched storage key was written (`new`) or deleted (`None`).
pub async fn object_written(
    ctx: &ControllerContext,
    storage_key: &str,
    key: &ObjectKey,
    new: Option<&Value>,
) {
    match (storage_key, new) {
        ("/secrets", Some(secret)) => fill_token_secret(ctx, key, secret).await,
        ("/serviceaccounts", None) => remove_token_secrets(ctx, key).await,
        (CSRS, Some(csr)) => sign_if_approved(ctx, key, csr).await,
        _ => {}
    }
}

/// Whether `info` is ClusterRoles or ClusterRoleBindings, where the default
/// RBAC objects live.
pub fn holds_default_rbac(info: &ResourceInfo) -> bool {
    info.group == RBAC_GROUP && matches!(info.resource.as_str(), "clusterroles" | "clusterrolebindings")
}

/// Whether `cluster` has its default RBAC objects stored (see
/// `ferry_server::auth::defaults`: until then it is judged with them
/// without holding them).
pub fn default_rbac_made(ctx: &ControllerContext, cluster: &str) -> bool {
    // Asked on every request for ClusterRoles or bindings: the stored labels
    // answer it, no object is parsed.
    [CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS]
        .into_iter()
        .any(|resource| {
            let (objects, _) = ctx.list(&ClusterScope::One(cluster.into()), resource, None, None);
            objects.iter().any(|(_, o)| is_default(&o.labels))
        })
}

/// Store `cluster`'s default RBAC objects if it has none yet: a client is
/// about to read or write its ClusterRoles or ClusterRoleBindings.
pub async fn materialize_default_rbac(ctx: &ControllerContext, cluster: &str) {
    crate::make_on_demand(ctx, cluster, default_rbac_made, ensure_default_rbac(ctx, cluster)).await;
}

/// Create the default ClusterRoles and ClusterRoleBindings in `cluster`;
/// existing ones (possibly edited by an admin) are left alone.
pub async fn ensure_default_rbac(ctx: &ControllerContext, cluster: &str) {
    // Together: the store commits them in one batch.
    let creates = default_rbac_objects()
        .into_iter()
        .map(|(resource, obj)| async move {
            match ctx.create(cluster, (RBAC_GROUP, "v1", resource), None, obj).await {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => tracing::warn!(cluster, resource, "creating a default RBAC object failed: {e}"),
            }
        });
    futures::future::join_all(creates).await;
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Field manager of the token Secret controller's writes.
const TOKENS_MANAGER: &str = "tokens-controller";
/// Field manager of the CSR signer's writes.
const SIGNER_MANAGER: &str = "certificate-signer";

/// Update the object at `key` (of `resource`, on `subresource` when given)
/// through the object service to `change(current)`, guarded by the current
/// resourceVersion and retried on conflicts. `change` returns `None` when
/// nothing needs writing.
async fn update_through_service(
    ctx: &ControllerContext,
    key: &ObjectKey,
    resource: (&str, &str, &str),
    subresource: Option<&str>,
    manager: &str,
    change: impl Fn(Value) -> Option<Value>,
) {
    let namespace = (!key.namespace.is_empty()).then_some(key.namespace.as_str());
    for _ in 0..8 {
        let Some(current) = ctx.get(key) else { return };
        let Some(mut new) = change(current.value()) else {
            // Done already, maybe by a write still being committed (the
            // controller's watch loop racing this first pass): wait for it,
            // so the client's next read sees it.
            let _ = ctx.wait_for(current.rv, std::time::Duration::from_secs(5)).await;
            return;
        };
        if json::set(
            &mut new,
            &["metadata", "resourceVersion"],
            json!(current.rv.to_string()),
        )
        .is_err()
        {
            return;
        }
        let request = match ctx.request(
            &key.cluster,
            resource,
            namespace,
            Some(&key.name),
            "update",
            manager,
        ) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(name = %key.name, "security controller write failed: {}", e.message);
                return;
            }
        };
        let request = match subresource {
            Some(sub) => request.on_subresource(sub),
            None => request,
        };
        match service::update(&request, new).await {
            Ok(_) => return,
            Err(e) if e.code == 409 => continue,
            Err(e) => {
                tracing::warn!(name = %key.name, "security controller write failed: {}", e.message);
                return;
            }
        }
    }
}

/// A `kubernetes.io/service-account-token` Secret without a token gets one
/// (plus `ca.crt` and `namespace`), as kube's token controller does.
async fn fill_token_secret(ctx: &ControllerContext, key: &ObjectKey, secret: &Value) {
    if str_at(secret, "/type") != SERVICE_ACCOUNT_TOKEN_TYPE
        || !str_at(secret, "/data/token").is_empty()
        || secret.pointer("/metadata/deletionTimestamp").is_some()
    {
        return;
    }
    let sa_name = secret
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(SERVICE_ACCOUNT_NAME_ANNOTATION))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if sa_name.is_empty() {
        return;
    }
    let sa_key = ObjectKey {
        cluster: key.cluster.clone(),
        resource: "/serviceaccounts".into(),
        namespace: key.namespace.clone(),
        name: sa_name.clone(),
    };
    let Some(sa) = ctx.get(&sa_key).map(|o| o.value()) else {
        tracing::info!(
            cluster = %key.cluster,
            namespace = %key.namespace,
            secret = %key.name,
            "token Secret names ServiceAccount {sa_name:?}, which does not exist; left without a token"
        );
        return;
    };
    let sa_uid = str_at(&sa, "/metadata/uid").to_string();
    let ca = ctx
        .certificate_authority()
        .map(|m| m.ca_cert_pem.clone())
        .unwrap_or_default();
    update_through_service(
        ctx,
        key,
        ("", "v1", "secrets"),
        None,
        TOKENS_MANAGER,
        |mut current| {
            if !str_at(&current, "/data/token").is_empty() {
                return None;
            }
            let recorded = current
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(SERVICE_ACCOUNT_UID_ANNOTATION))
                .and_then(Value::as_str)
                .unwrap_or("");
            if !recorded.is_empty() && recorded != sa_uid {
                return None; // meant for an earlier ServiceAccount of that name
            }
            let spec = TokenSpec {
                cluster: &key.cluster,
                namespace: &key.namespace,
                name: &sa_name,
                uid: &sa_uid,
                audiences: Vec::new(),
                expiration_seconds: None,
                secret: Some(ObjectRef {
                    name: key.name.clone(),
                    uid: str_at(&current, "/metadata/uid").to_string(),
                }),
                pod: None,
            };
            let token = ctx.mint_service_account_token(&spec);
            let data = json::object_mut(&mut current, &["data"]).ok()?;
            data.insert("token".into(), json!(b64(token.as_bytes())));
            data.insert("namespace".into(), json!(b64(key.namespace.as_bytes())));
            if !ca.is_empty() {
                data.insert("ca.crt".into(), json!(b64(ca.as_bytes())));
            }
            json::set(
                &mut current,
                &["metadata", "annotations", SERVICE_ACCOUNT_UID_ANNOTATION],
                json!(sa_uid),
            )
            .ok()?;
            Some(current)
        },
    )
    .await;
}

/// A ServiceAccount was deleted: its legacy token Secrets go too (their
/// tokens are already refused, since the ServiceAccount is gone).
async fn remove_token_secrets(ctx: &ControllerContext, sa_key: &ObjectKey) {
    let (secrets, _) = ctx.list(
        &ClusterScope::One(sa_key.cluster.clone()),
        "/secrets",
        Some(&sa_key.namespace),
        None,
    );
    for (key, obj) in secrets {
        let v = obj.value();
        let owner = v
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(SERVICE_ACCOUNT_NAME_ANNOTATION))
            .and_then(Value::as_str);
        if str_at(&v, "/type") == SERVICE_ACCOUNT_TOKEN_TYPE && owner == Some(sa_key.name.as_str()) {
            delete_token_secret(ctx, &key, &v).await;
        }
    }
}

/// Delete the token Secret at `key` (if it is still `v`).
async fn delete_token_secret(ctx: &ControllerContext, key: &ObjectKey, v: &Value) {
    let options = DeleteOptions {
        uid: Some(str_at(v, "/metadata/uid").to_string()),
        ..Default::default()
    };
    let request = ctx.request(
        &key.cluster,
        ("", "v1", "secrets"),
        Some(&key.namespace),
        Some(&key.name),
        "delete",
        TOKENS_MANAGER,
    );
    let deleted = match request {
        Ok(r) => service::delete(&r, &options).await.map(|_| ()),
        Err(e) => Err(e),
    };
    if let Err(e) = deleted {
        if e.code != 404 && e.code != 409 {
            tracing::warn!(secret = %key.name, "removing a token Secret failed: {}", e.message);
        }
    }
}

fn has_condition(csr: &Value, kind: &str) -> bool {
    csr.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == kind && c.get("status").and_then(Value::as_str).unwrap_or("True") == "True"
            })
        })
}

/// Why the hub will not sign a request for this subject, if it will not.
///
/// A CSR is approved inside one workspace, by whoever administers it, so
/// nothing it yields may reach past that workspace: the certificate is bound
/// to it (see `server::tls::CertIdentity`), and the reserved `system:` users
/// and groups — `system:masters` above all — are never signed.
pub fn subject_refusal(user: &str, groups: &[String]) -> Option<String> {
    if user.starts_with("system:") {
        return Some(format!(
            "the hub does not sign certificates for reserved \"system:\" users (CN={user:?}); \
             request a certificate for an ordinary user name and bind it to roles in this workspace"
        ));
    }
    if let Some(g) = groups.iter().find(|g| g.starts_with("system:")) {
        return Some(format!(
            "the hub does not sign certificates for reserved \"system:\" groups (O={g:?}); \
             hub-wide administrators use the hub's admin credentials, and a workspace grants rights through RBAC bindings there"
        ));
    }
    None
}

/// Why the hub will not sign this CSR for [`CLIENT_SIGNER`], if it will not.
fn client_signer_refusal(csr: &Value) -> Option<String> {
    let usages: Vec<&str> = csr
        .pointer("/spec/usages")
        .and_then(Value::as_array)
        .map(|u| u.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !usages.contains(&"client auth") {
        return Some(
            "spec.usages must include \"client auth\" for signer kubernetes.io/kube-apiserver-client".into(),
        );
    }
    let allowed = ["digital signature", "key encipherment", "client auth"];
    if let Some(extra) = usages.iter().find(|u| !allowed.contains(u)) {
        return Some(format!(
            "usage {extra:?} is not allowed for signer kubernetes.io/kube-apiserver-client (allowed: digital signature, key encipherment, client auth)"
        ));
    }
    None
}

/// An Approved CSR for the hub's client signer gets `status.certificate`;
/// one the signer cannot honour gets a `Failed` condition saying why.
async fn sign_if_approved(ctx: &ControllerContext, key: &ObjectKey, csr: &Value) {
    if str_at(csr, "/spec/signerName") != CLIENT_SIGNER
        || !has_condition(csr, "Approved")
        || has_condition(csr, "Denied")
        || has_condition(csr, "Failed")
        || !str_at(csr, "/status/certificate").is_empty()
    {
        return;
    }
    let Some(ca) = ctx.certificate_authority() else {
        return;
    };
    let outcome = match client_signer_refusal(csr) {
        Some(why) => Err(why),
        None => {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(str_at(csr, "/spec/request"))
                .ok()
                .and_then(|b| String::from_utf8(b).ok());
            let days = csr
                .pointer("/spec/expirationSeconds")
                .and_then(Value::as_i64)
                .map(|s| u32::try_from(((s + 86_399) / 86_400).max(1)).unwrap_or(DEFAULT_CERT_DAYS))
                .unwrap_or(DEFAULT_CERT_DAYS);
            match pem {
                None => Err("spec.request is not base64-encoded PEM".to_string()),
                Some(pem) => match ferry_server::server::tls::csr_identity(&pem) {
                    Err(e) => Err(format!("spec.request: {e:#}")),
                    Ok((user, groups)) => match subject_refusal(&user, &groups) {
                        Some(why) => Err(why),
                        None => ferry_server::server::tls::sign_csr(&ca, &pem, days, Some(&key.cluster))
                            .map_err(|e| format!("{e:#}")),
                    },
                },
            }
        }
    };
    let now = ferry_api::timestamp::now();
    let csrs = ("certificates.k8s.io", "v1", "certificatesigningrequests");
    update_through_service(ctx, key, csrs, Some("status"), SIGNER_MANAGER, |mut current| {
        if !str_at(&current, "/status/certificate").is_empty() || has_condition(&current, "Failed") {
            return None;
        }
        let status = json::object_mut(&mut current, &["status"]).ok()?;
        match &outcome {
            Ok(cert) => {
                status.insert("certificate".into(), json!(b64(cert.as_bytes())));
            }
            Err(why) => {
                let conditions = status.entry("conditions").or_insert_with(|| json!([]));
                if !conditions.is_array() {
                    *conditions = json!([]);
                }
                if let Some(cs) = conditions.as_array_mut() {
                    cs.push(json!({
                        "type": "Failed", "status": "True", "reason": "SignerValidationFailure",
                        "message": why, "lastUpdateTime": now, "lastTransitionTime": now,
                    }));
                }
            }
        }
        Some(current)
    })
    .await;
}
