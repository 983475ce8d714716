//! CertificateSigningRequests: the `approval` subresource changes only
//! `status.conditions`, and approving or denying also needs `approve` on
//! the CSR's signer (`certificates.k8s.io/signers`, named `<signerName>` or
//! `<domain>/*`), as kube-apiserver's CertificateApproval admission requires.
//! Signing approved requests is a controller's job
//! (`controllers::security`).

use serde_json::Value;

use crate::auth::authorize::{self, Attributes};
use crate::auth::rbac::Request as RbacRequest;
use crate::json;
use crate::request::Request;
use crate::status::ApiError;
use crate::strategy::Strategy;

pub struct CsrStrategy;

impl Strategy for CsrStrategy {
    fn merge_subresource(
        &self,
        subresource: &str,
        old: &Value,
        sent: &Value,
    ) -> Option<Result<Value, ApiError>> {
        if subresource != "approval" {
            return None;
        }
        Some(crate::strategy::with_field_from(
            old,
            sent,
            &["status", "conditions"],
        ))
    }

    fn admit(&self, r: &Request, old: Option<&Value>, _obj: &Value) -> Result<(), ApiError> {
        match (r.subresource.as_deref(), old) {
            (Some("approval"), Some(old)) => check_approver(r, old),
            _ => Ok(()),
        }
    }
}

/// Whether the writer may approve for `csr`'s signer.
fn check_approver(r: &Request, csr: &Value) -> Result<(), ApiError> {
    if r.user.is_superuser() {
        return Ok(());
    }
    let cluster = r.cluster()?;
    let signer = json::str_at(csr, "/spec/signerName");
    let csr_name = json::str_at(csr, "/metadata/name");
    let domain_wildcard = signer.split_once('/').map(|(d, _)| format!("{d}/*"));
    let allowed = std::iter::once(signer.to_string())
        .chain(domain_wildcard)
        .any(|name| {
            let attrs = Attributes {
                request: RbacRequest::Resource {
                    verb: "approve".into(),
                    group: "certificates.k8s.io".into(),
                    resource: "signers".into(),
                    subresource: String::new(),
                    namespace: String::new(),
                    name,
                },
                workspace: Some(cluster.clone()),
            };
            authorize::authorize(&r.hub, &r.user, &attrs).allowed()
        });
    if allowed {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "certificatesigningrequests.certificates.k8s.io {csr_name:?} is forbidden: user not permitted to approve requests with signerName {signer:?}: User {:?} needs \"approve\" on signers {signer:?} in workspace {:?}",
            r.user.name, cluster.path
        )))
    }
}
