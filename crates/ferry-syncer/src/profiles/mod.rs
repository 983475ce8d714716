//! The profiles: what makes each kind of syncer different (see [`crate::profile`]).
//!
//! - [`kubestellar`]: KubeStellar's edge syncer: SyncerConfigs in a mailbox workspace
//!   select objects, copies keep their names, `edge.kubestellar.io/downsynced` and
//!   `.../upsynced` annotations plus the `ferry.dev/syncer` label mark them.

pub mod kubestellar;
