//! Every label, annotation and finalizer name Ferry reads or writes.
//!
//! Names taken from the reference systems keep their exact spelling so that objects
//! written by KubeStellar, kcp or api-syncagent tooling are understood, and vice versa.
//! Ferry's own names live under `ferry.dev/`.

// ---------------------------------------------------------------- KubeStellar (edge)

/// Annotation on a downstream copy made by downsync. Value: [`owned_value`]
/// (`<Kind>/<namespace>/<name>`), so that objects which merely inherit the annotation
/// (a ReplicaSet copying its Deployment's annotations) do not look owned.
pub const DOWNSYNCED_ANNOTATION: &str = "edge.kubestellar.io/downsynced";

/// Annotation on an upstream copy made by upsync. Value: [`owned_value`].
pub const UPSYNCED_ANNOTATION: &str = "edge.kubestellar.io/upsynced";

/// Annotation on an upstream workload object; the value `"false"` means create-only:
/// the syncer creates the downstream copy but never updates or deletes it. The
/// syncer propagates it to the copy.
pub const DOWNSYNC_OVERWRITE_ANNOTATION: &str = "edge.kubestellar.io/downsync-overwrite";

/// Annotation on a mailbox Workspace naming the SyncTarget it serves.
pub const SYNC_TARGET_NAME_ANNOTATION: &str = "edge.kubestellar.io/sync-target-name";

/// Annotation on a workload object: the number of executing copies (singleton reported state).
pub const EXECUTING_COUNT_ANNOTATION: &str = "kubestellar.io/executing-count";

/// Annotation on a workload object (or a Customizer): `"true"` opts it in to
/// per-destination parameter expansion. Every `%(name)` in its string values
/// becomes the destination's value for `name` (a label or annotation key of
/// the Location, then of the SyncTarget); `%%` is a literal `%`.
pub const EXPAND_PARAMETERS_ANNOTATION: &str = "edge.kubestellar.io/expand-parameters";

/// Annotation on a workload object naming the `Customizer` applied to its
/// copies: `name` (in the object's namespace) or `namespace/name`.
pub const CUSTOMIZER_ANNOTATION: &str = "edge.kubestellar.io/customizer";

/// Annotation on an object (and on its copies): the fields its workload
/// cluster owns (see [`crate::control`]), as JSON
/// `[{"condition": "OnSpokePresent", "jsonPaths": ["$.spec.replicas"]}]`.
pub const OWNED_DOWNSTREAM_ANNOTATION: &str = "ferry.dev/owned-downstream";

/// Label the KubeStellar CRDs carry so kube-bind may export them.
pub const KUBE_BIND_EXPORTED_LABEL: &str = "kube-bind.io/exported";

/// The ownership value KubeStellar writes into [`DOWNSYNCED_ANNOTATION`] and
/// [`UPSYNCED_ANNOTATION`]: `<Kind>/<namespace>/<name>`, with an empty namespace for
/// cluster-scoped objects (`ClusterRole//admin`). The group is deliberately absent
/// because it may differ between upstream and downstream (denaturing).
pub fn owned_value(kind: &str, namespace: Option<&str>, name: &str) -> String {
    format!("{kind}/{}/{name}", namespace.unwrap_or(""))
}

// ---------------------------------------------------------------- kcp

/// Annotation kcp sets on every object to name its logical cluster. Never copied.
pub const KCP_CLUSTER_ANNOTATION: &str = "kcp.io/cluster";

/// Prefix of the kcp TMC state label, see [`workload_state_label`].
pub const WORKLOAD_STATE_LABEL_PREFIX: &str = "state.workload.kcp.io/";

/// Value of the state label asking for downsync to the target.
pub const WORKLOAD_STATE_SYNC: &str = "Sync";

/// Value of the state label asking for upsync from the target.
pub const WORKLOAD_STATE_UPSYNC: &str = "Upsync";

/// The kcp TMC state label for one sync target: `state.workload.kcp.io/<key>`, where the
/// key is [`crate::workload::sync_target_key`]. Values: `""` (pending),
/// [`WORKLOAD_STATE_SYNC`] or [`WORKLOAD_STATE_UPSYNC`].
pub fn workload_state_label(sync_target_key: &str) -> String {
    format!("{WORKLOAD_STATE_LABEL_PREFIX}{sync_target_key}")
}

/// Label kcp puts on downstream copies: the sync target key (replaces the state label).
pub const WORKLOAD_CLUSTER_LABEL: &str = "internal.workload.kcp.io/cluster";

/// Label kcp puts on a SyncTarget: its sync target key.
pub const WORKLOAD_KEY_LABEL: &str = "internal.workload.kcp.io/key";

/// Annotation on a kcp TMC copy naming the SyncTarget whose syncer wrote it (the
/// kcp workload syncer document's tracking annotations, for people reading the copy).
pub const SYNCER_SYNC_TARGET_ANNOTATION: &str = "syncer.kcp.io/sync-target";
/// Annotation on a kcp TMC copy naming the workspace of its source.
pub const SYNCER_WORKSPACE_ANNOTATION: &str = "syncer.kcp.io/workspace";
/// Annotation on a kcp TMC copy: when the syncer last wrote it (RFC 3339). It changes
/// only when the copy is written for a change, so it is never compared as drift.
pub const SYNCER_LAST_SYNC_ANNOTATION: &str = "syncer.kcp.io/last-sync";

/// Annotation on downstream namespaces (and cluster-scoped copies) locating the upstream.
pub const NAMESPACE_LOCATOR_ANNOTATION: &str = "kcp.io/namespace-locator";

/// Upstream annotation recording the downstream resourceVersion of an upsynced object.
pub const WORKLOAD_RV_ANNOTATION: &str = "workload.kcp.io/rv";

/// The kcp TMC finalizer on upstream objects: `workload.kcp.io/syncer-<key>`.
pub fn workload_syncer_finalizer(sync_target_key: &str) -> String {
    format!("{WORKLOAD_SYNCER_FINALIZER_PREFIX}{sync_target_key}")
}

/// The kcp TMC per-target deletion annotation: `deletion.internal.workload.kcp.io/<key>`.
pub fn workload_deletion_annotation(sync_target_key: &str) -> String {
    format!("{WORKLOAD_DELETION_ANNOTATION_PREFIX}{sync_target_key}")
}

/// The kcp TMC soft-finalizer annotation: `finalizers.workload.kcp.io/<key>`.
pub fn workload_soft_finalizers_annotation(sync_target_key: &str) -> String {
    format!("{WORKLOAD_SOFT_FINALIZERS_ANNOTATION_PREFIX}{sync_target_key}")
}

/// The kcp TMC per-target status annotation: `experimental.status.workload.kcp.io/<key>`,
/// where the syncer of that SyncTarget returns the status its cluster reports (as JSON)
/// while several SyncTargets sync the object ([`status_per_target`]).
pub fn workload_status_annotation(sync_target_key: &str) -> String {
    format!("{WORKLOAD_STATUS_ANNOTATION_PREFIX}{sync_target_key}")
}

/// Whether the status each cluster reports on an upstream object with these labels is
/// kept per SyncTarget, in [`workload_status_annotation`]s, rather than in its `status`:
/// while more than one SyncTarget syncs it (kcp promotes a syncer's status to the
/// object only when one target syncs it). Syncers write by this rule and the hub reads
/// by it, so a status is never taken for another cluster's.
pub fn status_per_target<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> bool {
    labels
        .into_iter()
        .filter(|(k, v)| k.starts_with(WORKLOAD_STATE_LABEL_PREFIX) && *v == WORKLOAD_STATE_SYNC)
        .nth(1)
        .is_some()
}

const WORKLOAD_SYNCER_FINALIZER_PREFIX: &str = "workload.kcp.io/syncer-";
const WORKLOAD_DELETION_ANNOTATION_PREFIX: &str = "deletion.internal.workload.kcp.io/";
const WORKLOAD_SOFT_FINALIZERS_ANNOTATION_PREFIX: &str = "finalizers.workload.kcp.io/";
const WORKLOAD_STATUS_ANNOTATION_PREFIX: &str = "experimental.status.workload.kcp.io/";

/// kcp TMC's per-SyncTarget bookkeeping on an upstream object
/// (`<prefix><sync target key>`): the scheduler's deletion mark, syncers' soft
/// finalizers and the status each syncer reports. It is about the upstream
/// object's life in the control plane and means nothing to a cluster, so
/// copies never carry it (a kcp-style server refuses it from anyone else).
pub const WORKLOAD_PER_TARGET_ANNOTATION_PREFIXES: &[&str] = &[
    WORKLOAD_DELETION_ANNOTATION_PREFIX,
    WORKLOAD_SOFT_FINALIZERS_ANNOTATION_PREFIX,
    WORKLOAD_STATUS_ANNOTATION_PREFIX,
    // Ferry's: the last drift each SyncTarget's syncer restored.
    crate::drift::DRIFT_ANNOTATION_PREFIX,
];

/// The SyncTarget key of a kcp TMC state label (`state.workload.kcp.io/<key>`).
pub fn workload_label_target(label: &str) -> Option<&str> {
    label.strip_prefix(WORKLOAD_STATE_LABEL_PREFIX)
}

/// The SyncTarget key of a per-target annotation
/// ([`WORKLOAD_PER_TARGET_ANNOTATION_PREFIXES`]).
pub fn workload_annotation_target(annotation: &str) -> Option<&str> {
    WORKLOAD_PER_TARGET_ANNOTATION_PREFIXES
        .iter()
        .find_map(|prefix| annotation.strip_prefix(prefix))
}

/// The SyncTarget key of a syncer's finalizer ([`workload_syncer_finalizer`]).
pub fn workload_finalizer_target(finalizer: &str) -> Option<&str> {
    finalizer.strip_prefix(WORKLOAD_SYNCER_FINALIZER_PREFIX)
}

// ---------------------------------------------------------------- api-syncagent

/// Finalizer api-syncagent puts on the kcp-side source object.
pub const SYNCAGENT_CLEANUP_FINALIZER: &str = "syncagent.kcp.io/cleanup";

/// Label naming the agent that owns a service-cluster copy.
pub const SYNCAGENT_AGENT_NAME_LABEL: &str = "syncagent.kcp.io/agent-name";

/// Label on a service-cluster copy: the kcp cluster of the source object.
pub const SYNCAGENT_REMOTE_CLUSTER_LABEL: &str = "syncagent.kcp.io/remote-object-cluster";

/// Label on a service-cluster copy: hash of the source namespace.
pub const SYNCAGENT_REMOTE_NAMESPACE_HASH_LABEL: &str = "syncagent.kcp.io/remote-object-namespace-hash";

/// Label on a service-cluster copy: hash of the source name.
pub const SYNCAGENT_REMOTE_NAME_HASH_LABEL: &str = "syncagent.kcp.io/remote-object-name-hash";

/// Annotation on a service-cluster copy: the source namespace.
pub const SYNCAGENT_REMOTE_NAMESPACE_ANNOTATION: &str = "syncagent.kcp.io/remote-object-namespace";

/// Annotation on a service-cluster copy: the source name.
pub const SYNCAGENT_REMOTE_NAME_ANNOTATION: &str = "syncagent.kcp.io/remote-object-name";

/// Annotation on a service-cluster copy: the source's workspace path (with the
/// PublishedResource's `enableWorkspacePaths`).
pub const SYNCAGENT_REMOTE_WORKSPACE_PATH_ANNOTATION: &str = "syncagent.kcp.io/remote-object-workspace-path";

/// Annotation on a service-cluster copy: the PublishedResource that made it (Ferry's
/// addition). When a PublishedResource is replaced by one with other naming, the agent
/// moves the copies to the new names; after a PublishedResource is deleted with nothing
/// replacing it, its copies stay and this says where they came from.
pub const SYNCAGENT_PUBLISHED_RESOURCE_ANNOTATION: &str = "ferry.dev/published-resource";

// ---------------------------------------------------------------- Kubernetes

/// Annotation `kubectl apply` writes; describes the upstream apply, so it is never copied.
pub const LAST_APPLIED_CONFIG_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

// ---------------------------------------------------------------- Ferry

/// Label on every copy a Ferry syncer writes, valued [`syncer_label_value`] of the
/// syncer's name.
///
/// Why a label when KubeStellar only uses an annotation: labels can be selected by the
/// server, so a syncer can watch and list exactly its own copies
/// (`labelSelector=ferry.dev/syncer=<name>`) instead of every object of a type, and its
/// clean-up (delete copies that are labelled but no longer desired) never touches objects
/// made by anyone else. It also answers "who manages this?" (kubestellar#1100).
pub const SYNCER_LABEL: &str = "ferry.dev/syncer";

/// Annotation on a Ferry copy: a hash of the content the syncer last wrote (everything it
/// manages: top-level fields other than `metadata`, plus its labels and annotations).
/// A different hash means the source changed, including removals, which a field-by-field
/// "is the desired content still there" check cannot see.
pub const DESIRED_HASH_ANNOTATION: &str = "ferry.dev/desired-hash";

/// Annotation on a Ferry copy: JSON `{"labels":[...],"annotations":[...]}` listing the keys
/// the syncer set, so a later update can drop keys removed at the source while keeping
/// keys other controllers added to the copy (such as `deployment.kubernetes.io/revision`).
pub const MANAGED_METADATA_ANNOTATION: &str = "ferry.dev/managed-metadata";

/// The value of [`SYNCER_LABEL`] for a syncer name.
///
/// A valid label value (at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both
/// ends) is used as is. Anything else is sanitised, truncated and suffixed with a hash of
/// the full name, so distinct names keep distinct values.
pub fn syncer_label_value(syncer_name: &str) -> String {
    if is_valid_label_value(syncer_name) {
        return syncer_name.to_string();
    }
    let sanitised: String = syncer_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let prefix: String = sanitised.chars().take(54).collect();
    let prefix = prefix.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let hash = format!("{:08x}", fnv1a32(syncer_name.as_bytes()));
    if prefix.is_empty() {
        hash
    } else {
        format!("{prefix}-{hash}")
    }
}

/// Whether `value` is a valid Kubernetes label value.
pub fn is_valid_label_value(value: &str) -> bool {
    if value.is_empty() {
        return true;
    }
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, b| {
        (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Condition types Ferry writes into `SyncerConfig.status.conditions`.
pub mod conditions {
    /// `True` when every entry of the SyncerConfig is valid and resolvable.
    pub const CONFIG_VALID: &str = "ConfigValid";
    /// `True` when the syncer is watching every resource the config asks for.
    pub const SYNCING: &str = "Syncing";
    /// `True` when the last heartbeat was written on time.
    pub const HEARTBEAT_HEALTHY: &str = "HeartbeatHealthy";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_value_leaves_namespace_empty_for_cluster_scoped_objects() {
        assert_eq!(owned_value("ClusterRole", None, "admin"), "ClusterRole//admin");
        assert_eq!(owned_value("ConfigMap", Some("ns"), "cm"), "ConfigMap/ns/cm");
    }

    #[test]
    fn valid_syncer_names_are_used_as_label_values() {
        assert_eq!(
            syncer_label_value("kubestellar-syncer-florin-32uaph9l"),
            "kubestellar-syncer-florin-32uaph9l"
        );
    }

    #[test]
    fn long_or_odd_syncer_names_become_distinct_valid_label_values() {
        let long = "a".repeat(100);
        let odd = "syncer:root/imw1";
        for name in [long.as_str(), odd, "-x-", "ü"] {
            let value = syncer_label_value(name);
            assert!(is_valid_label_value(&value), "{value:?} from {name:?}");
        }
        assert_ne!(syncer_label_value("a:b"), syncer_label_value("a/b"));
    }

    #[test]
    fn kcp_names_are_built_from_the_target_key() {
        assert_eq!(workload_state_label("abc"), "state.workload.kcp.io/abc");
        assert_eq!(workload_syncer_finalizer("abc"), "workload.kcp.io/syncer-abc");
        assert_eq!(
            workload_status_annotation("abc"),
            "experimental.status.workload.kcp.io/abc"
        );
    }

    #[test]
    fn status_is_kept_per_target_only_while_several_targets_sync_the_object() {
        let one = [("state.workload.kcp.io/a", "Sync"), ("app", "web")];
        assert!(!status_per_target(one));
        let pending = [
            ("state.workload.kcp.io/a", "Sync"),
            ("state.workload.kcp.io/b", ""),
        ];
        assert!(!status_per_target(pending));
        let two = [
            ("state.workload.kcp.io/a", "Sync"),
            ("state.workload.kcp.io/b", "Sync"),
        ];
        assert!(status_per_target(two));
    }
}
