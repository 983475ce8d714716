//! The command-line conventions users expect of a Rust tool: shell completion, man
//! pages, a version naming its commit, and a failure that is one line a user can read
//! whatever `RUST_BACKTRACE` says.

use std::process::{Command, Output};

fn ferry(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
    command.args(args);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("ferry runs")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "ferry failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8")
}

#[test]
fn completion_scripts_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let script = stdout(&ferry(&["completion", shell], &[]));
        for command in ["quickstart", "syncer-gen", "workload", "completion"] {
            assert!(
                script.contains(command),
                "the {shell} script does not complete `{command}`"
            );
        }
    }
}

#[test]
fn man_pages_are_written_for_ferry_and_each_command() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("man1");
    stdout(&ferry(&["man", "--out-dir", out_dir.to_str().unwrap()], &[]));
    for page in [
        "ferry.1",
        "ferry-syncer.1",
        "ferry-quickstart.1",
        "ferry-workload-sync.1",
    ] {
        let text =
            std::fs::read_to_string(out_dir.join(page)).unwrap_or_else(|e| panic!("{page} not written: {e}"));
        assert!(text.contains(".TH"), "{page} is not a man page");
    }
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let version = stdout(&ferry(&["--version"], &[]));
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
    let expected = head.unwrap_or_else(|| "unknown".into());
    assert!(
        version.contains(&format!("(commit {expected})")),
        "`ferry --version` says {version:?}, built from {expected}"
    );
}

#[test]
fn a_failure_is_one_line_even_with_rust_backtrace_set() {
    let out = ferry(
        &["ws", "--kubeconfig", "/nonexistent/kubeconfig", "tree"],
        &[("RUST_BACKTRACE", "1")],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end().lines().collect::<Vec<_>>(),
        ["error: kubeconfig /nonexistent/kubeconfig does not exist"],
        "stderr: {stderr}"
    );
}

#[test]
fn verbosity_four_adds_where_a_failure_arose() {
    let out = ferry(
        &["-v", "4", "ws", "--kubeconfig", "/nonexistent/kubeconfig", "tree"],
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("backtrace"), "stderr: {stderr}");
}

#[test]
fn a_completion_script_read_in_part_does_not_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["completion", "bash"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ferry runs");
    // Close the pipe at once, as `| head -0` would.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "stderr: {stderr}");
}

#[test]
fn the_kubectl_plugin_shows_its_usage_as_kubectl_runs_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_kubectl-ferry"))
        .args(["syncer-gen", "--help"])
        .output()
        .expect("kubectl-ferry runs");
    let help = stdout(&out);
    assert!(help.contains("Usage: kubectl ferry syncer-gen"), "help: {help}");
}
