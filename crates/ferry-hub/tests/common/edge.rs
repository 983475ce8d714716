//! `ferry_testkit::edge`, under the name the hub tests import.

pub use ferry_testkit::edge::*;
