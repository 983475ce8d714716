//! Ferry's hub: an embedded, Kubernetes-compatible API server with kcp-style
//! workspaces (logical clusters), durable storage and watch.

pub mod api;
pub mod apis;
pub mod auth;
pub mod controllers;
pub mod decode;
pub mod discovery;
pub mod hub;
pub mod json;
pub mod kubeconfig;
pub mod openapi;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod replicas;
pub mod selector;
pub mod server;
pub mod service;
pub mod status;
pub mod storage;
pub mod strategy;
pub mod synctarget;
pub mod table;
pub mod testing;
pub mod validation;
pub mod virtual_workspace;
pub mod workspace;

pub use hub::{Hub, HubConfig};
