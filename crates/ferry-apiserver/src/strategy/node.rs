//! node.k8s.io/v1 RuntimeClasses: `handler` is required, a DNS label, and
//! immutable, as kube-apiserver has it.

use serde_json::{json, Value};

use crate::json::str_at;
use crate::request::Request;
use crate::status::Cause;
use crate::strategy::workload::immutable;
use crate::strategy::Strategy;
use crate::validation::invalid_value;
use crate::validation::names::dns1123_label_errors;

pub struct RuntimeClassStrategy;

pub fn validate(obj: &Value) -> Vec<Cause> {
    let handler = str_at(obj, "/handler");
    if handler.is_empty() {
        return vec![Cause::required("handler")];
    }
    dns1123_label_errors(handler)
        .into_iter()
        .map(|e| Cause::invalid("handler", invalid_value(&json!(handler), &e)))
        .collect()
}

impl Strategy for RuntimeClassStrategy {
    fn validate(&self, _r: &Request, obj: &Value) -> Vec<Cause> {
        validate(obj)
    }

    fn validate_update(&self, _r: &Request, old: &Value, obj: &Value) -> Vec<Cause> {
        let mut causes = validate(obj);
        causes.extend(immutable(old, obj, "/handler", "handler"));
        causes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handler_is_a_required_dns_label() {
        assert_eq!(validate(&json!({}))[0].describe(), "handler: Required value");
        assert!(validate(&json!({"handler": "Gvisor.X"}))[0]
            .message
            .contains("RFC 1123 label"));
        assert!(validate(&json!({"handler": "runsc"})).is_empty());
    }
}
