//! Ferry syncer engine.
//!
//! The pure parts, unit-tested without any server:
//! - [`selection`]: which objects go down and up (the merge of all SyncerConfigs), and
//!   which resource types to watch on each side once discovery is known.
//! - [`transform`]: how a copy is made (server fields stripped, ownership marked), when it
//!   needs an update, and how status returns upstream.

pub mod selection;
pub mod transform;
