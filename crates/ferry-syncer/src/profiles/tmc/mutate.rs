//! kcp TMC's mutators: what changes in a copy on its way down, beyond stripping and
//! marking.
//!
//! Kept (they make sense without kcp's DNS and tunnel):
//! - names: `kube-root-ca.crt` → `kcp-root-ca.crt`, `default-token-*` →
//!   `kcp-default-token-*`, so they never clash with what the cluster makes itself;
//! - Secrets: a service-account token becomes `Opaque`, without the service-account
//!   annotations (the cluster would otherwise treat it as its own token and rewrite it);
//! - pod templates of Deployments, StatefulSets and ReplicaSets: the service account is
//!   dropped and its token not mounted (the account lives upstream, not in the cluster,
//!   and the cluster's token must not reach a workload that thinks it talks to kcp), and
//!   an env var read from the downward API's `metadata.namespace` gets the upstream
//!   namespace as a literal (the pod runs in `kcp-<hash>`).
//!
//! Left out (they need kcp's front proxy, DNS or tunnel in the cluster): the
//! `KUBERNETES_SERVICE_*` env pointing at kcp, the `kcp-api-access` projected volume,
//! `dnsPolicy: None` with the workspace's DNS server, and the tunnel's pod labels.

use serde_json::Value;

/// The ConfigMap every namespace gets from the cluster; its upstream copy is renamed.
pub const ROOT_CA: &str = "kube-root-ca.crt";
/// What the upstream `kube-root-ca.crt` is called downstream.
pub const KCP_ROOT_CA: &str = "kcp-root-ca.crt";
const DEFAULT_TOKEN_PREFIX: &str = "default-token-";
const KCP_PREFIX: &str = "kcp-";

/// The downstream name of the upstream object `name` of `resource` (core group).
pub fn downstream_name(resource: &str, name: &str) -> String {
    match resource {
        "configmaps" if name == ROOT_CA => KCP_ROOT_CA.to_string(),
        "secrets" if name.starts_with(DEFAULT_TOKEN_PREFIX) => format!("{KCP_PREFIX}{name}"),
        _ => name.to_string(),
    }
}

/// The upstream name of the downstream copy `name` (the inverse of [`downstream_name`]).
pub fn upstream_name(resource: &str, name: &str) -> String {
    match resource {
        "configmaps" if name == KCP_ROOT_CA => ROOT_CA.to_string(),
        "secrets" if name.starts_with("kcp-default-token-") => name[KCP_PREFIX.len()..].to_string(),
        _ => name.to_string(),
    }
}

/// A service-account token Secret becomes a plain `Opaque` one.
pub fn mutate_secret(copy: &mut Value) {
    if copy.get("type").and_then(Value::as_str) != Some("kubernetes.io/service-account-token") {
        return;
    }
    copy["type"] = Value::String("Opaque".into());
    if let Some(annotations) = copy
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove("kubernetes.io/service-account.name");
        annotations.remove("kubernetes.io/service-account.uid");
    }
}

/// The pod template of a Deployment, StatefulSet or ReplicaSet: no service account, no
/// mounted token, and the upstream namespace `namespace` as a literal where the
/// downward API would give the downstream one.
pub fn mutate_pod_template(copy: &mut Value, namespace: &str) {
    let Some(spec) = copy
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    spec.remove("serviceAccountName");
    spec.remove("serviceAccount");
    spec.insert("automountServiceAccountToken".into(), Value::Bool(false));
    for containers in ["containers", "initContainers"] {
        let Some(list) = spec.get_mut(containers).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in list {
            let Some(env) = container.get_mut("env").and_then(Value::as_array_mut) else {
                continue;
            };
            for var in env {
                let reads_namespace = var
                    .pointer("/valueFrom/fieldRef/fieldPath")
                    .and_then(Value::as_str)
                    == Some("metadata.namespace");
                if let (true, Some(var)) = (reads_namespace, var.as_object_mut()) {
                    var.remove("valueFrom");
                    var.insert("value".into(), Value::String(namespace.to_string()));
                }
            }
        }
    }
}

/// Whether objects of `group`/`resource` carry a pod template the mutator changes.
pub fn has_pod_template(group: &str, resource: &str) -> bool {
    group == "apps" && matches!(resource, "deployments" | "statefulsets" | "replicasets")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_root_ca_and_default_tokens_are_renamed_both_ways() {
        assert_eq!(
            downstream_name("configmaps", "kube-root-ca.crt"),
            "kcp-root-ca.crt"
        );
        assert_eq!(upstream_name("configmaps", "kcp-root-ca.crt"), "kube-root-ca.crt");
        assert_eq!(
            downstream_name("secrets", "default-token-x1"),
            "kcp-default-token-x1"
        );
        assert_eq!(
            upstream_name("secrets", "kcp-default-token-x1"),
            "default-token-x1"
        );
        assert_eq!(downstream_name("configmaps", "app"), "app");
        assert_eq!(upstream_name("secrets", "kcp-other"), "kcp-other");
    }

    #[test]
    fn a_service_account_token_becomes_opaque() {
        let mut secret = json!({ "type": "kubernetes.io/service-account-token",
            "metadata": { "annotations": { "kubernetes.io/service-account.name": "default", "keep": "1" } },
            "data": { "token": "dA==" } });
        mutate_secret(&mut secret);
        assert_eq!(secret["type"], "Opaque");
        assert_eq!(secret["metadata"]["annotations"], json!({ "keep": "1" }));
        assert_eq!(secret["data"]["token"], "dA==");
        let mut plain = json!({ "type": "Opaque", "data": {} });
        let before = plain.clone();
        mutate_secret(&mut plain);
        assert_eq!(plain, before);
    }

    #[test]
    fn a_pod_template_loses_its_service_account_and_reads_the_upstream_namespace() {
        let mut deployment = json!({ "spec": { "template": { "spec": {
            "serviceAccountName": "builder",
            "containers": [{ "name": "c", "env": [
                { "name": "NS", "valueFrom": { "fieldRef": { "fieldPath": "metadata.namespace" } } },
                { "name": "POD", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }
            ] }]
        } } } });
        mutate_pod_template(&mut deployment, "app");
        let spec = &deployment["spec"]["template"]["spec"];
        assert!(spec.get("serviceAccountName").is_none());
        assert_eq!(spec["automountServiceAccountToken"], false);
        assert_eq!(
            spec["containers"][0]["env"][0],
            json!({ "name": "NS", "value": "app" })
        );
        assert_eq!(
            spec["containers"][0]["env"][1]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name"
        );
        assert!(has_pod_template("apps", "deployments"));
        assert!(!has_pod_template("", "pods"));
    }
}
