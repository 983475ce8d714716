//! `PlacementSummary` (`edge.ferry.dev/v1alpha1`): beyond KubeStellar, one
//! object per placed workload object in its workload management workspace,
//! listing every destination (SyncTarget) with whether its mailbox holds the
//! current copy, a digest of the status that came back, when that last
//! changed, and the last drift its syncer restored ([`crate::drift`]).
//! Written by the hub's placement translator; read with
//! `kubectl get placementsummaries`.
//!
//! A separate kind rather than annotations on the workload object: a list of
//! destinations does not fit a string annotation, `kubectl get` shows every
//! object's summary in one table, and writing it does not touch (nor bump the
//! resourceVersion of) the user's object, which would re-copy it everywhere.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The summary of one workload object. Like SinglePlacementSlice it has no
/// `spec`/`status`: it is written by the hub only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSummary {
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The workload object summarized.
    #[serde(default)]
    pub object: SummarizedObject,
    /// How many mailboxes hold its current copy (as `kubestellar.io/executing-count`).
    #[serde(default)]
    pub executing_count: usize,
    /// One per SyncTarget some EdgePlacement sends it to, by SyncTarget name.
    #[serde(default)]
    pub destinations: Vec<DestinationSummary>,
    /// For `kubectl get`: the destinations' clusters, comma-separated.
    #[serde(default)]
    pub clusters: String,
    /// For `kubectl get`: `<synced>/<destinations>`.
    #[serde(default)]
    pub synced: String,
    /// For `kubectl get`: `<cluster>: <statusDigest>` for each destination, `; `-separated.
    #[serde(default)]
    pub statuses: String,
    /// How many times the destinations' syncers restored a copy someone had
    /// changed in its cluster, over all destinations.
    #[serde(default)]
    pub drift_corrections: u64,
}

/// Which object a summary is about.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SummarizedObject {
    /// API group, empty for the core group.
    #[serde(default)]
    pub group: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

/// One destination of a workload object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DestinationSummary {
    /// The SyncTarget's name (the cluster).
    pub cluster: String,
    /// The logical cluster of its inventory workspace.
    pub inventory: String,
    /// The mailbox workspace's path.
    pub mailbox: String,
    /// The mailbox holds a copy of the object's current version.
    pub synced: bool,
    /// What came back: `1/1 available`, `Ready=True`, a phase, `status <hash>`,
    /// `no status yet`, or why there is no copy.
    pub status_digest: String,
    /// When `synced` or `statusDigest` last changed (RFC 3339).
    pub last_update: String,
    /// The last change someone made to the copy in the cluster, which its
    /// syncer restored (the fields, never their values), and how many so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<crate::drift::Drift>,
}

impl PlacementSummary {
    pub const KIND: &'static str = "PlacementSummary";
    pub const GROUP: &'static str = "edge.ferry.dev";
    pub const VERSION: &'static str = "v1alpha1";
    pub const PLURAL: &'static str = "placementsummaries";

    /// Fill the one-line fields `kubectl get` shows from `destinations`.
    pub fn fill_columns(&mut self) {
        let ds = &self.destinations;
        self.clusters = ds
            .iter()
            .map(|d| d.cluster.as_str())
            .collect::<Vec<_>>()
            .join(",");
        self.synced = format!("{}/{}", ds.iter().filter(|d| d.synced).count(), ds.len());
        self.statuses = ds
            .iter()
            .map(|d| format!("{}: {}", d.cluster, d.status_digest))
            .collect::<Vec<_>>()
            .join("; ");
        self.drift_corrections = ds
            .iter()
            .filter_map(|d| d.drift.as_ref())
            .fold(0u64, |sum, d| sum.saturating_add(d.corrections));
    }

    /// The summary's name for an object: `<resource>.<group or core>[.<namespace>].<name>`,
    /// shortened with a hash when longer than a name may be.
    pub fn name_for(group: &str, resource: &str, namespace: &str, name: &str) -> String {
        let group = if group.is_empty() { "core" } else { group };
        let full = if namespace.is_empty() {
            format!("{resource}.{group}.{name}")
        } else {
            format!("{resource}.{group}.{namespace}.{name}")
        };
        if full.len() <= 253 {
            return full;
        }
        use sha2::Digest;
        let hash = sha2::Sha256::digest(full.as_bytes());
        let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let mut cut = 236;
        while !full.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}.{hex}", full[..cut].trim_end_matches(['.', '-']))
    }

    /// The CRD (cluster-scoped, no status subresource).
    pub fn crd() -> CustomResourceDefinition {
        let text = |description: &str| json!({"type": "string", "description": description});
        let destination = json!({
            "type": "object",
            "description": "One SyncTarget an EdgePlacement sends the object to.",
            "required": ["cluster", "synced", "statusDigest"],
            "properties": {
                "cluster": text("The SyncTarget's name (the cluster)."),
                "inventory": text("The logical cluster of the SyncTarget's inventory workspace."),
                "mailbox": text("The path of the SyncTarget's mailbox workspace."),
                "synced": {"type": "boolean", "description": "Whether the mailbox holds a copy of the object's current version."},
                "statusDigest": text("What came back from the cluster: `1/1 available`, `Ready=True`, a phase, `status <hash>`, `no status yet`, or why there is no copy."),
                "lastUpdate": text("When synced or statusDigest last changed (RFC 3339)."),
                "drift": {
                    "type": "object",
                    "description": "The last change someone made to the copy in the cluster, which its syncer restored, and how many so far.",
                    "properties": {
                        "time": text("When the syncer last restored the copy (RFC 3339)."),
                        "fields": {"type": "array", "items": {"type": "string"}, "description": "The fields found changed, as field paths such as $.spec.template.spec.containers[0].image (never their values)."},
                        "corrections": {"type": "integer", "description": "How many times the syncer has restored this copy."},
                    },
                },
            },
        });
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}.{}", Self::PLURAL, Self::GROUP)},
            "spec": {
                "group": Self::GROUP,
                "names": {
                    "kind": Self::KIND, "listKind": "PlacementSummaryList",
                    "plural": Self::PLURAL, "singular": "placementsummary",
                },
                "scope": "Cluster",
                "versions": [{
                    "name": Self::VERSION, "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "description": "Where one workload object of a workload management workspace is placed, and what came back from each destination. Written by the hub's placement translator.",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "object": {"type": "object", "description": "The workload object summarized.", "properties": {
                                "group": text("Its API group, empty for the core group."),
                                "resource": text("Its resource (plural), e.g. deployments."),
                                "namespace": text("Its namespace, absent for a cluster-scoped object."),
                                "name": text("Its name."),
                            }},
                            "executingCount": {"type": "integer", "description": "How many mailboxes hold its current copy (as the kubestellar.io/executing-count annotation on the object)."},
                            "destinations": {"type": "array", "description": "One per SyncTarget some EdgePlacement sends the object to.", "items": destination},
                            "clusters": text("The destinations' clusters, comma-separated (for kubectl get)."),
                            "synced": text("<synced>/<destinations> (for kubectl get)."),
                            "statuses": text("<cluster>: <statusDigest> for each destination, separated by `; ` (for kubectl get)."),
                            "driftCorrections": {"type": "integer", "description": "How many times the destinations' syncers restored a copy someone had changed in its cluster, over all destinations."},
                        },
                    }},
                    "additionalPrinterColumns": [
                        {"name": "Executing", "type": "integer", "jsonPath": ".executingCount"},
                        {"name": "Clusters", "type": "string", "jsonPath": ".clusters"},
                        {"name": "Synced", "type": "string", "jsonPath": ".synced"},
                        {"name": "Status", "type": "string", "jsonPath": ".statuses"},
                        {"name": "Drift", "type": "integer", "jsonPath": ".driftCorrections"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }],
            },
        }))
        .expect("the PlacementSummary CRD is a valid CRD")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_are_readable_and_bounded() {
        assert_eq!(
            PlacementSummary::name_for("apps", "deployments", "commonstuff", "commond"),
            "deployments.apps.commonstuff.commond"
        );
        assert_eq!(
            PlacementSummary::name_for("", "namespaces", "", "commonstuff"),
            "namespaces.core.commonstuff"
        );
        let long = "x".repeat(250);
        let a = PlacementSummary::name_for("", "configmaps", "ns", &long);
        let b = PlacementSummary::name_for("", "configmaps", "ns2", &long);
        assert!(a.len() <= 253 && b.len() <= 253);
        assert_ne!(a, b);
    }
}
