//! The `certificates.k8s.io` group.

pub mod csr;
