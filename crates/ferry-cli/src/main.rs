//! `ferry`.

/// mimalloc rather than glibc's malloc: glibc gives each thread that
/// contends for the heap an arena of its own (up to eight per core) and
/// rarely returns their freed pages, so a hub serving lists and large
/// writes on tokio's blocking pool kept 365 MiB resident where 122 MiB were
/// live (`ferry bench hub`, 20k objects). mimalloc's per-thread heaps hand
/// freed pages back.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    ferry_cli::main("ferry")
}
