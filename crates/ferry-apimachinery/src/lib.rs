//! Kubernetes object machinery: the rules a Kubernetes-compatible API server
//! applies to objects, as plain functions over JSON values.
//!
//! What it is — the lowest layer of Ferry's hub, with no I/O:
//! - [`status`]: the one place that builds `meta.k8s.io/v1 Status` error
//!   bodies ([`status::ApiError`]), and turns them into HTTP responses;
//! - [`json`]: bounded JSON parsing of request bodies;
//! - [`patch`]: JSON patch, JSON merge patch, strategic merge patch and
//!   server-side apply with managed fields;
//! - [`protobuf`]: the `application/vnd.kubernetes.protobuf` encoding of
//!   built-in kinds;
//! - [`selector`]: label and field selectors;
//! - [`validation`]: names, OpenAPI v3 structural schemas, CEL rules and
//!   CRD definitions;
//! - [`table`]: `meta.k8s.io/v1 Table` rows and columns for `kubectl get`.
//!
//! What it is not: it knows nothing of storage, servers, routes, workspaces
//! (kcp's logical clusters) or Ferry's profiles (KubeStellar, kcp TMC, the
//! api-syncagent). Those layers (`ferry-storage`, `ferry-hub`) are built on
//! it; `ferry-hub` re-exports every module here under its old path, so
//! `ferry_hub::status::ApiError` and `ferry_apimachinery::status::ApiError`
//! are the same item.

pub mod json;
pub mod patch;
pub mod protobuf;
pub mod selector;
pub mod status;
pub mod table;
pub mod validation;
