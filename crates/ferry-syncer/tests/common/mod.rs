//! The tests' kit is `ferry_testkit`; this module keeps the names the syncer
//! tests import with `use common::*` (stand-in clusters, the syncer stage, a
//! syncer run in-process, waiting with a deadline).
#![allow(dead_code, unused_imports)]

pub use ferry_testkit::cluster::*;
pub use ferry_testkit::eventually;
pub use ferry_testkit::resources::*;
pub use ferry_testkit::syncer::*;
