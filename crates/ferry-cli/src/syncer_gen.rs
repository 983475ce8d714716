//! `ferry syncer-gen NAME --syncer-image IMAGE -o FILE` (also `kubectl ferry
//! syncer-gen`): register a workload cluster. Run against a mailbox workspace,
//! it creates the syncer's identity there (ServiceAccount, a ClusterRole with
//! explicit verbs, a binding, a TokenRequest token) and writes the manifest
//! that installs the syncer on the cluster.

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
use ferry_api::well_known::SYNC_TARGET_NAME_ANNOTATION;
use ferry_hub::controllers::mailbox::{INVENTORY_CLUSTER_ANNOTATION, SYNC_TARGET_UID_ANNOTATION};
use ferry_hub::controllers::upsync_role::UPSYNC_ROLE;
/// Where the Deployment mounts the upstream kubeconfig Secret.
pub const UPSTREAM_MOUNT: &str = "/ferry/upstream";

#[derive(clap::Args, Debug, Clone)]
pub struct SyncerGenArgs {
    /// Name of the SyncTarget whose mailbox workspace the kubeconfig points at.
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
}

/// What registration produced.
#[derive(Debug, Clone)]
pub struct Registration {
    pub syncer_id: String,
    pub sync_target_name: String,
    pub sync_target_uid: String,
    /// The mailbox workspace path, e.g. `root:abc-mb-<uid>`.
    pub workspace: String,
    /// The upstream kubeconfig the syncer uses (also inside the manifest's Secret).
    pub upstream_kubeconfig: String,
    /// Multi-document YAML for `kubectl apply -f` on the workload cluster.
    pub manifest: String,
}

/// `ferry-syncer-<name>-<8 base-36 chars of sha256(sync target uid)>`: stable
/// for one SyncTarget, so running syncer-gen again updates rather than adds.
pub fn syncer_id(name: &str, uid: &str) -> String {
    let digest = Sha256::digest(uid.as_bytes());
    let n = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    let suffix = ferry_api::naming::base36(n.into(), 8);
    let mut base = format!("ferry-syncer-{name}");
    base.truncate(63 - 9);
    format!("{base}-{suffix}")
}

fn workspace_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
        "workspaces",
    )
}

const NOT_A_MAILBOX: &str = "syncer-gen must run against a mailbox workspace: point your kubeconfig at \
    https://HUB/clusters/root:<inventory-cluster>-mb-<synctarget-uid> (list them with `kubectl get workspaces` \
    in root; the mailbox controller makes one per SyncTarget)";

/// Find and check the mailbox workspace `config` points at, for SyncTarget `name`.
async fn mailbox(config: &kube::Config, name: &str) -> anyhow::Result<(String, String)> {
    let url = config.cluster_url.to_string();
    let Some(path) = url
        .split("/clusters/")
        .nth(1)
        .map(|p| p.trim_end_matches('/').to_string())
    else {
        bail!("{NOT_A_MAILBOX}; the kubeconfig's server {url} has no /clusters/<workspace> path");
    };
    let (parent, ws_name) = match path.rsplit_once(':') {
        Some((p, n)) if n.contains("-mb-") => (p.to_string(), n.to_string()),
        _ => bail!("{NOT_A_MAILBOX}; {path} is not one"),
    };
    let parent_client = kube::Client::try_from(ferry_hub::kubeconfig::at_workspace(config, &parent)?)?;
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
        kube::Client::try_from(ferry_hub::kubeconfig::at_workspace(config, inventory)?)?,
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

/// Rules for the syncer in its mailbox workspace: read everything placed
/// there; update what it reports on (status, through the subresource or,
/// for kinds without one, the object; heartbeats on SyncerConfigs); create
/// Events and the Namespaces upsynced objects go into. It creates and
/// deletes nothing else: the objects it upsyncs come from the ClusterRole
/// the hub keeps from the SyncerConfigs' `upsync` sets
/// ([`UPSYNC_ROLE`], bound beside this one), so the token can never make a
/// ServiceAccount, a token, a Secret, RBAC or a workspace. Explicit verbs
/// only, no escalate/bind/impersonate, no non-resource URLs, and the token is
/// valid in that one workspace only.
pub fn upstream_rules() -> Value {
    json!([
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch", "update", "patch"]},
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
    let (workspace, uid) = mailbox(config, &args.name).await?;
    let id = syncer_id(&args.name, &uid);
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
    .await?;
    let namespace = args.namespace.clone().unwrap_or_else(|| id.clone());
    let manifest = manifest(&id, &namespace, &args.name, &uid, &upstream_kubeconfig, args)?;
    Ok(Registration {
        syncer_id: id,
        sync_target_name: args.name.clone(),
        sync_target_uid: uid,
        workspace,
        upstream_kubeconfig,
        manifest,
    })
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
    let labels = json!({"app.kubernetes.io/name": "ferry-syncer", "ferry.dev/sync-target": name});
    let mut syncer_args = vec![
        "syncer".to_string(),
        format!("--from-kubeconfig={UPSTREAM_MOUNT}/kubeconfig"),
        format!("--sync-target-name={name}"),
        format!("--sync-target-uid={uid}"),
    ];
    // Unset, the syncer goes at each server's pace (see `ferry syncer --help`).
    syncer_args.extend(args.qps.map(|qps| format!("--qps={qps}")));
    syncer_args.extend(args.burst.map(|burst| format!("--burst={burst}")));
    syncer_args.push("--health-address=0.0.0.0:8080".to_string());
    syncer_args.extend(syncer_leader_election_args(ns));
    render(&install_objects(&Install {
        id,
        namespace: ns,
        labels,
        container: "ferry-syncer",
        image: &args.syncer_image,
        args: syncer_args,
        replicas: args.replicas,
        volume: "upstream",
        mount: UPSTREAM_MOUNT,
        kubeconfig,
        rules: downstream_rules(args.downstream_access),
    }))
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
    let rbac = |kind: &str, plural: &str| {
        Api::<DynamicObject>::all_with(
            client.clone(),
            &ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", kind),
                plural,
            ),
        )
    };
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
    Ok(ferry_hub::kubeconfig::kubeconfig(
        who.context,
        &server,
        &ca_pem(config),
        ferry_hub::kubeconfig::AuthInfo::Token(token),
        who.context,
        None,
    ))
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
        .map(|der| ferry_hub::server::tls::pem_encode("CERTIFICATE", der))
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
    eprintln!("Created in {}: ServiceAccount {}/{id}, ClusterRole {id}, ClusterRoleBindings {id} and {id}-{UPSYNC_ROLE} (what the SyncerConfigs there upsync, kept by the hub), and a token for them.", reg.workspace, args.upstream_namespace, id = reg.syncer_id);
    eprintln!("Wrote the syncer manifest to {out}. Next, on the workload cluster:");
    eprintln!("  kubectl apply -f {out}");
    eprintln!(
        "  kubectl -n {} rollout status deployment/{}",
        args.namespace.clone().unwrap_or(reg.syncer_id.clone()),
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
        assert!(a.starts_with("ferry-syncer-florin-") && a.len() <= 63);
        assert!(syncer_id(&"x".repeat(80), "u").len() <= 63);
    }

    #[test]
    fn downstream_access_is_cluster_admin_unless_restricted() {
        assert_eq!(
            downstream_rules(DownstreamAccess::default())[0]["verbs"],
            json!(["*"])
        );
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
