//! How the lists of built-in kinds merge: by key, as sets, or atomically.
//!
//! A hand-written extract of the `patchStrategy`/`patchMergeKey` and
//! `listType`/`listMapKeys` markers of the Kubernetes API types, shared by
//! strategic merge patch and server-side apply. Maps are always merged
//! field by field.

/// Groups whose kinds are compiled into kube-apiserver, so strategic merge
/// patch applies to them.
const BUILT_IN_GROUPS: &[&str] = &[
    "",
    "apps",
    "batch",
    "autoscaling",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "storage.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "certificates.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "admissionregistration.k8s.io",
    "scheduling.k8s.io",
    "node.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "resource.k8s.io",
];

/// Whether strategic merge patch is defined for `group`/`kind`: true for the
/// built-in API groups, false for everything else (custom resources, for
/// which kube-apiserver answers 415 Unsupported Media Type).
pub fn supports_strategic_merge(group: &str, _kind: &str) -> bool {
    BUILT_IN_GROUPS.contains(&group)
}

/// How a list merges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ListType {
    /// Replaced as a whole (no patch strategy, `listType=atomic`).
    Atomic,
    /// A set of scalars merged by value (`patchStrategy=merge` on a list of
    /// scalars, `listType=set`).
    Set,
    /// A list of objects merged by the values of these fields
    /// (`listType=map`). Strategic merge patch only knows one merge key, the
    /// first.
    Map(&'static [&'static str]),
}

const BY_NAME: ListType = ListType::Map(&["name"]);

/// The list types of one kind.
#[derive(Clone, Copy, Debug)]
pub(super) struct Schema<'a> {
    kind: &'a str,
    built_in: bool,
    /// Where the kind keeps its `PodSpec`, if it has one.
    pod_spec: Option<&'static [&'static str]>,
}

impl<'a> Schema<'a> {
    pub(super) fn new(group: &str, kind: &'a str) -> Self {
        let pod_spec: Option<&'static [&'static str]> = match (group, kind) {
            ("", "Pod") => Some(&["spec"]),
            ("", "PodTemplate") => Some(&["template", "spec"]),
            ("", "ReplicationController")
            | ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
            | ("batch", "Job") => Some(&["spec", "template", "spec"]),
            ("batch", "CronJob") => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
            _ => None,
        };
        Schema {
            kind,
            built_in: supports_strategic_merge(group, kind),
            pod_spec,
        }
    }

    /// The list type at `path`, given as the field names leading to the list
    /// (list items do not appear in it).
    pub(super) fn list_type(&self, path: &[&str]) -> ListType {
        // ObjectMeta is shared by every kind, custom resources included.
        match path {
            ["metadata", "ownerReferences"] => return ListType::Map(&["uid"]),
            ["metadata", "finalizers"] => return ListType::Set,
            _ if !self.built_in => return ListType::Atomic,
            ["status", "conditions"] => return ListType::Map(&["type"]),
            _ => {}
        }
        if let Some(rest) = self.pod_spec.and_then(|prefix| path.strip_prefix(prefix)) {
            return pod_spec_list_type(rest);
        }
        match (self.kind, path) {
            ("Service", ["spec", "ports"]) => ListType::Map(&["port"]),
            ("Node", ["status", "addresses"]) => ListType::Map(&["type"]),
            ("Pod", ["status", "podIPs" | "hostIPs"]) => ListType::Map(&["ip"]),
            ("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration", ["webhooks"]) => BY_NAME,
            ("CSINode", ["spec", "drivers"]) => BY_NAME,
            _ => ListType::Atomic,
        }
    }
}

/// List types inside a `PodSpec`; `path` is relative to the pod spec.
fn pod_spec_list_type(path: &[&str]) -> ListType {
    const CONTAINERS: [&str; 3] = ["containers", "initContainers", "ephemeralContainers"];
    match path {
        [list] if CONTAINERS.contains(list) => BY_NAME,
        ["volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims"] => BY_NAME,
        ["hostAliases"] => ListType::Map(&["ip"]),
        ["topologySpreadConstraints"] => ListType::Map(&["topologyKey", "whenUnsatisfiable"]),
        [list, field] if CONTAINERS.contains(list) => match *field {
            "env" => BY_NAME,
            "ports" => ListType::Map(&["containerPort"]),
            "volumeMounts" => ListType::Map(&["mountPath"]),
            "volumeDevices" => ListType::Map(&["devicePath"]),
            "resizePolicy" => ListType::Map(&["resourceName"]),
            _ => ListType::Atomic,
        },
        _ => ListType::Atomic,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategic_merge_is_supported_for_built_in_groups_only() {
        assert!(supports_strategic_merge("", "ConfigMap"));
        assert!(supports_strategic_merge("apps", "Deployment"));
        assert!(supports_strategic_merge("rbac.authorization.k8s.io", "Role"));
        assert!(!supports_strategic_merge("example.com", "Widget"));
        assert!(!supports_strategic_merge("ferry.dev", "Workspace"));
    }

    #[test]
    fn pod_spec_lists_are_found_under_each_workload_kind() {
        let containers = |group, kind, path: &[&str]| Schema::new(group, kind).list_type(path);
        assert_eq!(containers("", "Pod", &["spec", "containers"]), BY_NAME);
        assert_eq!(
            containers(
                "apps",
                "Deployment",
                &["spec", "template", "spec", "containers", "env"]
            ),
            BY_NAME
        );
        assert_eq!(
            containers(
                "batch",
                "CronJob",
                &["spec", "jobTemplate", "spec", "template", "spec", "volumes"]
            ),
            BY_NAME
        );
        assert_eq!(
            containers("", "PodTemplate", &["template", "spec", "containers", "ports"]),
            ListType::Map(&["containerPort"])
        );
        assert_eq!(containers("", "Pod", &["spec", "tolerations"]), ListType::Atomic);
        assert_eq!(
            containers("", "Pod", &["spec", "containers", "envFrom"]),
            ListType::Atomic
        );
    }

    #[test]
    fn custom_resources_only_know_object_meta_lists() {
        let schema = Schema::new("example.com", "Widget");
        assert_eq!(schema.list_type(&["metadata", "finalizers"]), ListType::Set);
        assert_eq!(schema.list_type(&["status", "conditions"]), ListType::Atomic);
        assert_eq!(schema.list_type(&["spec", "containers"]), ListType::Atomic);
    }
}
