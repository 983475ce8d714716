//! `kubectl ferry ws`: move between a hub's workspaces the way kcp's
//! `kubectl ws` plugin does, by editing the kubeconfig in effect.
//!
//! Entering a workspace writes a cluster and a context both named
//! `workspace.kcp.io/current` (a copy of the current context's cluster with
//! the server URL at `https://HOST/clusters/<path>`), keeps what was current
//! as `workspace.kcp.io/previous` (for `ws -`), and makes
//! `workspace.kcp.io/current` the current context. Names are resolved as kcp
//! resolves them: `a` and `a:b` below the current workspace, `:root:a` (or
//! `root:a`, as the seeds write it) from the top, `..` up, `:` to the root,
//! `-` back. Messages are kcp's, as the seeds show them
//! (`Current workspace is "root:my-org" (type "root:organization").`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use futures::future::BoxFuture;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{json, Value};

use crate::kubeconfig_file::{Edit, KubeconfigFiles, Merged};

/// The cluster and context kcp's plugin writes for the workspace entered.
pub const CURRENT: &str = "workspace.kcp.io/current";
/// The cluster and context it keeps for the workspace left (`ws -`).
pub const PREVIOUS: &str = "workspace.kcp.io/previous";
/// The root workspace.
pub const ROOT: &str = "root";
/// How long `ws create` waits for a new workspace to be Ready (kcp's default).
pub const READY_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WsArgs {
    #[command(subcommand)]
    pub command: Option<WsCommand>,
    /// Workspace to enter (short for `ws use`): NAME or a:b below the current
    /// workspace, :root:a or root:a from the top, .. for the parent, : for the
    /// root, - for the previous one; `.` prints the current one.
    pub workspace: Option<String>,
    /// Print only the workspace path (for shell prompts).
    #[arg(long)]
    pub short: bool,
    #[command(flatten)]
    pub kube: KubeFlags,
}

/// Which kubeconfig, as kubectl takes it.
#[derive(clap::Args, Clone, Default)]
pub struct KubeFlags {
    /// Kubeconfig to read and edit (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Context to start from (default: the current context).
    #[arg(long, global = true)]
    pub context: Option<String>,
}

#[derive(clap::Subcommand)]
pub enum WsCommand {
    /// Create a workspace in the current workspace.
    Create(CreateArgs),
    /// Enter a workspace (NAME, a:b, :root:a, root:a, .., :, -, or . to print the current one)
    #[command(alias = "cd")]
    Use(UseArgs),
    /// Print the current workspace (same as `ws .`).
    Current(CurrentArgs),
    /// Print the tree of workspaces below the current one.
    Tree(TreeArgs),
}

#[derive(clap::Args)]
pub struct CreateArgs {
    /// Name of the new workspace.
    pub name: String,
    /// Workspace type: `universal` (the default), `organization` or `team`,
    /// alone or with their path (`root:organization`).
    #[arg(long = "type")]
    pub type_: Option<String>,
    /// Enter the workspace once it is ready.
    #[arg(long)]
    pub enter: bool,
    /// Succeed if the workspace already exists (with the same type).
    #[arg(long)]
    pub ignore_existing: bool,
}

#[derive(clap::Args)]
pub struct UseArgs {
    /// The workspace (see `kubectl ferry ws --help`).
    pub workspace: String,
    /// Print only the workspace path.
    #[arg(long)]
    pub short: bool,
}

#[derive(clap::Args)]
pub struct CurrentArgs {
    /// Print only the workspace path.
    #[arg(long)]
    pub short: bool,
}

#[derive(clap::Args)]
pub struct TreeArgs {
    /// Show full workspace paths.
    #[arg(short, long)]
    pub full: bool,
}

pub async fn run(args: WsArgs) -> anyhow::Result<()> {
    let mut session = Session::open(&args.kube).await?;
    let out = match args.command {
        Some(WsCommand::Create(c)) => session.create(&c).await?,
        Some(WsCommand::Use(u)) => session.enter(&u.workspace, u.short).await?,
        Some(WsCommand::Current(c)) => current_message(&session.server, c.short, None),
        Some(WsCommand::Tree(t)) => session.tree(t.full).await?,
        None => match args.workspace {
            Some(w) => session.enter(&w, args.short).await?,
            None => bail!(
                "the hub has no home workspaces: name one (kubectl ferry ws :root, kubectl ferry ws NAME), \
                 or print the current one with kubectl ferry ws ."
            ),
        },
    };
    print!("{out}");
    Ok(())
}

// ---------------------------------------------------------------------------
// Paths and messages (pure).

/// `https://HOST[/prefix]/clusters/<path>[/...]` split into the URL before
/// `/clusters/` and the workspace path; `None` when the URL addresses no
/// workspace (kcp's `ParseClusterURL`).
pub fn parse_cluster_url(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let path_start = rest.find('/')?;
    let (host, path) = rest.split_at(path_start);
    let at = path.find("/clusters/")?;
    let cluster = path[at + "/clusters/".len()..].split('/').next()?;
    is_valid_path(cluster).then(|| (format!("{scheme}://{host}{}", &path[..at]), cluster.to_string()))
}

/// A workspace path: `:`-separated names of lowercase letters, digits and
/// `-`, starting and ending with a letter or digit.
pub fn is_valid_path(path: &str) -> bool {
    !path.is_empty() && path.split(':').all(is_valid_segment)
}

fn is_valid_segment(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty() && s.chars().all(|c| ok(c) || c == '-') && s.starts_with(ok) && s.ends_with(ok)
}

/// Where `ws use <arg>` leads from `current`: an absolute path, and whether
/// `arg` named a workspace directly below (kcp then reports its type).
#[derive(Debug, PartialEq, Eq)]
pub struct Resolved {
    pub path: String,
    pub child: bool,
}

pub fn resolve(current: &str, arg: &str) -> Result<Resolved, String> {
    let name = arg.replace('/', ":");
    let absolute = if name == ":" {
        current.split(':').next().unwrap_or(ROOT).to_string()
    } else if let Some(rest) = name.strip_prefix(':') {
        rest.to_string()
    } else if name == ROOT || name.starts_with("root:") {
        // Older kcp (and the seeds) write absolute paths without the colon.
        name.clone()
    } else {
        format!("{current}:{name}")
    };
    let mut path: Vec<&str> = Vec::new();
    for part in absolute.split(':') {
        match part {
            "." => {}
            ".." => {
                if path.len() <= 1 {
                    return Err("cannot go up from root".into());
                }
                path.pop();
            }
            p => path.push(p),
        }
    }
    let path = path.join(":");
    if !is_valid_path(&path) {
        return Err(format!("invalid workspace path: {arg}"));
    }
    Ok(Resolved {
        path,
        child: is_valid_segment(&name) && name != ROOT,
    })
}

/// What `ws .` and `ws use` print (kcp's messages).
pub fn current_message(server: &str, short: bool, workspace_type: Option<&str>) -> String {
    match (parse_cluster_url(server), short) {
        (None, true) => String::new(),
        (None, false) => format!("Current workspace is the URL \"{server}\".\n"),
        (Some((_, path)), true) => format!("{path}\n"),
        (Some((_, path)), false) => match workspace_type {
            Some(t) => format!("Current workspace is \"{path}\" (type \"{t}\").\n"),
            None => format!("Current workspace is \"{path}\".\n"),
        },
    }
}

/// A Workspace's type as kcp writes it: `root:universal`.
fn type_of(ws: &Value) -> String {
    let s = |p: &str| ws.pointer(p).and_then(Value::as_str).unwrap_or_default();
    match (s("/spec/type/path"), s("/spec/type/name")) {
        ("", name) => name.to_string(),
        (path, name) => format!("{path}:{name}"),
    }
}

/// `--type` as kcp's `{name, path}`: `organization` names a type (the hub
/// finds it in root), `root:organization` gives its path too.
pub fn parse_type(t: &str) -> Value {
    match t.rsplit_once(':') {
        Some((path, name)) => json!({"name": name.to_ascii_lowercase(), "path": path}),
        None => json!({"name": t.to_ascii_lowercase()}),
    }
}

/// The edits that enter `server` from context `current` (kcp's `commitConfig`).
pub fn enter_edits(start: &Merged, current: &str, server: &str) -> anyhow::Result<Vec<Edit>> {
    let context = start
        .contexts
        .get(current)
        .with_context(|| format!("current context {current:?} not found in the kubeconfig"))?;
    let cluster_name = str_field(context, "cluster");
    let old_cluster = start
        .clusters
        .get(&cluster_name)
        .with_context(|| format!("cluster {cluster_name:?} not found in the kubeconfig"))?;
    let mut new_cluster = old_cluster.clone();
    set_field(&mut new_cluster, "server", json!(server));
    let mut new_context = context.clone();
    set_field(&mut new_context, "cluster", json!(CURRENT));
    let mut edits = vec![
        Edit::Cluster(CURRENT.into(), new_cluster),
        Edit::Context(CURRENT.into(), new_context),
    ];
    // What was current becomes previous; its cluster entry is about to be
    // overwritten, so it moves too.
    let mut previous = context.clone();
    if cluster_name == CURRENT {
        set_field(&mut previous, "cluster", json!(PREVIOUS));
        edits.push(Edit::Cluster(PREVIOUS.into(), old_cluster.clone()));
    }
    edits.push(Edit::Context(PREVIOUS.into(), previous));
    edits.push(Edit::CurrentContext(CURRENT.into()));
    Ok(edits)
}

/// The edits that go back to the previous workspace, and its server URL
/// (kcp's `swapContexts`).
pub fn swap_edits(start: &Merged, current: &str) -> anyhow::Result<(Vec<Edit>, String)> {
    let context = start
        .contexts
        .get(current)
        .with_context(|| format!("current context {current:?} not found in the kubeconfig"))?;
    let Some(prev) = start.contexts.get(PREVIOUS) else {
        bail!("no previous workspace found in kubeconfig");
    };
    let mut edits = Vec::new();
    let mut clusters = start.clusters.clone();
    let mut context = context.clone();
    if str_field(&context, "cluster") == CURRENT {
        let old = start
            .clusters
            .get(CURRENT)
            .with_context(|| format!("cluster {CURRENT:?} not found in kubeconfig"))?;
        set_field(&mut context, "cluster", json!(PREVIOUS));
        clusters.insert(PREVIOUS.into(), old.clone());
        edits.push(Edit::Cluster(PREVIOUS.into(), old.clone()));
    }
    let mut prev = prev.clone();
    if str_field(&prev, "cluster") == PREVIOUS {
        let old = start
            .clusters
            .get(PREVIOUS)
            .with_context(|| format!("cluster {PREVIOUS:?} not found in kubeconfig"))?;
        set_field(&mut prev, "cluster", json!(CURRENT));
        clusters.insert(CURRENT.into(), old.clone());
        edits.push(Edit::Cluster(CURRENT.into(), old.clone()));
    }
    let server = clusters
        .get(&str_field(&prev, "cluster"))
        .map(|c| str_field(c, "server"))
        .unwrap_or_default();
    edits.push(Edit::Context(CURRENT.into(), prev));
    edits.push(Edit::Context(PREVIOUS.into(), context));
    edits.push(Edit::CurrentContext(CURRENT.into()));
    Ok((edits, server))
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn set_field(v: &mut Value, key: &str, value: Value) {
    if !v.is_object() {
        *v = json!({});
    }
    if let Some(m) = v.as_object_mut() {
        m.insert(key.into(), value);
    }
}

/// One workspace in `ws tree`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    pub name: String,
    pub children: Vec<TreeNode>,
}

// Annotation on a KubeStellar mailbox Workspace: the logical cluster of its
// SyncTarget's inventory workspace (the hub's mailbox controller writes it).
use ferry_api::edge::mailbox::INVENTORY_CLUSTER_ANNOTATION;

/// What `ws tree` learnt on its walk: each workspace's path by logical
/// cluster, and each mailbox's SyncTarget and inventory cluster by shown name.
#[derive(Default)]
pub struct Seen {
    pub paths: std::collections::HashMap<String, String>,
    pub mailboxes: std::collections::HashMap<String, (String, String)>,
}

/// Mailbox workspaces say whose they are: `<name> (SyncTarget florin in
/// root:imw1)`, the inventory workspace by path when the walk saw it, else
/// by logical cluster.
pub fn name_mailboxes(node: &mut TreeNode, seen: &Seen) {
    if let Some((target, inventory)) = seen.mailboxes.get(&node.name) {
        let inventory = seen.paths.get(inventory).unwrap_or(inventory);
        node.name = format!("{} (SyncTarget {target} in {inventory})", node.name);
    }
    for child in &mut node.children {
        name_mailboxes(child, seen);
    }
}

/// The tree as kcp prints it (treeprint's layout, under a `.` line).
pub fn render_tree(root: &TreeNode) -> String {
    fn walk(out: &mut String, node: &TreeNode, ended: &mut Vec<bool>, last: bool) {
        for &e in ended.iter() {
            out.push_str(if e { "    " } else { "│   " });
        }
        out.push_str(if last { "└── " } else { "├── " });
        out.push_str(&node.name);
        out.push('\n');
        ended.push(last);
        let n = node.children.len();
        for (i, child) in node.children.iter().enumerate() {
            walk(out, child, ended, i + 1 == n);
        }
        ended.pop();
    }
    let mut out = String::from(".\n");
    walk(&mut out, root, &mut Vec::new(), true);
    // kcp prints the tree with Println: one blank line after it.
    out.push('\n');
    out
}

// ---------------------------------------------------------------------------
// Talking to the hub.

fn workspaces_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("tenancy.kcp.io", "v1alpha1", "Workspace"),
        "workspaces",
    )
}

/// A request's failure as the server said it (its Status message), or the
/// transport error.
fn api_error(e: kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(s) if !s.message.is_empty() => anyhow::Error::msg(s.message),
        other => other.into(),
    }
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// The kubeconfig in effect and the context being used.
struct Session {
    files: KubeconfigFiles,
    start: Merged,
    context: String,
    /// The server URL of the context's cluster.
    server: String,
    /// Credentials for requests (pointed at a workspace per request).
    config: kube::Config,
}

impl Session {
    async fn open(flags: &KubeFlags) -> anyhow::Result<Session> {
        let files = KubeconfigFiles::load(flags.kubeconfig.as_deref())?;
        let start = files.merged();
        let context = match &flags.context {
            Some(c) => c.clone(),
            None if start.current_context.is_empty() => {
                bail!("the kubeconfig has no current context; pass --context")
            }
            None => start.current_context.clone(),
        };
        let ctx = start
            .contexts
            .get(&context)
            .with_context(|| format!("context {context:?} not found in the kubeconfig"))?;
        let cluster = str_field(ctx, "cluster");
        let server = start
            .clusters
            .get(&cluster)
            .map(|c| str_field(c, "server"))
            .with_context(|| {
                format!("cluster {cluster:?} (of context {context:?}) not found in the kubeconfig")
            })?;
        let config = files.client_config(&context).await?;
        Ok(Session {
            files,
            start,
            context,
            server,
            config,
        })
    }

    /// The URL before `/clusters/` and the current workspace's path.
    fn current(&self) -> anyhow::Result<(String, String)> {
        parse_cluster_url(&self.server).with_context(|| {
            format!(
                "current URL {:?} does not point to a workspace: its path has no /clusters/<workspace>; \
                 point the context at https://HOST/clusters/root (as the hub's admin.kubeconfig does)",
                self.server
            )
        })
    }

    fn client(&self, base: &str, path: &str) -> anyhow::Result<kube::Client> {
        let mut config = self.config.clone();
        config.cluster_url = format!("{base}/clusters/{path}")
            .parse()
            .with_context(|| format!("workspace URL for {path:?}"))?;
        Ok(kube::Client::try_from(config)?)
    }

    fn workspaces(&self, base: &str, path: &str) -> anyhow::Result<Api<DynamicObject>> {
        Ok(Api::all_with(self.client(base, path)?, &workspaces_resource()))
    }

    /// `ws use`: check the workspace can be entered, then enter it.
    async fn enter(&mut self, arg: &str, short: bool) -> anyhow::Result<String> {
        match arg {
            "." => return Ok(current_message(&self.server, short, None)),
            "-" => {
                let (edits, server) = swap_edits(&self.start, &self.context)?;
                self.files.apply(&edits);
                self.files.save()?;
                return Ok(current_message(&server, short, None));
            }
            "~" | "" => bail!(
                "the hub has no home workspaces: name one (kubectl ferry ws :root, kubectl ferry ws NAME)"
            ),
            _ => {}
        }
        let (base, current) = self.current()?;
        let target = resolve(&current, arg).map_err(anyhow::Error::msg)?;
        let path = target.path;

        // As kcp: discovery says whether the workspace is reachable, its
        // Workspace object in the parent whether it exists.
        let (denied, missing) = match self.client(&base, &path)?.list_api_groups().await {
            Ok(groups) => (groups.groups.is_empty(), false),
            Err(e) => match api_code(&e) {
                Some(401 | 403) => (true, false),
                Some(404) => (false, true),
                _ => return Err(api_error(e).context(format!("reaching workspace {path:?}"))),
            },
        };
        let mut workspace_type = None;
        let mut not_found = false;
        if path == ROOT {
            workspace_type = Some(ROOT.to_string());
        } else if let Some((parent, name)) = path.rsplit_once(':') {
            match self.workspaces(&base, parent)?.get(name).await {
                Ok(ws) => {
                    let ws = serde_json::to_value(&ws)?;
                    let phase = ws
                        .pointer("/status/phase")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    if phase != "Ready" && !missing && !denied {
                        bail!("workspace {path:?} is not ready (phase {phase:?})");
                    }
                    workspace_type = Some(type_of(&ws));
                }
                Err(e) if api_code(&e) == Some(404) => not_found = true,
                // A parent one may not read is no reason to stay out.
                Err(_) => {}
            }
        }
        if missing || (denied && not_found) {
            let hint = match path.rsplit_once(':') {
                Some((parent, name)) => {
                    format!(": create it with \"kubectl ferry ws create {name}\" in {parent:?}")
                }
                None => String::new(),
            };
            bail!("workspace {path:?} not found{hint}");
        }
        if denied {
            bail!("access to workspace {path:?} denied");
        }
        let server = format!("{base}/clusters/{path}");
        let edits = enter_edits(&self.start, &self.context, &server)?;
        self.files.apply(&edits);
        self.files.save()?;
        let shown_type = if target.child { workspace_type } else { None };
        Ok(current_message(&server, short, shown_type.as_deref()))
    }

    /// `ws create`: create the Workspace, wait until it is Ready, enter it
    /// when asked.
    async fn create(&mut self, args: &CreateArgs) -> anyhow::Result<String> {
        let (base, current) = self.current()?;
        if args.ignore_existing {
            if let Some(t) = &args.type_ {
                if t != ROOT && !t.starts_with("root:") {
                    bail!("--ignore-existing must not be used with non-absolute type path");
                }
            }
        }
        let wanted_type = args.type_.as_deref().map(parse_type);
        let mut spec = json!({});
        if let Some(t) = &wanted_type {
            spec["type"] = t.clone();
        }
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "kind": "Workspace",
            "metadata": {"name": args.name},
            "spec": spec,
        }))?;
        let api = self.workspaces(&base, &current)?;
        let mut out = String::new();
        let (ws, existed) = match api.create(&PostParams::default(), &object).await {
            Ok(ws) => (ws, false),
            Err(e) if api_code(&e) == Some(409) && args.ignore_existing => (
                api.get(&args.name)
                    .await
                    .map_err(api_error)
                    .with_context(|| format!("reading workspace {:?} in {current:?}", args.name))?,
                true,
            ),
            Err(e) if api_code(&e) == Some(409) => bail!(
                "workspace {:?} already exists in {current:?}; pass --ignore-existing to use it as it is",
                args.name
            ),
            Err(e) => {
                return Err(api_error(e))
                    .with_context(|| format!("creating workspace {:?} in {current:?}", args.name))
            }
        };
        let mut ws = serde_json::to_value(&ws)?;
        let reference = format!("Workspace {:?} (type {})", args.name, type_of(&ws));
        let ready = |ws: &Value| ws.pointer("/status/phase").and_then(Value::as_str) == Some("Ready");
        if existed {
            if let Some(t) = &wanted_type {
                let asked = format!("{}:{}", str_field(t, "path"), str_field(t, "name"));
                if asked != type_of(&ws) {
                    bail!(
                        "workspace {:?} cannot be created with type {asked}, it already exists with different type {}",
                        args.name,
                        type_of(&ws)
                    );
                }
            }
            if ready(&ws) {
                out += &format!("{reference} already exists.\n");
            } else {
                out += &format!("{reference} already exists. Waiting for it to be ready...\n");
            }
        } else {
            // The seeds show this line even when the workspace is ready at once.
            out += &format!("{reference} created. Waiting for it to be ready...\n");
        }
        print!("{out}");
        out.clear();
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        while !ready(&ws) {
            if tokio::time::Instant::now() > deadline {
                let phase = ws
                    .pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                bail!(
                    "workspace {:?} did not become ready within {}s (phase {phase:?})",
                    args.name,
                    READY_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            ws = serde_json::to_value(
                api.get(&args.name)
                    .await
                    .map_err(api_error)
                    .with_context(|| format!("reading workspace {:?} in {current:?}", args.name))?,
            )?;
        }
        out += &format!("{reference} is ready to use.\n");
        if args.enter {
            print!("{out}");
            out.clear();
            out += &self.enter(&args.name, false).await?;
        }
        Ok(out)
    }

    /// `ws tree`: the workspaces below the current one.
    async fn tree(&self, full: bool) -> anyhow::Result<String> {
        let Some((base, current)) = parse_cluster_url(&self.server) else {
            return Ok(format!(
                "current context URL {:?} does not point directly to a kcp workspace\n",
                self.server
            ));
        };
        let name = if full {
            current.clone()
        } else {
            current.rsplit(':').next().unwrap_or(&current).to_string()
        };
        let seen = std::sync::Mutex::new(Seen::default());
        let children = self
            .children(&base, current.clone(), name.clone(), full, &seen)
            .await?;
        let mut root = TreeNode { name, children };
        name_mailboxes(&mut root, &seen.into_inner().unwrap_or_default());
        Ok(render_tree(&root))
    }

    fn children<'a>(
        &'a self,
        base: &'a str,
        path: String,
        shown: String,
        full: bool,
        seen: &'a std::sync::Mutex<Seen>,
    ) -> BoxFuture<'a, anyhow::Result<Vec<TreeNode>>> {
        Box::pin(async move {
            let list = match self.workspaces(base, &path)?.list(&Default::default()).await {
                Ok(l) => l,
                // A workspace one may see but not enter shows as a leaf
                // (kcp fails the whole tree there).
                Err(e) if matches!(api_code(&e), Some(403 | 404)) => return Ok(Vec::new()),
                Err(e) => {
                    return Err(api_error(e)).with_context(|| format!("listing the workspaces in {path:?}"))
                }
            };
            let mut nodes = Vec::new();
            for ws in list.items {
                if ws.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let ws_name = ws.metadata.name.clone().unwrap_or_default();
                let url = ws
                    .data
                    .pointer("/spec/URL")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let child_path = parse_cluster_url(url)
                    .map(|(_, p)| p)
                    .unwrap_or_else(|| format!("{path}:{ws_name}"));
                let name = if full {
                    format!("{shown}:{ws_name}")
                } else {
                    ws_name
                };
                if let Ok(mut seen) = seen.lock() {
                    let at = |p: &str| ws.data.pointer(p).and_then(Value::as_str).map(String::from);
                    if let Some(cluster) = at("/spec/cluster") {
                        seen.paths.insert(cluster, child_path.clone());
                    }
                    let annotation =
                        |k: &str| ws.metadata.annotations.as_ref().and_then(|a| a.get(k)).cloned();
                    if let (Some(target), Some(inventory)) = (
                        annotation(ferry_api::well_known::SYNC_TARGET_NAME_ANNOTATION),
                        annotation(INVENTORY_CLUSTER_ANNOTATION),
                    ) {
                        seen.mailboxes.insert(name.clone(), (target, inventory));
                    }
                }
                let children = self.children(base, child_path, name.clone(), full, seen).await?;
                nodes.push(TreeNode { name, children });
            }
            Ok(nodes)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailboxes_say_whose_they_are() {
        let leaf = |name: &str| TreeNode {
            name: name.into(),
            children: vec![],
        };
        let mut root = TreeNode {
            name: "root".into(),
            children: vec![leaf("imw1"), leaf("c1-mb-u1"), leaf("c9-mb-u2")],
        };
        let mut seen = Seen::default();
        seen.paths.insert("c1".into(), "root:imw1".into());
        seen.mailboxes
            .insert("c1-mb-u1".into(), ("florin".into(), "c1".into()));
        seen.mailboxes
            .insert("c9-mb-u2".into(), ("guilder".into(), "c9".into()));
        name_mailboxes(&mut root, &seen);
        let names: Vec<&str> = root.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "imw1",
                "c1-mb-u1 (SyncTarget florin in root:imw1)",
                "c9-mb-u2 (SyncTarget guilder in c9)"
            ]
        );
    }

    #[test]
    fn cluster_urls_split_into_base_and_path() {
        assert_eq!(
            parse_cluster_url("https://127.0.0.1:6443/clusters/root:a"),
            Some(("https://127.0.0.1:6443".into(), "root:a".into()))
        );
        assert_eq!(
            parse_cluster_url("https://h/prefix/clusters/root/api/v1"),
            Some(("https://h/prefix".into(), "root".into()))
        );
        assert_eq!(parse_cluster_url("https://127.0.0.1:6443"), None);
        assert_eq!(parse_cluster_url("https://h/clusters/Root"), None);
    }

    #[test]
    fn names_resolve_like_kcp() {
        let r = |arg: &str| resolve("root:org", arg);
        let abs = |p: &str, child: bool| {
            Ok(Resolved {
                path: p.into(),
                child,
            })
        };
        assert_eq!(r("team"), abs("root:org:team", true));
        assert_eq!(r("team:sub"), abs("root:org:team:sub", false));
        assert_eq!(r(".."), abs("root", false));
        assert_eq!(r("..:other"), abs("root:other", false));
        assert_eq!(r(":root:x"), abs("root:x", false));
        assert_eq!(r("root:x"), abs("root:x", false));
        assert_eq!(r("root"), abs("root", false));
        assert_eq!(r(":"), abs("root", false));
        assert_eq!(r("team/sub"), abs("root:org:team:sub", false));
        assert_eq!(resolve("root", ".."), Err("cannot go up from root".into()));
        assert_eq!(r("Bad_Name"), Err("invalid workspace path: Bad_Name".to_string()));
        assert!(r("a::b").is_err());
    }

    #[test]
    fn messages_are_kcps() {
        let url = "https://h:1/clusters/root:my-org";
        assert_eq!(
            current_message(url, false, Some("root:organization")),
            "Current workspace is \"root:my-org\" (type \"root:organization\").\n"
        );
        assert_eq!(
            current_message(url, false, None),
            "Current workspace is \"root:my-org\".\n"
        );
        assert_eq!(current_message(url, true, None), "root:my-org\n");
        assert_eq!(
            current_message("https://h:1", false, None),
            "Current workspace is the URL \"https://h:1\".\n"
        );
        assert_eq!(current_message("https://h:1", true, None), "");
    }

    #[test]
    fn types_parse_like_kcp() {
        assert_eq!(parse_type("organization"), json!({"name": "organization"}));
        assert_eq!(
            parse_type("root:Organization"),
            json!({"name": "organization", "path": "root"})
        );
        assert_eq!(
            type_of(&json!({"spec": {"type": {"name": "universal", "path": "root"}}})),
            "root:universal"
        );
    }

    fn start() -> Merged {
        let mut m = Merged::default();
        m.clusters.insert(
            "hub".into(),
            json!({"server": "https://h/clusters/root", "certificate-authority-data": "QQ=="}),
        );
        m.contexts
            .insert("admin".into(), json!({"cluster": "hub", "user": "admin"}));
        m.current_context = "admin".into();
        m
    }

    /// The merged view after `edits` (what the files hold once written).
    fn after(mut m: Merged, edits: &[Edit]) -> Merged {
        for e in edits {
            match e {
                Edit::Cluster(n, v) => {
                    m.clusters.insert(n.clone(), v.clone());
                }
                Edit::Context(n, v) => {
                    m.contexts.insert(n.clone(), v.clone());
                }
                Edit::CurrentContext(n) => m.current_context = n.clone(),
            }
        }
        m
    }

    fn server_of(m: &Merged) -> String {
        let ctx = &m.contexts[&m.current_context];
        str_field(&m.clusters[&str_field(ctx, "cluster")], "server")
    }

    #[test]
    fn entering_writes_kcps_current_and_previous_entries() {
        let m0 = start();
        let m1 = after(
            m0.clone(),
            &enter_edits(&m0, "admin", "https://h/clusters/root:a").unwrap(),
        );
        assert_eq!(m1.current_context, CURRENT);
        assert_eq!(server_of(&m1), "https://h/clusters/root:a");
        assert_eq!(m1.contexts[CURRENT]["user"], "admin");
        assert_eq!(m1.clusters[CURRENT]["certificate-authority-data"], "QQ==");
        // The original entries are untouched; previous is the admin context.
        assert_eq!(m1.clusters["hub"], m0.clusters["hub"]);
        assert_eq!(m1.contexts[PREVIOUS], m0.contexts["admin"]);

        // Entering again moves the current cluster to previous.
        let m2 = after(
            m1.clone(),
            &enter_edits(&m1, CURRENT, "https://h/clusters/root:b").unwrap(),
        );
        assert_eq!(server_of(&m2), "https://h/clusters/root:b");
        assert_eq!(m2.contexts[PREVIOUS]["cluster"], PREVIOUS);
        assert_eq!(m2.clusters[PREVIOUS]["server"], "https://h/clusters/root:a");

        // `ws -` swaps them, twice over.
        let (edits, server) = swap_edits(&m2, CURRENT).unwrap();
        assert_eq!(server, "https://h/clusters/root:a");
        let m3 = after(m2.clone(), &edits);
        assert_eq!(server_of(&m3), "https://h/clusters/root:a");
        let (edits, server) = swap_edits(&m3, CURRENT).unwrap();
        assert_eq!(server, "https://h/clusters/root:b");
        assert_eq!(server_of(&after(m3, &edits)), "https://h/clusters/root:b");
    }

    #[test]
    fn swapping_without_a_previous_workspace_fails() {
        let err = swap_edits(&start(), "admin").unwrap_err();
        assert_eq!(err.to_string(), "no previous workspace found in kubeconfig");
    }

    #[test]
    fn trees_print_as_treeprint_does() {
        let leaf = |n: &str| TreeNode {
            name: n.into(),
            children: vec![],
        };
        let tree = TreeNode {
            name: "root".into(),
            children: vec![
                TreeNode {
                    name: "a".into(),
                    children: vec![leaf("a1"), leaf("a2")],
                },
                leaf("b"),
            ],
        };
        assert_eq!(
            render_tree(&tree),
            ".\n└── root\n    ├── a\n    │   ├── a1\n    │   └── a2\n    └── b\n\n"
        );
    }
}
