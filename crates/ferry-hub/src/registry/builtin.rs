use super::ResourceInfo;
/// Built-in resources served in every workspace.
pub fn builtin_resources() -> Vec<ResourceInfo> { Vec::new() }
