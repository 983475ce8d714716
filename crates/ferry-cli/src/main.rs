//! `ferry`.

fn main() -> anyhow::Result<()> {
    ferry_cli::main("ferry")
}
