//! Starting hubs from the commands (`ferry hub`, the quickstarts' hubs and
//! stand-in clusters): the server with the controllers the binary plugged in
//! when it started ([`crate::main`]). This crate does not depend on the
//! controllers, so changing one recompiles only them and the binary.

use std::sync::{Arc, OnceLock};

use ferry_server::server::{start_with, Controllers, HubOptions, RunningHub};

/// The controllers every hub this process starts runs; set once, by [`plug`].
static CONTROLLERS: OnceLock<Arc<dyn Controllers>> = OnceLock::new();

/// Makes `controllers` the ones the hubs this process starts run. The first
/// call wins: a process runs one set of controllers.
pub fn plug(controllers: Arc<dyn Controllers>) {
    let _ = CONTROLLERS.set(controllers);
}

/// Start a hub with `opts` and the plugged-in controllers; returns once it
/// is accepting connections.
pub async fn start(opts: HubOptions) -> anyhow::Result<RunningHub> {
    let controllers = CONTROLLERS.get().cloned().ok_or_else(|| {
        anyhow::anyhow!(
            "no controllers plugged in to start a hub with: run the commands through \
             ferry_commands::main with the built-in controllers (ferry_hub::controllers::BuiltInControllers)"
        )
    })?;
    start_with(opts, controllers).await
}

#[cfg(test)]
mod tests {
    /// A program that never plugged controllers in is told how to, instead of
    /// starting a hub that would run none.
    #[tokio::test]
    async fn starting_a_hub_without_plugged_controllers_names_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let error = super::start(ferry_server::server::HubOptions::new(dir.path()))
            .await
            .err()
            .expect("no hub without controllers");
        assert!(
            error
                .to_string()
                .contains("ferry_hub::controllers::BuiltInControllers"),
            "{error}"
        );
    }
}
