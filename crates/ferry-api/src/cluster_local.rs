//! Objects every cluster makes for itself, which a syncer never copies either way
//! (so it never adopts, overwrites or deletes them): one rule for every syncer
//! profile and for the kcp TMC scheduler, which must know which objects a
//! target's syncer will copy.

/// Whether an object is one every cluster makes for itself: the `kube-root-ca.crt`
/// ConfigMap (kcp renames it for the same reason), the `default` ServiceAccount,
/// ServiceAccount token Secrets (`secret_type` `kubernetes.io/service-account-token`),
/// whose contents only mean something to the cluster that issued them, and the API
/// server's own `default/kubernetes` Service, Endpoints and EndpointSlice.
/// `namespace` is empty for a cluster-scoped object.
pub fn is_cluster_local(
    group: &str,
    resource: &str,
    namespace: &str,
    name: &str,
    secret_type: Option<&str>,
) -> bool {
    match (group, resource) {
        ("", "services" | "endpoints") | ("discovery.k8s.io", "endpointslices") => {
            namespace == "default" && name == "kubernetes"
        }
        ("", "configmaps") => name == "kube-root-ca.crt",
        ("", "serviceaccounts") => name == "default",
        ("", "secrets") => secret_type == Some("kubernetes.io/service-account-token"),
        _ => false,
    }
}

/// Whether a kcp TMC syncer leaves an object to each cluster: as
/// [`is_cluster_local`], except that ConfigMaps and Secrets are all synced (kcp's
/// syncer renames `kube-root-ca.crt` to `kcp-root-ca.crt` downstream and rewrites
/// ServiceAccount tokens), so only the `default` ServiceAccount and the API
/// server's own `default/kubernetes` objects stay.
pub fn tmc_leaves_to_cluster(group: &str, resource: &str, namespace: &str, name: &str) -> bool {
    !matches!((group, resource), ("", "configmaps" | "secrets"))
        && is_cluster_local(group, resource, namespace, name, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_each_cluster_keeps_for_itself_and_what_a_tmc_syncer_still_copies() {
        let token = Some("kubernetes.io/service-account-token");
        assert!(is_cluster_local(
            "",
            "configmaps",
            "app",
            "kube-root-ca.crt",
            None
        ));
        assert!(!is_cluster_local("", "configmaps", "app", "settings", None));
        assert!(is_cluster_local("", "serviceaccounts", "app", "default", None));
        assert!(!is_cluster_local("", "serviceaccounts", "app", "builder", None));
        assert!(is_cluster_local("", "secrets", "app", "builder-token", token));
        assert!(!is_cluster_local(
            "",
            "secrets",
            "app",
            "builder-token",
            Some("Opaque")
        ));
        for (group, resource) in [
            ("", "services"),
            ("", "endpoints"),
            ("discovery.k8s.io", "endpointslices"),
        ] {
            assert!(
                is_cluster_local(group, resource, "default", "kubernetes", None),
                "{resource}"
            );
            assert!(
                !is_cluster_local(group, resource, "app", "kubernetes", None),
                "{resource} elsewhere"
            );
            assert!(
                !is_cluster_local(group, resource, "default", "web", None),
                "another {resource}"
            );
        }
        assert!(!is_cluster_local(
            "",
            "endpointslices",
            "default",
            "kubernetes",
            None
        ));
        assert!(!is_cluster_local(
            "apps",
            "deployments",
            "default",
            "kubernetes",
            None
        ));

        assert!(!tmc_leaves_to_cluster(
            "",
            "configmaps",
            "app",
            "kube-root-ca.crt"
        ));
        assert!(!tmc_leaves_to_cluster("", "secrets", "app", "builder-token"));
        assert!(tmc_leaves_to_cluster("", "serviceaccounts", "app", "default"));
        assert!(tmc_leaves_to_cluster("", "services", "default", "kubernetes"));
        assert!(tmc_leaves_to_cluster(
            "discovery.k8s.io",
            "endpointslices",
            "default",
            "kubernetes"
        ));
        assert!(!tmc_leaves_to_cluster("", "services", "app", "kubernetes"));
    }
}
