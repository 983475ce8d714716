//! KubeStellar's deployment shape on a hub:
//! - `kubectl ferry kubestellar init` plays `kubestellar init`: the edge
//!   service provider workspace `root:espw` exporting the KubeStellar API as
//!   the APIExport `edge.kubestellar.io` (which every authenticated user may
//!   bind), and the inventory management workspace `root:imw1` bound to it.
//!   Create-only, so running it again changes nothing; a hub's mailboxes and
//!   (on `ferry ensure wmw`) workload management workspaces move from
//!   directly installed CRDs to the binding, keeping their objects.
//! - `kubectl ferry kubestellar remove wmw NAME` (also `kubectl ferry remove
//!   wmw NAME`) plays `kubectl kubestellar remove wmw`: deletes the workload
//!   management workspace.

use anyhow::{bail, Context};
use ferry_api::edge::espw;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::ensure_cmd::{ensure_binding, ensure_workspace, workspace_path, WmwArgs};

#[derive(clap::Subcommand)]
pub enum KubestellarCommand {
    /// Create what is missing of root:espw (exporting KubeStellar's API as the
    /// APIExport edge.kubestellar.io, bindable by every authenticated user) and
    /// of the inventory management workspace root:imw1, as `kubestellar init` does.
    Init(InitArgs),
    /// Remove what KubeStellar's commands made.
    #[command(subcommand)]
    Remove(RemoveCommand),
}

#[derive(clap::Subcommand)]
pub enum RemoveCommand {
    /// Delete the workload management workspace NAME (a child of the
    /// kubeconfig's workspace), with everything in it.
    Wmw(WmwArgs),
}

#[derive(clap::Args)]
pub struct InitArgs {
    /// Kubeconfig of the hub's root workspace (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
}

/// What `init` ensured: the ESPW's and the inventory workspace's paths.
pub struct Initialized {
    pub espw: String,
    pub imw: String,
}

/// `kubestellar init` against the hub `config` addresses (any workspace of it).
pub async fn init(config: &kube::Config) -> anyhow::Result<Initialized> {
    let root = ferry_server::kubeconfig::at_workspace(config, "root")?;
    let espw_path = ensure_workspace(&root, espw::WORKSPACE, "organization").await?;
    let inside = kube::Client::try_from(ferry_server::kubeconfig::at_workspace(config, &espw_path)?)?;
    for obj in espw::objects() {
        create_missing(&inside, &obj).await?;
    }
    let imw = ensure_workspace(&root, espw::DEFAULT_IMW, "organization").await?;
    let imw_client = kube::Client::try_from(ferry_server::kubeconfig::at_workspace(config, &imw)?)?;
    ensure_binding(&imw_client, espw::WMW_BINDING).await?;
    Ok(Initialized { espw: espw_path, imw })
}

/// Create `obj` unless an object of its kind and name exists (what exists
/// is never overwritten: kcp's APIResourceSchemas are immutable anyway).
async fn create_missing(client: &kube::Client, obj: &Value) -> anyhow::Result<()> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let (ar, _) = kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .with_context(|| format!("{kind} is not served: is this a Ferry hub (or kcp)?"))?;
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let made: DynamicObject = serde_json::from_value(obj.clone())?;
    match api.create(&Default::default(), &made).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("creating {kind} {name} in {}", espw::PATH)),
    }
}

/// Delete the workload management workspace `name` under the config's
/// workspace. Refuses the ESPW, the inventory and mailbox workspaces (they
/// are not WMWs); a WMW that is already gone is fine, as in KubeStellar.
pub async fn remove_wmw(config: &kube::Config, name: &str) -> anyhow::Result<String> {
    let parent = workspace_path(config);
    let path = format!("{parent}:{name}");
    let workspaces: Api<DynamicObject> = Api::all_with(
        kube::Client::try_from(config.clone())?,
        &crate::ar("tenancy.kcp.io", "v1alpha1", "Workspace", "workspaces"),
    );
    let Some(ws) = workspaces.get_opt(name).await? else {
        return Ok(format!("workspace {path} does not exist; nothing to remove"));
    };
    let annotations = ws.metadata.annotations.unwrap_or_default();
    if annotations.contains_key(ferry_api::well_known::SYNC_TARGET_NAME_ANNOTATION) {
        bail!(
            "workspace {path} is the mailbox workspace of SyncTarget {:?}, not a workload management workspace: delete the SyncTarget instead",
            annotations[ferry_api::well_known::SYNC_TARGET_NAME_ANNOTATION]
        );
    }
    if parent == "root" && (name == espw::WORKSPACE || name == "compute") {
        bail!("workspace {path} is KubeStellar's (or kcp's) own, not a workload management workspace: it is not removed");
    }
    workspaces
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting workspace {path}"))?;
    Ok(format!("workspace {path} removed"))
}

pub async fn run(cmd: KubestellarCommand) -> anyhow::Result<()> {
    match cmd {
        KubestellarCommand::Init(args) => {
            let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
            let done = init(&config).await?;
            println!(
                "{} exports the KubeStellar API as APIExport {} (any authenticated user may bind it)",
                done.espw,
                espw::EXPORT
            );
            println!(
                "{} is the inventory management workspace (APIBinding {})",
                done.imw,
                espw::WMW_BINDING
            );
            println!(
                "next: kubectl ferry ws {}; kubectl ferry ensure location NAME key=value...",
                done.imw
            );
            Ok(())
        }
        KubestellarCommand::Remove(RemoveCommand::Wmw(args)) => remove(args).await,
    }
}

/// `remove wmw NAME`.
pub async fn remove(args: WmwArgs) -> anyhow::Result<()> {
    let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    println!("{}", remove_wmw(&config, &args.name).await?);
    Ok(())
}
