//! Ferry API types, CRD manifests and well-known names. No I/O.
//!
//! The shapes follow the reference systems so their documented YAML works as written:
//!
//! | module | API group/version | kinds |
//! | --- | --- | --- |
//! | [`edge`] | `edge.kubestellar.io/v2alpha1` | SyncerConfig, SyncTarget, Location, EdgePlacement |
//! | [`workload`] | `workload.kcp.io/v1alpha1` | SyncTarget |
//! | [`scheduling`] | `scheduling.kcp.io/v1alpha1` | Location, Placement |
//! | [`apiresource`] | `apiresource.kcp.io/v1alpha1` | APIResourceImport |
//! | [`syncagent`] | `syncagent.kcp.io/v1alpha1` | PublishedResource |
//! | [`control`] | `control.kubestellar.io/v1alpha1` | CustomTransform |
//! | [`combined_status`] | `control.kubestellar.io/v1alpha1` | StatusCollector, CombinedStatus |
//!
//! Every kind is a plain struct (`metadata`, `spec`, `status`) that implements
//! [`kube::Resource`] and [`kube::CustomResourceExt`], so it works with `kube::Api`.
//! The root types are written by hand (see `resource.rs`) rather than with
//! `#[derive(CustomResource)]` because the reference objects may omit `spec` entirely
//! (the seeds' SyncTarget has none), which the derive cannot express.
//!
//! Ferry's hub serves `workload.kcp.io`, `scheduling.kcp.io` and `apiresource.kcp.io`
//! built in, as kcp does; [`crds`] still renders the SyncTarget CRD for real clusters
//! (the hub stores such a CRD but keeps serving its built-in).
//!
//! [`well_known`] holds every label, annotation and finalizer name the system uses;
//! [`crds`] renders all CRDs (`ferry crds | kubectl apply -f -`); [`timestamp`] and
//! [`naming`] format the timestamps and generated names that hub, syncer and CLI share.

#[macro_use]
mod resource;

pub mod allocated;
pub mod apiresource;
pub mod cluster_local;
pub mod combined_status;
pub mod control;
pub mod crd_builder;
pub mod crds;
pub mod drift;
pub mod edge;
pub mod field_path;
pub mod naming;
pub mod scheduling;
pub mod schema;
pub mod syncagent;
pub mod timestamp;
pub mod transform;
pub mod well_known;
pub mod workload;

pub use crds::{all_crds, crds_yaml};
pub use well_known as labels;
