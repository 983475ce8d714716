//! Ferry's hub: an embedded, Kubernetes-compatible API server with kcp-style
//! workspaces (logical clusters), durable storage and watch — the server
//! (`ferry-server`) with the built-in controllers of every profile wired in
//! ([`controllers::BuiltInControllers`]: Kubernetes' and kcp's tenancy's from
//! `ferry-controllers`, KubeStellar's from `ferry-kubestellar`, kcp TMC's
//! from `ferry-tmc`), which the binaries (`ferry-cli`) plug into the
//! commands and [`server::start`] starts hubs with. Tests start hubs through
//! the test kit (`ferry-testkit`), which is built on this crate.
//!
//! The server's and the lower layers' modules are re-exported under the
//! paths they had when they were modules of this crate
//! (`ferry_hub::service`, `ferry_hub::storage::Store`), as are the
//! controllers (`ferry_hub::controllers::placement::PLACED_LABEL`).

pub mod controllers;
pub mod server;

pub use ferry_server::{
    api, apis, auth, customize, decode, discovery, follow, grants, hub, json, kinds, kubeconfig, openapi,
    patch, protobuf, registry, replicas, selector, service, status, storage, strategy, synctarget, table,
    validation, virtual_workspace, workspace, Hub, HubConfig,
};
