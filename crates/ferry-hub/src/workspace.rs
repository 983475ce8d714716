//! Logical clusters (kcp-style workspaces).
