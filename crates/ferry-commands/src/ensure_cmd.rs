//! `ferry ensure location NAME key=value...`: create or update a SyncTarget
//! and its Location, as `kubectl kubestellar ensure location` does.
//! `ferry ensure wmw NAME`: a workload management workspace with the edge API
//! (EdgePlacement, SinglePlacementSlice, ...) bound from `root:espw` as
//! `bind-espw`, as `kubectl kubestellar ensure wmw` does.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use ferry_api::edge::espw;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

#[derive(clap::Subcommand)]
pub enum EnsureCommand {
    /// Create or update the SyncTarget and Location named NAME with the given labels.
    Location(LocationArgs),
    /// Create (if missing) the workload management workspace NAME, a child of the
    /// kubeconfig's workspace, binding KubeStellar's API from root:espw as bind-espw
    /// (without root:espw: Ferry's CRDs installed in it).
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

/// The KubeStellar API in the workspace `config` addresses: the APIBinding
/// `bind-espw` of `root:espw`'s export `edge.kubestellar.io` where the hub has
/// the ESPW (`kubectl ferry kubestellar init`), as KubeStellar's commands do;
/// Ferry's CRDs elsewhere (a hub without the ESPW, any Kubernetes API server).
/// A workspace given the CRDs earlier keeps its objects when it binds (the
/// hub hands the resources to the binding).
pub async fn ensure_edge_api(config: &kube::Config) -> anyhow::Result<()> {
    let client = kube::Client::try_from(config.clone())?;
    if espw_exported(config).await {
        ensure_binding(&client, espw::WMW_BINDING).await
    } else {
        install_crds(&client).await
    }
}

/// Whether `root:espw` on this server exports the KubeStellar API (every
/// authenticated user may read the export there).
pub async fn espw_exported(config: &kube::Config) -> bool {
    let Ok(espw_config) = ferry_server::kubeconfig::at_workspace(config, espw::PATH) else {
        return false;
    };
    let Ok(client) = kube::Client::try_from(espw_config) else {
        return false;
    };
    Api::<DynamicObject>::all_with(client, &kcp("APIExport", "apiexports"))
        .get(espw::EXPORT)
        .await
        .is_ok()
}

/// The APIBinding `name` of the ESPW's export, created unless it exists, and Bound.
pub async fn ensure_binding(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let bindings: Api<DynamicObject> = Api::all_with(client.clone(), &kcp("APIBinding", "apibindings"));
    if bindings.get_opt(name).await?.is_none() {
        let binding: DynamicObject = serde_json::from_value(espw::binding(name))?;
        match bindings.create(&Default::default(), &binding).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("binding {}:{} as APIBinding {name}", espw::PATH, espw::EXPORT))
            }
        }
    }
    crate::bind_cmd::wait_bound(client, name, Duration::from_secs(30)).await
}

fn kcp(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apis.kcp.io", "v1alpha1", kind), plural)
}

/// Install Ferry's CRDs in the workspace (server-side apply) and wait until
/// they are established.
pub async fn install_crds(client: &kube::Client) -> anyhow::Result<()> {
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

/// The SyncTarget and Location `name` in the inventory workspace `config`
/// addresses (with the KubeStellar API there first).
pub async fn ensure_location(
    config: &kube::Config,
    name: &str,
    labels: &BTreeMap<String, String>,
) -> anyhow::Result<DynamicObject> {
    ensure_edge_api(config).await?;
    let client = &kube::Client::try_from(config.clone())?;
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
/// until it is Ready, and bind (or install) the KubeStellar API in it. Returns its path.
pub async fn ensure_wmw(config: &kube::Config, name: &str) -> anyhow::Result<String> {
    let path = ensure_workspace(config, name, "universal").await?;
    let inside = ferry_server::kubeconfig::at_workspace(config, &path)?;
    ensure_edge_api(&inside).await?;
    Ok(path)
}

fn workspaces_api(config: &kube::Config) -> anyhow::Result<Api<DynamicObject>> {
    Ok(Api::all_with(
        kube::Client::try_from(config.clone())?,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
            "workspaces",
        ),
    ))
}

/// The path of the workspace the config addresses (`root` for a plain URL).
pub fn workspace_path(config: &kube::Config) -> String {
    config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .rsplit_once("/clusters/")
        .map(|(_, p)| p.to_string())
        .unwrap_or_else(|| "root".to_string())
}

/// Create workspace `name` of type `workspace_type` (`universal`,
/// `organization`) under the config's workspace unless it exists, and wait
/// until it is Ready. Returns its path.
pub async fn ensure_workspace(
    config: &kube::Config,
    name: &str,
    workspace_type: &str,
) -> anyhow::Result<String> {
    let workspaces = workspaces_api(config)?;
    let ws = json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name},
                    "spec": {"type": {"name": workspace_type}}});
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
    Ok(format!("{}:{name}", workspace_path(config)))
}

pub async fn run(cmd: EnsureCommand) -> anyhow::Result<()> {
    match cmd {
        EnsureCommand::Wmw(args) => {
            let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
            let path = ensure_wmw(&config, &args.name).await?;
            println!("workspace {path} ensured, with the KubeStellar API (EdgePlacement)");
            println!("next: kubectl ferry ws use {path}; kubectl apply your workload and an EdgePlacement");
            Ok(())
        }
        EnsureCommand::Location(args) => {
            let labels = parse_labels(&args.labels)?;
            let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
            let made = ensure_location(&config, &args.name, &labels).await?;
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
