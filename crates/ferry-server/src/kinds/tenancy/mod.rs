//! kcp's `tenancy.kcp.io` group.

pub mod workspace;
