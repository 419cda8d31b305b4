//! The command line: global flags, subcommands, and dispatch to their implementations.

mod chat;
mod format;
mod pairing;
mod run;
mod sessions;

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::home::HermesHome;

/// Exit code for a usage or runtime error that is not a configuration error.
pub const EXIT_FAILURE: i32 = 1;

#[derive(Debug, Parser)]
#[command(
    name = "hermesd",
    version,
    about = "Multi-platform messaging gateway for the Hermes agent"
)]
pub struct Cli {
    /// Use this directory as HERMES_HOME (overrides the HERMES_HOME variable).
    #[arg(long, global = true, value_name = "PATH")]
    pub home: Option<PathBuf>,
    /// Use the named profile: <root>/profiles/NAME.
    #[arg(short = 'p', long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway daemon in the foreground (the default).
    Run(run::RunArgs),
    /// Talk to the agent in the terminal (`-q` for one message and exit).
    Chat(chat::ChatArgs),
    /// Inspect the configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Inspect and manage stored sessions in state.db.
    Sessions {
        #[command(subcommand)]
        command: sessions::SessionsCommand,
    },
    /// Approve, list and revoke DM pairing (who may talk to the bot).
    Pairing {
        #[command(subcommand)]
        command: pairing::PairingCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate config.yaml, .env and the environment; list every error.
    Check,
    /// Print the effective configuration with secrets masked.
    Show {
        /// Print JSON instead of YAML.
        #[arg(long)]
        json: bool,
    },
}

impl Cli {
    /// The log filter when `RUST_LOG` is unset: the daemon logs its life at `info`; the
    /// terminal chat logs nothing, so logs never interleave with the conversation (its own
    /// failures are reported as one `error:` line; set `RUST_LOG` to see more).
    pub fn default_log_level(&self) -> &'static str {
        match self.command {
            Some(Command::Chat(_)) => "off",
            _ => "info",
        }
    }
}

/// Parses the command line and runs it; returns the process exit code.
pub fn main_with(cli: Cli, env: BTreeMap<String, String>) -> i32 {
    let home = match HermesHome::resolve(cli.home.as_deref(), cli.profile.as_deref(), &env) {
        Ok(home) => home,
        Err(e) => {
            eprintln!("error: {e}");
            return crate::config::EXIT_CONFIG;
        }
    };
    match cli.command.unwrap_or(Command::Run(run::RunArgs::default())) {
        Command::Run(args) => run::run(&home, &env, &args),
        Command::Chat(args) => chat::run(&home, &env, args),
        Command::Config { command } => match command {
            ConfigCommand::Check => crate::config::cli::check(&home, &env),
            ConfigCommand::Show { json } => crate::config::cli::show(&home, &env, json),
        },
        Command::Sessions { command } => sessions::run(&home, &env, command),
        Command::Pairing { command } => pairing::run(&home, &env, command),
    }
}

/// A current-thread runtime for the short-lived subcommands.
fn small_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
