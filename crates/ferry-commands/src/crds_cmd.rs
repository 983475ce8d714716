//! `ferry crds`: the CRDs of every API Ferry defines or accepts, less the
//! kinds the target server already serves built in.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// `ferry crds`.
#[derive(clap::Args, Debug, Default)]
pub struct CrdsArgs {
    /// The server the CRDs are for. `hub`: a Ferry hub, which serves kcp TMC's
    /// kinds (`synctargets.workload.kcp.io`) built in, so their CRDs are left out;
    /// `kubernetes`: any other server (kube-apiserver, kcp), every CRD. Without it,
    /// the server of the kubeconfig's current context is asked (a Ferry hub says
    /// so in its version); when none answers, every CRD is printed.
    #[arg(long = "for", value_enum, value_name = "SERVER")]
    pub target: Option<Target>,
    /// Kubeconfig of the server to ask when `--for` is not given
    /// (default: `$KUBECONFIG`, then `~/.kube/config`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// What kind of server the CRDs are applied to.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Hub,
    Kubernetes,
}

/// How long asking the server may take before every CRD is printed.
const ASK_TIMEOUT: Duration = Duration::from_secs(3);

pub async fn run(args: CrdsArgs) -> anyhow::Result<()> {
    let target = match args.target {
        Some(t) => t,
        None => detect(args.kubeconfig.as_deref()).await,
    };
    let crds = for_target(target);
    if target == Target::Hub {
        eprintln!(
            "leaving out the CRDs of kinds a Ferry hub serves built in ({}); pass --for kubernetes to print them too",
            left_out().join(", ")
        );
    }
    print!("{}", ferry_api::crds::to_yaml(&crds));
    Ok(())
}

/// Whether the kubeconfig's server is a Ferry hub (its `/version` carries
/// `+ferry-`); any other answer, or none, means `kubernetes`.
async fn detect(kubeconfig: Option<&std::path::Path>) -> Target {
    let asked = async {
        let client = crate::kubeconfig::client(kubeconfig, None).await.ok()?;
        client.apiserver_version().await.ok()
    };
    match tokio::time::timeout(ASK_TIMEOUT, asked).await {
        Ok(Some(v)) if is_hub_version(&v.git_version) => Target::Hub,
        _ => Target::Kubernetes,
    }
}

/// A Ferry hub's `gitVersion`: `v1.33.0+ferry-v<version>`.
pub fn is_hub_version(git_version: &str) -> bool {
    git_version.contains("+ferry-")
}

/// Whether a Ferry hub serves `crd`'s kind built in in every workspace.
fn served_by_hub(crd: &CustomResourceDefinition) -> bool {
    ferry_server::registry::Registry::with_builtins(&ferry_server::kinds::builtin::resources().0)
        .is_builtin(&crd.spec.group, &crd.spec.names.plural)
}

/// The CRDs to apply to `target`.
pub fn for_target(target: Target) -> Vec<CustomResourceDefinition> {
    ferry_api::all_crds()
        .into_iter()
        .filter(|crd| target == Target::Kubernetes || !served_by_hub(crd))
        .collect()
}

/// The names of the CRDs `--for hub` leaves out.
fn left_out() -> Vec<String> {
    ferry_api::all_crds()
        .iter()
        .filter(|crd| served_by_hub(crd))
        .filter_map(|crd| crd.metadata.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hub_gets_no_crd_for_what_it_serves_built_in() {
        let names = |t| -> Vec<String> {
            for_target(t)
                .into_iter()
                .filter_map(|c| c.metadata.name)
                .collect()
        };
        let hub = names(Target::Hub);
        let kubernetes = names(Target::Kubernetes);
        assert!(kubernetes.contains(&"synctargets.workload.kcp.io".to_string()));
        assert!(!hub.contains(&"synctargets.workload.kcp.io".to_string()));
        assert!(hub.contains(&"synctargets.edge.kubestellar.io".to_string()));
        assert_eq!(kubernetes.len(), hub.len() + left_out().len());
        assert!(is_hub_version("v1.33.0+ferry-v0.1.0"));
        assert!(!is_hub_version("v1.24.3+kcp-v0.11.0"));
    }
}
