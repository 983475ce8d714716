//! `syncagent.kcp.io/v1alpha1`: the kcp api-syncagent `PublishedResource`.
//!
//! Shape as of api-syncagent v0.7 (see `reference/api-syncagent-and-peers.md` §1.2).
//! Deprecated fields are kept so older manifests still decode.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "syncagent.kcp.io";
/// The API version.
pub const VERSION: &str = "v1alpha1";

cluster_resource! {
    /// How a resource type of the service cluster is published into kcp workspaces and
    /// how its objects are synced (spec and metadata kcp → service, status back).
    pub struct PublishedResource {
        group: "syncagent.kcp.io",
        version: "v1alpha1",
        kind: "PublishedResource",
        plural: "publishedresources",
        short_names: [],
        categories: [],
        status_subresource: true,
        printer_columns: [
            ("Kind", "string", ".spec.resource.kind"),
            ("Ready", "string", ".status.conditions[?(@.type==\"Ready\")].status"),
            ("Schema", "string", ".status.resourceSchemaName"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ],
        spec: PublishedResourceSpec,
        status: PublishedResourceStatus,
    }
}

/// Why a PublishedResource's spec is immutable, as kube reports a refused change.
pub const IMMUTABLE_SPEC_MESSAGE: &str = "PublishedResources are immutable: to publish differently, delete this one and create a new PublishedResource (the agent moves the copies made under this one to the new names)";

/// The desired publication. Immutable once created (a CEL rule in the CRD, so a real
/// service cluster refuses changes too): kcp's api-syncagent documents
/// PublishedResources as immutable, since following a changed kind or naming would
/// mean re-syncing every workspace's objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{ "rule": "self == oldSelf", "message": IMMUTABLE_SPEC_MESSAGE }]))]
pub struct PublishedResourceSpec {
    /// The source resource type on the service cluster.
    #[serde(default)]
    pub resource: SourceResourceDescriptor,

    /// Restricts which objects are synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<ResourceFilter>,

    /// How local names and namespaces are formed (Go templates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naming: Option<ResourceNaming>,

    /// Also record the workspace path on local copies.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enable_workspace_paths: bool,

    /// Changes to the published GVK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<ResourceProjection>,

    /// Rewrite rules applied while syncing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation: Option<ResourceMutationSpec>,

    /// Related objects synced along with each primary object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<RelatedResourceSpec>,

    /// With `enabled: false` only the schema is published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronization: Option<SynchronizationSpec>,
}

/// The source resource type.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceResourceDescriptor {
    /// API group, e.g. `storage.example.com`.
    #[serde(default)]
    pub api_group: String,
    /// Deprecated: use `versions`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Versions to publish; empty means all served versions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<String>,
    /// Kind, e.g. `Database`.
    #[serde(default)]
    pub kind: String,
}

/// Label filters on objects and their namespaces (kcp side).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceFilter {
    /// Matched against the labels of the object's kcp Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub namespace: Option<LabelSelector>,
    /// Matched against the object's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub resource: Option<LabelSelector>,
}

/// Templates for local names. Defaults: namespace `{{ .ClusterName }}`, name
/// `{{ .Object.metadata.namespace | sha3short }}-{{ .Object.metadata.name | sha3short }}`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceNaming {
    /// Template for the local name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Template for the local namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// GVK changes applied when publishing. For `shortNames` and `categories`, absent keeps
/// the original and `[]` removes them all.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceProjection {
    /// The API group the resource is published under (default: the group of
    /// the agent's APIExport). Ferry honours it, as kcp's earlier api-syncagent
    /// releases did (kcp's latest publishes under the APIExport's group only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Deprecated: use `versions`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Map from source version to published version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub versions: BTreeMap<String, String>,
    /// `Cluster` or `Namespaced`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
    /// New kind (also resets singular and plural).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// New plural name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub plural: String,
    /// New short names; `[]` removes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_names: Option<Vec<String>>,
    /// New categories; `[]` removes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub categories: Option<Vec<String>>,
}

/// Mutations for spec (kcp → service) and status (service → kcp).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceMutationSpec {
    /// Applied to the object going to the service cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spec: Vec<ResourceMutation>,
    /// Applied to the status going back to kcp.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<ResourceMutation>,
}

/// One mutation; exactly one field is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceMutation {
    /// Delete the value at `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete: Option<PathMutation>,
    /// Regex replacement at `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<RegexMutation>,
    /// Go template result at `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateMutation>,
    /// CEL expression result at `path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel: Option<CelMutation>,
}

/// A gjson path.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PathMutation {
    /// gjson path.
    #[serde(default)]
    pub path: String,
}

/// Regex replacement at a path.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RegexMutation {
    /// gjson path.
    #[serde(default)]
    pub path: String,
    /// Pattern; empty replaces the whole value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pattern: String,
    /// Replacement, may reference groups as `\N`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replacement: String,
}

/// Go template at a path.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct TemplateMutation {
    /// gjson path.
    #[serde(default)]
    pub path: String,
    /// Go template.
    #[serde(default)]
    pub template: String,
}

/// CEL expression at a path (sees `value`, `self`, `other`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CelMutation {
    /// gjson path.
    #[serde(default)]
    pub path: String,
    /// CEL expression.
    #[serde(default)]
    pub expression: String,
}

/// An object related to each primary object (credentials, connection details...).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelatedResourceSpec {
    /// Unique name within the PublishedResource.
    #[serde(default)]
    pub identifier: String,
    /// `service` or `kcp`: where the related object originates.
    #[serde(default)]
    pub origin: String,
    /// Deprecated: `ConfigMap` or `Secret`; use group/version/resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// API group of the related resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version of the related resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Resource name of the related resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// Identity hash, for resources from foreign APIExports.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub identity_hash: String,
    /// Also delete destination copies of service-origin objects with the primary.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cleanup: bool,
    /// GVR on the destination side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projection: Option<RelatedResourceProjection>,
    /// How to find the related object and where it goes.
    #[serde(default)]
    pub object: RelatedResourceObject,
    /// Mutations for the related object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutation: Option<ResourceMutationSpec>,
    /// How changes to related objects are noticed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<RelatedResourceWatch>,
    /// Copy status in the origin → destination direction.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sync_status: bool,
}

/// Destination-side GVR of a related resource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RelatedResourceProjection {
    /// API group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// API version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub version: String,
    /// Resource name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
}

/// Locates a related object: one of `reference`, `template` or `selector`, plus an
/// optional `namespace` of the same shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelatedResourceObject {
    /// Label selector (with name rewrite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<RelatedResourceObjectSelector>,
    /// Path into the primary object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<RelatedResourceObjectReference>,
    /// Go template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateExpression>,
    /// Where the related object lives; defaults to the primary's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<RelatedResourceObjectSpec>,
}

/// One way to locate an object or namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelatedResourceObjectSpec {
    /// Label selector (with name rewrite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<RelatedResourceObjectSelector>,
    /// Path into the primary object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<RelatedResourceObjectReference>,
    /// Go template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateExpression>,
}

/// A label selector plus how to rewrite found names for the destination.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelatedResourceObjectSelector {
    /// Label keys and values to match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Set-based requirements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
    /// Name rewrite for the destination.
    #[serde(default)]
    pub rewrite: RelatedResourceSelectorRewrite,
}

/// A set-based label requirement (`metav1.LabelSelectorRequirement`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct LabelSelectorRequirement {
    /// Label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In`/`NotIn`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

/// Rewrite of a found name: one of `regex` or `template`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RelatedResourceSelectorRewrite {
    /// Regex replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<RegularExpression>,
    /// Go template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateExpression>,
}

/// A path into the primary object, with an optional regex.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RelatedResourceObjectReference {
    /// Simplified JSONPath, e.g. `spec.secretName`.
    #[serde(default)]
    pub path: String,
    /// Applied to the selected value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<RegularExpression>,
}

/// A regex replacement.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RegularExpression {
    /// Pattern; empty replaces the whole value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pattern: String,
    /// Replacement.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub replacement: String,
}

/// A Go template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct TemplateExpression {
    /// The template text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub template: String,
}

/// How related objects are watched: exactly one of `byOwner` or `bySelector`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RelatedResourceWatch {
    /// Related objects carry an owner reference to the primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by_owner: Option<EmptyObject>,
    /// Related objects are found by these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::label_selector")]
    pub by_selector: Option<LabelSelector>,
}

/// An empty object (`{}`), used as a flag.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct EmptyObject {}

/// Whether objects are synced at all.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SynchronizationSpec {
    /// `false` publishes only the schema.
    #[serde(default = "default_true")]
    pub enabled: bool,
}

impl Default for SynchronizationSpec {
    fn default() -> Self {
        Self { enabled: true }
    }
}

fn default_true() -> bool {
    true
}

/// The observed state of a PublishedResource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublishedResourceStatus {
    /// Name of the APIResourceSchema created for this resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_schema_name: String,
    /// What the agent found: `Ready` (the schema is published and objects sync) or a
    /// reason naming the field to fix (Ferry's addition; the reference only logs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<PublishedResourceCondition>,
}

/// A condition on a PublishedResource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PublishedResourceCondition {
    /// `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// A CamelCase reason (`CRDNotFound`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What to fix.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the status last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_transition_time: String,
}
