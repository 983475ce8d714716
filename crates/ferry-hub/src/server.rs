//! Starting a hub: the server's options and handles
//! ([`ferry_server::server`]), with the built-in controllers plugged in.

use std::sync::Arc;

pub use ferry_server::server::*;

/// Start a hub with `opts` and the built-in controllers; returns once it is
/// accepting connections.
pub async fn start(opts: HubOptions) -> anyhow::Result<RunningHub> {
    start_with(opts, Arc::new(crate::controllers::BuiltInControllers)).await
}
