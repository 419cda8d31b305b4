//! The `hermesd` binary: logging set-up, then the command line in [`hermesd::cli`].

use clap::Parser;

fn init_logging(default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() {
    // rustls is built with the ring provider only; install it before any TLS client exists.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = hermesd::cli::Cli::parse();
    init_logging(cli.default_log_level());
    let env = std::env::vars().collect();
    std::process::exit(hermesd::cli::main_with(cli, env));
}
