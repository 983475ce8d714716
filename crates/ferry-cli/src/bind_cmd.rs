//! `kubectl ferry bind apiexport <path>:<export>`: bind an APIExport into the
//! current workspace, as `kubectl kcp bind apiexport` does — create the
//! APIBinding (named after the export unless `--name`), with the permission
//! claims accepted or rejected as asked, and wait until it is Bound.

use std::time::Duration;

use anyhow::{bail, Context};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

#[derive(clap::Subcommand)]
pub enum BindCommand {
    /// Bind an APIExport (`root:provider:widgets.example.io`) into the current workspace.
    Apiexport(ApiExportArgs),
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
    let BindCommand::Apiexport(args) = cmd;
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
    let client_for_discovery = client.clone();
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
    let bindings: Api<DynamicObject> = Api::all_with(client, &kcp_resource("APIBinding", "apibindings"));
    let obj: DynamicObject = serde_json::from_value(binding)?;
    bindings
        .create(&PostParams::default(), &obj)
        .await
        .with_context(|| format!("failed to create APIBinding {name:?}"))?;
    println!("apibinding {name} created. Waiting to successfully bind ...");
    let deadline = tokio::time::Instant::now() + args.timeout;
    loop {
        let current = bindings.get(&name).await?;
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
                args.timeout,
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
    let bound = bindings.get(&name).await?;
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
            if client_for_discovery.request_text(request).await.is_ok() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "{name} is Bound but {group} is not served after {:?}",
                    args.timeout
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    println!("{name} created and bound.");
    Ok(())
}

#[cfg(test)]
mod tests {
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
