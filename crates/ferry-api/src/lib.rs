//! Ferry API types. Filled in by the syncer work.
