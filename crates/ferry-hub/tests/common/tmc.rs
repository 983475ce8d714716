//! `ferry_testkit::tmc`, under the name the hub tests import.

pub use ferry_testkit::tmc::*;
