//! coordination.k8s.io/v1 Lease, which Go controllers' leader election
//! writes with protobuf clients.

use k8s_pb::api::coordination::v1::{Lease, LeaseSpec};
use serde_json::Value;

use super::json::Fields;
use super::meta::object_meta;

pub(super) fn lease(l: &Lease) -> Value {
    Fields::new()
        .message("metadata", &l.metadata, object_meta)
        .message("spec", &l.spec, lease_spec)
        .build()
}

fn lease_spec(s: &LeaseSpec) -> Value {
    Fields::new()
        .str("holderIdentity", &s.holder_identity)
        .opt("leaseDurationSeconds", s.lease_duration_seconds)
        .micro_time("acquireTime", &s.acquire_time)
        .micro_time("renewTime", &s.renew_time)
        .opt("leaseTransitions", s.lease_transitions)
        .str("strategy", &s.strategy)
        .str("preferredHolder", &s.preferred_holder)
        .build()
}
