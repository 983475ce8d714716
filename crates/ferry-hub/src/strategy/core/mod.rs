//! The core (`v1`) group.

pub mod namespace;
pub mod pod;
pub mod replication_controller;
pub mod secret;
