//! User transforms (KubeStellar's `CustomTransform`), applied by the
//! translator to a WMW object before it is copied into any mailbox.
//!
//! The WMW's owner writes the transforms, in the WMW, and they shape only
//! that WMW's objects: the translator reads the transforms of the object's
//! own logical cluster and no other, so nothing in one workspace changes
//! another's copies. Applying them here, once per object rather than once
//! per destination, is where KubeStellar applies them too (on the way out of
//! the workload description space), and the syncer then carries the
//! transformed copy like any other. What a transform does is
//! [`ferry_api::transform`]'s, which the kcp TMC syncer shares.

pub use ferry_api::transform::{transformed, Transform, TRANSFORMED_BY_ANNOTATION};
