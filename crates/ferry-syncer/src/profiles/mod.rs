//! The profiles: what makes each kind of syncer different (see [`crate::profile`]).
//!
//! - [`kubestellar`]: KubeStellar's edge syncer: SyncerConfigs in a mailbox workspace
//!   select objects, copies keep their names, `edge.kubestellar.io/downsynced` and
//!   `.../upsynced` annotations plus the `ferry.dev/syncer` label mark them.
//! - [`tmc`]: kcp's TMC workload syncer: objects labelled `state.workload.kcp.io/<key>`
//!   in the SyncTarget's virtual workspace, copies in `kcp-<hash>` namespaces.

pub mod kubestellar;
pub mod tmc;
