//! `ferry syncagent-gen NAME`: what the api-syncagent's Helm chart and its
//! getting-started guide have a service owner do by hand, in one step. Run with a
//! kubeconfig pointing at the provider workspace (the one holding the APIExport and its
//! endpoint slice), it
//! - creates there a ServiceAccount `NAME` with the guide's rights and no more: its
//!   endpoint slice and APIExport (read; the export also patched), APIResourceSchemas
//!   (read, create), the export's virtual workspace (`apiexports/content`), the
//!   workspace's LogicalCluster (read) and Events;
//! - writes the manifest for the service cluster: the PublishedResource CRD, a
//!   namespace, a ServiceAccount with the chart's rights (CRDs and PublishedResources
//!   read, their status written, namespaces made, Secrets for related objects and the
//!   per-object state, Leases and Events) plus full rights on each `--resources` type
//!   (the published types and related ones: the chart leaves those to the user), a
//!   Secret with a kubeconfig for the ServiceAccount above (a TokenRequest token), and
//!   a Deployment running two replicas of `ferry syncagent` with it, electing a leader.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

use crate::syncer_gen::{identity_kubeconfig, install_objects, render, Identity, Install};

const FIELD_MANAGER: &str = "ferry-syncagent-gen";
/// Where the Deployment mounts the kcp kubeconfig Secret.
const KCP_MOUNT: &str = "/kcp";

#[derive(clap::Args, Debug)]
pub struct SyncagentGenArgs {
    /// The agent's name (`--agent-name`): the ServiceAccount in the provider workspace
    /// and everything installed on the service cluster are named `ferry-syncagent-NAME`.
    pub name: String,
    /// The APIExportEndpointSlice (in the provider workspace) whose export the agent serves.
    #[arg(long)]
    pub apiexportendpointslice_ref: String,
    /// The image the Deployment runs (`ferry` as its entry point).
    #[arg(long, default_value = "ghcr.io/ferry-dev/ferry:latest")]
    pub image: String,
    /// The namespace on the service cluster the agent runs in (its Lease and state).
    #[arg(long, default_value = "ferry-system")]
    pub namespace: String,
    /// Only PublishedResources matching this label selector are the agent's.
    #[arg(long)]
    pub published_resource_selector: Option<String>,
    /// `resource.group` of each type the agent syncs on the service cluster (the
    /// published types and related ones other than Secrets), granted every verb.
    #[arg(long = "resources", value_delimiter = ',')]
    pub resources: Vec<String>,
    /// Replicas of the agent's Deployment; they elect a leader through the Lease
    /// `syncagent.NAME` in --namespace, so one syncs and the others stand by.
    #[arg(long, default_value_t = 2)]
    pub replicas: i32,
    /// The ServiceAccount token's lifetime.
    #[arg(long, default_value = "8760h", value_parser = crate::kubeconfig::parse_duration)]
    pub lifetime: Duration,
    /// Where to write the manifest (`-` for stdout).
    #[arg(short = 'o', long = "output-file", default_value = "-")]
    pub output_file: PathBuf,
    /// Kubeconfig of kcp, pointing at the provider workspace (default: $KUBECONFIG).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in --kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
}

/// What [`generate`] made: the agent's id, the kcp kubeconfig it got, and the manifest.
pub struct Generated {
    pub id: String,
    pub export: String,
    pub kcp_kubeconfig: String,
    pub manifest: String,
}

/// `ferry-syncagent-NAME`.
pub fn agent_id(name: &str) -> String {
    format!("ferry-syncagent-{name}")
}

fn apis(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apis.kcp.io", "v1alpha1", kind), plural)
}

/// The rights in the provider workspace: the reference guide's, for `slice` and `export`.
pub fn kcp_rules(slice: &str, export: &str) -> Value {
    json!([
        {"apiGroups": ["core.kcp.io"], "resources": ["logicalclusters"], "resourceNames": ["cluster"], "verbs": ["get"]},
        {"apiGroups": ["apis.kcp.io"], "resources": ["apiexportendpointslices"], "resourceNames": [slice], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["apis.kcp.io"], "resources": ["apiexports"], "resourceNames": [export], "verbs": ["get", "list", "watch", "patch", "update"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "create", "patch", "update"]},
        {"apiGroups": ["apis.kcp.io"], "resources": ["apiresourceschemas"], "verbs": ["get", "list", "watch", "create"]},
        {"apiGroups": ["apis.kcp.io"], "resources": ["apiexports/content"], "resourceNames": [export], "verbs": ["*"]},
    ])
}

/// The rights on the service cluster: the chart's, Leases, and every verb on each of
/// `resources` (`resource.group`; `resource` for the core group) and its status.
pub fn service_rules(resources: &[String]) -> anyhow::Result<Value> {
    let mut rules = vec![
        json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}),
        json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch", "create"]}),
        json!({"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]}),
        json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"]}),
        json!({"apiGroups": ["syncagent.kcp.io"], "resources": ["publishedresources"], "verbs": ["get", "list", "watch"]}),
        json!({"apiGroups": ["syncagent.kcp.io"], "resources": ["publishedresources/status"], "verbs": ["create", "get", "update", "patch"]}),
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}),
    ];
    for r in resources {
        let (resource, group) = r.split_once('.').unwrap_or((r.as_str(), ""));
        if resource.is_empty() || resource.contains('/') {
            bail!("--resources {r:?}: expected resource.group (databases.example.com), or a core resource (configmaps)");
        }
        rules.push(json!({"apiGroups": [group], "resources": [resource, format!("{resource}/status")], "verbs": ["*"]}));
    }
    Ok(Value::Array(rules))
}

/// Creates the agent's ServiceAccount and rights in the provider workspace `config`
/// points at, and writes the service cluster's manifest.
pub async fn generate(config: &kube::Config, args: &SyncagentGenArgs) -> anyhow::Result<Generated> {
    if args.replicas < 0 {
        bail!("--replicas must not be negative");
    }
    let rules = service_rules(&args.resources)?;
    let client = kube::Client::try_from(config.clone())?;
    let slice_name = &args.apiexportendpointslice_ref;
    let slice = Api::<DynamicObject>::all_with(client.clone(), &apis("APIExportEndpointSlice", "apiexportendpointslices"))
        .get_opt(slice_name)
        .await
        .with_context(|| format!("reading APIExportEndpointSlice {slice_name}"))?
        .with_context(|| {
            format!(
                "APIExportEndpointSlice {slice_name} does not exist in {}: create the APIExport (and its slice) there first, or point --kubeconfig at the provider workspace",
                config.cluster_url
            )
        })?;
    let export = slice
        .data
        .pointer("/spec/export/name")
        .and_then(Value::as_str)
        .with_context(|| format!("APIExportEndpointSlice {slice_name} names no export (spec.export.name)"))?
        .to_string();

    let id = agent_id(&args.name);
    let kcp_kubeconfig = identity_kubeconfig(
        config,
        &Identity {
            namespace: "default",
            id: &id,
            rules: kcp_rules(slice_name, &export),
            also_bound: &[],
            lifetime: args.lifetime,
            field_manager: FIELD_MANAGER,
            context: "kcp",
        },
    )
    .await?;

    let mut agent_args = vec![
        "syncagent".to_string(),
        format!("--kcp-kubeconfig={KCP_MOUNT}/kubeconfig"),
        format!("--namespace={}", args.namespace),
        format!("--agent-name={}", args.name),
        format!("--apiexportendpointslice-ref={slice_name}"),
        "--enable-leader-election".to_string(),
    ];
    agent_args.extend(
        args.published_resource_selector
            .as_ref()
            .map(|s| format!("--published-resource-selector={s}")),
    );
    agent_args.push("--metrics-address=0.0.0.0:8080".to_string());
    let labels =
        json!({"app.kubernetes.io/name": "ferry-syncagent", "syncagent.kcp.io/agent-name": args.name});
    let mut objects: Vec<Value> = ferry_api::crds::all_crds()
        .into_iter()
        .filter_map(|c| serde_json::to_value(c).ok())
        .filter(|c| c["metadata"]["name"] == "publishedresources.syncagent.kcp.io")
        .collect();
    objects.extend(install_objects(&Install {
        id: &id,
        namespace: &args.namespace,
        labels,
        container: "ferry-syncagent",
        image: &args.image,
        args: agent_args,
        replicas: args.replicas,
        volume: "kcp",
        mount: KCP_MOUNT,
        kubeconfig: &kcp_kubeconfig,
        rules,
    }));
    Ok(Generated {
        id,
        export,
        kcp_kubeconfig,
        manifest: render(&objects)?,
    })
}

pub async fn run(args: SyncagentGenArgs) -> anyhow::Result<()> {
    let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let generated = generate(&config, &args).await?;
    if args.output_file.as_os_str() == "-" {
        print!("{}", generated.manifest);
    } else {
        std::fs::write(&args.output_file, &generated.manifest)
            .with_context(|| format!("writing {}", args.output_file.display()))?;
    }
    let id = &generated.id;
    eprintln!(
        "Created in {}: ServiceAccount default/{id}, ClusterRole {id}, ClusterRoleBinding {id} (APIExport {}), and a token for them.",
        config.cluster_url, generated.export
    );
    let out = args.output_file.display();
    eprintln!("Wrote the agent's manifest to {out}. Next, on the service cluster:");
    eprintln!("  kubectl apply -f {out}");
    eprintln!("  kubectl -n {} rollout status deployment/{id}", args.namespace);
    if args.resources.is_empty() {
        eprintln!("Note: no --resources given; the agent may not touch the published types until you grant it (ClusterRole {id}).");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_become_full_rights_on_them_and_their_status() {
        let rules = service_rules(&["databases.example.com".into(), "configmaps".into()]).unwrap();
        let rules = rules.as_array().unwrap();
        assert!(rules.contains(
            &json!({"apiGroups": ["example.com"], "resources": ["databases", "databases/status"], "verbs": ["*"]})
        ));
        assert!(rules.contains(
            &json!({"apiGroups": [""], "resources": ["configmaps", "configmaps/status"], "verbs": ["*"]})
        ));
        let error = service_rules(&["databases/status".into()])
            .unwrap_err()
            .to_string();
        assert!(error.contains("resource.group"), "{error}");
    }

    #[test]
    fn kcp_rules_name_only_the_slice_and_the_export() {
        for rule in kcp_rules("slice", "export").as_array().unwrap() {
            let verbs = rule["verbs"].as_array().unwrap();
            let kcp_api = rule["apiGroups"][0] == "apis.kcp.io";
            if kcp_api && verbs.iter().any(|v| v == "*" || v == "update") {
                let names = rule["resourceNames"]
                    .as_array()
                    .expect("a rule that writes names its object");
                assert!(names == &[json!("export")], "{rule}");
            }
        }
    }
}
