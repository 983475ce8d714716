//! `kubectl-ferry`: the same commands as `ferry`, as a kubectl plugin
//! (`kubectl ferry syncer-gen ...`).

fn main() -> anyhow::Result<()> {
    ferry_cli::main("kubectl ferry")
}
