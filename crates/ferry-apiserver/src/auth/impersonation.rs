//! User impersonation, as kube-apiserver does it (`kubectl --as`,
//! `--as-group`, `--as-uid`): the `Impersonate-*` headers name an identity,
//! the requester needs the `impersonate` verb on every part of it in the
//! workspace the request addresses, and the rest of the request (authorization,
//! escalation checks, reviews, logging) runs as that identity.
//!
//! Reading the headers ([`Impersonation::from_headers`]), the permissions it
//! takes ([`Impersonation::checks`]) and the identity it yields
//! ([`Impersonation::identity`]) do no I/O; [`impersonate`] authorizes.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::authorize::{self, Attributes, Decision};
use super::rbac::Request;
use super::{
    parse_service_account_user, AuthContext, UserInfo, ANONYMOUS, AUTHENTICATED, EXTRA_CLUSTER_NAME,
    SERVICE_ACCOUNTS, UNAUTHENTICATED,
};
use crate::status::ApiError;
use crate::workspace::LogicalCluster;

/// The user to act as (`kubectl --as`).
pub const IMPERSONATE_USER: &str = "impersonate-user";
/// One group to act with (repeatable; `kubectl --as-group`).
pub const IMPERSONATE_GROUP: &str = "impersonate-group";
/// The uid to act with (`kubectl --as-uid`).
pub const IMPERSONATE_UID: &str = "impersonate-uid";
/// `Impersonate-Extra-<key>`: one `extra` value (repeatable); the key is
/// percent-encoded and, as every HTTP header name, case-insensitive.
pub const IMPERSONATE_EXTRA_PREFIX: &str = "impersonate-extra-";
/// The API group of the `uids` and `userextras` impersonation resources.
pub const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";
/// The verb every impersonation check asks for.
pub const VERB: &str = "impersonate";

/// What a request asks to impersonate.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Impersonation {
    pub user: String,
    /// As given; empty when no `Impersonate-Group` header was sent.
    pub groups: Vec<String>,
    pub uid: Option<String>,
    /// Decoded key → values, in header order.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Why the impersonation headers cannot be honoured (400 Bad Request).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImpersonationError {
    /// Groups, a uid or extras without `Impersonate-User`; names what was requested.
    #[error("requested {0} without impersonating a user: add the Impersonate-User header (kubectl --as)")]
    WithoutUser(String),
    /// A header value that is not UTF-8; names the header.
    #[error("the {0} header is not valid UTF-8")]
    NotUtf8(String),
}

impl From<ImpersonationError> for ApiError {
    fn from(e: ImpersonationError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

fn header_values<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> impl Iterator<Item = Result<&'a str, ImpersonationError>> {
    let name = name.to_string();
    headers.get_all(name.as_str()).into_iter().map(move |v| {
        std::str::from_utf8(v.as_bytes()).map_err(|_| ImpersonationError::NotUtf8(name.clone()))
    })
}

/// Go's `url.PathUnescape` as kube-apiserver applies it to extra keys:
/// `%XX` decoded; a malformed key is kept as sent.
fn unescape_extra_key(encoded: &str) -> String {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return encoded.to_string();
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| encoded.to_string())
}

impl Impersonation {
    /// The impersonation `headers` ask for; `None` when there is none.
    pub fn from_headers(headers: &HeaderMap) -> Result<Option<Impersonation>, ImpersonationError> {
        let first = |name: &str| {
            header_values(headers, name)
                .next()
                .transpose()
                .map(|v| v.unwrap_or(""))
        };
        let user = first(IMPERSONATE_USER)?.to_string();
        let uid = Some(first(IMPERSONATE_UID)?.to_string()).filter(|u| !u.is_empty());
        let groups = header_values(headers, IMPERSONATE_GROUP)
            .map(|g| g.map(String::from))
            .collect::<Result<Vec<_>, _>>()?;
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for name in headers.keys() {
            // `http` keeps header names lower-case, as kube lower-cases the key.
            let Some(key) = name.as_str().strip_prefix(IMPERSONATE_EXTRA_PREFIX) else {
                continue;
            };
            let vals = header_values(headers, name.as_str()).collect::<Result<Vec<_>, _>>()?;
            extra
                .entry(unescape_extra_key(key))
                .or_default()
                .extend(vals.into_iter().map(String::from));
        }
        if user.is_empty() {
            let mut asked = Vec::new();
            if !groups.is_empty() {
                asked.push(format!("groups {groups:?}"));
            }
            if let Some(uid) = &uid {
                asked.push(format!("uid {uid:?}"));
            }
            if !extra.is_empty() {
                let keys: Vec<&String> = extra.keys().collect();
                asked.push(format!("extra {keys:?}"));
            }
            return if asked.is_empty() {
                Ok(None)
            } else {
                Err(ImpersonationError::WithoutUser(asked.join(", ")))
            };
        }
        Ok(Some(Impersonation {
            user,
            groups,
            uid,
            extra,
        }))
    }

    /// The RBAC requests the requester must be allowed, in kube-apiserver's
    /// order: the user (or ServiceAccount), each group, each extra value, the uid.
    pub fn checks(&self) -> Vec<Request> {
        let check =
            |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| Request::Resource {
                verb: VERB.into(),
                group: group.into(),
                resource: resource.into(),
                subresource: subresource.into(),
                namespace: namespace.into(),
                name: name.into(),
            };
        let mut out = vec![match parse_service_account_user(&self.user) {
            Some((ns, name)) => check("", "serviceaccounts", "", ns, name),
            None => check("", "users", "", "", &self.user),
        }];
        out.extend(self.groups.iter().map(|g| check("", "groups", "", "", g)));
        for (key, vals) in &self.extra {
            out.extend(
                vals.iter()
                    .map(|v| check(AUTHENTICATION_GROUP, "userextras", key, "", v)),
            );
        }
        if let Some(uid) = &self.uid {
            out.push(check(AUTHENTICATION_GROUP, "uids", "", "", uid));
        }
        out
    }

    /// Who the request then runs as. Given groups are the authority; a
    /// ServiceAccount without given groups gets its fixed ones. Everyone but
    /// `system:anonymous` is in `system:authenticated` unless
    /// `system:unauthenticated` was given; `system:anonymous` is in
    /// `system:unauthenticated`.
    pub fn identity(&self) -> UserInfo {
        let mut groups = self.groups.clone();
        if groups.is_empty() {
            if let Some((ns, _)) = parse_service_account_user(&self.user) {
                groups = vec![SERVICE_ACCOUNTS.to_string(), format!("{SERVICE_ACCOUNTS}:{ns}")];
            }
        }
        let has = |g: &str| groups.iter().any(|x| x == g);
        if self.user == ANONYMOUS {
            if !has(UNAUTHENTICATED) {
                groups.push(UNAUTHENTICATED.to_string());
            }
        } else if !has(AUTHENTICATED) && !has(UNAUTHENTICATED) {
            groups.push(AUTHENTICATED.to_string());
        }
        UserInfo {
            name: self.user.clone(),
            uid: self.uid.clone().unwrap_or_default(),
            groups,
            extra: self.extra.clone(),
            // An impersonated kcp cluster-name binds the identity to that
            // workspace, as it binds a ServiceAccount credential.
            cluster: self
                .extra
                .get(EXTRA_CLUSTER_NAME)
                .and_then(|v| v.first())
                .cloned(),
        }
    }
}

/// The identity a request runs as: `requester`, or whom the
/// `Impersonate-*` headers name once `requester` may impersonate every part
/// of it in `workspace` (`None`: `/clusters/*`, superusers only); unless the
/// requester is a superuser, that identity is bound to `workspace`. 400 for
/// malformed headers; 403 naming the requester and the first part refused.
pub fn impersonate(
    hub: &dyn AuthContext,
    requester: UserInfo,
    headers: &HeaderMap,
    workspace: Option<&LogicalCluster>,
) -> Result<UserInfo, ApiError> {
    let Some(wanted) = Impersonation::from_headers(headers)? else {
        return Ok(requester);
    };
    for request in wanted.checks() {
        let attrs = Attributes {
            request,
            workspace: workspace.cloned(),
        };
        if let Decision::Deny(reason) = authorize::authorize(hub, &requester, &attrs) {
            return Err(authorize::forbidden(&requester, &attrs, &reason));
        }
    }
    let mut user = wanted.identity();
    // As kcp scopes it: what a workspace's admin impersonates acts in that
    // workspace only — system:masters included — so impersonation never
    // lends anyone a right in another workspace (a grant an export, a
    // Location or a workspace's owner never gave).
    if !requester.is_superuser() && user.cluster.is_none() {
        user.cluster = workspace.map(|w| w.name.clone());
    }
    tracing::debug!(
        requester = %requester.name,
        user = %user.name,
        groups = ?user.groups,
        workspace = workspace.map(|w| w.path.as_str()).unwrap_or("*"),
        "acting as an impersonated user"
    );
    Ok(user)
}

/// Whether the request carries any `Impersonate-*` header.
pub fn requested(headers: &HeaderMap) -> bool {
    headers.keys().any(|k| {
        let k = k.as_str();
        k == IMPERSONATE_USER
            || k == IMPERSONATE_GROUP
            || k == IMPERSONATE_UID
            || k.starts_with(IMPERSONATE_EXTRA_PREFIX)
    })
}

/// Drop the `Impersonate-*` headers once honoured, as kube-apiserver does,
/// so nothing further down mistakes them for the caller's.
pub fn remove_headers(headers: &mut HeaderMap) {
    let extra: Vec<http::HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with(IMPERSONATE_EXTRA_PREFIX))
        .cloned()
        .collect();
    for name in [IMPERSONATE_USER, IMPERSONATE_GROUP, IMPERSONATE_UID] {
        headers.remove(name);
    }
    for name in extra {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn parsed(pairs: &[(&str, &str)]) -> Impersonation {
        Impersonation::from_headers(&headers(pairs)).unwrap().unwrap()
    }

    fn resource(r: &Request) -> (&str, &str, &str, &str, &str) {
        match r {
            Request::Resource {
                verb,
                group,
                resource,
                subresource,
                name,
                ..
            } => {
                assert_eq!(verb, VERB);
                (group, resource, subresource, r.namespace(), name)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_impersonation_headers_mean_no_impersonation() {
        let h = headers(&[("authorization", "Bearer secret"), ("accept", "application/json")]);
        assert_eq!(Impersonation::from_headers(&h), Ok(None));
    }

    #[test]
    fn repeated_group_headers_are_each_a_group() {
        let i = parsed(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Group", "ops"),
        ]);
        assert_eq!(i.user, "alice");
        assert_eq!(i.groups, vec!["devs", "ops"]);
        let checks: Vec<_> = i.checks().iter().map(|r| resource(r).1.to_string()).collect();
        assert_eq!(checks, vec!["users", "groups", "groups"]);
        assert_eq!(
            i.identity().groups,
            vec!["devs", "ops", AUTHENTICATED],
            "given groups plus system:authenticated"
        );
    }

    #[test]
    fn extra_keys_are_percent_decoded_and_lower_case() {
        let i = parsed(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Extra-Example.com%2FScopes", "view"),
            ("impersonate-extra-example.com%2fscopes", "edit"),
            ("Impersonate-Extra-Bad%zzKey", "x"),
            ("Impersonate-Uid", "u-1"),
        ]);
        assert_eq!(
            i.extra,
            BTreeMap::from([
                ("bad%zzkey".to_string(), vec!["x".to_string()]),
                (
                    "example.com/scopes".to_string(),
                    vec!["view".to_string(), "edit".to_string()]
                ),
            ])
        );
        let checks = i.checks();
        let parts: Vec<_> = checks.iter().map(resource).collect();
        assert_eq!(
            parts,
            vec![
                ("", "users", "", "", "alice"),
                (AUTHENTICATION_GROUP, "userextras", "bad%zzkey", "", "x"),
                (
                    AUTHENTICATION_GROUP,
                    "userextras",
                    "example.com/scopes",
                    "",
                    "view"
                ),
                (
                    AUTHENTICATION_GROUP,
                    "userextras",
                    "example.com/scopes",
                    "",
                    "edit"
                ),
                (AUTHENTICATION_GROUP, "uids", "", "", "u-1"),
            ]
        );
        let user = i.identity();
        assert_eq!(user.uid, "u-1");
        assert_eq!(user.extra, i.extra);
    }

    #[test]
    fn groups_uid_or_extra_without_a_user_are_refused() {
        for pairs in [
            vec![("Impersonate-Group", "devs")],
            vec![("Impersonate-Uid", "u-1")],
            vec![("Impersonate-Extra-Scopes", "view")],
            vec![("Impersonate-User", ""), ("Impersonate-Group", "system:masters")],
        ] {
            let err = Impersonation::from_headers(&headers(&pairs)).unwrap_err();
            assert!(matches!(err, ImpersonationError::WithoutUser(_)), "{pairs:?}");
            assert!(err.to_string().contains("without impersonating a user"), "{err}");
            assert_eq!(ApiError::from(err).code, 400);
        }
        let err = Impersonation::from_headers(&headers(&[("Impersonate-Group", "devs")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "requested groups [\"devs\"] without impersonating a user: add the Impersonate-User header (kubectl --as)"
        );
    }

    #[test]
    fn service_accounts_are_checked_in_their_namespace_and_get_their_groups() {
        let i = parsed(&[("Impersonate-User", "system:serviceaccount:dev:builder")]);
        let checks = i.checks();
        assert_eq!(
            resource(&checks[0]),
            ("", "serviceaccounts", "", "dev", "builder")
        );
        let user = i.identity();
        assert_eq!(user.name, "system:serviceaccount:dev:builder");
        assert_eq!(
            user.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:dev",
                AUTHENTICATED
            ]
        );
        assert_eq!(user.cluster, None);
        // Given groups replace the fixed ones.
        let i = parsed(&[
            ("Impersonate-User", "system:serviceaccount:dev:builder"),
            ("Impersonate-Group", "devs"),
        ]);
        assert_eq!(i.identity().groups, vec!["devs", AUTHENTICATED]);
    }

    #[test]
    fn system_masters_is_only_a_group_to_impersonate_like_any_other() {
        let i = parsed(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "system:masters"),
        ]);
        assert_eq!(resource(&i.checks()[1]), ("", "groups", "", "", "system:masters"));
        assert!(i.identity().is_superuser());
        assert!(!parsed(&[("Impersonate-User", "alice")]).identity().is_superuser());
    }

    #[test]
    fn anonymous_and_unauthenticated_are_not_authenticated() {
        let anon = parsed(&[("Impersonate-User", ANONYMOUS)]).identity();
        assert_eq!(anon.groups, vec![UNAUTHENTICATED]);
        let i = parsed(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", UNAUTHENTICATED),
        ]);
        assert_eq!(i.identity().groups, vec![UNAUTHENTICATED]);
    }

    #[test]
    fn refusals_name_the_requester_what_was_impersonated_and_the_workspace() {
        let bob = UserInfo::new("bob", "", vec![]);
        let i = parsed(&[
            ("Impersonate-User", "system:serviceaccount:dev:builder"),
            ("Impersonate-Group", "system:masters"),
        ]);
        let workspace = Some(LogicalCluster {
            name: "c".into(),
            path: "root:a".into(),
            parent: None,
        });
        let messages: Vec<String> = i
            .checks()
            .into_iter()
            .map(|request| {
                let attrs = Attributes {
                    request,
                    workspace: workspace.clone(),
                };
                authorize::forbidden(&bob, &attrs, "").message
            })
            .collect();
        assert_eq!(
            messages,
            vec![
                "serviceaccounts \"builder\" is forbidden: User \"bob\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"dev\" in workspace \"root:a\"",
                "groups \"system:masters\" is forbidden: User \"bob\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope in workspace \"root:a\"",
            ]
        );
    }

    #[test]
    fn impersonated_cluster_name_binds_the_identity_to_that_workspace() {
        let i = parsed(&[
            ("Impersonate-User", "system:serviceaccount:dev:builder"),
            ("Impersonate-Extra-Authentication.kcp.io%2FCluster-Name", "c1"),
        ]);
        assert_eq!(i.identity().cluster.as_deref(), Some("c1"));
    }

    #[test]
    fn honoured_headers_are_removed() {
        let mut h = headers(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "a"),
            ("Impersonate-Group", "b"),
            ("Impersonate-Uid", "u"),
            ("Impersonate-Extra-K", "v"),
            ("Accept", "application/json"),
        ]);
        remove_headers(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("accept"));
    }
}
