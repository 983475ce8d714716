//! Puts the commit the binaries are built from into `ferry --version`
//! (`FERRY_COMMIT`), or `unknown` outside a git checkout, and links debug
//! builds of the binaries the quick way (no section dropping, no PIE).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=FERRY_COMMIT={commit}");
    // The link is most of the rebuild after an edit (book: reference/layout.md),
    // so a debug binary's link skips what only a shipped binary needs; release
    // builds link as Rust asks. Each measured on the debug `ferry`:
    // - finding the unused sections to drop costs a fifth or more of the link,
    //   and keeping them adds 30 MB;
    // - each of these costs about a tenth of the link: a position-independent
    //   executable (a dynamic relocation for every pointer in its data, 11 MB of
    //   them; a fixed-address one has none), merging equal strings (`-O1`), and
    //   hashing the whole 250 MB file for a build ID.
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    if linux && std::env::var("PROFILE").as_deref() == Ok("debug") {
        for arg in ["--no-gc-sections", "--no-pie", "-O0", "--build-id=none"] {
            println!("cargo:rustc-link-arg-bins=-Wl,{arg}");
        }
    }
    // Run again when HEAD moves: HEAD itself (a branch switch) and the branch it
    // names (a commit). In a worktree `.git` is a file naming the real directory.
    if let Some(git_dir) = git_path("--git-dir") {
        watch(&git_dir.join("HEAD"));
        if let Ok(head) = std::fs::read_to_string(git_dir.join("HEAD")) {
            if let Some(reference) = head.trim().strip_prefix("ref: ") {
                if let Some(common) = git_path("--git-common-dir") {
                    watch(&common.join(reference));
                    watch(&common.join("packed-refs"));
                }
            }
        }
    }
}

/// `git rev-parse <flag>` as an absolute path.
fn git_path(flag: &str) -> Option<PathBuf> {
    let out = Command::new("git")
        .args(["rev-parse", "--path-format=absolute", flag])
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    Some(PathBuf::from(String::from_utf8(out.stdout).ok()?.trim()))
}

fn watch(path: &Path) {
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
