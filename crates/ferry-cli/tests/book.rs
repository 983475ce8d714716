//! The documentation as a test: README.md and the book under `book/src` must link only
//! to pages and headings that exist, every example file a page names must exist and
//! parse, every YAML block must parse, every page must be in the book's table of
//! contents, and the generated reference pages must match the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::kubectl_async::Kubectl;
use ferry_cli::docs_cmd::anchor;
use ferry_testkit::{eventually, TestHub};
use serde_json::Value;

mod common;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// README.md and every page under book/src, as (path relative to the repo, text).
fn pages() -> BTreeMap<PathBuf, String> {
    let root = repo();
    let mut pages = BTreeMap::new();
    let mut dirs = vec![root.join("book/src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.insert(
                    path.strip_prefix(&root).unwrap().to_path_buf(),
                    std::fs::read_to_string(&path).unwrap(),
                );
            }
        }
    }
    pages.insert(
        "README.md".into(),
        std::fs::read_to_string(root.join("README.md")).unwrap(),
    );
    pages
}

/// A fenced code block: its info string (`sh`, `yaml`), its text, and the line number
/// of its opening fence.
struct Block {
    info: String,
    body: String,
    line: usize,
}

/// The lines of `text` outside fenced code blocks (with their numbers), and the blocks.
fn split_fences(text: &str) -> (Vec<(usize, &str)>, Vec<Block>) {
    let mut prose = Vec::new();
    let mut blocks = Vec::new();
    let mut open: Option<(String, String, usize)> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None if trimmed.starts_with("```") => {
                open = Some((
                    trimmed.trim_start_matches('`').trim().to_string(),
                    String::new(),
                    n + 1,
                ))
            }
            None => prose.push((n + 1, line)),
            Some((info, body, line)) if trimmed.starts_with("```") => blocks.push(Block { info, body, line }),
            Some((info, mut body, start)) => {
                body.push_str(line);
                body.push('\n');
                open = Some((info, body, start));
            }
        }
    }
    (prose, blocks)
}

/// Every heading id of a page, with mdBook's `-1`, `-2` ... for repeated headings.
fn anchors(text: &str) -> BTreeSet<String> {
    let (prose, _) = split_fences(text);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let id = anchor(heading);
        let count = seen.entry(id.clone()).or_default();
        out.insert(if *count == 0 {
            id.clone()
        } else {
            format!("{id}-{count}")
        });
        *count += 1;
    }
    out
}

/// The targets of the Markdown links `[text](target)` on one line, outside inline code.
fn links(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_code = false;
    let bytes: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            '`' => in_code = !in_code,
            ']' if !in_code && bytes.get(i + 1) == Some(&'(') => {
                let rest: String = bytes[i + 2..].iter().collect();
                if let Some(end) = rest.find(')') {
                    out.push(rest[..end].split_whitespace().next().unwrap_or("").to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

#[test]
fn links_and_anchors_resolve() {
    let root = repo();
    let pages = pages();
    let mut broken = Vec::new();
    for (page, text) in &pages {
        let (prose, _) = split_fences(text);
        for (n, line) in prose {
            for target in links(line) {
                if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                    continue;
                }
                let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
                let file = if path.is_empty() {
                    page.clone()
                } else {
                    let joined = page.parent().unwrap().join(path);
                    if !root.join(&joined).exists() {
                        broken.push(format!(
                            "{}:{n}: {target}: no file {}",
                            page.display(),
                            joined.display()
                        ));
                        continue;
                    }
                    normalize(&joined)
                };
                if fragment.is_empty() {
                    continue;
                }
                let Some(target_text) = pages.get(&file) else {
                    broken.push(format!(
                        "{}:{n}: {target}: #{fragment} into a file that is not a page",
                        page.display()
                    ));
                    continue;
                };
                if !anchors(target_text).contains(fragment) {
                    broken.push(format!(
                        "{}:{n}: {target}: no heading #{fragment} in {}",
                        page.display(),
                        file.display()
                    ));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links (fix the link or the heading):\n{}",
        broken.join("\n")
    );
}

/// `a/b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_page_is_in_the_summary() {
    let pages = pages();
    let summary = &pages[Path::new("book/src/SUMMARY.md")];
    let listed: BTreeSet<PathBuf> = summary
        .lines()
        .flat_map(links)
        .map(|l| normalize(&Path::new("book/src").join(l.split('#').next().unwrap())))
        .collect();
    let missing: Vec<_> = pages
        .keys()
        .filter(|p| {
            p.starts_with("book/src") && p.file_name().unwrap() != "SUMMARY.md" && !listed.contains(*p)
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "pages not in book/src/SUMMARY.md (add them): {missing:?}"
    );
}

#[test]
fn yaml_blocks_and_examples_parse() {
    let root = repo();
    let mut problems = Vec::new();
    let mut named = BTreeSet::new();
    for (page, text) in pages() {
        let (_, blocks) = split_fences(&text);
        for Block { info, body, line } in blocks {
            if info == "yaml" {
                if let Err(e) = serde_saphyr::from_multiple::<Value>(&body) {
                    problems.push(format!(
                        "{}:{line}: the yaml block does not parse: {e}",
                        page.display()
                    ));
                }
            }
        }
        for word in text.split(|c: char| c.is_whitespace() || "`()[]'\",;".contains(c)) {
            if let Some(start) = word.find("examples/") {
                let name = word[start..].trim_end_matches(['.', ':']);
                if name.ends_with(".yaml") {
                    named.insert(name.to_string());
                }
            }
        }
    }
    for entry in std::fs::read_dir(root.join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            named.insert(format!(
                "examples/{}",
                path.file_name().unwrap().to_string_lossy()
            ));
        }
    }
    assert!(!named.is_empty(), "no examples/*.yaml found");
    for name in named {
        match std::fs::read_to_string(root.join(&name)) {
            Err(e) => problems.push(format!("{name}: named by a page but cannot be read: {e}")),
            Ok(text) => match serde_saphyr::from_multiple::<Value>(&text) {
                Err(e) => problems.push(format!("{name}: does not parse: {e}")),
                Ok(docs) if docs.iter().all(Value::is_null) => {
                    problems.push(format!("{name}: holds no document"))
                }
                Ok(_) => {}
            },
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn generated_reference_is_current() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["docs", "--out-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ferry docs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in ["commands.md", "crds.md"] {
        let fresh = std::fs::read_to_string(dir.path().join(page)).unwrap();
        let committed =
            std::fs::read_to_string(repo().join("book/src/reference").join(page)).unwrap_or_default();
        assert!(
            fresh == committed,
            "book/src/reference/{page} is stale (a flag or CRD changed): run `cargo run -p ferry-cli -- docs \
             --out-dir book/src/reference` and commit the result"
        );
    }
}

#[test]
fn anchor_rule_is_mdbooks() {
    assert_eq!(
        anchor("`kubectl ferry ws`: moving between workspaces"),
        "kubectl-ferry-ws-moving-between-workspaces"
    );
    assert_eq!(
        anchor("Publishing and binding APIs (kcp's APIExports)"),
        "publishing-and-binding-apis-kcps-apiexports"
    );
    assert_eq!(
        anchors("# A\n## A\n```\n# not a heading\n```\n#hashtag\n"),
        BTreeSet::from(["a".to_string(), "a-1".to_string()])
    );
    assert_eq!(
        links("see [x](a.md#b) and `[y](z)` and [w](c.md)"),
        ["a.md#b", "c.md"]
    );
}

/// What the line before a walkthrough's shell block says about it.
#[derive(Debug, PartialEq)]
enum Marker {
    /// `<!-- test: NAME -->`: the page's test runs it.
    Test(String),
    /// `<!-- not tested: WHY -->`: it cannot run against stand-ins (a real
    /// cluster, a foreground server, a synopsis with placeholders); the reason is
    /// printed by every run of [`every_walkthrough_shell_block_runs_or_says_why_not`].
    NotTested(String),
}

/// The shell blocks of `page` (relative to the repo) with their markers and the
/// line of their opening fence, in the page's order.
fn shell_blocks(page: &str) -> Vec<(Option<Marker>, usize, String)> {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (_, blocks) = split_fences(&text);
    blocks
        .into_iter()
        .filter(|b| b.info == "sh")
        .map(|Block { body, line, .. }| {
            let marker = line
                .checked_sub(2)
                .and_then(|i| lines.get(i))
                .and_then(|l| l.trim().strip_prefix("<!--")?.strip_suffix("-->"))
                .and_then(|m| {
                    let m = m.trim();
                    if let Some(name) = m.strip_prefix("test:") {
                        Some(Marker::Test(name.trim().to_string()))
                    } else {
                        m.strip_prefix("not tested:")
                            .map(|why| Marker::NotTested(why.trim().to_string()))
                    }
                });
            (marker, line, body)
        })
        .collect()
}

/// The shell blocks of `page` marked `<!-- test: NAME -->`, as (name, script).
fn marked_blocks(page: &str) -> Vec<(String, String)> {
    shell_blocks(page)
        .into_iter()
        .filter_map(|(marker, _, body)| match marker {
            Some(Marker::Test(name)) => Some((name, body)),
            _ => None,
        })
        .collect()
}

/// Every walkthrough's shell blocks are run by this file's tests, or say why not
/// (and as few as possible do).
#[test]
fn every_walkthrough_shell_block_runs_or_says_why_not() {
    let dir = repo().join("book/src/walkthroughs");
    let mut unmarked = Vec::new();
    let mut pages: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    for path in pages {
        let page = path.strip_prefix(repo()).unwrap().display().to_string();
        for (marker, line, _) in shell_blocks(&page) {
            match marker {
                Some(Marker::Test(_)) => {}
                Some(Marker::NotTested(why)) => eprintln!("{page}:{line}: not run: {why}"),
                None => unmarked.push(format!("{page}:{line}")),
            }
        }
    }
    assert!(
        unmarked.is_empty(),
        "shell blocks neither run nor saying why not (put <!-- test: NAME --> or \
         <!-- not tested: WHY --> on the line before the fence, and for a test name, run \
         the page in crates/ferry-cli/tests/book.rs):\n{}",
        unmarked.join("\n")
    );
}

/// A directory for a walkthrough's blocks: what a user has after cloning the
/// repository (`examples/`), and nothing else.
fn walkthrough_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(repo().join("examples"), dir.path().join("examples")).unwrap();
    dir
}

/// Processes a walkthrough started in the background (a syncer, an agent, a hub),
/// stopped (SIGTERM) when this drops, so the test can check what they do first.
struct Background(Vec<String>);

impl Drop for Background {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = std::process::Command::new("kill").arg(pid).status();
        }
    }
}

/// Runs the marked blocks of `page` in order in one bash session in `dir`, as a
/// user pasting them into one terminal (variables carry over), with the built
/// `ferry` and `kubectl-ferry` on PATH and `kubectl`'s KUBECONFIG. Fails naming
/// the block that failed, with its output (and stops what the blocks started);
/// else returns what they left running in the background.
async fn run_walkthrough(kubectl: &Kubectl, page: &str, dir: &Path) -> Background {
    let blocks = marked_blocks(page);
    assert!(!blocks.is_empty(), "no block marked <!-- test: ... --> in {page}");
    let jobs = dir.join(".walkthrough-jobs");
    let mut script = format!(
        "trap 'if [ $? -ne 0 ]; then kill $(jobs -p) 2>/dev/null; else jobs -p > {}; fi' EXIT\n",
        jobs.display()
    );
    for (name, body) in &blocks {
        script.push_str(&format!("echo '>>> block {name}' >&2\n{body}\n"));
    }
    let out = kubectl.shell(&script, dir).await;
    let background = Background(
        std::fs::read_to_string(&jobs)
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let failed = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(">>> block "))
        .unwrap_or("?");
    if !out.status.success() {
        // What the page's background processes logged (`> syncer.log 2>&1 &`), the
        // end of each: why a syncer or agent did not do what the block waited for.
        let mut logs = String::new();
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                logs.push_str(&format!("\n--- {} (end):\n", path.display()));
                logs.extend(tail.into_iter().rev().map(|l| format!("{l}\n")));
            }
        }
        panic!(
            "{page}: the block {failed:?} fails as written\nstdout:\n{}\nstderr:\n{stderr}{logs}",
            String::from_utf8_lossy(&out.stdout),
        );
    }
    background
}

/// A walkthrough run against a hub, as its admin, and a hub standing in for the
/// cluster the page names by its kubeconfig file (`east.kubeconfig`). Dropping it
/// stops what the page started, then the hubs.
struct StandInRun {
    /// kubectl as the hub's admin, in the workspace the page left it in.
    kubectl: Kubectl,
    /// kubectl as the stand-in cluster's admin.
    cluster: Kubectl,
    _background: Background,
    _hubs: (TestHub, TestHub),
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

async fn run_against_stand_in(page: &str, cluster_kubeconfig: &str) -> StandInRun {
    // As `ferry hub` starts by default: with kcp's root:compute.
    let hub = TestHub::start_with(|o| o.compute_workspace = true).await;
    let stand_in = TestHub::start().await;
    let home = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::admin_of(&hub, home.path(), "admin.kubeconfig");
    let dir = walkthrough_dir();
    std::fs::copy(stand_in.kubeconfig(), dir.path().join(cluster_kubeconfig)).unwrap();
    let background = run_walkthrough(&kubectl, page, dir.path()).await;
    StandInRun {
        cluster: Kubectl::admin_of(&stand_in, home.path(), cluster_kubeconfig),
        kubectl,
        _background: background,
        _hubs: (hub, stand_in),
        _dirs: (home, dir),
    }
}

/// The KubeStellar walkthrough, run as written against a hub and a hub standing in
/// for florin (`florin.kubeconfig`): every command must succeed, the syncer started
/// as the page shows syncs what the EdgePlacement places on florin, and the
/// EdgePlacement reaches both Locations.
#[tokio::test(flavor = "multi_thread")]
async fn kubestellar_walkthrough_blocks_run_as_written() {
    let run = run_against_stand_in("book/src/walkthroughs/kubestellar.md", "florin.kubeconfig").await;
    eventually(
        60,
        "the placed ConfigMap on florin, synced by the page's syncer",
        || async {
            let out = run
                .cluster
                .run(&["get", "configmap", "httpd-htdocs", "-n", "commonstuff"])
                .await;
            out.status.success().then_some(())
        },
    )
    .await;
    eventually(30, "edge-placement-c to match florin and guilder", || async {
        let count = run
            .kubectl
            .ok(&[
                "get",
                "edgeplacement",
                "edge-placement-c",
                "-o",
                "jsonpath={.status.matchingLocationCount}",
            ])
            .await;
        (count == "2").then_some(())
    })
    .await;
}

/// The kcp TMC walkthrough, run as written against a hub and a hub standing in
/// for the cluster (`east.kubeconfig`): the syncer started as the page shows
/// puts the Deployment's copy on the cluster.
#[tokio::test(flavor = "multi_thread")]
async fn tmc_walkthrough_blocks_run_as_written() {
    let run = run_against_stand_in("book/src/walkthroughs/tmc.md", "east.kubeconfig").await;
    eventually(60, "kuard's copy on the cluster", || async {
        let copies = run
            .cluster
            .ok(&[
                "get",
                "deployments",
                "-A",
                "-l",
                "internal.workload.kcp.io/cluster",
                "-o",
                "name",
            ])
            .await;
        (copies.trim() == "deployment.apps/kuard").then_some(())
    })
    .await;
}

/// A walkthrough that starts its own servers and exports its own KUBECONFIG: what
/// it left running, the directory it ran in, and its HOME.
async fn run_self_contained(page: &str) -> (Background, tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::new(home.path().join("unused.kubeconfig"), home.path());
    let dir = walkthrough_dir();
    (run_walkthrough(&kubectl, page, dir.path()).await, dir, home)
}

/// The hub walkthrough: the hub the page starts answers kubectl, `/readyz` and
/// `/metrics` as the page shows.
#[tokio::test(flavor = "multi_thread")]
async fn hub_walkthrough_blocks_run_as_written() {
    let _hub = run_self_contained("book/src/walkthroughs/hub.md").await;
}

/// The api-syncagent walkthrough, run as written against a hub and a hub standing
/// in for the service cluster (`service.kubeconfig`): the agent started as the page
/// shows publishes the Database, and the consumer's Database lands on the cluster.
#[tokio::test(flavor = "multi_thread")]
async fn api_syncagent_walkthrough_blocks_run_as_written() {
    let run = run_against_stand_in("book/src/walkthroughs/api-syncagent.md", "service.kubeconfig").await;
    eventually(60, "the consumer's Database on the service cluster", || async {
        let copies = run
            .cluster
            .ok(&[
                "get",
                "databases.example.com",
                "-A",
                "-o",
                "jsonpath={.items[*].spec.engine}",
            ])
            .await;
        (copies == "postgres").then_some(())
    })
    .await;
}

/// The HA walkthrough (three etcd members, three hub replicas, two syncers; the
/// leading syncer, a replica and a member killed), run as written. It needs
/// `etcd` on PATH (Debian's etcd-server, which CI installs); without it the test
/// says so and passes.
#[tokio::test(flavor = "multi_thread")]
async fn ha_walkthrough_blocks_run_as_written() {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if !std::env::split_paths(&path).any(|d| d.join("etcd").is_file()) {
        eprintln!("SKIPPED: the HA walkthrough needs etcd on PATH (apt-get install etcd-server)");
        return;
    }
    let (_cluster, dir, _home) = run_self_contained("book/src/walkthroughs/ha-etcd.md").await;
    let read = |f: &str| std::fs::read_to_string(dir.path().join("ha").join(f)).unwrap();
    let (acked, present) = (read("acked"), read("present"));
    let present: std::collections::BTreeSet<&str> = present.lines().collect();
    let lost: Vec<&str> = acked.lines().filter(|w| !present.contains(w)).collect();
    assert!(acked.lines().count() > 0, "the writer had no write acknowledged");
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
}

/// Users never saw the reference documents Ferry was built from under the name
/// "seed": README and the book name the upstream documents (kcp's, KubeStellar's)
/// or say what they are.
#[test]
fn no_page_refers_to_the_seeds() {
    let mut found = Vec::new();
    for (path, text) in pages() {
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            let word = lower
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w == "seed" || w == "seeds");
            if word {
                found.push(format!("{}:{}: {line}", path.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "pages naming the seeds:\n{}", found.join("\n"));
}

/// The licence Cargo.toml declares is at the root, where users and packagers
/// look, and README names it.
#[test]
fn the_license_cargo_declares_is_at_the_root() {
    let root = repo();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("license = \"Apache-2.0\""),
        "Cargo.toml's licence changed"
    );
    let license = std::fs::read_to_string(root.join("LICENSE")).expect("a LICENSE file at the root");
    assert!(license.contains("Apache License") && license.contains("Version 2.0"));
    assert!(pages()[Path::new("README.md")].contains("Apache-2.0"));
}

/// The Install page names the image `ferry syncagent-gen` writes by default
/// (as `--help` says it) and how to build one from the repository's
/// Dockerfile, which exists.
#[test]
fn install_names_the_default_image_and_how_to_build_it() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["syncagent-gen", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let image = help
        .split("--image <IMAGE>")
        .nth(1)
        .and_then(|rest| rest.split("[default: ").nth(1))
        .and_then(|rest| rest.split(']').next())
        .unwrap_or_else(|| panic!("no default image in `ferry syncagent-gen --help`:\n{help}"));
    let install = &pages()[Path::new("book/src/install.md")];
    assert!(
        install.contains(image),
        "book/src/install.md does not name {image}"
    );
    assert!(
        install.contains("docker build -t ferry:dev ."),
        "no build instruction"
    );
    assert!(repo().join("Dockerfile").is_file());
}
