//! `ferry_testkit::kubectl`'s blocking face, under the name the CLI tests
//! import: real kubectl with the built `kubectl-ferry` plugin on PATH, its
//! own KUBECONFIG and HOME.

#![allow(unused_imports)]

pub use ferry_testkit::kubectl::{admin_copy, Kubectl};
