//! `ferry ensure location NAME key=value...`: create or update a SyncTarget
//! and its Location, as `kubectl kubestellar ensure location` does.
//! `ferry ensure wmw NAME`: a workload management workspace with the edge API
//! (EdgePlacement, SinglePlacementSlice, ...) installed, as `kubectl kubestellar
//! ensure wmw` does.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

#[derive(clap::Subcommand)]
pub enum EnsureCommand {
    /// Create or update the SyncTarget and Location named NAME with the given labels.
    Location(LocationArgs),
    /// Create (if missing) the workload management workspace NAME, a child of the
    /// kubeconfig's workspace, with Ferry's edge API installed in it.
    Wmw(WmwArgs),
}

#[derive(clap::Args)]
pub struct WmwArgs {
    /// Name of the workspace (a child of the kubeconfig's workspace, usually root).
    pub name: String,
    /// Kubeconfig of the parent workspace (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
}

#[derive(clap::Args)]
pub struct LocationArgs {
    /// Name of the SyncTarget and Location.
    pub name: String,
    /// Labels, as key=value.
    pub labels: Vec<String>,
    /// Kubeconfig of the inventory workspace (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
}

const FIELD_MANAGER: &str = "ferry-ensure-location";

fn edge(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", kind),
        plural,
    )
}

fn parse_labels(pairs: &[String]) -> anyhow::Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|p| match p.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => bail!("label {p:?} is not key=value (e.g. env=prod)"),
        })
        .collect()
}

/// Install Ferry's CRDs in the workspace if the edge API is not served there.
pub async fn ensure_edge_api(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in ferry_api::all_crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("installing CRD {name}"))?;
    }
    for crd in ferry_api::all_crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let established = kube::runtime::wait::await_condition(
            crds.clone(),
            &name,
            kube::runtime::conditions::is_crd_established(),
        );
        tokio::time::timeout(Duration::from_secs(30), established)
            .await
            .with_context(|| format!("CRD {name} did not become established"))??;
    }
    Ok(())
}

pub async fn ensure_location(
    client: &kube::Client,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> anyhow::Result<DynamicObject> {
    ensure_edge_api(client).await?;
    let mut target_labels = labels.clone();
    target_labels.insert("id".into(), name.into());
    let target = json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget",
        "metadata": {"name": name, "labels": target_labels},
    });
    let location = json!({
        "apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "Location",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "resource": {"group": "edge.kubestellar.io", "version": "v2alpha1", "resource": "synctargets"},
            "instanceSelector": {"matchLabels": {"id": name}},
        },
    });
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let targets: Api<DynamicObject> = Api::all_with(client.clone(), &edge("SyncTarget", "synctargets"));
    let made = targets
        .patch(name, &pp, &Patch::Apply(&target))
        .await
        .with_context(|| format!("applying SyncTarget {name}"))?;
    let locations: Api<DynamicObject> = Api::all_with(client.clone(), &edge("Location", "locations"));
    locations
        .patch(name, &pp, &Patch::Apply(&location))
        .await
        .with_context(|| format!("applying Location {name}"))?;
    // KubeStellar's script removes the unused Location named default.
    if name != "default" {
        match locations.delete("default", &DeleteParams::default()).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(made)
}

/// Create workspace `name` under the config's workspace (unless it exists), wait
/// until it is Ready, and install the edge API in it. Returns its path.
pub async fn ensure_wmw(config: &kube::Config, name: &str) -> anyhow::Result<String> {
    let parent = kube::Client::try_from(config.clone())?;
    let workspaces: Api<DynamicObject> = Api::all_with(
        parent,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
            "workspaces",
        ),
    );
    let ws =
        json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}});
    if workspaces.get_opt(name).await?.is_none() {
        let ws: DynamicObject = serde_json::from_value(ws)?;
        match workspaces.create(&Default::default(), &ws).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).with_context(|| format!("creating workspace {name}")),
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let ws = workspaces.get(name).await?;
        if ws.data["status"]["phase"] == "Ready" {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            bail!("workspace {name} did not become Ready within 30s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let parent_url = config.cluster_url.to_string();
    let parent_path = parent_url
        .trim_end_matches('/')
        .rsplit_once("/clusters/")
        .map(|(_, p)| p.to_string())
        .unwrap_or_else(|| "root".to_string());
    let path = format!("{parent_path}:{name}");
    let inside = ferry_hub::kubeconfig::at_workspace(config, &path)?;
    ensure_edge_api(&kube::Client::try_from(inside)?).await?;
    Ok(path)
}

pub async fn run(cmd: EnsureCommand) -> anyhow::Result<()> {
    match cmd {
        EnsureCommand::Wmw(args) => {
            let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
            let path = ensure_wmw(&config, &args.name).await?;
            println!("workspace {path} ensured, with the edge API (EdgePlacement) installed");
            println!("next: kubectl ferry ws use {path}; kubectl apply your workload and an EdgePlacement");
            Ok(())
        }
        EnsureCommand::Location(args) => {
            let labels = parse_labels(&args.labels)?;
            let client =
                crate::kubeconfig::client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
            let made = ensure_location(&client, &args.name, &labels).await?;
            println!(
                "synctarget.edge.kubestellar.io/{0} and location.edge.kubestellar.io/{0} ensured (uid {1})",
                args.name,
                made.metadata.uid.unwrap_or_default()
            );
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_must_be_key_value() {
        let l = parse_labels(&["env=prod".into(), "extended=yes".into()]).unwrap();
        assert_eq!(l["extended"], "yes");
        assert!(parse_labels(&["oops".into()])
            .unwrap_err()
            .to_string()
            .contains("key=value"));
    }
}
