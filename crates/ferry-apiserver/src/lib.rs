//! A Kubernetes-compatible API server as a library: what kube-apiserver does
//! for a client — storage with watch, the registry of what is served, the
//! typed write path, REST and watch over HTTP, authentication and RBAC,
//! discovery, OpenAPI and Table — holding nothing of kcp, KubeStellar or
//! TMC but the keys a caller's logical cluster travels under (said below).
//! Ferry's hub (`ferry-server`) builds kcp's tenancy, APIExports, virtual
//! workspaces and the profiles' kinds on top of it; a program that wants a
//! plain Kubernetes API server builds a [`Hub`] over a [`storage::Store`]
//! and serves [`api::router`].
//!
//! # Public surface, bottom up
//!
//! - [`registry`]: what is served — Kubernetes' built-in resources, those
//!   a layer above serves built in, those CRDs add, field labels, the key
//!   order of stored objects; [`discovery`] and [`openapi`] describe them to
//!   clients.
//! - [`hub`]: the state every layer above reads — the store, the registry,
//!   the logical clusters ([`workspace`]), security ([`auth`]: tokens,
//!   ServiceAccounts, impersonation, RBAC) and the [`hub::Extensions`] a
//!   layer above adds.
//! - [`request`], [`strategy`] and [`service`]: the typed write path. Every
//!   write — from a client or a controller — goes through the object service:
//!   decode ([`decode`]), prepare, validate, admit, store, then the
//!   [`hub::WriteHooks`] of whoever runs controllers. What is special about
//!   a kind lives in its strategy; [`propagation`] is a DELETE's policy.
//! - [`api`]: REST handlers and watch over HTTP (JSON, YAML, protobuf and
//!   Table answers), and the views ([`view`]) a layer above serves under
//!   `/services/`.
//! - [`tls`] (the PKI and serving certificates), [`kubeconfig`] (the
//!   kubeconfigs the server writes), [`service_ranges`] (Services' cluster
//!   IPs and node ports) and [`follow_metrics`] (how controllers that follow
//!   the store keep up, on `/metrics`).
//!
//! # Logical clusters
//!
//! Every object and request is partitioned by a logical cluster
//! ([`workspace::LogicalCluster`]), the key kcp gives its workspaces; a
//! plain Kubernetes server has one, `root`. The library keeps the index of
//! the logical clusters that exist and resolves the one a request names; a
//! layer above says which of its objects make more of them.
//!
//! # What a layer above adds
//!
//! The library names nothing above it. A layer that adds kinds and routes
//! hands them in when it builds the hub ([`hub::Hub::with_extensions`]), one
//! value per type in [`hub::Extensions`]:
//!
//! - [`registry::BuiltinResources`]: resources it serves built in, in every
//!   logical cluster, after Kubernetes' own (kcp's Workspaces, APIExports,
//!   SyncTargets, ...), written down as [`registry::BuiltinKind`]s with
//!   their `kubectl get` columns ([`registry::BuiltinKind::with_columns`];
//!   [`table`] holds only Kubernetes' own);
//! - [`strategy::StrategyTable`]: the strategies of its kinds, looked up
//!   before Kubernetes' own, as kube-apiserver's strategies are registered by
//!   whoever installs an API group;
//! - [`workspace::LogicalClusterObjects`]: the objects that make logical
//!   clusters below root (kcp's Workspaces), and the annotation that names
//!   an object's logical cluster (`kcp.io/cluster`);
//! - `Arc<dyn` [`hub::ServedResources`]`>`: resources a logical cluster
//!   serves beyond its CRDs (kcp's APIBindings);
//! - [`service::reserved::ReservedMetadata`]: labels and annotations only
//!   its own components may write (kcp TMC's scheduler and syncers');
//! - [`view::VirtualWorkspaces`]: views of the logical clusters served
//!   under `/services/<kind>/...` (kcp's virtual workspaces).
//!
//! A hub built with none ([`Hub::new`]) serves Kubernetes' own kinds and
//! CRDs in `root` alone.
//!
//! What still names kcp: a caller's logical cluster travels under kcp's
//! keys (the `kcp.io/cluster` claim of a ServiceAccount token, the
//! `authentication.kcp.io/cluster-name` user extra), as kcp's clients
//! expect them, and a test impersonates that extra.
//! `crates/ferry-cli/tests/layers.rs` lists each such file with its reason,
//! and fails when a new one appears.
//!
//! The modules import one another without a circle: [`hub`] holds the state
//! and names only the modules below it ([`auth`] reads it through
//! [`auth::AuthContext`]); [`request`], [`strategy`], [`service`] and
//! [`api`] build on it in that order.

pub mod api;
pub mod auth;
pub mod decode;
pub mod discovery;
pub mod follow_metrics;
pub mod hub;
pub mod kubeconfig;
pub mod openapi;
pub mod propagation;
pub mod registry;
pub mod request;
pub mod service;
pub mod service_ranges;
pub mod strategy;
pub mod tls;
pub mod view;
pub mod workspace;

// The layers below, under the paths they had when they were modules of the
// hub's crate (`crate::status::ApiError`, `crate::storage::Store`).
pub use ferry_apimachinery::{json, patch, protobuf, selector, status, table, validation};
pub use ferry_storage as storage;

pub use hub::{Hub, HubConfig};
