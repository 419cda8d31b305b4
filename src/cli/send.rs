//! `hermesd send --to <platform>[:<chat>[:<thread>]] [--thread T] [--file F] "text"`: a
//! message from a script into a chat, through the RUNNING gateway's admin API (`POST /send`,
//! see `gateway/admin_send.rs`), so it is recorded in the delivery ledger and goes out once,
//! in the chat's order, waiting out rate limits. By default the command waits (bounded by
//! `--timeout`) for the outcome: exit 0 once delivered; 1 when delivery failed, the wait
//! ran out or no gateway answers; 2 for a usage or configuration error (a refused request
//! included). The idempotency key (random, or `--idempotency-key`) makes retries safe: the
//! same key and text never become a second message.

mod body;
mod client;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::{self, Secret};
use crate::home::HermesHome;
use body::{Destination, parse_destination, read_body, with_subject};
use client::{AdminClient, CallError, Settled};

/// Delivery failed, was not confirmed in time, or no gateway answers.
const EXIT_NOT_DELIVERED: i32 = 1;
/// Bad arguments, configuration, or a request the gateway refused.
const EXIT_USAGE: i32 = 2;

#[derive(Debug, clap::Args)]
pub struct SendArgs {
    /// Where to: PLATFORM (its home channel), PLATFORM:CHAT or PLATFORM:CHAT:THREAD.
    #[arg(short = 't', long, value_name = "TARGET")]
    pub to: Option<String>,
    /// The message text; without it, --file or piped stdin. With --list: a platform filter.
    pub message: Option<String>,
    /// The thread (Telegram topic, Discord thread, Slack thread ts) within the chat.
    #[arg(long, value_name = "THREAD")]
    pub thread: Option<String>,
    /// Read the message text from this file ('-' for stdin). Attach files with MEDIA:/path
    /// in the text instead.
    #[arg(short = 'f', long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// A first line put before the message.
    #[arg(short = 's', long, value_name = "LINE")]
    pub subject: Option<String>,
    /// List the platforms the running gateway can send to and their home channels.
    #[arg(short = 'l', long = "list")]
    pub list: bool,
    /// Print nothing on success.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// Return once the gateway has recorded the message, without waiting for delivery.
    #[arg(long)]
    pub no_wait: bool,
    /// Seconds to wait for the delivery.
    #[arg(long, default_value_t = 120, value_name = "SECONDS")]
    pub timeout: u64,
    /// The same key for a retry of the same message (letters, digits, '-', '_', '.'); a
    /// random one by default.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
    /// The admin API's address (HOST:PORT) instead of admin.host/admin.port.
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<String>,
}

/// How the command ends: an exit code and what to say.
struct Ending {
    code: i32,
    message: String,
}

fn usage(message: impl Into<String>) -> Ending {
    Ending {
        code: EXIT_USAGE,
        message: message.into(),
    }
}

fn not_delivered(message: impl Into<String>) -> Ending {
    Ending {
        code: EXIT_NOT_DELIVERED,
        message: message.into(),
    }
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, args: &SendArgs) -> i32 {
    let outcome = prepare(home, env, args).and_then(|(client, job)| {
        let runtime = super::small_runtime()
            .map_err(|e| not_delivered(format!("cannot start the runtime: {e}")))?;
        runtime.block_on(async {
            match job {
                Job::List(filter) => list(&client, filter.as_deref(), args).await,
                Job::Send(destination, text) => send(&client, &destination, text, args).await,
            }
        })
    });
    match outcome {
        Ok(()) => 0,
        Err(ending) => {
            if !ending.message.is_empty() {
                eprintln!("hermesd send: {}", crate::logging::mask(&ending.message));
            }
            ending.code
        }
    }
}

enum Job {
    List(Option<String>),
    Send(Destination, String),
}

/// Reads the arguments, the message and the configuration; nothing is sent yet.
fn prepare(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    args: &SendArgs,
) -> Result<(AdminClient, Job), Ending> {
    let job = if args.list {
        Job::List(args.message.clone())
    } else {
        let to = args.to.as_deref().ok_or_else(|| {
            usage(
                "--to PLATFORM[:CHAT[:THREAD]] is required, e.g. --to telegram \"deploy done\" \
                 (the home channel) or --to telegram:-1001234567890; --list shows the targets",
            )
        })?;
        let destination = parse_destination(to, args.thread.as_deref()).map_err(usage)?;
        let body = read_body(args.message.as_deref(), args.file.as_deref()).map_err(usage)?;
        let text = body.filter(|b| !b.trim().is_empty()).ok_or_else(|| {
            usage("no message: give the text as an argument, with --file PATH, or on stdin")
        })?;
        Job::Send(destination, with_subject(args.subject.as_deref(), text))
    };
    let loaded = config::load(home, env).map_err(|errors| {
        usage(format!(
            "the configuration does not load:\n{}",
            crate::logging::mask(&errors.to_string())
        ))
    })?;
    let admin = &loaded.config.admin;
    // The address the running daemon recorded is where it really listens; else the
    // configured one (a daemon that is not running is reported when it does not answer).
    let running = crate::gateway::admin_addr_file::running_admin_addr(home.path());
    let addr = match (&args.addr, running) {
        (Some(addr), _) => addr.clone(),
        (None, Some(addr)) => addr.to_string(),
        (None, None) if admin.port == 0 => {
            return Err(not_delivered(
                "no running gateway on this home: admin.port is 0 and no daemon recorded \
                 the port it got; start it with `hermesd run` (or pass --addr HOST:PORT)",
            ));
        }
        (None, None) => super::health::admin_target(admin),
    };
    let token = token(admin.token.as_ref(), loaded.config.api_server.key.as_ref())?;
    let client = AdminClient::new(&addr, token).map_err(not_delivered)?;
    Ok((client, job))
}

/// `admin.token`, else the API key: the operator's credential for the admin API.
fn token(admin: Option<&Secret>, api_key: Option<&Secret>) -> Result<Secret, Ending> {
    admin
        .into_iter()
        .chain(api_key)
        .find(|t| !t.expose().is_empty())
        .cloned()
        .ok_or_else(|| {
            usage(
                "sending needs the operator's token: set admin.token in config.yaml (or \
                 API_SERVER_KEY in .env), the same one the running gateway reads",
            )
        })
}

fn unreachable(client: &AdminClient, reason: &str) -> Ending {
    not_delivered(format!(
        "no running gateway on {} ({reason}); start it with `hermesd run`",
        client.base()
    ))
}

fn refused(error: CallError, client: &AdminClient) -> Ending {
    match error {
        CallError::Unreachable(reason) => unreachable(client, &reason),
        CallError::Refused { status, message } => usage(format!(
            "the gateway refused the message ({status}): {message}"
        )),
        CallError::Broken(reason) => not_delivered(format!("the gateway failed: {reason}")),
    }
}

fn idempotency_key(args: &SendArgs) -> String {
    args.idempotency_key
        .clone()
        .unwrap_or_else(|| format!("cli-{:032x}", rand::random::<u128>()))
}

async fn send(
    client: &AdminClient,
    destination: &Destination,
    text: String,
    args: &SendArgs,
) -> Result<(), Ending> {
    let key = idempotency_key(args);
    let request = json!({
        "platform": destination.platform,
        "chat_id": destination.chat_id,
        "thread_id": destination.thread_id,
        "text": text,
        "idempotency_key": key,
    });
    let recorded = client
        .send(&request)
        .await
        .map_err(|e| refused(e, client))?;
    let id = recorded["id"].as_str().unwrap_or_default().to_owned();
    let label = destination.label();
    if args.no_wait {
        return finish(args, &recorded, &format!("recorded for {label} (id {id})"));
    }
    let limit = Duration::from_secs(args.timeout.max(1));
    match client
        .wait_settled(&id, limit)
        .await
        .map_err(|e| refused(e, client))?
    {
        Settled::Done(report) if report["state"] == "delivered" => {
            finish(args, &report, &format!("sent to {label}"))
        }
        Settled::Done(report) => {
            print_json(args, &report);
            Err(not_delivered(format!(
                "not delivered to {label}: {} ({})",
                report["state"].as_str().unwrap_or("unknown"),
                report["last_error"]
                    .as_str()
                    .unwrap_or("no reason recorded")
            )))
        }
        Settled::TimedOut(report) => {
            let report = report.unwrap_or(recorded);
            print_json(args, &report);
            Err(not_delivered(format!(
                "not confirmed within {}s (state {}{}); the gateway keeps it owed and sends it \
                 when it can. Retrying with --idempotency-key {key} never sends it twice",
                limit.as_secs(),
                report["state"].as_str().unwrap_or("unknown"),
                report["last_error"]
                    .as_str()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default(),
            )))
        }
    }
}

fn print_json(args: &SendArgs, report: &Value) {
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).unwrap_or_default()
        );
    }
}

fn finish(args: &SendArgs, report: &Value, line: &str) -> Result<(), Ending> {
    if args.json {
        print_json(args, report);
    } else if !args.quiet {
        println!("{line}");
    }
    Ok(())
}

async fn list(client: &AdminClient, filter: Option<&str>, args: &SendArgs) -> Result<(), Ending> {
    let targets = client.targets().await.map_err(|e| refused(e, client))?;
    let platforms: Vec<&Value> = targets["platforms"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| filter.is_none_or(|f| p["platform"].as_str() == Some(f)))
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "platforms": platforms })).unwrap_or_default()
        );
        return Ok(());
    }
    if platforms.is_empty() {
        return Err(usage(match filter {
            Some(f) => format!("platform '{f}' is not running in the gateway"),
            None => "the gateway runs no chat platform".to_owned(),
        }));
    }
    for p in platforms {
        let name = p["platform"].as_str().unwrap_or_default();
        let home = &p["home_channel"];
        match home["chat_id"].as_str() {
            Some(chat) => match home["thread_id"].as_str() {
                Some(thread) => println!("{name}  home channel {name}:{chat}:{thread}"),
                None => println!("{name}  home channel {name}:{chat}"),
            },
            None => println!("{name}  (no home channel: name the chat, {name}:<chat>)"),
        }
    }
    Ok(())
}
