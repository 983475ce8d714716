//! Ferry syncer engine.
