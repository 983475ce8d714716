//! Who may place or schedule onto whose Locations: the rules that admission
//! (the strategies), the syncer virtual workspace and the placement and
//! scheduling controllers all apply, so they live below all three.

pub mod edge;
pub mod tmc;
