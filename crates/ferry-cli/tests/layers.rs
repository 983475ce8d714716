//! The crate graph is layered: a crate depends only on crates of lower
//! layers, so no crate cycle can form and each layer builds and tests without
//! the ones above it. The order is written once, in [`LAYERS`].

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// The workspace's crates, lowest layer first. A crate's normal and build
/// dependencies may only be crates of lower layers. Dev-dependencies are free:
/// tests may use a higher crate's test kit (ferry-syncer's tests start hubs).
const LAYERS: &[&[&str]] = &[
    // API types; Kubernetes object machinery (no I/O).
    &["ferry-api", "ferry-apimachinery"],
    // The object store (SQLite, etcd, watch cache); the web console's pages.
    &["ferry-storage", "ferry-console"],
    // The Kubernetes-compatible API server library (nothing of kcp,
    // KubeStellar or TMC: see `the_api_server_library_names_no_kcp_kubestellar_or_tmc`).
    &["ferry-apiserver"],
    // The hub's server (kcp tenancy, virtual workspaces, starting a hub);
    // the syncer agent.
    &["ferry-server", "ferry-syncer"],
    // What KubeStellar's and kcp TMC's controllers share: combined status,
    // the label index, SyncTarget heartbeats.
    &["ferry-multicluster"],
    // The built-in controllers, clients of the server through its hook, one
    // crate per profile: Kubernetes' and kcp's tenancy's, KubeStellar's, kcp
    // TMC's. The command line's commands, which start hubs with whatever
    // controllers the binaries plug in: none depends on another, so a
    // controller change does not recompile the commands, nor another
    // profile's controllers.
    &[
        "ferry-controllers",
        "ferry-kubestellar",
        "ferry-tmc",
        "ferry-commands",
    ],
    // The hub: the server with the controllers of every profile wired in,
    // and what starts hubs in tests.
    &["ferry-hub"],
    // The binaries: the commands with the controllers plugged in.
    &["ferry-cli"],
    // The tests' kit, on top of everything it sets up; crates use it only as
    // a dev-dependency.
    &["ferry-testkit"],
];

/// Every dependency edge between workspace crates that breaks [`LAYERS`],
/// worded for the person who added it; `edges` are (from, to) crate names.
fn layering_violations(layers: &[&[&str]], edges: &[(String, String)]) -> Vec<String> {
    let layer_of: BTreeMap<&str, usize> = layers
        .iter()
        .enumerate()
        .flat_map(|(i, crates)| crates.iter().map(move |c| (*c, i)))
        .collect();
    let mut problems = Vec::new();
    for (from, to) in edges {
        match (layer_of.get(from.as_str()), layer_of.get(to.as_str())) {
            (Some(f), Some(t)) if t < f => {}
            (Some(_), Some(_)) => problems.push(format!(
                "{from} depends on {to}, which is not in a lower layer: move the code {from} needs \
                 down into a lower crate, or invert the dependency (LAYERS in crates/ferry-cli/tests/layers.rs)"
            )),
            (None, _) => problems.push(format!("{from} is not in LAYERS: add it to the layer it belongs to")),
            (_, None) => problems.push(format!("{to} is not in LAYERS: add it to the layer it belongs to")),
        }
    }
    problems
}

/// The (from, to) normal and build dependencies between workspace crates,
/// as `cargo metadata` reads them from the Cargo.toml files.
fn workspace_edges() -> (Vec<String>, Vec<(String, String)>) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let names: Vec<String> = packages
        .iter()
        .map(|p| p["name"].as_str().expect("name").to_string())
        .collect();
    let mut edges = Vec::new();
    for package in packages {
        for dep in package["dependencies"].as_array().expect("dependencies") {
            // `kind` is null for normal dependencies, "build" or "dev" otherwise.
            let name = dep["name"].as_str().expect("dependency name");
            if dep["kind"].as_str() != Some("dev") && names.iter().any(|n| n == name) {
                edges.push((
                    package["name"].as_str().expect("name").to_string(),
                    name.to_string(),
                ));
            }
        }
    }
    (names, edges)
}

#[test]
fn no_crate_depends_on_a_crate_of_its_own_or_a_higher_layer() {
    let (names, edges) = workspace_edges();
    let mut problems = layering_violations(LAYERS, &edges);
    for name in &names {
        if !LAYERS.iter().any(|layer| layer.contains(&name.as_str())) {
            problems.push(format!(
                "{name} is not in LAYERS: add it to the layer it belongs to"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the crate graph breaks its layering:\n{}",
        problems.join("\n")
    );
    // The graph really is read: the API server sits on the lower layers,
    // the hub's server on it, the controllers on the server.
    assert!(edges.contains(&("ferry-apiserver".into(), "ferry-apimachinery".into())));
    assert!(edges.contains(&("ferry-server".into(), "ferry-apiserver".into())));
    assert!(edges.contains(&("ferry-controllers".into(), "ferry-server".into())));
    assert!(edges.contains(&("ferry-tmc".into(), "ferry-multicluster".into())));
}

/// The workspace crates that recompile when `changed` does: those that
/// depend on it through normal and build dependencies, directly or not.
fn dependents(edges: &[(String, String)], changed: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut todo = vec![changed.to_string()];
    while let Some(c) = todo.pop() {
        for (from, to) in edges {
            if *to == c && !found.contains(from) {
                found.push(from.clone());
                todo.push(from.clone());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_controller_change_recompiles_its_profile_the_wiring_and_the_binaries_only() {
    // The edit path measured in book/src/reference/layout.md: a Kubernetes
    // controller's change rebuilds neither KubeStellar's nor kcp TMC's
    // controllers, nor the commands.
    let (_, edges) = workspace_edges();
    assert_eq!(
        dependents(&edges, "ferry-controllers"),
        ["ferry-cli", "ferry-hub", "ferry-testkit"],
        "a crate above ferry-controllers depends on it: move what it needs into ferry-server"
    );
    assert_eq!(
        dependents(&edges, "ferry-kubestellar"),
        ["ferry-cli", "ferry-hub", "ferry-testkit"],
        "a crate above ferry-kubestellar depends on it: move what it needs into ferry-multicluster"
    );
    assert_eq!(
        dependents(&edges, "ferry-tmc"),
        ["ferry-cli", "ferry-hub", "ferry-testkit"]
    );
    // The wiring is a few lines on the server and the three profiles.
    let mut of_hub: Vec<&str> = edges
        .iter()
        .filter(|(from, _)| from == "ferry-hub")
        .map(|(_, to)| to.as_str())
        .collect();
    of_hub.sort();
    assert_eq!(
        of_hub,
        [
            "ferry-controllers",
            "ferry-kubestellar",
            "ferry-server",
            "ferry-tmc"
        ]
    );
}

#[test]
fn dependents_are_found_through_every_path() {
    let edge = |from: &str, to: &str| (from.to_string(), to.to_string());
    let edges = [
        edge("b", "a"),
        edge("c", "b"),
        edge("d", "a"),
        edge("d", "c"),
        edge("a", "z"),
    ];
    assert_eq!(dependents(&edges, "a"), ["b", "c", "d"]);
    assert_eq!(dependents(&edges, "c"), ["d"]);
    assert!(dependents(&edges, "d").is_empty());
}

#[test]
fn the_binaries_crate_only_plugs_the_controllers_into_the_commands() {
    // Whatever ferry-cli depends on recompiles it; kept to these two, a
    // controller change rebuilds its profile's crate, the wiring in
    // ferry-hub, ferry-cli's few lines and the link, and the commands stay
    // as they were.
    let (_, edges) = workspace_edges();
    let mut of_cli: Vec<&str> = edges
        .iter()
        .filter(|(from, _)| from == "ferry-cli")
        .map(|(_, to)| to.as_str())
        .collect();
    of_cli.sort();
    assert_eq!(
        of_cli,
        ["ferry-commands", "ferry-hub"],
        "ferry-cli plugs the controllers into the commands and nothing more: \
         put what it needs into ferry-commands (or a lower crate) instead"
    );
}

#[test]
fn an_upward_or_sideways_edge_is_named_with_the_fix() {
    let edge = |from: &str, to: &str| (from.to_string(), to.to_string());
    assert!(layering_violations(
        LAYERS,
        &[edge("ferry-hub", "ferry-storage"), edge("ferry-cli", "ferry-api")]
    )
    .is_empty());
    let problems = layering_violations(
        LAYERS,
        &[
            edge("ferry-storage", "ferry-hub"),
            edge("ferry-server", "ferry-syncer"),
            edge("ferry-server", "ferry-controllers"),
            edge("ferry-apiserver", "ferry-server"),
            edge("ferry-controllers", "ferry-hub"),
            edge("ferry-hub", "ferry-dashboard"),
            edge("ferry-commands", "ferry-controllers"),
            edge("ferry-commands", "ferry-hub"),
            edge("ferry-kubestellar", "ferry-controllers"),
            edge("ferry-kubestellar", "ferry-tmc"),
        ],
    );
    assert_eq!(problems.len(), 10, "{problems:#?}");
    assert!(problems[0].starts_with("ferry-storage depends on ferry-hub, which is not in a lower layer"));
    assert!(problems[1].starts_with("ferry-server depends on ferry-syncer"));
    assert!(problems[2].starts_with("ferry-server depends on ferry-controllers"));
    assert!(problems[3].starts_with("ferry-apiserver depends on ferry-server"));
    assert!(problems[4].starts_with("ferry-controllers depends on ferry-hub"));
    assert_eq!(
        problems[5],
        "ferry-dashboard is not in LAYERS: add it to the layer it belongs to"
    );
    assert!(problems[6].starts_with("ferry-commands depends on ferry-controllers"));
    assert!(problems[7].starts_with("ferry-commands depends on ferry-hub"));
    assert!(problems[8]
        .starts_with("ferry-kubestellar depends on ferry-controllers, which is not in a lower layer"));
    assert!(problems[9].starts_with("ferry-kubestellar depends on ferry-tmc"));
}

/// Where `source` (one Rust file) names the hub itself rather than the
/// controllers' handle on it: the `Hub` type, a path into
/// `ferry_server::hub`, or a call of `.hub()` (a service request's hub, for
/// strategies). Comments are not read. Returns the offending lines,
/// numbered from 1.
fn mentions_of_the_hub(source: &str) -> Vec<(usize, String)> {
    source
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let code = line.split("//").next().unwrap_or_default();
            let names_hub = code
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .any(|word| word == "Hub");
            (names_hub || code.contains("ferry_server::hub") || code.contains(".hub()"))
                .then(|| (i + 1, line.trim().to_string()))
        })
        .collect()
}

/// Every `.rs` file under `dir`, depth first.
fn rust_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the directory is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn the_controllers_reach_the_hub_only_through_their_handle() {
    let mut files = Vec::new();
    for profile in [
        "ferry-controllers",
        "ferry-multicluster",
        "ferry-kubestellar",
        "ferry-tmc",
    ] {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(profile)
            .join("src");
        let found = rust_files(&src);
        assert!(
            found.len() >= 5,
            "the controllers' sources are read from {}",
            src.display()
        );
        files.extend(found);
    }
    let mut problems = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("a controller source is readable");
        for (line, text) in mentions_of_the_hub(&source) {
            problems.push(format!("{}:{line}: {text}", file.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "the built-in controllers take ferry_server::controller::ControllerContext, never the whole Hub \
         (add what a controller needs to the handle, documented there):\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_mention_of_the_hub_is_found_in_code_and_not_in_comments() {
    let source = "use ferry_server::hub::CRDS;\n\
                  // the Hub owns the store\n\
                  fn f(hub: &Arc<Hub>) {}\n\
                  fn g(ctx: &ControllerContext, opts: &HubOptions) {} // not the Hub\n\
                  /// Reads the hub's store.\n\
                  let store = &r.hub().store;\n\
                  let hub = ctx.hub_name(); // r.hub()\n";
    let found: Vec<usize> = mentions_of_the_hub(source)
        .into_iter()
        .map(|(line, _)| line)
        .collect();
    assert_eq!(found, vec![1, 3, 6]);
}

/// Module cycles that exist today, each as the set of a crate's top-level
/// modules that import one another in a circle (the crate is named in the
/// comment only, so moving the modules to another crate keeps them known).
/// A cycle may shrink or go; a new one, or one that grows, fails
/// [`no_module_cycle_beyond_the_known_ones`]. Remove an entry when its
/// cycle is broken.
const KNOWN_MODULE_CYCLES: &[&[&str]] = &[
    // ferry-syncer: the engine and its profiles.
    &["engine", "profile", "profiles", "transform"],
    // ferry-cli: commands that call one another.
    &["bind_cmd", "workload_cmd"],
    &[
        "database_service",
        "quickstart",
        "quickstart_syncagent",
        "quickstart_tmc",
        "syncer_pod",
    ],
    &[
        "bench_cmd",
        "bench_compare",
        "bench_fleet",
        "bench_load",
        "bench_placement",
        "bench_sync",
        "bench_syncagent",
    ],
];

/// The top-level modules of one crate that import one another in a circle:
/// `files` are (path under `src/`, source) pairs. A file belongs to the
/// top-level module its path starts with (`a.rs`, `a/b.rs` → `a`); it
/// depends on every other top-level module its code names as `crate::m`
/// (in a path or a `use crate::{…}` list). Comments are not read. Returns
/// each cycle (a strongly connected set of two or more modules), sorted.
fn module_cycles(files: &[(String, String)]) -> Vec<Vec<String>> {
    use std::collections::{BTreeMap, BTreeSet};
    let top_of = |path: &str| {
        let first = path.split('/').next().unwrap_or_default();
        first.strip_suffix(".rs").unwrap_or(first).to_string()
    };
    let modules: BTreeSet<String> = files
        .iter()
        .map(|(path, _)| top_of(path))
        .filter(|m| m != "lib" && m != "main")
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> =
        modules.iter().map(|m| (m.clone(), BTreeSet::new())).collect();
    for (path, source) in files {
        let from = top_of(path);
        let Some(out) = edges.get_mut(&from) else { continue };
        for line in source.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for (at, _) in code.match_indices("crate::") {
                // `crate::`, not the tail of `other_crate::` or `$crate::`.
                if code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') {
                    continue;
                }
                let rest = &code[at + "crate::".len()..];
                let named: Vec<&str> = match rest.strip_prefix('{') {
                    // `use crate::{a, b::c}`: the first segment of each item.
                    Some(list) => list
                        .split('}')
                        .next()
                        .unwrap_or_default()
                        .split(',')
                        .map(|item| item.trim().split("::").next().unwrap_or_default())
                        .collect(),
                    None => vec![rest
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or_default()],
                };
                for m in named {
                    if m != from && modules.contains(m) {
                        out.insert(m.to_string());
                    }
                }
            }
        }
    }
    // Two modules are in one cycle when each reaches the other.
    let reach = |start: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.clone()];
        while let Some(m) = todo.pop() {
            for next in &edges[&m] {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> = modules.iter().map(|m| (m, reach(m))).collect();
    let mut cycles: Vec<Vec<String>> = Vec::new();
    for m in &modules {
        if !reaches[m].contains(m) || cycles.iter().any(|c| c.contains(m)) {
            continue;
        }
        let cycle: Vec<String> = modules
            .iter()
            .filter(|other| reaches[m].contains(*other) && reaches[*other].contains(m))
            .cloned()
            .collect();
        cycles.push(cycle);
    }
    cycles
}

/// (path under `src/`, source) of every Rust file of the crate at `dir`.
fn crate_sources(dir: &std::path::Path) -> Vec<(String, String)> {
    let src = dir.join("src");
    rust_files(&src)
        .into_iter()
        .map(|file| {
            let path = file
                .strip_prefix(&src)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            let source = std::fs::read_to_string(&file).expect("a source file is readable");
            (path, source)
        })
        .collect()
}

#[test]
fn no_module_cycle_beyond_the_known_ones() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    let mut found = 0;
    for entry in std::fs::read_dir(&crates).expect("the crates directory is readable") {
        let dir = entry.expect("a directory entry").path();
        if !dir.join("src").is_dir() {
            continue;
        }
        for cycle in module_cycles(&crate_sources(&dir)) {
            found += 1;
            let known = KNOWN_MODULE_CYCLES
                .iter()
                .any(|k| cycle.iter().all(|m| k.contains(&m.as_str())));
            if !known {
                problems.push(format!(
                    "{}: the modules {} import one another in a circle: move what they share into one \
                     module the others use, or pass it in",
                    dir.file_name().unwrap_or_default().to_string_lossy(),
                    cycle.join(", ")
                ));
            }
        }
    }
    // The sources really are read: today's known cycles are found.
    assert!(found > 0, "no crate sources read under {}", crates.display());
    assert!(problems.is_empty(), "new module cycles:\n{}", problems.join("\n"));
}

#[test]
fn a_module_cycle_is_found_through_paths_and_use_lists() {
    let file = |path: &str, source: &str| (path.to_string(), source.to_string());
    let files = [
        file("lib.rs", "pub mod a; pub mod b; pub mod c; pub mod d;"),
        file(
            "a.rs",
            "use crate::{b::Thing, json};\n// crate::d is only mentioned here",
        ),
        file("b/mod.rs", "pub mod inner;"),
        file("b/inner.rs", "fn f() { crate::c::g() }"),
        file("c.rs", "use crate::a::A;"),
        file("d.rs", "use crate::a;"),
    ];
    assert_eq!(
        module_cycles(&files),
        vec![vec!["a".to_string(), "b".into(), "c".into()]]
    );
    assert!(module_cycles(&files[..3]).is_empty());
}

/// The Rust modules of `ferry_api` that hold kcp's, KubeStellar's and kcp
/// TMC's kinds and what their syncers share: the API server library
/// names none of them outside [`KNOWN_KCP_IN_THE_API_SERVER`].
const PROFILE_MODULES: &[&str] = &[
    "apiresource",
    "combined_status",
    "control",
    "edge",
    "scheduling",
    "syncagent",
    "transform",
    "workload",
];

/// The files of `ferry-apiserver` that still name kcp, KubeStellar or TMC
/// (an API group of theirs, or one of [`PROFILE_MODULES`]), each with why.
/// The list may shrink, never grow: a file not listed that names them fails
/// [`the_api_server_library_names_no_kcp_kubestellar_or_tmc`], and so does a
/// listed file that no longer does (remove its entry).
const KNOWN_KCP_IN_THE_API_SERVER: &[(&str, &str)] = &[
    (
        "auth/impersonation.rs",
        "a test: kcp's cluster-name extra is impersonated as any other",
    ),
    (
        "auth/mod.rs",
        "the user extra naming a request's logical cluster, kcp's key",
    ),
    (
        "auth/service_account.rs",
        "ServiceAccount tokens carry their logical cluster as kcp's do",
    ),
];

/// The plural names of kcp's, kcp TMC's and KubeStellar's kinds: a library
/// below ferry-server that matches on one (to give it columns, a strategy,
/// ...) holds that kind's rules, even without naming its group.
const PROFILE_PLURALS: &[&str] = &[
    "workspaces",
    "workspacetypes",
    "logicalclusters",
    "apiresourceschemas",
    "apiexports",
    "apiexportendpointslices",
    "apibindings",
    "synctargets",
    "locations",
    "placements",
    "apiresourceimports",
    "edgeplacements",
    "singleplacementslices",
    "customizers",
    "customtransforms",
    "syncerconfigs",
    "edgesyncconfigs",
    "placementsummaries",
];

/// Whether `source` (one Rust file, comments not read) names kcp,
/// KubeStellar or TMC: one of their API groups (`tenancy.kcp.io`,
/// `edge.kubestellar.io`, any `kcp.io` or `kubestellar.io` name), one of
/// their kinds' plurals as a string (`"synctargets"`, [`PROFILE_PLURALS`])
/// or a path into one of [`PROFILE_MODULES`] of `ferry_api`.
fn names_kcp_kubestellar_or_tmc(source: &str) -> bool {
    source.lines().any(|line| {
        let code = line.split("//").next().unwrap_or_default();
        code.contains("kcp.io")
            || code.contains("kubestellar.io")
            || PROFILE_PLURALS
                .iter()
                .any(|plural| code.contains(&format!("\"{plural}\"")))
            || PROFILE_MODULES.iter().any(|m| {
                code.contains(&format!("ferry_api::{m}::")) || code.contains(&format!("ferry_api::{{{m}"))
            })
    })
}

/// What is wrong with the crate `name` (a directory beside ferry-cli)
/// naming kcp, KubeStellar or TMC: its files that name them and are not
/// `known` (path under `src/`; the list's name in this file is
/// `known_list`), and the `known` ones that no longer do or are gone.
/// `min_files` guards against reading nothing.
fn kcp_names_in(name: &str, known: &[(&str, &str)], known_list: &str, min_files: usize) -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name);
    let files = crate_sources(&dir);
    assert!(
        files.len() >= min_files,
        "{name}'s sources are read from {}",
        dir.display()
    );
    let mut problems = Vec::new();
    for (path, source) in &files {
        let names = names_kcp_kubestellar_or_tmc(source);
        let is_known = known.iter().any(|(p, _)| p == path);
        if names && !is_known {
            problems.push(format!(
                "{name}/src/{path} names kcp, KubeStellar or TMC: the libraries below ferry-server know none \
                 of them; put it in ferry-server and hand it in through the hub's Extensions \
                 (a StrategyTable, BuiltinResources with their BuiltinKind's columns, VirtualWorkspaces)"
            ));
        }
        if is_known && !names {
            problems.push(format!(
                "{name}/src/{path} no longer names kcp, KubeStellar or TMC: remove it from {known_list}"
            ));
        }
    }
    for (path, _) in known {
        if !files.iter().any(|(p, _)| p == path) {
            problems.push(format!("{name}/src/{path} is gone: remove it from {known_list}"));
        }
    }
    problems
}

#[test]
fn the_api_server_library_names_no_kcp_kubestellar_or_tmc() {
    let problems = kcp_names_in(
        "ferry-apiserver",
        KNOWN_KCP_IN_THE_API_SERVER,
        "KNOWN_KCP_IN_THE_API_SERVER",
        50,
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_object_machinery_names_no_kcp_kubestellar_or_tmc() {
    // Below the API server: Kubernetes' own rules only (kcp's kinds' Table
    // columns are ferry-server's, `kinds::columns`).
    let problems = kcp_names_in("ferry-apimachinery", &[], "a list of known ones", 10);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn kcp_kubestellar_and_tmc_are_found_by_group_and_by_module() {
    assert!(names_kcp_kubestellar_or_tmc(
        r#"("tenancy.kcp.io", "workspaces")"#
    ));
    assert!(names_kcp_kubestellar_or_tmc(
        r#"if group == "edge.kubestellar.io" {}"#
    ));
    assert!(names_kcp_kubestellar_or_tmc(
        "use ferry_api::workload::SyncTarget;"
    ));
    assert!(names_kcp_kubestellar_or_tmc(
        "use ferry_api::{edge::EdgePlacement, naming};"
    ));
    assert!(!names_kcp_kubestellar_or_tmc("use ferry_api::timestamp::now;"));
    assert!(!names_kcp_kubestellar_or_tmc(
        "// kcp's tenancy.kcp.io Workspaces live above"
    ));
    assert!(!names_kcp_kubestellar_or_tmc(r#"("apps", "deployments")"#));
    // A kind's columns matched by its plural alone.
    assert!(names_kcp_kubestellar_or_tmc(
        r#"(_, "synctargets") => vec![string("Schedulable", "x")],"#
    ));
    assert!(!names_kcp_kubestellar_or_tmc(
        r#"let placements = "node placements";"#
    ));
}
