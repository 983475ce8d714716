//! The hub's server: kcp's tenancy layer on the Kubernetes-compatible API
//! server library (`ferry-apiserver`) — workspaces (logical clusters),
//! APIExports and APIBindings, virtual workspaces, the TMC SyncTarget side
//! and the kinds KubeStellar adds — and starting a hub: everything of the
//! hub except its built-in controllers.
//!
//! - What this layer adds to the API server it hands in when the hub is
//!   built ([`server::extensions`]): kcp's kinds served built in with
//!   their `kubectl get` columns, their strategies and TMC's reserved
//!   labels and annotations ([`kinds`]), the
//!   Workspaces that make logical clusters ([`workspace`]), what
//!   APIBindings serve ([`apis`]) and the virtual workspaces
//!   ([`virtual_workspace`]).
//! - [`server::start_with`] starts a hub with the controllers it is given
//!   ([`server::Controllers`]); the `ferry-controllers`, `ferry-kubestellar`
//!   and `ferry-tmc` crates provide the built-in ones (Kubernetes' and kcp's
//!   tenancy's, KubeStellar's, kcp TMC's) and `ferry-hub` assembles them
//!   with the server. The server never depends on a controller: what they
//!   need (the grant rules in [`grants`], [`customize`] limits, the watch
//!   [`follow`]er, the helpers in [`controller`] every profile uses) lives here,
//!   and the controllers reach the hub only through [`controller`]'s
//!   narrow handle, [`controller::ControllerContext`].
//! - The API server's modules are re-exported under the paths they had
//!   when they were modules of this crate (`ferry_server::hub::Hub`,
//!   `ferry_server::service`), so this layer and its dependants name them
//!   as before.

pub mod apis;
pub mod controller;
pub mod customize;
pub mod follow;
pub mod grants;
pub mod kinds;
pub mod replicas;
pub mod server;
pub mod synctarget;
pub mod virtual_workspace;
pub mod workspace;

pub use ferry_apiserver::{
    api, auth, decode, discovery, follow_metrics, hub, json, kubeconfig, openapi, patch, propagation,
    protobuf, registry, request, selector, service, service_ranges, status, storage, strategy, table, tls,
    validation, view, Hub, HubConfig,
};
