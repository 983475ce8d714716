//! ServiceAccount tokens: JWTs the hub signs (HS256, key in the data
//! directory), bound to one workspace, namespace and ServiceAccount (by uid),
//! with an expiry and audiences — and refused as soon as the ServiceAccount
//! (or the Secret or Pod the token is bound to) is gone.
//!
//! HS256 keeps verification to one HMAC (about a microsecond) on every
//! request. Nobody but the hub can verify such a token offline; other
//! components ask the hub with a TokenReview.

use base64::Engine;
use ring::hmac;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{AuthContext, UserInfo};
use crate::storage::ObjectKey;

/// The audience the hub's own API accepts (kube-apiserver's default issuer).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
/// `iss` of bound tokens (TokenRequest).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// `iss` of legacy tokens stored in `kubernetes.io/service-account-token` Secrets.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// TokenRequest's default `expirationSeconds`.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// Shortest `expirationSeconds` a TokenRequest may ask for (as kube-apiserver).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// Longest `expirationSeconds` (kube-apiserver's validation limit, 2^32 s).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// Tolerated clock skew for `nbf`.
const LEEWAY_SECONDS: i64 = 60;

/// Why a token the hub recognises as a ServiceAccount token is refused.
/// Messages say which check failed, never the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not three base64url parts of JSON.
    #[error("the bearer token is not a well-formed JWT ({0})")]
    Malformed(String),
    /// Signed with an algorithm the hub does not issue.
    #[error("the token is signed with {0:?}; the hub only accepts the HS256 tokens it issues")]
    Algorithm(String),
    /// The signature does not match the header and claims.
    #[error("the token's signature is invalid: it was tampered with or not issued by this hub")]
    BadSignature,
    /// `exp` is in the past.
    #[error("the token has expired (at {0}); request a new one")]
    Expired(String),
    /// `nbf` is in the future.
    #[error("the token is not valid yet (from {0})")]
    NotYetValid(String),
    /// None of the token's audiences is acceptable here.
    #[error("the token has the wrong audience: it is for {got:?}, but {wanted:?} is required")]
    WrongAudience { got: Vec<String>, wanted: Vec<String> },
    /// The workspace the token was issued in was deleted.
    #[error("the token was issued in a workspace that no longer exists")]
    WorkspaceGone,
    /// The ServiceAccount was deleted.
    #[error("the ServiceAccount {0} the token was issued for no longer exists")]
    ServiceAccountGone(String),
    /// The ServiceAccount was deleted and re-created since.
    #[error("the ServiceAccount {0} was re-created after the token was issued (its uid differs)")]
    ServiceAccountReplaced(String),
    /// The Secret or Pod the token is bound to was deleted (or re-created).
    #[error("the {kind} {name} the token is bound to no longer exists")]
    BoundObjectGone { kind: String, name: String },
}

/// A reference to the object a token is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectRef {
    pub name: String,
    pub uid: String,
}

/// The `kubernetes.io` private claim, as kube-apiserver writes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    pub namespace: String,
    pub serviceaccount: ObjectRef,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
}

/// A ServiceAccount token's claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub sub: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aud: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<i64>,
    pub iat: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
    /// The logical cluster (name) the ServiceAccount lives in.
    #[serde(rename = "kcp.io/cluster")]
    pub cluster: String,
}

impl Claims {
    pub fn is_legacy(&self) -> bool {
        self.iss == LEGACY_ISSUER
    }
}

/// What a token is requested for.
#[derive(Debug, Clone)]
pub struct TokenSpec<'a> {
    pub cluster: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    pub audiences: Vec<String>,
    /// `None`: a legacy token that never expires.
    pub expiration_seconds: Option<i64>,
    pub secret: Option<ObjectRef>,
    pub pod: Option<ObjectRef>,
}

/// Signs and verifies ServiceAccount tokens.
pub struct ServiceAccountTokens {
    key: hmac::Key,
    kid: String,
}

/// Whether `token` has the shape of a JWT (three dot-separated parts).
pub fn looks_like_jwt(token: &str) -> bool {
    token.split('.').count() == 3 && token.starts_with("eyJ")
}

fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
}

fn unb64(part: &str, what: &str) -> Result<Vec<u8>, TokenError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| TokenError::Malformed(format!("the {what} is not base64url")))
}

fn rfc3339(secs: i64) -> String {
    ferry_api::timestamp::from_unix_seconds(secs).unwrap_or_else(|| secs.to_string())
}

impl ServiceAccountTokens {
    pub fn new(key: &[u8]) -> Self {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(key);
        let kid = b64(&digest[..12]);
        ServiceAccountTokens {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
            kid,
        }
    }

    /// Sign a token for `spec` issued at `now` (unix seconds). Returns the
    /// token and its expiry (unix seconds; `None` for legacy tokens).
    pub fn mint(&self, spec: &TokenSpec<'_>, now: i64) -> (String, Option<i64>) {
        let legacy = spec.expiration_seconds.is_none();
        let exp = spec.expiration_seconds.map(|s| now + s);
        let claims = Claims {
            iss: if legacy { LEGACY_ISSUER } else { ISSUER }.to_string(),
            sub: super::service_account_user(spec.namespace, spec.name),
            aud: spec.audiences.clone(),
            exp,
            iat: now,
            nbf: (!legacy).then_some(now),
            jti: uuid::Uuid::new_v4().to_string(),
            kubernetes: KubernetesClaims {
                namespace: spec.namespace.to_string(),
                serviceaccount: ObjectRef {
                    name: spec.name.to_string(),
                    uid: spec.uid.to_string(),
                },
                secret: spec.secret.clone(),
                pod: spec.pod.clone(),
            },
            cluster: spec.cluster.to_string(),
        };
        (self.sign(&claims), exp)
    }

    /// Encode and sign arbitrary claims (tests use this to forge expiry).
    pub fn sign(&self, claims: &Claims) -> String {
        let header = serde_json::json!({"alg": "HS256", "typ": "JWT", "kid": self.kid});
        let signing_input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(&serde_json::to_vec(claims).expect("claims serialise"))
        );
        let tag = hmac::sign(&self.key, signing_input.as_bytes());
        format!("{signing_input}.{}", b64(tag.as_ref()))
    }

    /// Check the signature and decode the claims; nothing else.
    pub fn verify_signature(&self, token: &str) -> Result<Claims, TokenError> {
        let mut parts = token.splitn(3, '.');
        let (Some(h), Some(p), Some(sig)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(TokenError::Malformed("it does not have three parts".into()));
        };
        let header: Value = serde_json::from_slice(&unb64(h, "header")?)
            .map_err(|_| TokenError::Malformed("the header is not JSON".into()))?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        if alg != "HS256" {
            return Err(TokenError::Algorithm(alg.to_string()));
        }
        let signature = unb64(sig, "signature")?;
        let signing_input = &token[..h.len() + 1 + p.len()];
        hmac::verify(&self.key, signing_input.as_bytes(), &signature)
            .map_err(|_| TokenError::BadSignature)?;
        serde_json::from_slice(&unb64(p, "payload")?)
            .map_err(|e| TokenError::Malformed(format!("the claims are not a ServiceAccount token's: {e}")))
    }

    /// Check a token's signature, time window and audience at `now`.
    pub fn validate(
        &self,
        token: &str,
        audiences: Option<&[String]>,
        now: i64,
    ) -> Result<Claims, TokenError> {
        let claims = self.verify_signature(token)?;
        if let Some(exp) = claims.exp {
            if now >= exp {
                return Err(TokenError::Expired(rfc3339(exp)));
            }
        }
        if let Some(nbf) = claims.nbf {
            if now + LEEWAY_SECONDS < nbf {
                return Err(TokenError::NotYetValid(rfc3339(nbf)));
            }
        }
        let api = [API_AUDIENCE.to_string()];
        let wanted = audiences.unwrap_or(&api);
        let ok = if claims.is_legacy() {
            // Legacy tokens carry no audience and are good for the hub's API only.
            wanted.iter().any(|a| a == API_AUDIENCE)
        } else {
            claims.aud.iter().any(|a| wanted.contains(a))
        };
        if !ok {
            return Err(TokenError::WrongAudience {
                got: claims.aud.clone(),
                wanted: wanted.to_vec(),
            });
        }
        Ok(claims)
    }

    /// Authenticate a token: valid signature, time and audience, and the
    /// ServiceAccount (and any bound object) still exists with the same uid.
    pub fn authenticate(
        &self,
        hub: &dyn AuthContext,
        token: &str,
        audiences: Option<&[String]>,
    ) -> Result<UserInfo, TokenError> {
        let now = chrono::Utc::now().timestamp();
        let claims = self.validate(token, audiences, now)?;
        check_still_bound(hub, &claims, token)?;
        let k = &claims.kubernetes;
        let mut user = UserInfo::service_account(
            &claims.cluster,
            &k.namespace,
            &k.serviceaccount.name,
            &k.serviceaccount.uid,
        );
        user.extra.insert(
            "authentication.kubernetes.io/credential-id".into(),
            vec![format!("JTI={}", claims.jti)],
        );
        if let Some(pod) = &k.pod {
            user.extra.insert(
                "authentication.kubernetes.io/pod-name".into(),
                vec![pod.name.clone()],
            );
            user.extra.insert(
                "authentication.kubernetes.io/pod-uid".into(),
                vec![pod.uid.clone()],
            );
        }
        Ok(user)
    }
}

fn stored(
    hub: &dyn AuthContext,
    cluster: &str,
    resource: &str,
    namespace: &str,
    name: &str,
) -> Option<Value> {
    let key = ObjectKey {
        cluster: cluster.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    };
    hub.store().get(&key).map(|o| o.value())
}

fn uid_of(v: &Value) -> &str {
    v.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("")
}

fn deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp").is_some()
}

/// The objects a token names must still be there (same uid, not being deleted).
fn check_still_bound(hub: &dyn AuthContext, claims: &Claims, token: &str) -> Result<(), TokenError> {
    let k = &claims.kubernetes;
    if hub.workspaces().by_name(&claims.cluster).is_none() {
        return Err(TokenError::WorkspaceGone);
    }
    let sa_name = format!("{}/{}", k.namespace, k.serviceaccount.name);
    let sa = stored(
        hub,
        &claims.cluster,
        "/serviceaccounts",
        &k.namespace,
        &k.serviceaccount.name,
    )
    .filter(|v| !deleting(v))
    .ok_or_else(|| TokenError::ServiceAccountGone(sa_name.clone()))?;
    if uid_of(&sa) != k.serviceaccount.uid {
        return Err(TokenError::ServiceAccountReplaced(sa_name));
    }
    if let Some(secret_ref) = &k.secret {
        let gone = || TokenError::BoundObjectGone {
            kind: "Secret".into(),
            name: format!("{}/{}", k.namespace, secret_ref.name),
        };
        let secret = stored(hub, &claims.cluster, "/secrets", &k.namespace, &secret_ref.name)
            .filter(|v| !deleting(v) && uid_of(v) == secret_ref.uid)
            .ok_or_else(gone)?;
        if claims.is_legacy() {
            // A legacy token is only good while its Secret still holds it.
            let held = secret
                .pointer("/data/token")
                .and_then(Value::as_str)
                .and_then(|t| base64::engine::general_purpose::STANDARD.decode(t).ok());
            if !held.is_some_and(|h| super::constant_time_eq(&h, token.as_bytes())) {
                return Err(gone());
            }
        }
    }
    if let Some(pod_ref) = &k.pod {
        stored(hub, &claims.cluster, "/pods", &k.namespace, &pod_ref.name)
            .filter(|v| !deleting(v) && uid_of(v) == pod_ref.uid)
            .ok_or_else(|| TokenError::BoundObjectGone {
                kind: "Pod".into(),
                name: format!("{}/{}", k.namespace, pod_ref.name),
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TokenSpec<'static> {
        TokenSpec {
            cluster: "c1",
            namespace: "ns",
            name: "sa",
            uid: "uid-1",
            audiences: vec![API_AUDIENCE.into()],
            expiration_seconds: Some(600),
            secret: None,
            pod: None,
        }
    }

    #[test]
    fn minted_tokens_validate_until_they_expire() {
        let signer = ServiceAccountTokens::new(b"k1");
        let (token, exp) = signer.mint(&spec(), 1_000);
        assert_eq!(exp, Some(1_600));
        assert!(looks_like_jwt(&token));
        let claims = signer.validate(&token, None, 1_100).unwrap();
        assert_eq!(claims.sub, "system:serviceaccount:ns:sa");
        assert_eq!(claims.cluster, "c1");
        assert!(matches!(
            signer.validate(&token, None, 1_600),
            Err(TokenError::Expired(_))
        ));
    }

    #[test]
    fn tampering_and_foreign_keys_break_the_signature() {
        let signer = ServiceAccountTokens::new(b"k1");
        let (token, _) = signer.mint(&spec(), 1_000);
        let parts: Vec<&str> = token.split('.').collect();
        let mut claims: Value = serde_json::from_slice(&unb64(parts[1], "p").unwrap()).unwrap();
        claims["kubernetes.io"]["namespace"] = "kube-system".into();
        let forged = format!("{}.{}.{}", parts[0], b64(claims.to_string().as_bytes()), parts[2]);
        assert_eq!(
            signer.validate(&forged, None, 1_100),
            Err(TokenError::BadSignature)
        );
        let other = ServiceAccountTokens::new(b"k2");
        assert_eq!(other.validate(&token, None, 1_100), Err(TokenError::BadSignature));
        let none = format!("{}.{}.", b64(br#"{"alg":"none"}"#), parts[1]);
        assert_eq!(
            signer.validate(&none, None, 1_100),
            Err(TokenError::Algorithm("none".into()))
        );
    }

    #[test]
    fn audiences_must_intersect() {
        let signer = ServiceAccountTokens::new(b"k1");
        let mut s = spec();
        s.audiences = vec!["vault".into()];
        let (token, _) = signer.mint(&s, 1_000);
        let err = signer.validate(&token, None, 1_100).unwrap_err();
        assert!(matches!(err, TokenError::WrongAudience { .. }), "{err}");
        assert!(err.to_string().contains("wrong audience"));
        assert!(signer.validate(&token, Some(&["vault".into()]), 1_100).is_ok());
    }

    #[test]
    fn legacy_tokens_never_expire_and_serve_the_api_audience_only() {
        let signer = ServiceAccountTokens::new(b"k1");
        let mut s = spec();
        s.expiration_seconds = None;
        s.audiences = vec![];
        let (token, exp) = signer.mint(&s, 1_000);
        assert_eq!(exp, None);
        let claims = signer.validate(&token, None, i64::from(u32::MAX)).unwrap();
        assert!(claims.is_legacy());
        assert!(signer.validate(&token, Some(&["vault".into()]), 1_100).is_err());
    }
}
