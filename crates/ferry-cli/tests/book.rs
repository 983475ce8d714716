//! The documentation as a test: README.md and the book under `book/src` must link only
//! to pages and headings that exist, every example file a page names must exist and
//! parse, every YAML block must parse, every page must be in the book's table of
//! contents, and the generated reference pages must match the code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ferry_cli::docs_cmd::anchor;
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

/// The shell blocks of `page` marked `<!-- test: NAME -->` on the line before their
/// fence, as (name, script), in the page's order.
fn marked_blocks(page: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (_, blocks) = split_fences(&text);
    blocks
        .into_iter()
        .filter(|b| b.info == "sh")
        .filter_map(|Block { body, line, .. }| {
            let marker = lines.get(line.checked_sub(2)?)?.trim();
            let name = marker.strip_prefix("<!-- test:")?.strip_suffix("-->")?.trim();
            Some((name.to_string(), body))
        })
        .collect()
}

/// The KubeStellar walkthrough's placement block, run as written in bash with the
/// built `ferry` and `kubectl-ferry` on PATH, against a hub as its admin: every
/// command must succeed, and the EdgePlacement it applies must reach both Locations.
#[tokio::test(flavor = "multi_thread")]
async fn kubestellar_walkthrough_blocks_run_as_written() {
    let blocks = marked_blocks("book/src/walkthroughs/kubestellar.md");
    assert!(
        !blocks.is_empty(),
        "no block marked <!-- test: ... --> in the KubeStellar walkthrough"
    );
    let hub = ferry_hub::testing::TestHub::start().await;
    let home = tempfile::tempdir().unwrap();
    let kubectl = common::kubectl_async::Kubectl::admin_of(&hub, home.path(), "admin.kubeconfig");
    for (name, script) in blocks {
        let out = kubectl.shell(&script, &repo()).await;
        assert!(
            out.status.success(),
            "the walkthrough's block {name:?} fails as written:\n{script}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    ferry_hub::testing::eventually(30, "edge-placement-c to match florin and guilder", || async {
        let count = kubectl
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
