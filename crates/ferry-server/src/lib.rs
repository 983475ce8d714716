//! Ferry's hub: an embedded, Kubernetes-compatible API server with kcp-style
//! workspaces (logical clusters), durable storage and watch.

pub mod api;
pub mod apis;
pub mod auth;
pub mod controllers;
pub mod customize;
pub mod decode;
pub mod discovery;
pub mod follow;
pub mod grants;
pub mod hub;
pub mod kubeconfig;
pub mod openapi;
pub mod registry;
pub mod replicas;
pub mod server;
pub mod service;
pub mod strategy;
pub mod synctarget;
pub mod testing;
pub mod virtual_workspace;
pub mod workspace;

// The layers below the hub, under the paths they had when they were modules
// of this crate (`crate::status::ApiError`, `ferry_hub::storage::Store`).
pub use ferry_apimachinery::{json, patch, protobuf, selector, status, table, validation};
pub use ferry_storage as storage;

pub use hub::{Hub, HubConfig};
