//! The `hermesd` binary: logging set-up, then the command line in [`hermesd::cli`].

use clap::Parser;

/// `--features heap-stats`: Rust allocations go to jemalloc, whose statistics then count
/// exactly the Rust heap (see `hermesd::heap_stats`).
#[cfg(feature = "heap-stats")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    // rustls is built with the ring provider only; install it before any TLS client exists.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = hermesd::cli::Cli::parse();
    let env = std::env::vars().collect();
    // Every configured token and key is masked in the logs, whoever logs it.
    let secrets =
        hermesd::logging::secrets_for_home(cli.home.as_deref(), cli.profile.as_deref(), &env);
    let _logging =
        hermesd::logging::install(cli.log_format, cli.default_log_level(), &env, secrets);
    std::process::exit(hermesd::cli::main_with(cli, env));
}
