//! The command-line conventions users expect of a Rust tool: shell completion, man
//! pages, a version naming its commit, and a failure that is one line a user can read
//! whatever `RUST_BACKTRACE` says.

#[path = "common/kubectl.rs"]
mod kubectl;

use std::process::{Command, Output};

use ferry_testkit::eventually;

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

/// `ferry ARGS hub` on a free loopback port in `dir`, its output in files there;
/// stopped with SIGTERM, as a service manager stops it.
struct HubProcess {
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl HubProcess {
    async fn start(dir: &std::path::Path, verbosity: &[&str]) -> HubProcess {
        std::fs::create_dir_all(dir).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ferry"))
            .args(verbosity)
            .args(["hub", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("hub"))
            .env_remove("NO_COLOR")
            .env_remove("FERRY_LOG")
            .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
            .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
            .spawn()
            .expect("ferry runs");
        let hub = HubProcess {
            child,
            dir: dir.to_path_buf(),
        };
        eventually(60, "the hub to be ready", || {
            let ready = std::fs::read_to_string(hub.dir.join("stdout"))
                .unwrap_or_default()
                .contains("ferry hub is ready");
            async move { ready.then_some(()) }
        })
        .await;
        hub
    }

    fn kubectl(&self) -> kubectl::Kubectl {
        kubectl::Kubectl::new(self.dir.join("hub/admin.kubeconfig"), &self.dir)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }

    /// SIGTERM, and its log once it has exited.
    async fn stop(mut self) -> String {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        eventually(30, "the hub to exit on SIGTERM", || {
            let exited = self.child.try_wait().unwrap();
            async move { exited }
        })
        .await;
        self.log()
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Logs written to a file (not a terminal) hold no ANSI colour codes.
#[tokio::test(flavor = "multi_thread")]
async fn logs_redirected_to_a_file_hold_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(dir.path(), &[]).await;
    let log = hub.stop().await;
    assert!(log.contains("shutting down"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "escape codes in a redirected log: {log:?}"
    );
}

/// `-v 2` adds each failed request the hub answers, `-v 3` every request, each
/// as one line with method, path, status and duration.
#[tokio::test(flavor = "multi_thread")]
async fn the_hub_logs_failed_requests_at_v2_and_every_request_at_v3() {
    let dir = tempfile::tempdir().unwrap();
    let at_2 = HubProcess::start(&dir.path().join("v2"), &["-v", "2"]).await;
    let kubectl = at_2.kubectl();
    kubectl.ok(&["get", "--raw", "/version"]);
    assert!(!kubectl.run(&["get", "--raw", "/no/such/path"]).status.success());
    eventually(20, "the failed request in the hub's log at -v 2", || {
        let logged = at_2.log().contains("GET /no/such/path 404");
        async move { logged.then_some(()) }
    })
    .await;
    let log = at_2.stop().await;
    assert!(!log.contains("GET /version 200"), "{log}");

    let at_3 = HubProcess::start(&dir.path().join("v3"), &["-v", "3"]).await;
    at_3.kubectl().ok(&["get", "--raw", "/version"]);
    eventually(20, "every request in the hub's log at -v 3", || {
        let line = at_3
            .log()
            .lines()
            .find(|l| l.contains("GET /version 200"))
            .map(String::from);
        async move { line }
    })
    .await;
}

/// `ferry syncer --help` names each of the three profiles and what it is.
#[test]
fn syncer_help_lists_every_profile() {
    let help = stdout(&ferry(&["syncer", "--help"], &[]));
    let profile = help
        .split("--profile <PROFILE>")
        .nth(1)
        .and_then(|rest| rest.split("\n      --").next())
        .expect("--profile in the help");
    for value in ["kubestellar:", "tmc:", "syncagent:"] {
        assert!(
            profile.contains(value),
            "--profile does not explain {value}\n{profile}"
        );
    }
    assert!(!profile.contains("kubestellar, or tmc"), "{profile}");
}

/// Every `description` in `schema`, with its JSON path.
fn descriptions(schema: &serde_json::Value, at: &str, out: &mut Vec<(String, String)>) {
    match schema {
        serde_json::Value::Object(obj) => {
            for (key, child) in obj {
                match (key.as_str(), child) {
                    ("description", serde_json::Value::String(text)) => {
                        out.push((at.to_string(), text.clone()))
                    }
                    (_, child) => descriptions(child, &format!("{at}.{key}"), out),
                }
            }
        }
        serde_json::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                descriptions(item, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// What `kubectl explain` shows of every Ferry CRD is prose: no rustdoc link
/// syntax, no line broken mid-sentence, and every field of PlacementSummary
/// described.
#[test]
fn crd_descriptions_are_clean_prose() {
    let yaml = stdout(&ferry(&["crds"], &[]));
    let crds: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert!(crds.len() >= 10, "{} CRDs", crds.len());
    let link = |text: &str| {
        text.match_indices("[`").any(|(i, _)| {
            text[i..]
                .split_once("`]")
                .is_some_and(|(inner, _)| !inner[2..].contains(' '))
        })
    };
    let mut bad = Vec::new();
    for crd in &crds {
        let name = crd["metadata"]["name"].as_str().unwrap().to_string();
        let mut found = Vec::new();
        descriptions(&crd["spec"]["versions"], &name, &mut found);
        for (at, text) in found {
            let mid_sentence = text
                .split('\n')
                .zip(text.split('\n').skip(1))
                .any(|(line, next)| {
                    !line.is_empty()
                        && !next.is_empty()
                        && !line.ends_with(['.', ':', '!', '?'])
                        && !["- ", "* ", "| "].iter().any(|m| next.starts_with(m))
                });
            if link(&text) || mid_sentence {
                bad.push(format!("{at}: {text:?}"));
            }
            if text.contains("current api-syncagent ignores it") {
                bad.push(format!("{at}: says the field is ignored: {text:?}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "descriptions that are not prose:\n{}",
        bad.join("\n")
    );

    let summary = crds
        .iter()
        .find(|c| c["metadata"]["name"] == "placementsummaries.edge.ferry.dev")
        .expect("the PlacementSummary CRD");
    let schema = &summary["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    let destination = &schema["destinations"]["items"]["properties"];
    for (field, props) in schema
        .as_object()
        .unwrap()
        .iter()
        .filter(|(f, _)| !["apiVersion", "kind", "metadata"].contains(&f.as_str()))
        .chain(destination.as_object().unwrap())
    {
        assert!(
            props["description"].is_string(),
            "PlacementSummary {field} has no description"
        );
    }
}

/// `/readyz?verbose` and `/livez?verbose` list their checks as kube-apiserver
/// does; without `verbose` they answer `ok`.
#[tokio::test(flavor = "multi_thread")]
async fn health_endpoints_list_their_checks_when_verbose() {
    let dir = tempfile::tempdir().unwrap();
    let hub = HubProcess::start(dir.path(), &[]).await;
    let kubectl = hub.kubectl();
    assert_eq!(
        kubectl.ok(&["get", "--raw", "/readyz?verbose"]),
        "[+]ping ok\n[+]storage ok\nreadyz check passed\n"
    );
    assert_eq!(
        kubectl.ok(&["get", "--raw", "/livez?verbose"]),
        "[+]ping ok\nlivez check passed\n"
    );
    assert_eq!(kubectl.ok(&["get", "--raw", "/readyz"]), "ok");
}

/// Whether `code` (the text between backticks) names a Rust item rather than
/// something a user types or reads: a path (`a::b`) or a snake_case name
/// (`effective_downsync`); Kubernetes fields and values are camelCase.
fn names_a_rust_item(code: &str) -> bool {
    code.contains("::")
        || (code.contains('_')
            && code.split('_').all(|part| {
                !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            }))
}

/// `kubectl explain` of a Ferry kind points at nothing only Ferry's source
/// holds: no description names a Rust function, field or path.
#[test]
fn crd_descriptions_name_no_rust_item() {
    assert!(names_a_rust_item("effective_downsync") && names_a_rust_item("EdgePlacementSpec::x"));
    assert!(!names_a_rust_item("namespaceSelector") && !names_a_rust_item("kcp-<hash>"));
    let yaml = stdout(&ferry(&["crds", "--for", "kubernetes"], &[]));
    let crds: Vec<serde_json::Value> = serde_saphyr::from_multiple(&yaml).unwrap();
    let mut bad = Vec::new();
    for crd in &crds {
        let mut found = Vec::new();
        descriptions(
            &crd["spec"]["versions"],
            crd["metadata"]["name"].as_str().unwrap(),
            &mut found,
        );
        for (at, text) in found {
            // Odd pieces of a split on backticks are the code spans.
            if text.split('`').skip(1).step_by(2).any(names_a_rust_item) {
                bad.push(format!("{at}: {text}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "descriptions naming Rust items:\n{}",
        bad.join("\n")
    );
}

/// Whether `text` holds an SGR escape (colour, bold, reset): cursor movement
/// is not colour.
fn has_colour(text: &str) -> bool {
    text.match_indices("\u{1b}[").any(|(i, _)| {
        let rest = &text[i + 2..];
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == ';'));
        end.is_some_and(|e| rest[e..].starts_with('m'))
    })
}

/// The pid of `parent`'s first child process (Linux's /proc).
fn child_of(parent: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// On a terminal the hub's log lines are coloured, unless `NO_COLOR` is set
/// to anything but the empty string (<https://no-color.org>). The terminal is
/// util-linux's `script`; without it the test says so and passes.
#[tokio::test(flavor = "multi_thread")]
async fn no_color_turns_colour_off_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: needs util-linux's `script` for a terminal");
        return;
    }
    for (no_color, coloured) in [("", true), ("1", false)] {
        let dir = tempfile::tempdir().unwrap();
        let typescript = dir.path().join("terminal");
        let hub = format!(
            "exec {} hub --listen 127.0.0.1:0 --data-dir {}",
            env!("CARGO_BIN_EXE_ferry"),
            dir.path().join("hub").display()
        );
        let mut script = Command::new("script")
            .args(["-qfec", &hub])
            .arg(&typescript)
            .env("NO_COLOR", no_color)
            .env_remove("FERRY_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("script runs");
        let text = eventually(60, "the hub ready on its terminal", || {
            let text = std::fs::read_to_string(&typescript).unwrap_or_default();
            async move { text.contains("ferry hub is ready").then_some(text) }
        })
        .await;
        match child_of(script.id()) {
            Some(hub) => drop(Command::new("kill").args(["-TERM", &hub.to_string()]).status()),
            None => drop(script.kill()),
        }
        let _ = script.wait();
        assert!(text.contains("INFO"), "no log line on the terminal: {text:?}");
        assert_eq!(
            has_colour(&text),
            coloured,
            "NO_COLOR={no_color:?}, the terminal shows: {text:?}"
        );
    }
}
