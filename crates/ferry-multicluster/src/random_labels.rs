//! Random labels and label selectors for the property tests of the
//! placement indexes (KubeStellar's where-resolver, kcp TMC's scheduler):
//! few keys and values, so selectors and objects meet often.

use rand::rngs::StdRng;
use rand::Rng;
use serde_json::{json, Value};

pub const KEYS: &[&str] = &["env", "region", "id", "tier"];
pub const VALUES: &[&str] = &["prod", "dev", "eu", "us", "1", "2", "3"];

/// A `metadata.labels` map of some of [`KEYS`].
pub fn labels(rng: &mut StdRng) -> Value {
    let mut m = serde_json::Map::new();
    for k in KEYS {
        if rng.random_bool(0.5) {
            m.insert(k.to_string(), json!(VALUES[rng.random_range(0..VALUES.len())]));
        }
    }
    Value::Object(m)
}

/// A selector of any shape the API allows, from empty to `null`.
pub fn selector_json(rng: &mut StdRng) -> Value {
    if rng.random_ratio(1, 12) {
        return Value::Null;
    }
    let mut match_labels = serde_json::Map::new();
    let mut exprs = Vec::new();
    for _ in 0..rng.random_range(0..3) {
        let k = KEYS[rng.random_range(0..KEYS.len())];
        let v = VALUES[rng.random_range(0..VALUES.len())];
        match rng.random_range(0..5) {
            0 | 1 => {
                match_labels.insert(k.into(), json!(v));
            }
            2 => exprs.push(json!({"key": k, "operator": "In",
                "values": [v, VALUES[rng.random_range(0..VALUES.len())]]})),
            3 => exprs.push(json!({"key": k, "operator": "NotIn", "values": [v]})),
            _ => {
                let op = ["Exists", "DoesNotExist"][rng.random_range(0..2)];
                exprs.push(json!({"key": k, "operator": op}))
            }
        }
    }
    json!({"matchLabels": match_labels, "matchExpressions": exprs})
}
