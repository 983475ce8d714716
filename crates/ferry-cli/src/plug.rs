//! The `ferry` command line with the hub's built-in controllers plugged in:
//! the commands live in `ferry-commands` and the controllers in
//! `ferry-controllers`, `ferry-kubestellar` and `ferry-tmc` (wired together
//! by `ferry-hub`), the commands depending on none of them, so changing a
//! controller recompiles only its crate, `ferry-hub`'s few lines, this small
//! crate and the link. The binaries `ferry` and `kubectl-ferry` call [`main`]; the
//! commands' modules are re-exported here under the paths they had when they
//! lived in this crate (`ferry_cli::quickstart::simulate_kubelet`).

use std::sync::Arc;

pub use ferry_commands::*;

/// `ferry --version`: the release and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("FERRY_COMMIT"), ")");

/// Parse the command line (as `name`) and run the command, every hub it
/// starts running the built-in controllers ([`ferry_commands::main`]).
pub fn main(name: &'static str) -> std::process::ExitCode {
    ferry_commands::main(
        name,
        Binary {
            version: VERSION,
            controllers: Arc::new(ferry_hub::controllers::BuiltInControllers),
        },
    )
}
