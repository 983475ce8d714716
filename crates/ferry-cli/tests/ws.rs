//! `kubectl ferry ws`, run through real kubectl with the built plugin on
//! PATH against a real hub: kcp's messages, the kubeconfig entries it
//! writes, relative and absolute names, `..`, `-`, `tree`, and bad input
//! that leaves the kubeconfig as it was.

mod common;

use std::path::Path;
use std::process::Command;

use common::kubectl::{admin_copy, Kubectl};

use ferry_hub::kubeconfig::{kubeconfig, AuthInfo};
use ferry_testkit::TestHub;
use serde_json::Value;

/// The kubeconfig file as JSON.
fn read(file: &Path) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

fn entry<'a>(doc: &'a Value, list: &str, name: &str) -> Option<&'a Value> {
    doc[list].as_array()?.iter().find(|e| e["name"] == name)
}

/// The server URL of the current context.
fn current_server(file: &Path) -> String {
    let doc = read(file);
    let ctx = doc["current-context"].as_str().unwrap();
    let cluster = entry(&doc, "contexts", ctx).unwrap()["context"]["cluster"]
        .as_str()
        .unwrap()
        .to_string();
    entry(&doc, "clusters", &cluster).unwrap()["cluster"]["server"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn ws_moves_between_workspaces_like_kcp() {
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = admin_copy(&hub, dir.path());
    // A second file in KUBECONFIG, as kubectl users have: left alone.
    let other = dir.path().join("kind.kubeconfig");
    std::fs::write(
        &other,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: kind\n  cluster:\n    server: https://10.0.0.1:6443\n\
         contexts:\n- name: kind\n  context:\n    cluster: kind\n    user: kind\nusers:\n- name: kind\n  user:\n    token: \"0123\"\n",
    )
    .unwrap();
    let other_before = std::fs::read(&other).unwrap();
    let list = std::env::join_paths([&file, &other]).unwrap();
    let k = Kubectl::new(list, dir.path());
    let url = hub.url();

    assert_eq!(k.ok(&["ferry", "ws", "."]), "Current workspace is \"root\".\n");
    assert_eq!(
        k.ok(&[
            "ferry",
            "ws",
            "create",
            "my-org",
            "--type",
            "root:organization",
            "--enter"
        ]),
        "Workspace \"my-org\" (type root:organization) created. Waiting for it to be ready...\n\
         Workspace \"my-org\" (type root:organization) is ready to use.\n\
         Current workspace is \"root:my-org\" (type \"root:organization\").\n"
    );
    // kcp's entries: current and previous clusters and contexts, the
    // original ones untouched.
    let doc = read(&file);
    assert_eq!(doc["current-context"], "workspace.kcp.io/current");
    assert_eq!(current_server(&file), format!("{url}/clusters/root:my-org"));
    let previous = entry(&doc, "contexts", "workspace.kcp.io/previous").unwrap();
    assert_eq!(previous["context"]["cluster"], "ferry-hub");
    assert_eq!(
        entry(&doc, "clusters", "ferry-hub").unwrap()["cluster"]["server"],
        format!("{url}/clusters/root")
    );
    let current = entry(&doc, "contexts", "workspace.kcp.io/current").unwrap();
    assert_eq!(current["context"]["user"], "admin");

    assert_eq!(
        k.ok(&["ferry", "ws", "create", "team", "--enter"]),
        "Workspace \"team\" (type root:universal) created. Waiting for it to be ready...\n\
         Workspace \"team\" (type root:universal) is ready to use.\n\
         Current workspace is \"root:my-org:team\" (type \"root:universal\").\n"
    );
    assert_eq!(k.ok(&["ferry", "ws", "current", "--short"]), "root:my-org:team\n");
    assert_eq!(
        k.ok(&["ferry", "ws", ".."]),
        "Current workspace is \"root:my-org\".\n"
    );
    assert_eq!(
        k.ok(&["ferry", "ws", "-"]),
        "Current workspace is \"root:my-org:team\".\n"
    );
    assert_eq!(current_server(&file), format!("{url}/clusters/root:my-org:team"));
    assert_eq!(
        k.ok(&["ferry", "ws", "-"]),
        "Current workspace is \"root:my-org\".\n"
    );
    assert_eq!(
        k.ok(&["ferry", "ws", "use", "team"]),
        "Current workspace is \"root:my-org:team\" (type \"root:universal\").\n"
    );
    assert_eq!(k.ok(&["ferry", "ws", ":"]), "Current workspace is \"root\".\n");
    // Absolute paths, kcp's and the seeds' spelling; `ferry ws` is the same command.
    assert_eq!(
        k.ok(&["ferry", "ws", ":root:my-org:team"]),
        "Current workspace is \"root:my-org:team\".\n"
    );
    let ferry = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["ws", "root:my-org"])
        .env("KUBECONFIG", std::env::join_paths([&file, &other]).unwrap())
        .output()
        .unwrap();
    assert!(
        ferry.status.success(),
        "{}",
        String::from_utf8_lossy(&ferry.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ferry.stdout),
        "Current workspace is \"root:my-org\".\n"
    );
    assert_eq!(current_server(&file), format!("{url}/clusters/root:my-org"));

    // What kubectl sees there: the workspace's LogicalCluster.
    assert_eq!(
        k.ok(&[
            "get",
            "logicalcluster",
            "cluster",
            "-o",
            "jsonpath={.metadata.annotations.kcp\\.io/path}"
        ]),
        "root:my-org"
    );

    k.ok(&["ferry", "ws", "root"]);
    assert_eq!(
        k.ok(&["ferry", "ws", "tree"]),
        ".\n└── root\n    └── my-org\n        └── team\n\n"
    );
    assert_eq!(
        k.ok(&["ferry", "ws", "tree", "--full"]),
        ".\n└── root\n    └── root:my-org\n        └── root:my-org:team\n\n"
    );

    // kubectl get workspaces: kcp's columns, and Ferry's SYNCTARGET (mailboxes).
    let table = k.ok(&["get", "workspaces"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "TYPE", "REGION", "PHASE", "URL", "SYNCTARGET", "AGE"],
        "{table}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        row[..4],
        [
            "my-org",
            "organization",
            "Ready",
            format!("{url}/clusters/root:my-org").as_str()
        ],
        "{table}"
    );

    assert_eq!(
        std::fs::read(&other).unwrap(),
        other_before,
        "the second kubeconfig changed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_and_leaves_the_kubeconfig_alone() {
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = admin_copy(&hub, dir.path());
    let k = Kubectl::new(&file, dir.path());

    let err = k.fails(&["ferry", "ws", "-"], &file);
    assert!(err.contains("no previous workspace found in kubeconfig"), "{err}");
    let err = k.fails(&["ferry", "ws", "nope"], &file);
    assert!(err.contains("workspace \"root:nope\" not found"), "{err}");
    assert!(err.contains("kubectl ferry ws create nope"), "{err}");
    let err = k.fails(&["ferry", "ws", "use", ":root:nope:deeper"], &file);
    assert!(err.contains("workspace \"root:nope:deeper\" not found"), "{err}");
    let err = k.fails(&["ferry", "ws", ".."], &file);
    assert!(err.contains("cannot go up from root"), "{err}");
    let err = k.fails(&["ferry", "ws", "Bad_Name"], &file);
    assert!(err.contains("invalid workspace path: Bad_Name"), "{err}");
    let err = k.fails(&["ferry", "ws"], &file);
    assert!(err.contains("no home workspaces"), "{err}");

    let err = k.fails(&["ferry", "ws", "create", "x", "--type", "galaxy"], &file);
    assert!(
        err.contains("root:galaxy") && err.contains("root:organization"),
        "{err}"
    );
    let err = k.fails(&["ferry", "ws", "create", "Bad_Name"], &file);
    assert!(err.contains("Bad_Name") && err.contains("RFC 1123"), "{err}");

    assert_eq!(
        k.ok(&["ferry", "ws", "create", "my-org"]),
        "Workspace \"my-org\" (type root:universal) created. Waiting for it to be ready...\n\
         Workspace \"my-org\" (type root:universal) is ready to use.\n"
    );
    let err = k.fails(&["ferry", "ws", "create", "my-org"], &file);
    assert!(
        err.contains("\"my-org\" already exists") && err.contains("--ignore-existing"),
        "{err}"
    );
    assert_eq!(
        k.ok(&["ferry", "ws", "create", "my-org", "--ignore-existing"]),
        "Workspace \"my-org\" (type root:universal) already exists.\n\
         Workspace \"my-org\" (type root:universal) is ready to use.\n"
    );
    for (type_, refusal) in [
        (
            "root:organization",
            "cannot be created with type root:organization, it already exists with different type root:universal",
        ),
        (
            "organization",
            "--ignore-existing must not be used with non-absolute type path",
        ),
    ] {
        let err = k.fails(
            &["ferry", "ws", "create", "my-org", "--ignore-existing", "--type", type_],
            &file,
        );
        assert!(err.contains(refusal), "{err}");
    }

    // A context whose server is not a workspace URL.
    let plain = dir.path().join("plain.kubeconfig");
    std::fs::write(
        &plain,
        kubeconfig(
            "hub",
            hub.url(),
            &hub.running.ca_pem,
            AuthInfo::Token(hub.running.admin_token.clone()),
            "plain",
            None,
        ),
    )
    .unwrap();
    let p = Kubectl::new(&plain, dir.path());
    assert_eq!(
        p.ok(&["ferry", "ws", "."]),
        format!("Current workspace is the URL \"{}\".\n", hub.url())
    );
    let err = p.fails(&["ferry", "ws", "my-org"], &plain);
    assert!(err.contains("does not point to a workspace"), "{err}");
    // A kubeconfig that does not exist.
    let missing = dir.path().join("missing");
    let out =
        Kubectl::new(&file, dir.path()).run(&["ferry", "ws", ".", "--kubeconfig", missing.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert!(!missing.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workspace_one_may_not_enter_is_denied_without_saying_whether_it_exists() {
    let hub = TestHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = admin_copy(&hub, dir.path());
    let admin = Kubectl::new(&file, dir.path());
    admin.ok(&["ferry", "ws", "create", "a", "--enter"]);
    admin.ok(&["ferry", "ws", "create", "inner"]);
    admin.ok(&["ferry", "ws", ":root"]);
    admin.ok(&["ferry", "ws", "create", "b"]);
    admin.ok(&["ferry", "ws", ":root:a"]);
    // A ServiceAccount of root:a, admin there.
    admin.ok(&[
        "create",
        "clusterrolebinding",
        "sa-admin",
        "--clusterrole=cluster-admin",
        "--serviceaccount=default:default",
    ]);
    let sa_token = admin.ok(&["create", "token", "default", "-n", "default"]);
    let sa_file = dir.path().join("sa.kubeconfig");
    std::fs::write(
        &sa_file,
        kubeconfig(
            "hub",
            &format!("{}/clusters/root:a", hub.url()),
            &hub.running.ca_pem,
            AuthInfo::Token(sa_token.trim().to_string()),
            "sa",
            None,
        ),
    )
    .unwrap();
    let sa = Kubectl::new(&sa_file, dir.path());
    assert_eq!(sa.ok(&["ferry", "ws", "."]), "Current workspace is \"root:a\".\n");
    assert_eq!(sa.ok(&["ferry", "ws", "tree"]), ".\n└── a\n    └── inner\n\n");
    // Not a member of root:a:inner, root:b or root; whether a workspace it
    // cannot see exists is not told.
    for target in ["inner", ":root:b", ":root:nope", ":root"] {
        let err = sa.fails(&["ferry", "ws", target], &sa_file);
        let path = match target.strip_prefix(':') {
            Some(p) => p.to_string(),
            None => format!("root:a:{target}"),
        };
        assert!(
            err.contains(&format!("access to workspace \"{path}\" denied")),
            "{target}: {err}"
        );
    }
    // Below its own workspace, where it may read Workspaces, a missing one is named.
    let err = sa.fails(&["ferry", "ws", "nope"], &sa_file);
    assert!(err.contains("workspace \"root:a:nope\" not found"), "{err}");
}
