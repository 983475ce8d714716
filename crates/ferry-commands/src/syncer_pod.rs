//! A syncer started from its applied manifest the way its pod would start: the
//! Deployment's container arguments, the Secret it mounts (the upstream kubeconfig that
//! `syncer-gen` for KubeStellar or `kubectl ferry workload sync` for kcp TMC put there),
//! and an in-cluster identity for its ServiceAccount, with files under a directory of
//! this machine standing in for the pod's paths.
//!
//! The quickstarts start the syncer from this in their own process; `ferry bench fleet`
//! runs it as a `ferry` process per cluster.

use std::path::{Path, PathBuf};

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use crate::ar;

/// What the pod of an applied syncer manifest runs.
pub struct PodSyncer {
    /// `ferry`'s arguments (`syncer ...`) as the pod runs them, with the mounted
    /// kubeconfig's path under the local directory, `--to-kubeconfig` of the in-cluster
    /// identity, and without the pod's fixed `--health-address`.
    pub args: Vec<String>,
    /// The Deployment's container arguments, unchanged.
    pub container_args: Vec<String>,
    /// The Deployment's namespace (the pod's `NAMESPACE`).
    pub namespace: String,
    /// The local stand-in for the pod's mounted upstream kubeconfig.
    pub upstream_kubeconfig: PathBuf,
}

/// Reads the syncer Deployment `namespace/id` applied to the cluster at `url` (CA
/// `ca_pem`, administered through `admin`), writes what its pod would mount under `dir`,
/// and returns what the pod runs.
pub async fn from_applied(
    url: &str,
    ca_pem: &str,
    admin: &kube::Client,
    namespace: &str,
    id: &str,
    dir: &Path,
) -> anyhow::Result<PodSyncer> {
    // It may be a cluster's data directory, which must stay owner-only.
    ferry_server::server::data_dir::create_private_dir(dir)?;
    let deployment = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        namespace,
        &ar("apps", "v1", "Deployment", "deployments"),
    )
    .get(id)
    .await
    .with_context(|| format!("reading the syncer Deployment {namespace}/{id}"))?;
    let pod = deployment
        .data
        .pointer("/spec/template/spec")
        .context("the syncer Deployment has no pod template")?;
    let container = &pod["containers"][0];
    let container_args: Vec<String> = container["args"]
        .as_array()
        .context("the syncer Deployment has no arguments")?
        .iter()
        .filter_map(Value::as_str)
        .map(String::from)
        .collect();
    let mount = &container["volumeMounts"][0];
    let mount_path = mount["mountPath"]
        .as_str()
        .context("the syncer Deployment mounts no volume")?;
    let secret_name = pod["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .and_then(|v| v["secret"]["secretName"].as_str())
        .context("the syncer Deployment's volume is not a Secret")?;
    let secret = Api::<Secret>::namespaced(admin.clone(), namespace)
        .get(secret_name)
        .await
        .with_context(|| format!("reading the Secret {namespace}/{secret_name}"))?;
    let kubeconfig = secret
        .data
        .as_ref()
        .and_then(|d| d.get("kubeconfig"))
        .map(|b| b.0.clone())
        .with_context(|| format!("the Secret {namespace}/{secret_name} has no kubeconfig key"))?;
    let mounted = dir.join(mount_path.trim_start_matches('/'));
    ferry_server::server::data_dir::create_private_dir(&mounted)?;
    let upstream_kubeconfig = mounted.join("kubeconfig");
    // The kubeconfigs hold the syncer's tokens.
    ferry_server::server::write_private(&upstream_kubeconfig, &kubeconfig)?;
    let service_account = pod["serviceAccountName"].as_str().unwrap_or(id);
    let in_cluster = dir.join("in-cluster.kubeconfig");
    let text =
        crate::quickstart::in_cluster_kubeconfig_at(url, ca_pem, admin, namespace, service_account).await?;
    ferry_server::server::write_private(&in_cluster, text.as_bytes())?;
    let mut args = local_arguments(&container_args, mount_path, &mounted);
    args.push(format!("--to-kubeconfig={}", in_cluster.display()));
    Ok(PodSyncer {
        args,
        container_args,
        namespace: namespace.to_string(),
        upstream_kubeconfig,
    })
}

/// The container's arguments with paths under the pod's `mount_path` moved under
/// `local`, and without the pod's fixed health port.
fn local_arguments(container_args: &[String], mount_path: &str, local: &Path) -> Vec<String> {
    let local = local.display().to_string();
    container_args
        .iter()
        .filter(|a| !a.starts_with("--health-address"))
        .map(|a| match a.split_once('=') {
            Some((flag, value))
                if value == mount_path
                    || value.starts_with(&format!("{}/", mount_path.trim_end_matches('/'))) =>
            {
                format!("{flag}={local}{}", &value[mount_path.len()..])
            }
            _ => a.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounted_paths_move_and_the_health_port_goes() {
        let args = [
            "syncer",
            "--profile=tmc",
            "--from-kubeconfig=/kcp/kubeconfig",
            "--kcp-name=/kcpx",
            "--health-address=0.0.0.0:8080",
            "--enable-leader-election",
        ]
        .map(String::from);
        assert_eq!(
            local_arguments(&args, "/kcp", Path::new("/tmp/c1/kcp")),
            [
                "syncer",
                "--profile=tmc",
                "--from-kubeconfig=/tmp/c1/kcp/kubeconfig",
                // Only the mount itself, not a path that merely starts alike.
                "--kcp-name=/kcpx",
                "--enable-leader-election",
            ]
        );
    }
}
