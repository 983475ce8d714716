//! `kubectl ferry bind apiexport <path>:<export>`: bind an APIExport into the
//! current workspace, as `kubectl kcp bind apiexport` does — create the
//! APIBinding (named after the export unless `--name`), with the permission
//! claims accepted or rejected as asked, and wait until it is Bound.

use std::time::Duration;

use anyhow::{bail, Context};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};
use sha2::{Digest, Sha224};

#[derive(clap::Subcommand)]
pub enum BindCommand {
    /// Bind an APIExport (`root:provider:widgets.example.io`) into the current workspace.
    Apiexport(ApiExportArgs),
    /// Bind the current workspace to compute: APIBindings for the exports the
    /// SyncTargets support, and a Placement choosing a Location in `<location workspace>`.
    Compute(ComputeArgs),
}

#[derive(clap::Args)]
pub struct ComputeArgs {
    /// The workspace that holds the Locations and SyncTargets, e.g. `root:my-org`.
    pub location_workspace: String,
    /// APIExports to bind, as `<path>:<export>`.
    #[arg(long, value_delimiter = ',', default_value = crate::workload_cmd::DEFAULT_EXPORT)]
    pub apiexports: Vec<String>,
    /// Label selectors of the Locations to choose from (`env=test`); each flag is one
    /// selector and a Location matching any of them may be chosen. Default: every Location.
    #[arg(long = "location-selectors")]
    pub location_selectors: Vec<String>,
    /// Label selector of the namespaces the Placement schedules (`purpose=workload`).
    /// Default: every namespace.
    #[arg(long = "namespace-selector", default_value = "")]
    pub namespace_selector: String,
    /// Name of the Placement (default: `placement-` and a hash of what it selects).
    #[arg(long)]
    pub name: Option<String>,
    /// How long to wait for the bindings to be Bound.
    #[arg(long, default_value = "30s", value_parser = crate::kubeconfig::parse_duration)]
    pub timeout: Duration,
    /// Kubeconfig (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
}

#[derive(clap::Args)]
pub struct ApiExportArgs {
    /// The export as `<workspace path>:<export name>`, e.g. `root:provider:widgets.example.io`.
    pub export: String,
    /// Name of the APIBinding (default: the export's name).
    #[arg(long)]
    pub name: Option<String>,
    /// Accept a permission claim of the export, as `resource.group` (`configmaps` for the core group).
    #[arg(long = "accept-permission-claim", value_delimiter = ',')]
    pub accept: Vec<String>,
    /// Reject a permission claim of the export, as `resource.group`.
    #[arg(long = "reject-permission-claim", value_delimiter = ',')]
    pub reject: Vec<String>,
    /// Accept every permission claim the export makes.
    #[arg(long, conflicts_with_all = ["reject_all_permission_claims", "accept"])]
    pub accept_all_permission_claims: bool,
    /// Reject every permission claim the export makes.
    #[arg(long, conflicts_with_all = ["reject"])]
    pub reject_all_permission_claims: bool,
    /// How long to wait for the binding to be Bound.
    #[arg(long, default_value = "30s", value_parser = crate::kubeconfig::parse_duration)]
    pub timeout: Duration,
    /// Kubeconfig (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
}

fn kcp_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("apis.kcp.io", "v1alpha1", kind), plural)
}

/// `root:provider:widgets.example.io` → (`root:provider`, `widgets.example.io`).
pub fn split_reference(reference: &str) -> anyhow::Result<(String, String)> {
    match reference.rsplit_once(':') {
        Some((path, name))
            if !path.is_empty()
                && !name.is_empty()
                && path.split(':').all(|s| {
                    !s.is_empty()
                        && s.bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                }) =>
        {
            Ok((path.to_string(), name.to_string()))
        }
        _ => bail!(
            "{reference:?}: give the export as <workspace path>:<export name>, e.g. root:provider:widgets.example.io"
        ),
    }
}

/// `configmaps` / `configmaps.core` → ("", "configmaps"); `widgets.example.io` → ("example.io", "widgets").
pub fn parse_claim(text: &str) -> anyhow::Result<(String, String)> {
    let (resource, group) = text.split_once('.').unwrap_or((text, ""));
    if resource.is_empty() {
        bail!("permission claim {text:?}: write it as resource.group (configmaps, or widgets.example.io)");
    }
    let group = if group == "core" { "" } else { group };
    Ok((group.to_string(), resource.to_string()))
}

fn claim_key(c: &Value) -> (String, String) {
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    (s("group"), s("resource"))
}

pub async fn run(cmd: BindCommand) -> anyhow::Result<()> {
    let args = match cmd {
        BindCommand::Apiexport(args) => args,
        BindCommand::Compute(args) => return compute(args).await,
    };
    let (path, export) = split_reference(&args.export)?;
    let accept: Vec<(String, String)> = args
        .accept
        .iter()
        .map(|c| parse_claim(c))
        .collect::<Result<_, _>>()?;
    let reject: Vec<(String, String)> = args
        .reject
        .iter()
        .map(|c| parse_claim(c))
        .collect::<Result<_, _>>()?;
    if let Some(both) = accept.iter().find(|a| reject.contains(a)) {
        bail!(
            "permission claim {}.{} is both accepted and rejected",
            both.1,
            both.0
        );
    }
    let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let here = config.cluster_url.to_string();
    let client = kube::Client::try_from(config)?;
    let mut claims: Vec<Value> = Vec::new();
    if args.accept_all_permission_claims
        || args.reject_all_permission_claims
        || !accept.is_empty()
        || !reject.is_empty()
    {
        // The export's own claims, so each decision carries what it decides on.
        let base = here
            .split("/clusters/")
            .next()
            .unwrap_or(&here)
            .trim_end_matches('/')
            .to_string();
        let mut export_config =
            crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
        export_config.cluster_url = format!("{base}/clusters/{path}").parse()?;
        let exports: Api<DynamicObject> = Api::all_with(
            kube::Client::try_from(export_config)?,
            &kcp_resource("APIExport", "apiexports"),
        );
        let found = exports
            .get(&export)
            .await
            .with_context(|| format!("reading APIExport {export:?} in workspace {path}"))?;
        let asked: Vec<Value> = found
            .data
            .pointer("/spec/permissionClaims")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for wanted in accept.iter().chain(reject.iter()) {
            if !asked.iter().any(|c| claim_key(c) == *wanted) {
                bail!(
                    "APIExport {path}:{export} makes no permission claim on {}{}",
                    wanted.1,
                    if wanted.0.is_empty() {
                        String::new()
                    } else {
                        format!(".{}", wanted.0)
                    }
                );
            }
        }
        for claim in asked {
            let key = claim_key(&claim);
            let state = if args.accept_all_permission_claims || accept.contains(&key) {
                "Accepted"
            } else if args.reject_all_permission_claims || reject.contains(&key) {
                "Rejected"
            } else {
                continue;
            };
            let mut decided = claim.clone();
            decided["state"] = json!(state);
            claims.push(decided);
        }
    }
    let name = args.name.clone().unwrap_or_else(|| export.clone());
    let mut binding = json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding",
        "metadata": {"name": name},
        "spec": {"reference": {"export": {"path": path, "name": export}}},
    });
    if !claims.is_empty() {
        binding["spec"]["permissionClaims"] = json!(claims);
    }
    create_and_wait(&client, binding, args.timeout, &print_line).await
}

/// Creates the APIBinding `binding` and waits until it is Bound and what it
/// binds is served.
/// Each progress line goes to `say`.
async fn create_and_wait(
    client: &kube::Client,
    binding: Value,
    timeout: Duration,
    say: &dyn Fn(&str),
) -> anyhow::Result<()> {
    let name = binding["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let bindings: Api<DynamicObject> =
        Api::all_with(client.clone(), &kcp_resource("APIBinding", "apibindings"));
    let obj: DynamicObject = serde_json::from_value(binding)?;
    bindings
        .create(&PostParams::default(), &obj)
        .await
        .with_context(|| format!("failed to create APIBinding {name:?}"))?;
    say(&format!(
        "apibinding {name} created. Waiting to successfully bind ..."
    ));
    wait_bound(client, &name, timeout).await?;
    say(&format!("{name} created and bound."));
    Ok(())
}

/// Waits until the APIBinding `name` is Bound and what it binds is served;
/// fails after `timeout` with the conditions that say why not.
pub async fn wait_bound(client: &kube::Client, name: &str, timeout: Duration) -> anyhow::Result<()> {
    let bindings: Api<DynamicObject> =
        Api::all_with(client.clone(), &kcp_resource("APIBinding", "apibindings"));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let current = bindings.get(name).await?;
        if current.data.pointer("/status/phase").and_then(Value::as_str) == Some("Bound") {
            break;
        }
        if tokio::time::Instant::now() >= deadline {
            let why: Vec<String> = current
                .data
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|c| c.get("status").and_then(Value::as_str) == Some("False"))
                .filter_map(|c| c.get("message").and_then(Value::as_str).map(String::from))
                .collect();
            bail!(
                "could not bind {name}: not Bound after {:?}{}",
                timeout,
                if why.is_empty() {
                    String::new()
                } else {
                    format!(": {}", why.join("; "))
                }
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The workspace serves what the binding bound a moment after it reports
    // Bound; wait for that too, so the next command finds the resources.
    let bound = bindings.get(name).await?;
    let groups: Vec<String> = bound
        .data
        .pointer("/status/boundResources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("group").and_then(Value::as_str))
        .filter(|g| !g.is_empty())
        .map(String::from)
        .collect();
    for group in groups {
        loop {
            let request = http::Request::get(format!("/apis/{group}")).body(Vec::new())?;
            if client.request_text(request).await.is_ok() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("{name} is Bound but {group} is not served after {:?}", timeout);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// A label selector written as kubectl takes it (`env=test,tier in (a,b)`) as
/// `metav1.LabelSelector` JSON; the empty string selects everything (`{}`).
pub fn selector_json(text: &str) -> anyhow::Result<Value> {
    use ferry_server::selector::{LabelSelector, Operator};
    let parsed = LabelSelector::parse(text).map_err(|e| anyhow::anyhow!("selector {text:?}: {e}"))?;
    let mut labels = serde_json::Map::new();
    let mut expressions = Vec::new();
    for r in parsed.requirements() {
        let op = match r.operator() {
            Operator::Equals | Operator::DoubleEquals => {
                labels.insert(r.key().to_string(), json!(r.values()[0]));
                continue;
            }
            Operator::NotEquals | Operator::NotIn => "NotIn",
            Operator::In => "In",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::GreaterThan | Operator::LessThan => {
                bail!("selector {text:?}: a label selector object has no > or <; use in, notin, =, != or exists")
            }
        };
        let mut e = json!({"key": r.key(), "operator": op});
        if !r.values().is_empty() {
            e["values"] = json!(r.values());
        }
        expressions.push(e);
    }
    let mut out = json!({});
    if !labels.is_empty() {
        out["matchLabels"] = Value::Object(labels);
    }
    if !expressions.is_empty() {
        out["matchExpressions"] = Value::Array(expressions);
    }
    Ok(out)
}

/// `kubectl ferry bind compute <location workspace>`.
async fn compute(args: ComputeArgs) -> anyhow::Result<()> {
    let config = crate::kubeconfig::load(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let name = bind_compute(&kube::Client::try_from(config)?, &args, &print_line).await?;
    println!("placement {name} created.");
    Ok(())
}

/// kcp's progress lines, on stdout as kubectl-kcp prints them.
fn print_line(line: &str) {
    println!("{line}");
}

/// Binds the workspace `client` points at to compute: the APIBindings, then the
/// Placement, whose name it returns. Each progress line goes to `say`.
pub async fn bind_compute(
    client: &kube::Client,
    args: &ComputeArgs,
    say: &dyn Fn(&str),
) -> anyhow::Result<String> {
    let location_workspace = args.location_workspace.trim().to_string();
    if location_workspace.is_empty()
        || !location_workspace.split(':').all(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        })
    {
        bail!("{location_workspace:?}: give the workspace of the SyncTargets as a path, e.g. root:my-org");
    }
    let location_selectors: Vec<Value> = if args.location_selectors.is_empty() {
        vec![json!({})]
    } else {
        args.location_selectors
            .iter()
            .map(|s| selector_json(s))
            .collect::<Result<_, _>>()?
    };
    let namespace_selector = selector_json(&args.namespace_selector)?;
    let exports: Vec<(String, String)> = args
        .apiexports
        .iter()
        .filter(|e| !e.is_empty())
        .map(|e| split_reference(e))
        .collect::<Result<_, _>>()?;
    let bindings: Api<DynamicObject> =
        Api::all_with(client.clone(), &kcp_resource("APIBinding", "apibindings"));
    for (path, export) in exports {
        let reference = json!({"path": path, "name": export});
        // Running bind compute again reuses a binding to the same export.
        let existing = bindings.list(&Default::default()).await?;
        if let Some(b) = existing
            .items
            .iter()
            .find(|b| b.data.pointer("/spec/reference/export") == Some(&reference))
        {
            say(&format!(
                "apibinding {} already binds {path}:{export}.",
                b.metadata.name.clone().unwrap_or_default()
            ));
            continue;
        }
        let taken = existing
            .items
            .iter()
            .any(|b| b.metadata.name.as_deref() == Some(export.as_str()));
        let name = if taken {
            let digest = Sha224::digest(format!("{path}:{export}").as_bytes());
            let mut suffix = ferry_api::naming::radix_text(&digest, 36);
            suffix.truncate(8);
            format!("{export}-{suffix}")
        } else {
            export.clone()
        };
        let binding = json!({
            "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIBinding",
            "metadata": {"name": name},
            "spec": {"reference": {"export": reference}},
        });
        create_and_wait(client, binding, args.timeout, say).await?;
    }
    let spec = json!({
        "locationWorkspace": location_workspace,
        "locationResource": {"group": "workload.kcp.io", "version": "v1alpha1", "resource": "synctargets"},
        "locationSelectors": location_selectors,
        "namespaceSelector": namespace_selector,
    });
    let name = args.name.clone().unwrap_or_else(|| {
        let digest = Sha224::digest(spec.to_string().as_bytes());
        let mut suffix = ferry_api::naming::radix_text(&digest, 36);
        suffix.truncate(8);
        format!("placement-{suffix}")
    });
    let placement = json!({
        "apiVersion": "scheduling.kcp.io/v1alpha1", "kind": "Placement",
        "metadata": {"name": name},
        "spec": spec,
    });
    let placements: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("scheduling.kcp.io", "v1alpha1", "Placement"),
            "placements",
        ),
    );
    placements
        .patch(
            &name,
            &PatchParams::apply("kubectl-ferry-bind").force(),
            &Patch::Apply(&placement),
        )
        .await
        .with_context(|| format!("creating Placement {name}"))?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn selectors_become_label_selector_objects() {
        assert_eq!(selector_json("").unwrap(), json!({}));
        assert_eq!(
            selector_json("env=test").unwrap(),
            json!({"matchLabels": {"env": "test"}})
        );
        assert_eq!(
            selector_json("env=test,tier in (a,b),!gone").unwrap(),
            json!({"matchLabels": {"env": "test"}, "matchExpressions": [
                {"key": "gone", "operator": "DoesNotExist"},
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
            ]})
        );
        assert!(selector_json("x>3").is_err());
        assert!(selector_json("bad key").is_err());
    }

    use super::*;

    #[test]
    fn references_and_claims_parse_as_kcp_writes_them() {
        assert_eq!(
            split_reference("root:provider:widgets.example.io").unwrap(),
            ("root:provider".into(), "widgets.example.io".into())
        );
        assert!(split_reference("widgets.example.io").is_err());
        assert!(split_reference("root::x").is_err());
        assert_eq!(
            parse_claim("configmaps").unwrap(),
            ("".into(), "configmaps".into())
        );
        assert_eq!(
            parse_claim("configmaps.core").unwrap(),
            ("".into(), "configmaps".into())
        );
        assert_eq!(
            parse_claim("widgets.example.io").unwrap(),
            ("example.io".into(), "widgets".into())
        );
        assert!(parse_claim(".x").is_err());
    }
}
