//! The core (`v1`) group.

pub mod namespace;
pub mod pod;
pub mod pod_spec;
pub mod replication_controller;
pub mod secret;
pub mod service;
