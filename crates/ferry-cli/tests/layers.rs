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
    // The hub's server (API server, kcp tenancy, virtual workspaces); the
    // syncer agent.
    &["ferry-server", "ferry-syncer"],
    // The built-in controllers: clients of the server through its hook. The
    // command line's commands, which start hubs with whatever controllers the
    // binaries plug in: neither depends on the other, so a controller change
    // does not recompile the commands.
    &["ferry-controllers", "ferry-commands"],
    // The hub: the server with its controllers, and the test kit.
    &["ferry-hub"],
    // The binaries: the commands with the controllers plugged in.
    &["ferry-cli"],
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
    // The graph really is read: the server sits on the lower layers, the
    // controllers on the server.
    assert!(edges.contains(&("ferry-server".into(), "ferry-apimachinery".into())));
    assert!(edges.contains(&("ferry-controllers".into(), "ferry-server".into())));
}

#[test]
fn the_binaries_crate_only_plugs_the_controllers_into_the_commands() {
    // Whatever ferry-cli depends on recompiles it; kept to these two, a
    // controller change rebuilds ferry-controllers, ferry-cli's few lines and
    // the link, and the commands stay as they were.
    let (_, edges) = workspace_edges();
    let mut of_cli: Vec<&str> = edges
        .iter()
        .filter(|(from, _)| from == "ferry-cli")
        .map(|(_, to)| to.as_str())
        .collect();
    of_cli.sort();
    assert_eq!(
        of_cli,
        ["ferry-commands", "ferry-controllers"],
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
            edge("ferry-controllers", "ferry-hub"),
            edge("ferry-hub", "ferry-dashboard"),
            edge("ferry-commands", "ferry-controllers"),
            edge("ferry-commands", "ferry-hub"),
        ],
    );
    assert_eq!(problems.len(), 7, "{problems:#?}");
    assert!(problems[0].starts_with("ferry-storage depends on ferry-hub, which is not in a lower layer"));
    assert!(problems[1].starts_with("ferry-server depends on ferry-syncer"));
    assert!(problems[2].starts_with("ferry-server depends on ferry-controllers"));
    assert!(problems[3].starts_with("ferry-controllers depends on ferry-hub"));
    assert_eq!(
        problems[4],
        "ferry-dashboard is not in LAYERS: add it to the layer it belongs to"
    );
    assert!(problems[5].starts_with("ferry-commands depends on ferry-controllers"));
    assert!(problems[6].starts_with("ferry-commands depends on ferry-hub"));
}
