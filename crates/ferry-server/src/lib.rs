//! The hub's server: a Kubernetes-compatible API server with kcp-style
//! workspaces (logical clusters), APIExports and APIBindings, virtual
//! workspaces and the TMC SyncTarget side, over durable storage with watch —
//! everything of the hub except its built-in controllers.
//!
//! - [`Hub`] holds the store, what each workspace serves and the workspace
//!   index; [`service`] is the typed write path every write goes through
//!   (admission, [`strategy`], validation, RBAC); [`api`] serves it over
//!   HTTP with [`auth`], [`discovery`] and [`openapi`].
//! - [`server::start_with`] starts a hub with the controllers it is given
//!   ([`server::Controllers`]); the `ferry-controllers` crate provides the
//!   built-in ones and `ferry-hub` assembles the two. The server never
//!   depends on a controller: what both need (the grant rules in
//!   [`grants`], [`customize`] limits, the watch [`follow`]er) lives here,
//!   and the controllers reach the hub only through [`controller`]'s
//!   narrow handle, [`controller::ControllerContext`].
//! - The modules import one another without a circle: [`hub`] holds the
//!   state and names only the modules below it ([`auth`] reads it through
//!   [`auth::AuthContext`]; the controllers' part of a write reaches it as
//!   [`hub::WriteHooks`]); [`request`], [`strategy`], [`service`], [`api`]
//!   and [`server`] build on it in that order.

pub mod api;
pub mod apis;
pub mod auth;
pub mod controller;
pub mod customize;
pub mod decode;
pub mod discovery;
pub mod follow;
pub mod follow_metrics;
pub mod grants;
pub mod hub;
pub mod kinds;
pub mod kubeconfig;
pub mod openapi;
pub mod propagation;
pub mod registry;
pub mod replicas;
pub mod request;
pub mod server;
pub mod service;
pub mod service_ranges;
pub mod strategy;
pub mod synctarget;
pub mod tls;
pub mod view;
pub mod virtual_workspace;
pub mod workspace;

// The layers below the hub, under the paths they had when they were modules
// of this crate (`crate::status::ApiError`, `ferry_hub::storage::Store`).
pub use ferry_apimachinery::{json, patch, protobuf, selector, status, table, validation};
pub use ferry_storage as storage;

pub use hub::{Hub, HubConfig};
