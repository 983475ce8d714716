//! `ferry_testkit::kubectl`'s async face, under the name the CLI tests
//! import: kubectl run off the async runtime's threads, able to feed
//! standard input and run a document's shell blocks.

#![allow(unused_imports)]

pub use ferry_testkit::kubectl::AsyncKubectl as Kubectl;
