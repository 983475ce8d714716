//! kcp TMC's namespace locator: which upstream namespace (logical cluster and name) a
//! downstream `kcp-<hash>` namespace stands for, and the hash that names it.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha224};

/// The SyncTarget a downstream namespace was made for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncTargetLocator {
    /// The SyncTarget's logical cluster.
    #[serde(rename = "cluster", default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// The pre-v0.6.1 form of `cluster`, still read.
    #[serde(rename = "path", default, skip_serializing_if = "String::is_empty")]
    pub deprecated_path: String,
    /// The SyncTarget's name.
    pub name: String,
    /// The SyncTarget's uid.
    pub uid: String,
}

/// The value of the `kcp.io/namespace-locator` annotation. Field order and omissions
/// are kcp's, so the JSON (and the namespace name hashed from it) is the same.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceLocator {
    /// The SyncTarget.
    #[serde(rename = "syncTarget")]
    pub sync_target: SyncTargetLocator,
    /// The upstream object's logical cluster.
    #[serde(rename = "cluster", default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
    /// The upstream namespace (empty for a cluster-scoped object).
    #[serde(default)]
    pub namespace: String,
}

impl NamespaceLocator {
    /// The locator of upstream namespace `namespace` in `cluster`, for the SyncTarget
    /// `target`.
    pub fn new(target: &SyncTargetLocator, cluster: &str, namespace: &str) -> Self {
        NamespaceLocator {
            sync_target: target.clone(),
            cluster: cluster.to_string(),
            namespace: namespace.to_string(),
        }
    }

    /// The annotation's value.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads an annotation value, mapping the v0.6.0 form (`syncTarget.path`) onto
    /// `syncTarget.cluster` as kcp does. `None` if it is not a locator.
    pub fn parse(annotation: &str) -> Option<Self> {
        let mut locator: NamespaceLocator = serde_json::from_str(annotation).ok()?;
        if locator.sync_target.cluster.is_empty() {
            locator.sync_target.cluster = std::mem::take(&mut locator.sync_target.deprecated_path);
        }
        locator.sync_target.deprecated_path.clear();
        Some(locator)
    }

    /// The downstream namespace name: `kcp-` and the first 12 characters of the
    /// lowercase base36 of sha224 of the locator's JSON.
    pub fn downstream_namespace(&self) -> String {
        let hash = Sha224::digest(self.to_json().as_bytes());
        let digits = base36_bytes(&hash);
        format!("kcp-{}", &digits[..12.min(digits.len())])
    }
}

/// Bytes in base 36 as kcp's base36 package writes them (lowercased): the digits of the
/// big-endian number, plus one `0` for every leading zero byte.
pub fn base36_bytes(bytes: &[u8]) -> String {
    let leading_zeros = bytes.iter().take_while(|&&b| b == 0).count();
    let digits = if leading_zeros == bytes.len() {
        String::new()
    } else {
        ferry_api::naming::radix_text(&bytes[leading_zeros..], 36)
    };
    "0".repeat(leading_zeros) + &digits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> SyncTargetLocator {
        SyncTargetLocator {
            cluster: "root:org".into(),
            name: "east".into(),
            uid: "3d0e9ab2-0000-4000-8000-000000000001".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_locator_json_has_kcps_field_order() {
        let locator = NamespaceLocator::new(&target(), "2x9a8bq", "default");
        assert_eq!(
            locator.to_json(),
            r#"{"syncTarget":{"cluster":"root:org","name":"east","uid":"3d0e9ab2-0000-4000-8000-000000000001"},"cluster":"2x9a8bq","namespace":"default"}"#
        );
        assert_eq!(NamespaceLocator::parse(&locator.to_json()), Some(locator));
    }

    #[test]
    fn the_namespace_name_is_kcp_and_12_base36_digits_of_the_hash() {
        let locator = NamespaceLocator::new(&target(), "2x9a8bq", "default");
        let name = locator.downstream_namespace();
        assert_eq!(name.len(), 16, "{name}");
        assert!(name.starts_with("kcp-"));
        assert!(name[4..]
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));
        // Stable, and different per namespace, workspace and target.
        assert_eq!(name, locator.downstream_namespace());
        assert_ne!(
            name,
            NamespaceLocator::new(&target(), "2x9a8bq", "other").downstream_namespace()
        );
        assert_ne!(
            name,
            NamespaceLocator::new(&target(), "other", "default").downstream_namespace()
        );
        let mut moved = target();
        moved.uid = "another".into();
        assert_ne!(
            name,
            NamespaceLocator::new(&moved, "2x9a8bq", "default").downstream_namespace()
        );
        // The digits are those of the hash of the JSON, most significant first.
        let hash = Sha224::digest(locator.to_json().as_bytes());
        assert_eq!(&name[4..], &ferry_api::naming::radix_text(&hash, 36)[..12]);
    }

    #[test]
    fn leading_zero_bytes_become_zero_digits() {
        assert_eq!(base36_bytes(&[0, 0, 35]), "00z");
        assert_eq!(base36_bytes(&[1, 0]), "74");
        assert_eq!(base36_bytes(&[0]), "0");
    }

    #[test]
    fn a_v060_locator_is_read_with_its_path_as_the_cluster() {
        let old =
            r#"{"syncTarget":{"path":"root:org","name":"east","uid":"u"},"cluster":"c","namespace":"ns"}"#;
        let locator = NamespaceLocator::parse(old).unwrap();
        assert_eq!(locator.sync_target.cluster, "root:org");
        assert!(locator.sync_target.deprecated_path.is_empty());
        assert!(NamespaceLocator::parse("not json").is_none());
    }
}
