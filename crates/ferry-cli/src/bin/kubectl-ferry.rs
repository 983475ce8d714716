//! `kubectl-ferry`: the same commands as `ferry`, as a kubectl plugin
//! (`kubectl ferry syncer-gen ...`).

fn main() -> std::process::ExitCode {
    ferry_cli::main("kubectl ferry")
}
