//! HTTP(S) server.
pub mod tls;
