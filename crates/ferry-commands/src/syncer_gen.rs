//! `ferry syncer-gen NAME --syncer-image IMAGE -o FILE` (also `kubectl ferry
//! syncer-gen`, KubeStellar's `kubectl kubestellar syncer-gen`): register a
//! workload cluster. Run against a workspace the caller may write — a mailbox
//! workspace (checked against its SyncTarget) or any other, such as one made by
//! hand, where NAME alone is the syncer's identity — it creates the syncer's
//! identity there (ServiceAccount, a ClusterRole with explicit verbs, a binding,
//! a TokenRequest token), the default EdgeSyncConfig NAME, and writes the
//! manifest that installs the syncer on the cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const FIELD_MANAGER: &str = "ferry-syncer-gen";
use ferry_api::edge::mailbox::UPSYNC_ROLE;
use ferry_api::edge::mailbox::{INVENTORY_CLUSTER_ANNOTATION, SYNC_TARGET_UID_ANNOTATION};
use ferry_api::well_known::SYNC_TARGET_NAME_ANNOTATION;
/// Where the Deployment mounts the upstream kubeconfig Secret (KubeStellar's path).
pub const UPSTREAM_MOUNT: &str = "/kcp";

/// The prefix of every name syncer-gen gives (KubeStellar's).
pub const ID_PREFIX: &str = "kubestellar-syncer";

/// The prefix earlier Ferry releases gave; their identities are removed on re-registration.
const LEGACY_ID_PREFIX: &str = "ferry-syncer";

#[derive(clap::Args, Debug, Clone)]
pub struct SyncerGenArgs {
    /// The syncer's name: in a mailbox workspace, its SyncTarget's name; in any
    /// other workspace, the name the syncer is known by (its copies carry it).
    pub name: String,
    /// Container image that runs `ferry syncer` on the workload cluster.
    #[arg(long)]
    pub syncer_image: String,
    /// Where to write the manifest (`-` for standard output).
    #[arg(short = 'o', long = "output-file")]
    pub output_file: PathBuf,
    /// Namespace for the syncer's ServiceAccount in the mailbox workspace.
    #[arg(long, default_value = "default")]
    pub upstream_namespace: String,
    /// Namespace the syncer runs in on the workload cluster (default: the syncer ID).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Lifetime of the upstream token, e.g. 8760h, 30m, 3600s.
    #[arg(long, default_value = "8760h", value_parser = crate::kubeconfig::parse_duration)]
    pub lifetime: Duration,
    /// Syncer replicas; they elect a leader through a Lease in the syncer's namespace,
    /// and only the leader syncs (a standby takes over within 15s of its loss).
    #[arg(long, default_value_t = 2)]
    pub replicas: i32,
    /// The syncer's --qps (a cap on requests per second to each side). Unset, the
    /// syncer goes at each server's pace where the server paces clients itself (see
    /// `ferry syncer --help`).
    #[arg(long)]
    pub qps: Option<f32>,
    /// The syncer's --burst.
    #[arg(long)]
    pub burst: Option<u32>,
    /// Kubeconfig pointing at the mailbox workspace (default: $KUBECONFIG).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
    /// The syncer's rights on the workload cluster: `cluster-admin` (as
    /// KubeStellar's syncer has; it can install any application, RBAC included)
    /// or `restricted` (explicit verbs; RBAC granting rights the syncer lacks,
    /// such as a ClusterRole with `*` rules, is refused by the cluster).
    #[arg(long, value_enum, default_value_t = DownstreamAccess::ClusterAdmin)]
    pub downstream_access: DownstreamAccess,
    /// Create the default EdgeSyncConfig NAME (empty) in the workspace if there is
    /// none, installing the EdgeSyncConfig CRD where the workspace does not serve it,
    /// as KubeStellar's syncer-gen does. It selects nothing; the syncer merges every
    /// EdgeSyncConfig and SyncerConfig it sees.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub with_default_esc: bool,
}

impl SyncerGenArgs {
    /// How the quickstart and the benches register a stand-in cluster `name`: the
    /// command's defaults, with one replica (the stand-in runs one syncer), the image
    /// `ferry:dev`, no default EdgeSyncConfig, and the manifest written to `output_file`.
    pub fn stand_in(name: &str, output_file: PathBuf) -> SyncerGenArgs {
        SyncerGenArgs {
            name: name.to_string(),
            syncer_image: "ferry:dev".into(),
            output_file,
            upstream_namespace: "default".into(),
            namespace: None,
            lifetime: Duration::from_secs(8760 * 3600),
            replicas: 1,
            qps: None,
            burst: None,
            kubeconfig: None,
            context: None,
            downstream_access: Default::default(),
            with_default_esc: false,
        }
    }
}

/// What registration produced.
#[derive(Debug, Clone)]
pub struct Registration {
    pub syncer_id: String,
    pub sync_target_name: String,
    /// The SyncTarget's uid in a mailbox workspace; empty elsewhere.
    pub sync_target_uid: String,
    /// The workspace path, e.g. `root:abc-mb-<uid>` or `root:ws1`.
    pub workspace: String,
    /// The identity of an earlier Ferry release's registration that was removed
    /// (`ferry-syncer-<name>-<hash>`): its syncer can no longer reach the workspace
    /// and should be deleted from the workload cluster.
    pub removed_legacy: Option<String>,
    /// Whether the default EdgeSyncConfig was created now.
    pub created_default_esc: bool,
    /// The config CRDs given a status subresource now ([`upgrade_config_crds`]).
    pub upgraded_crds: Vec<String>,
    /// The upstream kubeconfig the syncer uses (also inside the manifest's Secret).
    pub upstream_kubeconfig: String,
    /// Multi-document YAML for `kubectl apply -f` on the workload cluster.
    pub manifest: String,
}

/// `kubestellar-syncer-<name>-<8 base-36 chars of sha256(identity)>`, where the
/// identity is the SyncTarget's uid in a mailbox workspace and `<workspace>\n<name>`
/// elsewhere ([`identity_of`]): stable, so running syncer-gen again updates rather
/// than adds.
pub fn syncer_id(name: &str, identity: &str) -> String {
    prefixed_id(ID_PREFIX, name, identity)
}

/// What [`syncer_id`] hashes for syncer `name` in `workspace` (`uid`: the
/// SyncTarget's, in a mailbox workspace).
pub fn identity_of(workspace: &str, name: &str, uid: Option<&str>) -> String {
    match uid {
        Some(uid) => uid.to_string(),
        None => format!("{workspace}\n{name}"),
    }
}

fn prefixed_id(prefix: &str, name: &str, identity: &str) -> String {
    let digest = Sha256::digest(identity.as_bytes());
    let n = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    let suffix = ferry_api::naming::base36(n.into(), 8);
    let mut base = format!("{prefix}-{name}");
    base.truncate(63 - 9);
    format!("{base}-{suffix}")
}

fn workspace_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
        "workspaces",
    )
}

const NOT_A_MAILBOX: &str = "a workspace named <inventory-cluster>-mb-<synctarget-uid> must be the mailbox \
    workspace of a SyncTarget (the mailbox controller makes one per SyncTarget; list them with \
    `kubectl get workspaces` in root)";

/// The workspace path `config` points at (`root` for a server URL without
/// `/clusters/<path>`, as the hub serves root there).
pub fn workspace_of(config: &kube::Config) -> String {
    let url = config.cluster_url.to_string();
    url.split("/clusters/")
        .nth(1)
        .map(|p| p.trim_end_matches('/').to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "root".to_string())
}

/// Whether workspace `path` is named as a KubeStellar mailbox workspace is.
pub fn looks_like_mailbox(path: &str) -> bool {
    path.rsplit_once(':')
        .is_some_and(|(_, name)| name.contains("-mb-"))
}

/// The workspace `config` points at and, for a mailbox workspace, the uid of its
/// SyncTarget `name` (checked).
async fn registration_target(config: &kube::Config, name: &str) -> anyhow::Result<(String, Option<String>)> {
    let path = workspace_of(config);
    if !looks_like_mailbox(&path) {
        return Ok((path, None));
    }
    let (path, uid) = mailbox(config, &path, name).await?;
    Ok((path, Some(uid)))
}

/// Check the mailbox workspace `path` (that `config` points at) against SyncTarget `name`.
async fn mailbox(config: &kube::Config, path: &str, name: &str) -> anyhow::Result<(String, String)> {
    let path = path.to_string();
    let Some((parent, ws_name)) = path.rsplit_once(':').map(|(p, n)| (p.to_string(), n.to_string())) else {
        bail!("{NOT_A_MAILBOX}; {path} is not one");
    };
    let parent_client = kube::Client::try_from(ferry_server::kubeconfig::at_workspace(config, &parent)?)?;
    let workspaces: Api<DynamicObject> = Api::all_with(parent_client, &workspace_resource());
    let ws = workspaces
        .get_opt(&ws_name)
        .await
        .with_context(|| format!("reading Workspace {ws_name} in {parent}"))?
        .ok_or_else(|| anyhow::anyhow!("{NOT_A_MAILBOX}; workspace {path} does not exist"))?;
    let annotations = ws.metadata.annotations.unwrap_or_default();
    let (Some(target), Some(uid), Some(inventory)) = (
        annotations.get(SYNC_TARGET_NAME_ANNOTATION),
        annotations.get(SYNC_TARGET_UID_ANNOTATION),
        annotations.get(INVENTORY_CLUSTER_ANNOTATION),
    ) else {
        bail!("{NOT_A_MAILBOX}; workspace {path} is not annotated as a mailbox");
    };
    if target != name {
        bail!("workspace {path} is the mailbox of SyncTarget {target:?}, not {name:?}: run `syncer-gen {target}` here, or point at {name}'s mailbox");
    }
    let targets: Api<DynamicObject> = Api::all_with(
        kube::Client::try_from(ferry_server::kubeconfig::at_workspace(config, inventory)?)?,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("edge.kubestellar.io", "v2alpha1", "SyncTarget"),
            "synctargets",
        ),
    );
    match targets
        .get_opt(name)
        .await
        .with_context(|| format!("reading SyncTarget {name}"))?
    {
        Some(st) if st.metadata.uid.as_deref() == Some(uid.as_str()) => Ok((path, uid.clone())),
        _ => bail!(
            "SyncTarget {name} (uid {uid}) no longer exists in its inventory workspace; create it with \
             `ferry ensure location {name} ...` and use its new mailbox"
        ),
    }
}

/// Why SyncTarget `name`'s syncer must not run in workspace `path`, whose
/// LogicalCluster carries `annotations`: it is another SyncTarget's mailbox.
pub fn foreign_mailbox(
    path: &str,
    annotations: &std::collections::BTreeMap<String, String>,
    name: &str,
) -> Option<String> {
    let owner = annotations.get(SYNC_TARGET_NAME_ANNOTATION)?;
    if owner == name {
        return None;
    }
    Some(format!(
        "workspace {path} is the mailbox of SyncTarget {owner}, not of --sync-target-name {name}: \
         point --from-kubeconfig at {name}'s mailbox (`kubectl get workspaces` in root shows whose each is), \
         or run this syncer as --sync-target-name {owner}"
    ))
}

/// Refuse to sync a mailbox workspace that is not SyncTarget `name`'s: its
/// SyncerConfigs place another cluster's workloads. The mailbox says whose it
/// is on its LogicalCluster `cluster`; where that cannot be read (a server
/// without one, or no right to), nothing is checked.
pub async fn check_mailbox_owner(config: &kube::Config, name: &str) -> anyhow::Result<()> {
    let client = kube::Client::try_from(config.clone())?;
    let logical_clusters: Api<DynamicObject> = Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("core.kcp.io", "v1alpha1", "LogicalCluster"),
            "logicalclusters",
        ),
    );
    let cluster = match logical_clusters.get_opt("cluster").await {
        Ok(Some(cluster)) => cluster,
        Ok(None) => return Ok(()),
        Err(e) => {
            tracing::debug!("not checking whose mailbox this is: reading LogicalCluster cluster: {e}");
            return Ok(());
        }
    };
    let annotations = cluster.metadata.annotations.unwrap_or_default();
    match foreign_mailbox(&workspace_of(config), &annotations, name) {
        Some(why) => bail!(why),
        None => Ok(()),
    }
}

/// Rules for the syncer in its mailbox workspace: read everything placed
/// there; report on the SyncerConfigs and EdgeSyncConfigs (their `status`
/// subresource only: their spec decides what it may upsync); create Events
/// and the Namespaces upsynced objects go into. It updates no object: what it
/// writes besides — the status of what it downsyncs, the objects it upsyncs —
/// comes from the ClusterRole the hub keeps from the configs ([`UPSYNC_ROLE`],
/// bound beside this one), which never reaches ServiceAccounts, tokens,
/// Secrets, RBAC, bindings or workspaces. So a stolen token can neither hand
/// its rights to anyone nor widen them. Explicit verbs only, no
/// escalate/bind/impersonate, no non-resource URLs, and the token is valid in
/// that one workspace only. syncer-gen owns these rules: running it again
/// replaces whatever an earlier release granted.
pub fn upstream_rules() -> Value {
    json!([
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["edge.kubestellar.io"], "resources": ["syncerconfigs/status", "edgesyncconfigs/status"],
         "verbs": ["get", "update", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create"]},
    ])
}

/// How much the syncer may do on the workload cluster.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DownstreamAccess {
    /// Everything, as KubeStellar's syncer is bound to cluster-admin: it can
    /// install what applications ship, RBAC that grants any rights included.
    #[default]
    ClusterAdmin,
    /// Explicit verbs on every resource, no escalate/bind/impersonate: RBAC that
    /// grants rights the syncer does not hold (a ClusterRole with `*` rules, a
    /// binding to cluster-admin) is refused by the cluster.
    Restricted,
}

/// Rules for the syncer on the workload cluster. With `ClusterAdmin` it may do
/// anything (whoever may place workloads there can run any pod, which reaches
/// any identity of the cluster anyway); with `Restricted` it creates and
/// removes the objects it syncs (any kind, including Namespaces and CRDs) with
/// explicit verbs and records Events.
pub fn downstream_rules(access: DownstreamAccess) -> Value {
    match access {
        DownstreamAccess::ClusterAdmin => json!([
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ]),
        DownstreamAccess::Restricted => json!([
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get", "update", "patch"]},
        ]),
    }
}

/// Register: create the upstream identity and build the downstream manifest.
pub async fn generate(config: &kube::Config, args: &SyncerGenArgs) -> anyhow::Result<Registration> {
    if args.replicas < 0 {
        bail!("--replicas must not be negative");
    }
    let (workspace, uid) = registration_target(config, &args.name).await?;
    let identity = identity_of(&workspace, &args.name, uid.as_deref());
    let id = syncer_id(&args.name, &identity);
    let upstream_kubeconfig = identity_kubeconfig(
        config,
        &Identity {
            namespace: &args.upstream_namespace,
            id: &id,
            rules: upstream_rules(),
            also_bound: &[UPSYNC_ROLE],
            lifetime: args.lifetime,
            field_manager: FIELD_MANAGER,
            context: "upstream",
        },
    )
    .await
    .map_err(|e| forbidden_hint(e, &workspace))?;
    let removed_legacy = remove_legacy_identity(
        config,
        &args.upstream_namespace,
        &prefixed_id(LEGACY_ID_PREFIX, &args.name, &identity),
    )
    .await?;
    let upgraded_crds = upgrade_config_crds(config, &workspace).await?;
    let created_default_esc = if args.with_default_esc {
        default_edge_sync_config(config, &args.name, &workspace).await?
    } else {
        false
    };
    let namespace = args.namespace.clone().unwrap_or_else(|| id.clone());
    let uid = uid.unwrap_or_default();
    let manifest = manifest(&id, &namespace, &args.name, &uid, &upstream_kubeconfig, args)?;
    Ok(Registration {
        syncer_id: id,
        sync_target_name: args.name.clone(),
        sync_target_uid: uid,
        workspace,
        removed_legacy,
        created_default_esc,
        upgraded_crds,
        upstream_kubeconfig,
        manifest,
    })
}

/// The API status code at the root of `e`, if it is an API error.
fn api_code(e: &anyhow::Error) -> Option<u16> {
    e.chain().find_map(|c| match c.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(s)) => Some(s.code),
        _ => None,
    })
}

/// A 403 while registering says what syncer-gen needs and how to get it.
fn forbidden_hint(e: anyhow::Error, workspace: &str) -> anyhow::Error {
    if api_code(&e) != Some(403) {
        return e;
    }
    anyhow::anyhow!(
        "you may not register a syncer in workspace {workspace}: {e:#}. syncer-gen creates a \
         ServiceAccount, a ClusterRole and ClusterRoleBindings there, so it needs admin rights in that \
         workspace: ask its owner to bind you to cluster-admin there, or point your kubeconfig at a \
         workspace you own"
    )
}

/// Deletes the upstream identity an earlier Ferry release registered as `legacy`
/// (ServiceAccount, ClusterRole and bindings), which revokes its syncer's token so
/// that two syncers never serve one workspace. Returns `legacy` if there was one.
async fn remove_legacy_identity(
    config: &kube::Config,
    ns: &str,
    legacy: &str,
) -> anyhow::Result<Option<String>> {
    let client = kube::Client::try_from(config.clone())?;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    if sas
        .get_opt(legacy)
        .await
        .with_context(|| format!("reading ServiceAccount {ns}/{legacy}"))?
        .is_none()
    {
        return Ok(None);
    }
    let rbac = |kind: &str, plural: &str| rbac_api(&client, kind, plural);
    let dp = kube::api::DeleteParams::default();
    let upsync_binding = format!("{legacy}-{UPSYNC_ROLE}");
    for (api, name) in [
        (rbac("ClusterRoleBinding", "clusterrolebindings"), legacy),
        (
            rbac("ClusterRoleBinding", "clusterrolebindings"),
            upsync_binding.as_str(),
        ),
        (rbac("ClusterRole", "clusterroles"), legacy),
    ] {
        match api.delete(name, &dp).await {
            Err(e) if !is_not_found(&e) => {
                return Err(e).with_context(|| format!("deleting the earlier syncer's {name}"))
            }
            _ => {}
        }
    }
    match sas.delete(legacy, &dp).await {
        Err(e) if !is_not_found(&e) => {
            return Err(e).with_context(|| format!("deleting ServiceAccount {ns}/{legacy}"))
        }
        _ => {}
    }
    Ok(Some(legacy.to_string()))
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Gives the SyncerConfig and EdgeSyncConfig CRDs of the workspace a status
/// subresource where they lack one (an earlier release's, or KubeStellar's
/// own): the syncer's role may write their status only, so without it the
/// syncer could not report. Returns the CRDs changed.
async fn upgrade_config_crds(config: &kube::Config, workspace: &str) -> anyhow::Result<Vec<String>> {
    use ferry_api::edge::{EdgeSyncConfig, SyncerConfig};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt;
    let crds: Api<CustomResourceDefinition> = Api::all(kube::Client::try_from(config.clone())?);
    let mut upgraded = Vec::new();
    for wanted in [SyncerConfig::crd(), EdgeSyncConfig::crd()] {
        let name = wanted.metadata.name.clone().unwrap_or_default();
        // Served through an APIBinding, or not at all: nothing of the workspace's to change.
        let Some(existing) = crds
            .get_opt(&name)
            .await
            .with_context(|| format!("reading CRD {name}"))?
        else {
            continue;
        };
        let has_status = existing
            .spec
            .versions
            .iter()
            .all(|v| v.subresources.as_ref().is_some_and(|s| s.status.is_some()));
        if has_status {
            continue;
        }
        crds.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&wanted),
        )
        .await
        .map_err(anyhow::Error::from)
        .map_err(|e| forbidden_hint(e, workspace))
        .with_context(|| format!("giving CRD {name} its status subresource in {workspace}"))?;
        upgraded.push(name);
    }
    Ok(upgraded)
}

/// Creates the empty EdgeSyncConfig `name` unless one exists, installing its CRD
/// first where the workspace does not serve it. Returns whether it created one.
async fn default_edge_sync_config(
    config: &kube::Config,
    name: &str,
    workspace: &str,
) -> anyhow::Result<bool> {
    use ferry_api::edge::EdgeSyncConfig;
    use kube::CustomResourceExt;
    let client = kube::Client::try_from(config.clone())?;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            EdgeSyncConfig::GROUP,
            EdgeSyncConfig::VERSION,
            EdgeSyncConfig::KIND,
        ),
        EdgeSyncConfig::PLURAL,
    );
    let escs: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let esc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/{}", EdgeSyncConfig::GROUP, EdgeSyncConfig::VERSION),
        "kind": EdgeSyncConfig::KIND, "metadata": {"name": name}, "spec": {},
    }))?;
    let mut installed = false;
    // The CRD takes a moment to be served once created.
    for _ in 0..50 {
        match escs.create(&PostParams::default(), &esc).await {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => return Ok(false),
            Err(kube::Error::Api(e)) if e.code == 404 => {
                if !installed {
                    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
                        Api::all(client.clone());
                    crds.patch(
                        &format!("{}.{}", EdgeSyncConfig::PLURAL, EdgeSyncConfig::GROUP),
                        &PatchParams::apply(FIELD_MANAGER),
                        &Patch::Apply(&EdgeSyncConfig::crd()),
                    )
                    .await
                    .map_err(anyhow::Error::from)
                    .map_err(|e| forbidden_hint(e, workspace))
                    .with_context(|| {
                        format!(
                            "workspace {workspace} does not serve EdgeSyncConfigs, and installing their CRD failed; \
                             bind KubeStellar's API there, or run syncer-gen with --with-default-esc=false"
                        )
                    })?;
                    installed = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => {
                return Err(forbidden_hint(e.into(), workspace))
                    .with_context(|| format!("creating the default EdgeSyncConfig {name} in {workspace}"))
            }
        }
    }
    bail!("the EdgeSyncConfig CRD installed in {workspace} was not served within 5s; run syncer-gen again")
}

/// The objects that install the syncer on a workload cluster.
fn manifest(
    id: &str,
    ns: &str,
    name: &str,
    uid: &str,
    kubeconfig: &str,
    args: &SyncerGenArgs,
) -> anyhow::Result<String> {
    let labels = json!({"app.kubernetes.io/name": ID_PREFIX, "ferry.dev/sync-target": name});
    let mut syncer_args = vec![
        "syncer".to_string(),
        format!("--from-kubeconfig={UPSTREAM_MOUNT}/kubeconfig"),
        format!("--sync-target-name={name}"),
    ];
    if !uid.is_empty() {
        syncer_args.push(format!("--sync-target-uid={uid}"));
    }
    // Unset, the syncer goes at each server's pace (see `ferry syncer --help`).
    syncer_args.extend(args.qps.map(|qps| format!("--qps={qps}")));
    syncer_args.extend(args.burst.map(|burst| format!("--burst={burst}")));
    syncer_args.push("--health-address=0.0.0.0:8080".to_string());
    syncer_args.extend(syncer_leader_election_args(ns));
    let mut objects = install_objects(&Install {
        id,
        namespace: ns,
        labels,
        container: ID_PREFIX,
        image: &args.syncer_image,
        args: syncer_args,
        replicas: args.replicas,
        volume: "upstream",
        mount: UPSTREAM_MOUNT,
        kubeconfig,
        rules: downstream_rules(args.downstream_access),
    });
    // KubeStellar's manifest also holds a token Secret for the syncer's ServiceAccount.
    objects.insert(2, token_secret(id, ns));
    render(&objects)
}

/// The `<id>-token` Secret of ServiceAccount `id`: the cluster's token controller
/// fills it with a token for the syncer's ServiceAccount.
fn token_secret(id: &str, ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
           "metadata": {"name": format!("{id}-token"), "namespace": ns,
                        "annotations": {"kubernetes.io/service-account.name": id}}})
}

/// An agent's identity in the workspace a kubeconfig points at.
pub struct Identity<'a> {
    /// The ServiceAccount's namespace.
    pub namespace: &'a str,
    /// The name of the ServiceAccount, its ClusterRole and their binding.
    pub id: &'a str,
    /// The ClusterRole's rules.
    pub rules: Value,
    /// ClusterRoles kept by someone else (the hub) that the ServiceAccount
    /// is bound to as well, each by a binding `<id>-<role>`.
    pub also_bound: &'a [&'a str],
    /// The token's lifetime.
    pub lifetime: Duration,
    /// Field manager of the server-side applies.
    pub field_manager: &'a str,
    /// Cluster, user and context name in the kubeconfig.
    pub context: &'a str,
}

/// Applies `who`'s ServiceAccount, ClusterRole and ClusterRoleBinding where `config`
/// points, and returns a kubeconfig for that server with a TokenRequest token of it.
pub async fn identity_kubeconfig(config: &kube::Config, who: &Identity<'_>) -> anyhow::Result<String> {
    let client = kube::Client::try_from(config.clone())?;
    let (id, ns) = (who.id, who.namespace);
    let pp = PatchParams::apply(who.field_manager).force();
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": id, "namespace": ns}});
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    sas.patch(id, &pp, &Patch::Apply(&sa))
        .await
        .with_context(|| format!("applying ServiceAccount {ns}/{id}"))?;
    let rbac = |kind: &str, plural: &str| rbac_api(&client, kind, plural);
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": id}, "rules": who.rules});
    rbac("ClusterRole", "clusterroles")
        .patch(id, &pp, &Patch::Apply(&role))
        .await
        .with_context(|| format!("applying ClusterRole {id}"))?;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": id},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
        "subjects": [{"kind": "ServiceAccount", "name": id, "namespace": ns}],
    });
    rbac("ClusterRoleBinding", "clusterrolebindings")
        .patch(id, &pp, &Patch::Apply(&binding))
        .await
        .with_context(|| format!("applying ClusterRoleBinding {id}"))?;
    for role in who.also_bound {
        let name = format!("{id}-{role}");
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": id, "namespace": ns}],
        });
        rbac("ClusterRoleBinding", "clusterrolebindings")
            .patch(&name, &pp, &Patch::Apply(&binding))
            .await
            .with_context(|| format!("applying ClusterRoleBinding {name}"))?;
    }
    let token = service_account_token(&sas, id, who.lifetime).await?;
    let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
    Ok(ferry_server::kubeconfig::kubeconfig(
        who.context,
        &server,
        &ca_pem(config),
        ferry_server::kubeconfig::AuthInfo::Token(token),
        who.context,
        None,
    ))
}

/// The cluster-scoped RBAC resource `kind` (`plural`) where `client` points.
fn rbac_api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
            plural,
        ),
    )
}

/// A TokenRequest token for ServiceAccount `id`, valid for `lifetime`.
pub async fn service_account_token(
    sas: &Api<ServiceAccount>,
    id: &str,
    lifetime: Duration,
) -> anyhow::Result<String> {
    let request: TokenRequest = serde_json::from_value(json!({
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": [], "expirationSeconds": lifetime.as_secs()},
    }))?;
    sas.create_token_request(id, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a token for ServiceAccount {id}"))?
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the hub returned an empty token for ServiceAccount {id}"))
}

/// The PEM of the CA `config` trusts (empty if it names none).
pub fn ca_pem(config: &kube::Config) -> String {
    config
        .root_cert
        .as_ref()
        .and_then(|certs| certs.first())
        .map(|der| ferry_server::server::tls::pem_encode("CERTIFICATE", der))
        .unwrap_or_default()
}

/// What a syncer's install on a workload cluster is made of (syncer-gen's and
/// `workload sync`'s manifests differ only in these).
pub struct Install<'a> {
    pub id: &'a str,
    pub namespace: &'a str,
    pub labels: Value,
    pub container: &'a str,
    pub image: &'a str,
    pub args: Vec<String>,
    pub replicas: i32,
    pub volume: &'a str,
    pub mount: &'a str,
    pub kubeconfig: &'a str,
    pub rules: Value,
}

/// The arguments that make every replica of a syncer elect a leader through a Lease
/// in its namespace `ns`, so any number of replicas is safe and a rolling update
/// hands over cleanly.
pub fn syncer_leader_election_args(ns: &str) -> [String; 2] {
    [
        "--enable-leader-election".to_string(),
        format!("--leader-elect-resource-namespace={ns}"),
    ]
}

/// Namespace, ServiceAccount, ClusterRole and binding, a Role and binding for
/// the leader election Lease, the upstream kubeconfig Secret, and the
/// Deployment running the agent with it mounted (with `args`, which turn leader
/// election on: see [`syncer_leader_election_args`]).
pub fn install_objects(i: &Install) -> Vec<Value> {
    let (id, ns) = (i.id, i.namespace);
    let args = i.args.clone();
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": i.labels}}),
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": id, "namespace": ns}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": id}, "rules": i.rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": id},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
               "subjects": [{"kind": "ServiceAccount", "name": id, "namespace": ns}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": format!("{id}-leader-election"), "namespace": ns},
               "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                          "verbs": ["get", "list", "watch", "create", "update", "patch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": format!("{id}-leader-election"), "namespace": ns},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{id}-leader-election")},
               "subjects": [{"kind": "ServiceAccount", "name": id, "namespace": ns}]}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": id, "namespace": ns},
               "type": "Opaque", "stringData": {"kubeconfig": i.kubeconfig}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": id, "namespace": ns, "labels": i.labels},
        "spec": {
            "replicas": i.replicas,
            "selector": {"matchLabels": {"app": id}},
            "template": {
                "metadata": {"labels": {"app": id}},
                "spec": {
                    "serviceAccountName": id,
                    "containers": [{
                        "name": i.container,
                        "image": i.image,
                        "args": args,
                        "env": [{"name": "NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
                        "ports": [{"name": "health", "containerPort": 8080}],
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "health"}},
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "health"}},
                        "volumeMounts": [{"name": i.volume, "mountPath": i.mount, "readOnly": true}],
                    }],
                    "volumes": [{"name": i.volume, "secret": {"secretName": id}}],
                },
            },
        }}),
    ]
}

/// Multi-document YAML of `objects`.
pub fn render(objects: &[Value]) -> anyhow::Result<String> {
    let mut out = String::new();
    for o in objects {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(o).context("rendering the manifest")?);
    }
    Ok(out)
}

pub async fn run(args: SyncerGenArgs) -> anyhow::Result<()> {
    let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let reg = generate(&config, &args).await?;
    if args.output_file.as_os_str() == "-" {
        print!("{}", reg.manifest);
    } else {
        std::fs::write(&args.output_file, &reg.manifest)
            .with_context(|| format!("writing {}", args.output_file.display()))?;
    }
    let out = args.output_file.display();
    let ns = args.namespace.clone().unwrap_or(reg.syncer_id.clone());
    eprintln!("Created in {}: ServiceAccount {}/{id}, ClusterRole {id}, ClusterRoleBindings {id} and {id}-{UPSYNC_ROLE} (what the SyncerConfigs there upsync, kept by the hub), and a token for them.", reg.workspace, args.upstream_namespace, id = reg.syncer_id);
    if reg.created_default_esc {
        eprintln!(
            "Created the default EdgeSyncConfig {} (empty: it selects nothing).",
            args.name
        );
    }
    for crd in &reg.upgraded_crds {
        eprintln!("Gave CRD {crd} a status subresource: the syncer reports there, and may no longer change the spec.");
    }
    if let Some(legacy) = &reg.removed_legacy {
        eprintln!("Removed the identity of the syncer an earlier Ferry release registered as {legacy}: it can no longer reach {}. Delete it from the workload cluster:", reg.workspace);
        eprintln!("  KUBECONFIG=<workload-execution-cluster-config> kubectl delete namespace {legacy}");
        eprintln!("  KUBECONFIG=<workload-execution-cluster-config> kubectl delete clusterrole,clusterrolebinding {legacy}");
    }
    eprintln!("Wrote the workload cluster's manifest to {out} for namespace {ns:?}. Apply it with");
    eprintln!("  KUBECONFIG=<workload-execution-cluster-config> kubectl apply -f {out:?}");
    eprintln!("and see the syncer run with");
    eprintln!(
        "  KUBECONFIG=<workload-execution-cluster-config> kubectl get deployment -n {ns:?} {}",
        reg.syncer_id
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncer_id_is_stable_and_a_valid_name() {
        let a = syncer_id("florin", "5b4c3a");
        assert_eq!(a, syncer_id("florin", "5b4c3a"));
        assert_ne!(a, syncer_id("florin", "other"));
        assert!(a.starts_with("kubestellar-syncer-florin-") && a.len() <= 63);
        assert!(syncer_id(&"x".repeat(80), "u").len() <= 63);
        // An earlier release's name differs only in its prefix.
        assert_eq!(
            prefixed_id(LEGACY_ID_PREFIX, "florin", "5b4c3a").strip_prefix("ferry-syncer"),
            a.strip_prefix("kubestellar-syncer")
        );
    }

    #[test]
    fn outside_a_mailbox_the_identity_is_the_workspace_and_name() {
        let a = syncer_id("guilder", &identity_of("root:ws1", "guilder", None));
        assert_eq!(a, syncer_id("guilder", &identity_of("root:ws1", "guilder", None)));
        assert_ne!(a, syncer_id("guilder", &identity_of("root:ws2", "guilder", None)));
        assert_eq!(identity_of("root:x-mb-u", "guilder", Some("u")), "u");
    }

    #[test]
    fn another_sync_targets_mailbox_is_refused_naming_both() {
        let annotations: std::collections::BTreeMap<String, String> =
            [(SYNC_TARGET_NAME_ANNOTATION.to_string(), "florin".to_string())].into();
        let why = foreign_mailbox("root:x-mb-1", &annotations, "guilder").expect("refused");
        assert!(why.contains("mailbox of SyncTarget florin, not of --sync-target-name guilder"));
        assert_eq!(foreign_mailbox("root:x-mb-1", &annotations, "florin"), None);
        assert_eq!(foreign_mailbox("root:ws1", &Default::default(), "guilder"), None);
    }

    #[test]
    fn a_mailbox_is_known_by_its_name() {
        assert!(looks_like_mailbox("root:1t82bk54r6gjnzsp-mb-1a045336"));
        assert!(!looks_like_mailbox("root:ws1"));
        assert!(!looks_like_mailbox("root"));
    }

    #[test]
    fn the_manifest_holds_a_token_secret_for_the_service_account() {
        let s = token_secret("kubestellar-syncer-florin-abc", "ns");
        assert_eq!(s["metadata"]["name"], "kubestellar-syncer-florin-abc-token");
        assert_eq!(s["type"], "kubernetes.io/service-account-token");
        assert_eq!(
            s["metadata"]["annotations"]["kubernetes.io/service-account.name"],
            "kubestellar-syncer-florin-abc"
        );
    }

    #[test]
    fn downstream_access_is_cluster_admin_unless_restricted() {
        assert_eq!(
            downstream_rules(DownstreamAccess::default())[0]["verbs"],
            json!(["*"])
        );
    }

    #[test]
    fn upstream_rules_write_only_the_configs_status() {
        for rule in upstream_rules().as_array().unwrap() {
            let verbs = rule["verbs"].as_array().unwrap();
            if verbs.iter().any(|v| v == "update" || v == "patch") {
                assert_eq!(rule["apiGroups"], json!(["edge.kubestellar.io"]), "{rule}");
                let resources = rule["resources"].as_array().unwrap();
                assert!(
                    resources
                        .iter()
                        .all(|r| r.as_str().unwrap().ends_with("configs/status")),
                    "{rule}"
                );
            }
        }
    }

    #[test]
    fn rules_never_grant_wildcard_verbs() {
        for rules in [upstream_rules(), downstream_rules(DownstreamAccess::Restricted)] {
            for rule in rules.as_array().unwrap() {
                let verbs = rule["verbs"].as_array().unwrap();
                assert!(!verbs
                    .iter()
                    .any(|v| v == "*" || v == "escalate" || v == "bind" || v == "impersonate"));
            }
        }
    }
}
