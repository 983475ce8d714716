//! The tests' kit is `ferry_testkit`; these modules keep the names the hub
//! tests import (`common::call`, `common::tenants::Tenants`, ...).
#![allow(dead_code, unused_imports)]

pub use ferry_testkit::clients::*;
pub use ferry_testkit::eventually;

pub mod edge;
pub mod tenants;
pub mod tmc;
