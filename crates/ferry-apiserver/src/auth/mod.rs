//! Who is calling, and what they may do.
//!
//! Authentication turns a request's credentials into a [`UserInfo`]:
//! the admin token, a static token file ([`token_file`]), ServiceAccount
//! tokens the hub signed ([`service_account`]) and client certificates signed
//! by the hub's CA. Authorization ([`authorize`]) evaluates Kubernetes RBAC
//! ([`rbac`]) per workspace, with `system:masters` as the superuser group;
//! writes of Roles and bindings are also refused when they would grant
//! permissions the writer does not hold ([`escalation`]). A caller allowed
//! the `impersonate` verb may act as someone else ([`impersonation`]).
//!
//! Credentials never reach a log line: error messages say *why* a token was
//! refused, never what it was.

pub mod authorize;
pub mod defaults;
pub mod escalation;
pub mod impersonation;
pub mod rbac;
pub mod service_account;
pub mod token_file;

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::{json, Value};

use crate::status::ApiError;
use crate::storage::Store;
use crate::tls::TlsMaterial;
use crate::workspace::WorkspaceIndex;
pub use authorize::{Attributes, Decision};
pub use rbac::RbacCache;
pub use service_account::{ServiceAccountTokens, TokenError};
pub use token_file::{StaticToken, StaticTokens};

/// The group whose members may do anything, everywhere (as in Kubernetes).
pub const SYSTEM_MASTERS: &str = "system:masters";
/// Every authenticated user is in this group.
pub const AUTHENTICATED: &str = "system:authenticated";
/// Kubernetes' user name for anonymous requests; the hub refuses those, so
/// only impersonation acts as it.
pub const ANONYMOUS: &str = "system:anonymous";
/// Anonymous requests are in this group (only health endpoints serve them).
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// Every ServiceAccount is in this group (and `system:serviceaccounts:<namespace>`).
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// User name of the admin token in `admin.kubeconfig`.
pub const ADMIN_USER: &str = "admin";
/// User name of the hub's own writes (kube-apiserver's loopback user).
pub const LOOPBACK_USER: &str = "system:apiserver";
/// `extra` key naming the logical cluster a ServiceAccount credential belongs to
/// (the key kcp uses).
pub const EXTRA_CLUSTER_NAME: &str = "authentication.kcp.io/cluster-name";

/// An authenticated caller, as Kubernetes' `user.Info`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    pub name: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
    /// For ServiceAccount credentials and certificates issued through a
    /// workspace's CertificateSigningRequest: the logical cluster (name) the
    /// credential belongs to. It is honoured in that workspace only.
    pub cluster: Option<String>,
}

impl UserInfo {
    /// A user with `groups` plus `system:authenticated`.
    pub fn new(name: impl Into<String>, uid: impl Into<String>, groups: Vec<String>) -> Self {
        let mut groups = groups;
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        UserInfo {
            name: name.into(),
            uid: uid.into(),
            groups,
            extra: BTreeMap::new(),
            cluster: None,
        }
    }

    pub fn admin() -> Self {
        UserInfo::new(ADMIN_USER, "", vec![SYSTEM_MASTERS.to_string()])
    }

    /// Who the hub's own writes (controllers, default objects) are made as:
    /// like kube-apiserver's loopback client, a member of `system:masters`,
    /// so they are never refused.
    pub fn loopback() -> Self {
        UserInfo::new(LOOPBACK_USER, "", vec![SYSTEM_MASTERS.to_string()])
    }

    /// `system:serviceaccount:<namespace>:<name>` of logical cluster `cluster`.
    pub fn service_account(cluster: &str, namespace: &str, name: &str, uid: &str) -> Self {
        let mut u = UserInfo::new(
            service_account_user(namespace, name),
            uid,
            vec![
                SERVICE_ACCOUNTS.to_string(),
                format!("{SERVICE_ACCOUNTS}:{namespace}"),
            ],
        );
        u.extra
            .insert(EXTRA_CLUSTER_NAME.into(), vec![cluster.to_string()]);
        u.cluster = Some(cluster.to_string());
        u
    }

    pub fn is_superuser(&self) -> bool {
        self.groups.iter().any(|g| g == SYSTEM_MASTERS)
    }

    /// `status.user` of a TokenReview / `status.userInfo` of a SelfSubjectReview.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            v["extra"] = json!(self.extra);
        }
        v
    }

    /// The user [`UserInfo::to_json`] wrote (a recorded requester, such as
    /// an EdgePlacement's placer); `None` without a user name. A kcp
    /// cluster-name in `extra` binds it to that workspace again, as it did
    /// the request it was recorded from.
    pub fn from_json(v: &Value) -> Option<Self> {
        let name = v.get("username")?.as_str().filter(|n| !n.is_empty())?;
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        };
        let extra: BTreeMap<String, Vec<String>> = v
            .get("extra")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(k, vs)| (k.clone(), strings(Some(vs))))
            .collect();
        Some(UserInfo {
            name: name.to_string(),
            uid: v
                .get("uid")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            groups: strings(v.get("groups")),
            cluster: extra.get(EXTRA_CLUSTER_NAME).and_then(|c| c.first()).cloned(),
            extra,
        })
    }
}

/// `system:serviceaccount:<namespace>:<name>`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// `(namespace, name)` of a ServiceAccount user name.
pub fn parse_service_account_user(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The DER certificate a client presented during the TLS handshake, verified
/// against the hub CA. The accept loop puts it into request extensions.
#[derive(Clone)]
pub struct PeerCertificate(pub Arc<Vec<u8>>);

/// What authentication and authorization read of the server they run in:
/// stored objects (ServiceAccounts, their Secrets and Pods, RBAC objects),
/// its [`Security`] and its workspaces. The hub provides it, so this module
/// sits below the hub and never names it.
pub trait AuthContext {
    fn store(&self) -> &Store;
    fn security(&self) -> &Security;
    fn workspaces(&self) -> &WorkspaceIndex;
}

impl<T: AuthContext + ?Sized> AuthContext for Arc<T> {
    fn store(&self) -> &Store {
        (**self).store()
    }

    fn security(&self) -> &Security {
        (**self).security()
    }

    fn workspaces(&self) -> &WorkspaceIndex {
        (**self).workspaces()
    }
}

/// Everything authentication and authorization need, held by the server
/// (and read back through [`AuthContext`]).
pub struct Security {
    admin_token: String,
    static_tokens: StaticTokens,
    pub service_accounts: ServiceAccountTokens,
    pub rbac: RbacCache,
    /// The CA that signs client certificates and CSRs; set once certificates exist.
    ca: RwLock<Option<Arc<TlsMaterial>>>,
}

/// Settings for [`Security`].
#[derive(Clone, Default)]
pub struct SecurityConfig {
    /// The admin bearer token (`admin.kubeconfig`); empty disables it.
    pub admin_token: String,
    /// Users from `--token-auth-file`.
    pub static_tokens: Vec<StaticToken>,
    /// HMAC key for ServiceAccount tokens; random (per process) when empty.
    pub service_account_key: Vec<u8>,
}

impl std::fmt::Debug for SecurityConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecurityConfig")
            .field("static_tokens", &self.static_tokens.len())
            .finish_non_exhaustive()
    }
}

/// Why a request was not authenticated. Messages never contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No credentials were presented.
    #[error("Unauthorized: no credentials were given; use a bearer token or a client certificate signed by the hub CA")]
    Anonymous,
    /// A bearer token no authenticator recognises.
    #[error("Unauthorized: the bearer token is not valid")]
    UnknownToken,
    /// A ServiceAccount token that is recognisably the hub's but refused.
    #[error("Unauthorized: {0}")]
    ServiceAccountToken(TokenError),
    /// The Authorization header is not `Bearer <token>`.
    #[error("Unauthorized: only bearer tokens are accepted in the Authorization header")]
    UnsupportedScheme,
    /// A verified client certificate without a usable subject.
    #[error("Unauthorized: the client certificate has no usable subject: {0}")]
    BadCertificate(String),
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        ApiError::unauthorized(e.to_string())
    }
}

impl Security {
    pub fn new(config: SecurityConfig) -> Self {
        let key = if config.service_account_key.is_empty() {
            use rand::Rng;
            let k: [u8; 32] = rand::rng().random();
            k.to_vec()
        } else {
            config.service_account_key
        };
        Security {
            admin_token: config.admin_token,
            static_tokens: StaticTokens::new(config.static_tokens),
            service_accounts: ServiceAccountTokens::new(&key),
            rbac: RbacCache::default(),
            ca: RwLock::new(None),
        }
    }

    pub fn set_ca(&self, ca: TlsMaterial) {
        *self.ca.write() = Some(Arc::new(ca));
    }

    pub fn ca(&self) -> Option<Arc<TlsMaterial>> {
        self.ca.read().clone()
    }

    /// Authenticate a request: a verified client certificate wins (as in
    /// kube-apiserver, x509 runs before token authenticators); then the
    /// bearer token. `Err(AuthError::Anonymous)` when there is neither.
    pub fn authenticate(
        &self,
        hub: &dyn AuthContext,
        headers: &http::HeaderMap,
        peer: Option<&PeerCertificate>,
    ) -> Result<UserInfo, AuthError> {
        if let Some(cert) = peer {
            let id = crate::tls::client_cert_identity(&cert.0)
                .map_err(|e| AuthError::BadCertificate(e.to_string()))?;
            if id.user.is_empty() {
                return Err(AuthError::BadCertificate("the common name is empty".into()));
            }
            let mut user = UserInfo::new(id.user, "", id.groups);
            if let Some(ws) = id.workspace {
                // Issued through a workspace's CSR: good in that workspace only.
                user.extra.insert(EXTRA_CLUSTER_NAME.into(), vec![ws.clone()]);
                user.cluster = Some(ws);
            }
            return Ok(user);
        }
        let Some(header) = headers.get(http::header::AUTHORIZATION) else {
            return Err(AuthError::Anonymous);
        };
        let header = header.to_str().map_err(|_| AuthError::UnknownToken)?.trim();
        if header.is_empty() || header.eq_ignore_ascii_case("bearer") {
            // An empty bearer token is no credential at all.
            return Err(AuthError::Anonymous);
        }
        let Some(token) = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
        else {
            return Err(AuthError::UnsupportedScheme);
        };
        self.authenticate_token(hub, token, None)
    }

    /// Authenticate a bearer token. `audiences`: what the token must be meant
    /// for (`None`: this hub's API audience).
    pub fn authenticate_token(
        &self,
        hub: &dyn AuthContext,
        token: &str,
        audiences: Option<&[String]>,
    ) -> Result<UserInfo, AuthError> {
        if token.is_empty() {
            return Err(AuthError::UnknownToken);
        }
        if !self.admin_token.is_empty() && constant_time_eq(token.as_bytes(), self.admin_token.as_bytes()) {
            return Ok(UserInfo::admin());
        }
        if let Some(user) = self.static_tokens.lookup(token) {
            return Ok(user);
        }
        if service_account::looks_like_jwt(token) {
            return self
                .service_accounts
                .authenticate(hub, token, audiences)
                .map_err(AuthError::ServiceAccountToken);
        }
        Err(AuthError::UnknownToken)
    }
}

/// Compare secrets without leaking where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_users_round_trip() {
        let u = UserInfo::service_account("c1", "ns", "builder", "uid-1");
        assert_eq!(u.name, "system:serviceaccount:ns:builder");
        assert_eq!(parse_service_account_user(&u.name), Some(("ns", "builder")));
        assert!(u.groups.contains(&"system:serviceaccounts:ns".to_string()));
        assert!(u.groups.contains(&AUTHENTICATED.to_string()));
        assert_eq!(u.cluster.as_deref(), Some("c1"));
        assert_eq!(parse_service_account_user("alice"), None);
        assert_eq!(parse_service_account_user("system:serviceaccount:ns"), None);
    }

    #[test]
    fn recorded_users_read_back_as_they_were_written() {
        let alice = UserInfo::new("alice", "u-alice", vec!["team-a".into()]);
        assert_eq!(UserInfo::from_json(&alice.to_json()), Some(alice));
        let sa = UserInfo::service_account("c1", "ns", "builder", "uid-1");
        let back = UserInfo::from_json(&sa.to_json()).unwrap();
        assert_eq!(
            back.cluster.as_deref(),
            Some("c1"),
            "still bound to its workspace"
        );
        assert_eq!(back, sa);
        assert_eq!(UserInfo::from_json(&json!({"groups": [SYSTEM_MASTERS]})), None);
        assert_eq!(UserInfo::from_json(&json!("admin")), None);
    }

    #[test]
    fn constant_time_eq_compares() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
