//! The command line: global flags, subcommands, and dispatch to their implementations.

mod chat;
mod config_cmd;
mod cron;
mod doctor;
mod format;
mod health;
mod hooks;
mod mcp;
mod pairing;
mod run;
mod runtime;
mod send;
mod service;
mod sessions;
mod state_cmd;
mod webhook;

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::home::HermesHome;

/// Exit code for a usage or runtime error that is not a configuration error.
pub const EXIT_FAILURE: i32 = 1;

/// `hermesd --version`: the crate version and the git revision it was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("HERMESD_GIT_REV"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "hermesd",
    version = VERSION,
    about = "Multi-platform messaging gateway for the Hermes agent"
)]
pub struct Cli {
    /// Use this directory as HERMES_HOME (overrides the HERMES_HOME variable).
    #[arg(long, global = true, value_name = "PATH")]
    pub home: Option<PathBuf>,
    /// Use the named profile: <root>/profiles/NAME.
    #[arg(short = 'p', long, global = true, value_name = "NAME")]
    pub profile: Option<String>,
    /// Log format: text, JSON lines, or auto (JSON when stderr is not a terminal under
    /// systemd or in a container). Filter with RUST_LOG.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t,
        value_name = "FORMAT"
    )]
    pub log_format: crate::logging::LogFormat,
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
    /// Move the state between state.db and PostgreSQL (either way), and verify a copy.
    State {
        #[command(subcommand)]
        command: state_cmd::StateCommand,
    },
    /// Approve, list and revoke DM pairing (who may talk to the bot).
    Pairing {
        #[command(subcommand)]
        command: pairing::PairingCommand,
    },
    /// List and manage scheduled jobs (cron/jobs.json, shared with `hermes cron`).
    Cron {
        #[command(subcommand)]
        command: cron::CronCommand,
    },
    /// Check config, permissions, state.db, tokens, the model endpoint and disk space.
    Doctor(doctor::DoctorArgs),
    /// Inspect the configured MCP servers (Model Context Protocol tools).
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// List, approve, revoke and try the operator's hooks (`hooks:` and $HERMES_HOME/hooks).
    Hooks {
        #[command(subcommand)]
        command: hooks::HooksCommand,
    },
    /// Install or remove the systemd unit for this binary and home.
    Service {
        #[command(subcommand)]
        command: service::ServiceCommand,
    },
    /// Ask the running daemon's admin API whether it is up (exit 0) or not (exit 1).
    Health(health::HealthArgs),
    /// Manage webhook subscriptions (webhook_subscriptions.json, shared with `hermes webhook`).
    Webhook {
        #[command(subcommand)]
        command: webhook::WebhookCommand,
    },
    /// Send a message to a chat through the running gateway (delivered once, rate limits
    /// waited out). Exit 0 delivered, 1 not delivered, 2 usage or configuration error.
    Send(send::SendArgs),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate config.yaml, .env and the environment; list every error.
    Check {
        /// Also fail (exit 78) on warnings: unknown keys and settings hermesd accepts but
        /// does not support yet.
        #[arg(long)]
        strict: bool,
    },
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
            // Their report is the output; only problems should interleave with it.
            Some(
                Command::Doctor(_)
                | Command::Health(_)
                | Command::Send(_)
                | Command::Service { .. }
                | Command::Mcp { .. }
                | Command::Hooks { .. }
                | Command::State { .. },
            ) => "warn",
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
            ConfigCommand::Check { strict } => config_cmd::check(&home, &env, strict),
            ConfigCommand::Show { json } => config_cmd::show(&home, &env, json),
        },
        Command::Sessions { command } => sessions::run(&home, &env, command),
        Command::State { command } => state_cmd::run(&home, &env, command),
        Command::Pairing { command } => pairing::run(&home, &env, command),
        Command::Cron { command } => cron::run(&home, &env, command),
        Command::Doctor(args) => doctor::run(&home, &env, &args),
        Command::Mcp { command } => mcp::run(&home, &env, command),
        Command::Hooks { command } => hooks::run(&home, &env, command),
        Command::Service { command } => service::run(&home, &env, command),
        Command::Health(args) => health::run(&home, &env, &args),
        Command::Webhook { command } => webhook::run(&home, &env, command),
        Command::Send(args) => send::run(&home, &env, &args),
    }
}

/// A current-thread runtime for the short-lived subcommands.
fn small_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}
