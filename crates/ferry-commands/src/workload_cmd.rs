//! `kubectl ferry workload sync|cordon|uncordon|drain`: kcp's TMC registration
//! and scheduling switches, as `kubectl kcp workload ...` has them.
//!
//! `sync NAME` runs in the workspace that holds the SyncTarget. It creates or
//! patches the SyncTarget, gives the syncer an identity there that may do
//! little more than the `sync` verb on that one SyncTarget (the syncer and
//! upsyncer virtual workspaces check exactly that verb), and writes the
//! manifest that installs the syncer on the workload cluster, its RBAC
//! derived from the SyncTarget's `syncedResources`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};
use sha2::{Digest, Sha224};

use crate::bind_cmd::split_reference;
use crate::syncer_gen::{ca_pem, install_objects, render, service_account_token, Install};

/// The field manager of what `workload sync` applies.
const FIELD_MANAGER: &str = "kubectl-ferry-workload";

/// Where the syncer's Deployment mounts the upstream kubeconfig (kcp's path).
pub const KCP_MOUNT: &str = "/kcp";

/// The export kcp's syncer uses when none is named.
pub const DEFAULT_EXPORT: &str = "root:compute:kubernetes";

/// The export a syncer's imported schemas (`--resources`) are served by, in the
/// SyncTarget's workspace.
pub const IMPORTED_APIS: &str = "imported-apis";

#[derive(clap::Subcommand)]
pub enum WorkloadCommand {
    /// Create or update a SyncTarget and write the manifest that installs its syncer.
    Sync(Box<SyncArgs>),
    /// Mark a SyncTarget unschedulable: no new workloads are placed on it.
    Cordon(TargetArgs),
    /// Mark a SyncTarget schedulable again and cancel a drain.
    Uncordon(TargetArgs),
    /// Cordon a SyncTarget and evict its workloads now: they move to other targets.
    Drain(TargetArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct SyncArgs {
    /// Name of the SyncTarget.
    pub name: String,
    /// Container image that runs `ferry syncer --profile tmc` on the workload cluster.
    #[arg(long)]
    pub syncer_image: String,
    /// Where to write the manifest (`-` for standard output).
    #[arg(short = 'o', long = "output-file")]
    pub output_file: PathBuf,
    /// Resources to sync besides the supported exports' (`routes.route.openshift.io`); the
    /// syncer imports their schemas into the `imported-apis` export of this workspace.
    #[arg(long, value_delimiter = ',')]
    pub resources: Vec<String>,
    /// APIExports whose resources the target supports, as `<path>:<export>`.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_EXPORT)]
    pub apiexports: Vec<String>,
    /// Labels of the SyncTarget (`region=east`), which Locations select on.
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Namespace of the syncer's ServiceAccount in this workspace.
    #[arg(long, default_value = "default")]
    pub kcp_namespace: String,
    /// Namespace the syncer runs in on the workload cluster (default: the syncer ID).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Syncer replicas; they elect a leader through a Lease in the syncer's namespace,
    /// and only the leader syncs.
    #[arg(long, default_value_t = 2)]
    pub replicas: i32,
    /// The syncer's --qps (kcp's plugin writes 20).
    #[arg(long, default_value_t = 20.0)]
    pub qps: f32,
    /// The syncer's --burst (kcp's plugin writes 30).
    #[arg(long, default_value_t = 30)]
    pub burst: u32,
    /// How long the syncer waits before deleting an empty downstream namespace.
    #[arg(long, default_value = "30s")]
    pub downstream_namespace_clean_delay: String,
    /// How often the syncer imports the cluster's schemas.
    #[arg(long, default_value = "1m")]
    pub api_import_poll_interval: String,
    /// Feature gates passed to the syncer.
    #[arg(long)]
    pub feature_gates: Option<String>,
    /// Lifetime of the syncer's upstream token, e.g. 8760h.
    #[arg(long, default_value = "8760h", value_parser = crate::kubeconfig::parse_duration)]
    pub lifetime: Duration,
    /// How long to wait for the SyncTarget's `syncedResources` (they set the
    /// downstream RBAC).
    #[arg(long, default_value = "30s", value_parser = crate::kubeconfig::parse_duration)]
    pub timeout: Duration,
    /// Kubeconfig pointing at the SyncTarget's workspace (default: $KUBECONFIG).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
    /// The syncer's rights on the workload cluster: `cluster-admin` (it can install
    /// any application, RBAC that grants any rights included) or `synced` (kcp's
    /// plugin's rules: the synced resources, namespaces, configmaps, secrets,
    /// serviceaccounts, pods and persistent volumes; Roles and RoleBindings it may
    /// write only if `--resources` names them, and then with escalate and bind, as kube
    /// requires of whoever writes RBAC granting what it does not hold itself).
    #[arg(long, value_enum, default_value_t = TmcDownstreamAccess::ClusterAdmin)]
    pub downstream_access: TmcDownstreamAccess,
}

impl SyncArgs {
    /// How the quickstart and the benches register a stand-in cluster `name`: the
    /// command's defaults, with one replica (the stand-in runs one syncer), the image
    /// `ferry:dev` and the manifest written to `output_file`.
    pub fn stand_in(name: &str, output_file: PathBuf) -> SyncArgs {
        SyncArgs {
            name: name.to_string(),
            syncer_image: "ferry:dev".into(),
            output_file,
            resources: Vec::new(),
            apiexports: vec![DEFAULT_EXPORT.to_string()],
            labels: Vec::new(),
            kcp_namespace: "default".into(),
            namespace: None,
            replicas: 1,
            qps: 20.0,
            burst: 30,
            downstream_namespace_clean_delay: "30s".into(),
            api_import_poll_interval: "1m".into(),
            feature_gates: None,
            lifetime: Duration::from_secs(8760 * 3600),
            timeout: Duration::from_secs(30),
            kubeconfig: None,
            context: None,
            downstream_access: Default::default(),
        }
    }
}

/// How much the TMC syncer may do on the workload cluster.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TmcDownstreamAccess {
    /// Everything: whoever may place a workload there may run a pod, which reaches
    /// any identity of the cluster anyway; what applications ship (ClusterRoles with
    /// `*` rules and their bindings) installs.
    #[default]
    ClusterAdmin,
    /// kcp's plugin's rules, which follow the SyncTarget's synced resources.
    Synced,
}

#[derive(clap::Args, Debug, Clone)]
pub struct TargetArgs {
    /// Name of the SyncTarget.
    pub name: String,
    /// Kubeconfig pointing at the SyncTarget's workspace (default: $KUBECONFIG).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
}

fn sync_targets(client: kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("workload.kcp.io", "v1alpha1", "SyncTarget"),
            "synctargets",
        ),
    )
}

fn rbac(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
            plural,
        ),
    )
}

/// `kcp-syncer-<name>-<8 base-36 chars of sha224(workspace + name)>`: stable for one
/// SyncTarget in one workspace, so running `workload sync` again updates in place.
pub fn syncer_id(workspace: &str, name: &str) -> String {
    let digest = Sha224::digest(format!("{name}{workspace}").as_bytes());
    let mut suffix = ferry_api::naming::radix_text(&digest, 36);
    suffix.truncate(8);
    let mut base = format!("kcp-syncer-{name}");
    base.truncate(63 - 9);
    format!("{base}-{suffix}")
}

/// `a=b,c=d` flags as a label map, refusing what is not a valid label.
pub fn parse_labels(labels: &[String]) -> anyhow::Result<serde_json::Map<String, Value>> {
    let mut out = serde_json::Map::new();
    for label in labels.iter().filter(|l| !l.is_empty()) {
        let Some((k, v)) = label.split_once('=') else {
            bail!("--labels {label:?}: write each label as key=value");
        };
        let selector = format!("{k}={v}");
        ferry_server::selector::LabelSelector::parse(&selector)
            .map_err(|e| anyhow::anyhow!("--labels {label:?}: {e}"))?;
        out.insert(k.to_string(), json!(v));
    }
    Ok(out)
}

/// The `supportedAPIExports` for `--apiexports` (`<path>:<export>`), plus this
/// workspace's `imported-apis` when `--resources` asks for imports.
pub fn supported_exports(apiexports: &[String], resources: &[String]) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for reference in apiexports.iter().filter(|r| !r.is_empty()) {
        let (path, export) = split_reference(reference)?;
        if export == IMPORTED_APIS {
            bail!("--apiexports {reference}: {IMPORTED_APIS} is reserved for the schemas the syncer imports (use --resources)");
        }
        out.push(json!({"export": export, "path": path}));
    }
    if !resources.is_empty() {
        out.push(json!({"export": IMPORTED_APIS}));
    }
    Ok(out)
}

/// Upstream rules for the syncer, in the SyncTarget's workspace: the `sync` verb on
/// its own SyncTarget (what the virtual workspaces check), reading it, writing its
/// status (the heartbeat), and the schema imports.
pub fn upstream_rules(name: &str) -> Value {
    json!([
        {"apiGroups": ["workload.kcp.io"], "resources": ["synctargets"], "resourceNames": [name], "verbs": ["sync"]},
        {"apiGroups": ["workload.kcp.io"], "resources": ["synctargets/tunnel"], "resourceNames": [name], "verbs": ["get"]},
        {"apiGroups": ["workload.kcp.io"], "resources": ["synctargets"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["workload.kcp.io"], "resources": ["synctargets/status"], "resourceNames": [name], "verbs": ["get", "update", "patch"]},
        {"apiGroups": ["apiresource.kcp.io"], "resources": ["apiresourceimports"], "verbs": ["get", "create", "update", "delete", "list", "watch"]},
    ])
}

/// Downstream rules for the syncer on the workload cluster. `ClusterAdmin`: every
/// verb on everything (the rules `syncer-gen` writes for KubeStellar). `Synced`: as
/// kcp's plugin writes them: the namespaces it creates and deletes (never
/// rewrites), CRDs it reads for imports, and full control of the synced resources
/// and of configmaps, secrets, serviceaccounts, pods and persistent volumes (with their
/// subresources; pods and volumes for upsync) always. The syncer checks each synced
/// resource with a SelfSubjectAccessReview for `*` before syncing it.
pub fn downstream_rules(access: TmcDownstreamAccess, synced: &[(String, String)]) -> Value {
    if access == TmcDownstreamAccess::ClusterAdmin {
        return crate::syncer_gen::downstream_rules(crate::syncer_gen::DownstreamAccess::ClusterAdmin);
    }
    let mut rules = vec![
        json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "get", "list", "watch", "delete"]}),
        json!({"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get"]}),
        json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"]}),
        json!({"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["create", "list", "watch"]}),
        json!({"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"], "verbs": ["create"]}),
        json!({"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]}),
    ];
    let mut by_group: std::collections::BTreeMap<&str, std::collections::BTreeSet<String>> =
        Default::default();
    // The syncer upsyncs pods and persistent volumes whatever the SyncTarget lists, so
    // they are always in the set.
    let core = by_group.entry("").or_default();
    core.extend(
        [
            "configmaps",
            "secrets",
            "serviceaccounts",
            "pods",
            "pods/status",
            "persistentvolumes",
            "persistentvolumes/status",
        ]
        .map(String::from),
    );
    for sub in [
        "log",
        "exec",
        "attach",
        "binding",
        "portforward",
        "proxy",
        "ephemeralcontainers",
    ] {
        core.insert(format!("pods/{sub}"));
    }
    for (group, resource) in synced {
        let set = by_group.entry(group.as_str()).or_default();
        set.insert(resource.clone());
        set.insert(format!("{resource}/status"));
    }
    // `*` on roles or bindings includes escalate and bind: syncing RBAC means writing
    // rules that grant what the syncer itself lacks, which kube allows only so. That
    // is deliberate (the flag's help says it), and it is what the syncer's
    // SelfSubjectAccessReview for `*` asks of every synced resource.
    for (group, resources) in by_group {
        rules.push(json!({"apiGroups": [group], "resources": resources, "verbs": ["*"]}));
    }
    Value::Array(rules)
}

/// The synced resources named in a SyncTarget's status, as (group, resource).
fn synced_resources(target: &DynamicObject) -> Vec<(String, String)> {
    target
        .data
        .pointer("/status/syncedResources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            (s("group"), s("resource"))
        })
        .filter(|(_, resource)| !resource.is_empty())
        .collect()
}

/// The path of the workspace a configuration points at (`/clusters/<path>`).
fn workspace_of(config: &kube::Config) -> anyhow::Result<(String, String)> {
    let url = config.cluster_url.to_string();
    let Some((base, path)) = url.split_once("/clusters/") else {
        bail!("the kubeconfig's server {url} names no workspace: point it at https://HUB/clusters/<workspace> (`kubectl ferry ws use <workspace>`)");
    };
    Ok((
        base.trim_end_matches('/').to_string(),
        path.trim_end_matches('/').to_string(),
    ))
}

/// What `workload sync` produced.
#[derive(Debug, Clone)]
pub struct Registration {
    pub syncer_id: String,
    pub sync_target_uid: String,
    /// The workspace path of the SyncTarget.
    pub workspace: String,
    /// The upstream kubeconfig the syncer uses (also in the manifest's Secret).
    pub upstream_kubeconfig: String,
    /// Multi-document YAML for `kubectl apply -f` on the workload cluster.
    pub manifest: String,
}

/// Register: the SyncTarget, the syncer's identity, its token and the manifest.
pub async fn sync(config: &kube::Config, args: &SyncArgs) -> anyhow::Result<Registration> {
    if args.replicas < 0 {
        bail!("--replicas must not be negative");
    }
    let (base, workspace) = workspace_of(config)?;
    let labels = parse_labels(&args.labels)?;
    let exports = supported_exports(&args.apiexports, &args.resources)?;
    for resource in &args.resources {
        if resource.is_empty() || resource.starts_with('.') || resource.contains('/') {
            bail!("--resources {resource:?}: write each resource as <plural>.<group> (routes.route.openshift.io), or <plural> for the core group");
        }
    }
    let client = kube::Client::try_from(config.clone())?;
    let targets = sync_targets(client.clone());
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let target = json!({
        "apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget",
        "metadata": {"name": args.name, "labels": labels},
        "spec": {"supportedAPIExports": exports},
    });
    let applied = targets
        .patch(&args.name, &pp, &Patch::Apply(&target))
        .await
        .with_context(|| format!("creating or updating SyncTarget {} in {workspace}", args.name))?;
    let uid = applied
        .metadata
        .uid
        .clone()
        .ok_or_else(|| anyhow::anyhow!("SyncTarget {} came back without a uid", args.name))?;
    let id = syncer_id(&workspace, &args.name);
    let owner = json!([{"apiVersion": "workload.kcp.io/v1alpha1", "kind": "SyncTarget", "name": args.name, "uid": uid}]);

    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &args.kcp_namespace);
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": id, "namespace": args.kcp_namespace, "ownerReferences": owner}});
    sas.patch(&id, &pp, &Patch::Apply(&sa))
        .await
        .with_context(|| format!("applying ServiceAccount {}/{id}", args.kcp_namespace))?;
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": id, "ownerReferences": owner}, "rules": upstream_rules(&args.name)});
    rbac(&client, "ClusterRole", "clusterroles")
        .patch(&id, &pp, &Patch::Apply(&role))
        .await
        .context("applying the syncer's ClusterRole")?;
    // kcp recreates the binding on every run, so a changed subject never lingers.
    let bindings = rbac(&client, "ClusterRoleBinding", "clusterrolebindings");
    let _ = bindings.delete(&id, &Default::default()).await;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": id, "ownerReferences": owner},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id},
        "subjects": [{"kind": "ServiceAccount", "name": id, "namespace": args.kcp_namespace}],
    });
    bindings
        .create(&PostParams::default(), &serde_json::from_value(binding)?)
        .await
        .context("creating the syncer's ClusterRoleBinding")?;

    let token = service_account_token(&sas, &id, args.lifetime).await?;

    // The downstream RBAC follows what the SyncTarget will sync; the hub fills
    // `syncedResources` from the supported exports shortly after the apply.
    let deadline = tokio::time::Instant::now() + args.timeout;
    let synced = loop {
        let current = targets.get(&args.name).await?;
        let synced = synced_resources(&current);
        if !synced.is_empty() || exports.is_empty() {
            break synced;
        }
        if tokio::time::Instant::now() >= deadline {
            eprintln!(
                "warning: SyncTarget {} has no status.syncedResources after {:?}; the manifest grants \
                 only namespaces, configmaps and secrets downstream (run this again once it has them)",
                args.name, args.timeout
            );
            break synced;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let mut synced = synced;
    for resource in &args.resources {
        let (plural, group) = resource.split_once('.').unwrap_or((resource.as_str(), ""));
        synced.push((group.to_string(), plural.to_string()));
    }

    let ca = ca_pem(config);
    // kcp's syncer kubeconfig points at the server's root; the syncer finds its
    // workspace from --from-cluster and its virtual workspaces from the SyncTarget.
    let upstream_kubeconfig = ferry_server::kubeconfig::kubeconfig(
        "kcp",
        &base,
        &ca,
        ferry_server::kubeconfig::AuthInfo::Token(token),
        "kcp",
        None,
    );
    let namespace = args.namespace.clone().unwrap_or_else(|| id.clone());
    let manifest = manifest(&Manifest {
        id: &id,
        namespace: &namespace,
        workspace: &workspace,
        uid: &uid,
        kubeconfig: &upstream_kubeconfig,
        synced: &synced,
        args,
    })?;
    Ok(Registration {
        syncer_id: id,
        sync_target_uid: uid,
        workspace,
        upstream_kubeconfig,
        manifest,
    })
}

struct Manifest<'a> {
    id: &'a str,
    namespace: &'a str,
    workspace: &'a str,
    uid: &'a str,
    kubeconfig: &'a str,
    synced: &'a [(String, String)],
    args: &'a SyncArgs,
}

/// The objects that install the syncer on a workload cluster.
fn manifest(m: &Manifest) -> anyhow::Result<String> {
    let (id, ns, args) = (m.id, m.namespace, m.args);
    let labels = json!({"app.kubernetes.io/name": "kcp-syncer", "workload.kcp.io/sync-target": args.name});
    let mut syncer_args = vec![
        "syncer".to_string(),
        "--profile=tmc".to_string(),
        format!("--from-kubeconfig={KCP_MOUNT}/kubeconfig"),
        format!("--sync-target-name={}", args.name),
        format!("--sync-target-uid={}", m.uid),
        format!("--from-cluster={}", m.workspace),
        format!("--api-import-poll-interval={}", args.api_import_poll_interval),
        format!(
            "--downstream-namespace-clean-delay={}",
            args.downstream_namespace_clean_delay
        ),
    ];
    syncer_args.extend(args.resources.iter().map(|r| format!("--resources={r}")));
    syncer_args.push(format!("--qps={}", args.qps));
    syncer_args.push(format!("--burst={}", args.burst));
    syncer_args.extend(args.feature_gates.iter().map(|g| format!("--feature-gates={g}")));
    syncer_args.push("--health-address=0.0.0.0:8080".to_string());
    syncer_args.extend(crate::syncer_gen::syncer_leader_election_args(ns));
    render(&install_objects(&Install {
        id,
        namespace: ns,
        labels,
        container: "kcp-syncer",
        image: &args.syncer_image,
        args: syncer_args,
        replicas: args.replicas,
        volume: "kcp-config",
        mount: KCP_MOUNT,
        kubeconfig: m.kubeconfig,
        rules: downstream_rules(args.downstream_access, m.synced),
    }))
}

/// Cordon, uncordon or drain: the merge patch on the SyncTarget's spec.
pub fn schedule_patch(command: &WorkloadCommand, now: &str) -> Value {
    match command {
        WorkloadCommand::Cordon(_) => json!({"spec": {"unschedulable": true}}),
        WorkloadCommand::Uncordon(_) => json!({"spec": {"unschedulable": false, "evictAfter": null}}),
        WorkloadCommand::Drain(_) => json!({"spec": {"unschedulable": true, "evictAfter": now}}),
        WorkloadCommand::Sync(_) => json!({}),
    }
}

pub async fn run(cmd: WorkloadCommand) -> anyhow::Result<()> {
    let target = match &cmd {
        WorkloadCommand::Sync(args) => return run_sync(args).await,
        WorkloadCommand::Cordon(t) | WorkloadCommand::Uncordon(t) | WorkloadCommand::Drain(t) => t.clone(),
    };
    let config = crate::kubeconfig::load(target.kubeconfig.as_deref(), target.context.as_deref()).await?;
    let (_, workspace) = workspace_of(&config)?;
    let targets = sync_targets(kube::Client::try_from(config)?);
    let now = ferry_api::timestamp::now();
    let patch = schedule_patch(&cmd, &now);
    targets
        .patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|e| match e {
            kube::Error::Api(ae) if ae.code == 404 => anyhow::anyhow!(
                "SyncTarget {} not found in workspace {workspace} (`kubectl get synctargets` lists them)",
                target.name
            ),
            e => anyhow::Error::new(e).context(format!("patching SyncTarget {}", target.name)),
        })?;
    let done = match cmd {
        WorkloadCommand::Cordon(_) => "cordoned",
        WorkloadCommand::Uncordon(_) => "uncordoned",
        WorkloadCommand::Drain(_) => "draining",
        WorkloadCommand::Sync(_) => unreachable!("handled above"),
    };
    println!("synctarget.workload.kcp.io/{} {done}", target.name);
    Ok(())
}

async fn run_sync(args: &SyncArgs) -> anyhow::Result<()> {
    let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let reg = sync(&config, args).await?;
    if args.output_file.as_os_str() == "-" {
        print!("{}", reg.manifest);
    } else {
        std::fs::write(&args.output_file, &reg.manifest)
            .with_context(|| format!("writing {}", args.output_file.display()))?;
    }
    let out = args.output_file.display();
    eprintln!(
        "SyncTarget {} (uid {}) is ready in {}; the syncer's identity is ServiceAccount {}/{id}.",
        args.name,
        reg.sync_target_uid,
        reg.workspace,
        args.kcp_namespace,
        id = reg.syncer_id
    );
    eprintln!("Wrote the syncer manifest to {out}. Next, on the workload cluster:");
    eprintln!("  kubectl apply -f {out}");
    eprintln!("and here:");
    eprintln!("  kubectl wait --for=condition=Ready synctarget/{}", args.name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncer_id_is_stable_per_target_and_workspace() {
        let a = syncer_id("root:my-org", "kind-east");
        assert_eq!(a, syncer_id("root:my-org", "kind-east"));
        assert_ne!(a, syncer_id("root:other", "kind-east"));
        assert!(a.starts_with("kcp-syncer-kind-east-") && a.len() == "kcp-syncer-kind-east-".len() + 8);
        assert!(syncer_id("root", &"x".repeat(80)).len() <= 63);
    }

    #[test]
    fn exports_default_to_compute_and_imports_add_the_local_export() {
        let exports = supported_exports(&[DEFAULT_EXPORT.to_string()], &[]).unwrap();
        assert_eq!(
            exports,
            vec![json!({"export": "kubernetes", "path": "root:compute"})]
        );
        let exports = supported_exports(
            &[DEFAULT_EXPORT.to_string()],
            &["routes.route.openshift.io".into()],
        )
        .unwrap();
        assert_eq!(exports[1], json!({"export": IMPORTED_APIS}));
        let err = supported_exports(&["root:x:imported-apis".into()], &[]).unwrap_err();
        assert!(err.to_string().contains("reserved"), "{err}");
        assert!(supported_exports(&["kubernetes".into()], &[]).is_err());
    }

    #[test]
    fn labels_must_be_valid() {
        let labels = parse_labels(&["region=east".into(), "tier=gold".into()]).unwrap();
        assert_eq!(labels["region"], "east");
        assert!(parse_labels(&["region".into()]).is_err());
        assert!(parse_labels(&["bad key=x".into()]).is_err());
    }

    #[test]
    fn upstream_rules_grant_sync_on_this_target_only() {
        let rules = upstream_rules("east");
        let sync: Vec<&Value> = rules
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["verbs"].as_array().unwrap().iter().any(|v| v == "sync"))
            .collect();
        assert_eq!(sync.len(), 1);
        assert_eq!(sync[0]["resourceNames"], json!(["east"]));
        for rule in rules.as_array().unwrap() {
            let verbs = rule["verbs"].as_array().unwrap();
            assert!(!verbs
                .iter()
                .any(|v| v == "*" || v == "escalate" || v == "bind" || v == "impersonate"));
        }
    }

    #[test]
    fn downstream_rules_follow_the_synced_resources() {
        let rules = downstream_rules(
            TmcDownstreamAccess::Synced,
            &[("apps".into(), "deployments".into())],
        );
        let text = rules.to_string();
        assert!(text.contains("\"deployments\""), "{text}");
        assert!(text.contains("\"deployments/status\""), "{text}");
        assert!(text.contains("\"pods/log\""), "{text}");
        assert!(
            text.contains("\"secrets\"") && text.contains("\"configmaps\""),
            "{text}"
        );
        assert!(!downstream_rules(TmcDownstreamAccess::Synced, &[])
            .to_string()
            .contains("deployments"));
    }

    #[test]
    fn downstream_access_is_cluster_admin_unless_synced() {
        let admin = downstream_rules(TmcDownstreamAccess::default(), &[]);
        assert_eq!(
            admin[0],
            json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
        );
        let synced = downstream_rules(TmcDownstreamAccess::Synced, &[]).to_string();
        assert!(
            !synced.contains("rbac.authorization.k8s.io"),
            "no RBAC unless synced: {synced}"
        );
        let with_rbac = downstream_rules(
            TmcDownstreamAccess::Synced,
            &[("rbac.authorization.k8s.io".into(), "roles".into())],
        );
        assert!(with_rbac
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["apiGroups"] == json!(["rbac.authorization.k8s.io"])
                && r["resources"].as_array().unwrap().contains(&json!("roles"))));
    }

    #[test]
    fn cordon_uncordon_and_drain_patch_the_spec() {
        let t = || TargetArgs {
            name: "east".into(),
            kubeconfig: None,
            context: None,
        };
        assert_eq!(
            schedule_patch(&WorkloadCommand::Cordon(t()), "now"),
            json!({"spec": {"unschedulable": true}})
        );
        assert_eq!(
            schedule_patch(&WorkloadCommand::Uncordon(t()), "now"),
            json!({"spec": {"unschedulable": false, "evictAfter": null}})
        );
        assert_eq!(
            schedule_patch(&WorkloadCommand::Drain(t()), "2026-01-01T00:00:00Z"),
            json!({"spec": {"unschedulable": true, "evictAfter": "2026-01-01T00:00:00Z"}})
        );
    }
}
