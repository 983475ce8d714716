//! `ferry_testkit::tenants`, under the name the hub tests import.

pub use ferry_testkit::tenants::*;
