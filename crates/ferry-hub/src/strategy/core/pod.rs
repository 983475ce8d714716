//! Pods: the `ephemeralcontainers` subresource changes only
//! `spec.ephemeralContainers`.

use serde_json::{json, Value};

use crate::json;
use crate::status::ApiError;
use crate::strategy::Strategy;

pub struct PodStrategy;

impl Strategy for PodStrategy {
    fn merge_subresource(
        &self,
        subresource: &str,
        old: &Value,
        sent: &Value,
    ) -> Option<Result<Value, ApiError>> {
        if subresource != "ephemeralcontainers" {
            return None;
        }
        let mut merged = old.clone();
        let containers = sent
            .pointer("/spec/ephemeralContainers")
            .cloned()
            .unwrap_or(json!([]));
        Some(
            json::set(&mut merged, &["spec", "ephemeralContainers"], containers)
                .map(|_| merged)
                .map_err(ApiError::from),
        )
    }
}
