//! Ferry's test kit, the one set-up every crate's tests share (a
//! dev-dependency only; nothing ships with it).
//!
//! - [`hub`]: [`TestHub`] starts a hub with the built-in controllers on a
//!   free loopback port, over SQLite or on etcd ([`TestEtcd`],
//!   [`TestEtcdCluster`], `FERRY_TEST_STORAGE=etcd`); every hub is a distinct
//!   cluster with its own Service and node-port ranges, so a hub also stands
//!   in for a workload cluster. Its items are re-exported here.
//! - [`eventually`]: waiting with a deadline, never with a bare sleep.
//! - [`workspaces`]: a workspace under `root`, once it serves (every set-up
//!   below starts its workspaces there).
//! - [`clients`]: kube-rs clients of a hub as admin or as any credential, and
//!   raw requests that return the status and body as the server sent them.
//! - [`tenants`]: a hub that knows users by bearer token (`mal`, the
//!   attacker, `alice`, `bob`), workspaces each administered by one of them,
//!   RBAC grants.
//! - [`edge`]: the KubeStellar set-up (workspaces with the edge API,
//!   SyncTargets and Locations with their mailboxes, the ESPW and binding its
//!   export, combined status); [`tmc`]: the kcp TMC set-up (SyncTargets,
//!   Locations, Placements, the syncer's virtual workspace).
//! - [`exports`]: kcp's APIExports and the APIBindings of them.
//! - [`cluster`]: objects on a hub or workspace addressed dynamically, the
//!   usual syncer stage (an upstream mailbox and a stand-in cluster);
//!   [`resources`]: the `ApiResource`s tests name.
//! - [`syncer`]: a syncer run in-process with test-speed timers, its
//!   readiness and its log.
//! - [`net`]: free loopback ports, plain HTTP reads of agents' endpoints,
//!   and a front proxy that stays put while the hub behind it moves.
//! - [`kubectl`]: real kubectl as a user runs it, with the `kubectl-ferry`
//!   plugin on PATH, from blocking or async tests.

pub mod clients;
pub mod cluster;
pub mod edge;
pub mod exports;
pub mod hub;
pub mod kubectl;
pub mod net;
pub mod resources;
pub mod syncer;
pub mod tenants;
pub mod tmc;
pub mod workspaces;

pub use hub::*;
