//! Prints every Ferry CRD as YAML: `cargo run -p ferry-api --example print_crds`.
fn main() {
    print!("{}", ferry_api::crds_yaml());
}
