//! Authorization of one request in one workspace: the superuser group, the
//! workspace a ServiceAccount credential belongs to, then RBAC.

use serde_json::json;

use super::rbac::{combined_resource, Request};
use super::{AuthContext, UserInfo};
use crate::status::ApiError;
use crate::workspace::LogicalCluster;

/// What is being asked, and where.
#[derive(Debug, Clone)]
pub struct Attributes {
    pub request: Request,
    /// `None`: the `/clusters/*` wildcard.
    pub workspace: Option<LogicalCluster>,
}

/// The outcome of authorizing a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the reason names the binding (empty for the superuser group).
    Allow(String),
    /// Denied; the reason is appended to the 403 message when not empty.
    Deny(String),
}

impl Decision {
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

/// Decide whether `user` may make `attrs.request` in `attrs.workspace`.
pub fn authorize(hub: &dyn AuthContext, user: &UserInfo, attrs: &Attributes) -> Decision {
    // A credential bound to a workspace stays there, whatever its groups (an
    // identity a workspace's admin impersonated is bound to that workspace).
    if let Some(home) = &user.cluster {
        if attrs.workspace.as_ref().is_none_or(|ws| ws.name != *home) {
            return Decision::Deny(home_only(hub, user, home));
        }
    }
    if user.is_superuser() {
        return Decision::Allow(String::new());
    }
    let Some(ws) = &attrs.workspace else {
        return Decision::Deny("only members of system:masters may use the /clusters/* wildcard".into());
    };
    let rbac = hub.security().rbac.get(hub.store(), &ws.name);
    if user.cluster.is_none() && !rbac.is_member(user) {
        return Decision::Deny(format!(
            "{:?} is not a member of workspace {:?}",
            user.name, ws.path
        ));
    }
    match rbac.allows(user, &attrs.request) {
        Some(reason) => Decision::Allow(reason),
        None => Decision::Deny(String::new()),
    }
}

/// Why a credential bound to workspace `home` is refused elsewhere.
fn home_only(hub: &dyn AuthContext, user: &UserInfo, home: &str) -> String {
    let home_path = hub
        .workspaces()
        .by_name(home)
        .map(|lc| lc.path)
        .unwrap_or_else(|| home.to_string());
    format!(
        "the credential of {:?} is valid only in its own workspace ({home_path})",
        user.name
    )
}

/// Let `user` into the workspace the client addressed as `raw` (`None`:
/// root), which resolved to `cluster` (`None`: it does not exist).
///
/// As in kcp, a workspace is closed to everyone but its members: a caller
/// that is neither in `system:masters` nor a member (see
/// [`super::rbac::WorkspaceRbac::is_member`]; a ServiceAccount or
/// certificate bound to the workspace is one) gets the same 403 for
/// everything in it, discovery included — and the same 403 for a workspace
/// that does not exist, so that existence does not leak.
pub fn enter_workspace(
    hub: &dyn AuthContext,
    user: &UserInfo,
    raw: Option<&str>,
    cluster: Option<&LogicalCluster>,
) -> Result<(), ApiError> {
    let path = raw.unwrap_or(crate::workspace::ROOT);
    if user.is_superuser() && user.cluster.is_none() {
        return Ok(());
    }
    if path == "*" {
        return Ok(()); // authorize() refuses the wildcard to non-superusers
    }
    if let Some(home) = &user.cluster {
        if cluster.is_none_or(|lc| lc.name != *home) {
            return Err(ApiError::forbidden(format!(
                "forbidden: User {:?} has no access in workspace {path:?}: {}",
                user.name,
                home_only(hub, user, home)
            )));
        }
        return Ok(());
    }
    let member = cluster.is_some_and(|lc| hub.security().rbac.get(hub.store(), &lc.name).is_member(user));
    if member {
        return Ok(());
    }
    Err(ApiError::forbidden(format!(
        "forbidden: User {:?} has no access in workspace {path:?}: it does not exist, or {:?} is not a member of it; \
         a member is named by a RoleBinding or ClusterRoleBinding there (as a user or through a group) \
         or holds the {:?} verb on the non-resource URL \"/\" there — ask the workspace's admin",
        user.name,
        user.name,
        super::rbac::WORKSPACE_ACCESS_VERB
    )))
}

/// `group/resource` as kube-apiserver prints it (`deployments.apps`).
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// The 403 kube-apiserver would send, naming user, verb, resource,
/// namespace — and the workspace.
pub fn forbidden(user: &UserInfo, attrs: &Attributes, reason: &str) -> ApiError {
    let ws = attrs
        .workspace
        .as_ref()
        .map(|w| w.path.clone())
        .unwrap_or_else(|| "*".into());
    let suffix = if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    };
    match &attrs.request {
        Request::NonResource { verb, path } => ApiError::forbidden(format!(
            "forbidden: User {:?} cannot {verb} path {path:?} in workspace {ws:?}{suffix}",
            user.name
        )),
        Request::Resource {
            verb,
            group,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let combined = combined_resource(resource, subresource);
            let scope = if namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {namespace:?}")
            };
            let subject = if name.is_empty() {
                qualified(group, resource)
            } else {
                format!("{} {name:?}", qualified(group, resource))
            };
            let mut e = ApiError::forbidden(format!(
                "{subject} is forbidden: User {:?} cannot {verb} resource {combined:?} in API group {group:?} {scope} in workspace {ws:?}{suffix}",
                user.name
            ));
            let mut details = json!({"name": name, "kind": resource});
            if !group.is_empty() {
                details["group"] = json!(group);
            }
            e.details = Some(Box::new(details));
            e
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages_read_like_kube_apiserver() {
        let user = UserInfo::new("alice", "", vec![]);
        let attrs = Attributes {
            request: Request::Resource {
                verb: "get".into(),
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: String::new(),
                namespace: "dev".into(),
                name: "web".into(),
            },
            workspace: Some(LogicalCluster {
                name: "c".into(),
                path: "root:a".into(),
                parent: None,
            }),
        };
        let e = forbidden(&user, &attrs, "");
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "deployments.apps \"web\" is forbidden: User \"alice\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"dev\" in workspace \"root:a\""
        );
    }
}
