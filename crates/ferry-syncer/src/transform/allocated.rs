//! What the source's API server allocated for its own cluster, which a copy never
//! carries (Service addresses and node ports, a Job's generated selector, a claim's
//! binding): the rules are [`ferry_api::allocated`]'s, shared with the KubeStellar
//! placement translator, which makes the mailbox copies.

use serde_json::Value;

pub use ferry_api::allocated::{
    JOB_GENERATED_LABELS, PRESERVE_ANNOTATION, PRESERVE_NODE_PORT, PVC_BINDING_ANNOTATIONS,
};

use super::ObjectType;

/// Removes from `copy` (an object of type `ty`) what its source cluster allocated.
pub fn drop_allocated(copy: &mut Value, ty: &ObjectType) {
    ferry_api::allocated::drop_allocated(copy, &ty.api_version, &ty.kind);
}
