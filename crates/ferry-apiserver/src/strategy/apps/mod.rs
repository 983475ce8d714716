//! The `apps` group: workload controllers. Each kind is a
//! [`crate::strategy::workload::Workload`] with its own defaults.

pub mod daemonset;
pub mod deployment;
pub mod replicaset;
pub mod statefulset;
