//! `hermesd webhook subscribe | list | remove | test`: the webhook routes kept in the home's
//! `webhook_subscriptions.json` (the file and the JSON shape Hermes's `hermes webhook` uses,
//! so either tool reads the other's routes). The running listener re-reads the file when it
//! changes; routes in config.yaml are not touched here and win over a subscription of the
//! same name. The file holds each route's secret: it is written whole (temporary sibling,
//! then rename) and private (0600).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use clap::Subcommand;
use serde_json::{Map, Value, json};

use super::EXIT_FAILURE;
use crate::home::HermesHome;

const FILE: &str = hermes_webhook::settings::SUBSCRIPTIONS_FILE;
const USAGE: i32 = 2;

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Add or replace a route served at /webhooks/<name>.
    #[command(alias = "add")]
    Subscribe(Subscription),
    /// List the subscriptions.
    #[command(alias = "ls")]
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a subscription.
    #[command(alias = "rm")]
    Remove { name: String },
    /// Send a signed test event to a subscription on the running listener.
    Test {
        name: String,
        /// The JSON payload to send.
        #[arg(long)]
        payload: Option<String>,
    },
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, command: WebhookCommand) -> i32 {
    let path = home.path().join(FILE);
    match command {
        WebhookCommand::Subscribe(request) => subscribe(home, env, &path, request),
        WebhookCommand::List { json } => list(home, env, &path, json),
        WebhookCommand::Remove { name } => remove(&path, &name),
        WebhookCommand::Test { name, payload } => test(home, env, &path, &name, payload),
    }
}

#[derive(Debug, clap::Args)]
pub struct Subscription {
    name: String,
    /// Event types taken (comma-separated); none = all.
    #[arg(long)]
    events: Option<String>,
    /// The prompt template ({dotted.path} into the payload, {event_type}, {__raw__}).
    #[arg(long)]
    prompt: Option<String>,
    /// Skills whose instructions wrap the prompt (comma-separated; the first found).
    #[arg(long)]
    skills: Option<String>,
    /// log, github_comment, telegram, discord or slack.
    #[arg(long, default_value = "log")]
    deliver: String,
    /// The chat to deliver to (else the platform's home channel).
    #[arg(long = "deliver-chat-id")]
    deliver_chat_id: Option<String>,
    /// Post the rendered prompt itself; no agent runs.
    #[arg(long = "deliver-only")]
    deliver_only: bool,
    /// The HMAC secret senders sign with; a random one when omitted.
    #[arg(long)]
    secret: Option<String>,
    #[arg(long)]
    description: Option<String>,
}

fn subscribe(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    path: &Path,
    request: Subscription,
) -> i32 {
    let name = request.name.trim().to_lowercase().replace(' ', "-");
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        eprintln!(
            "error: '{name}' is not a route name: use lowercase letters, digits, '-' and '_'"
        );
        return USAGE;
    }
    if request.deliver_only && request.deliver == "log" {
        eprintln!(
            "error: --deliver-only needs --deliver to name a chat platform or github_comment"
        );
        return USAGE;
    }
    let split = |list: &Option<String>| -> Vec<String> {
        list.as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let secret = request.secret.unwrap_or_else(random_secret);
    let mut route = json!({
        "description": request.description.unwrap_or_else(|| format!("Subscription {name}")),
        "events": split(&request.events),
        "secret": secret,
        "prompt": request.prompt.unwrap_or_default(),
        "skills": split(&request.skills),
        "deliver": request.deliver,
        "created_at": chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    });
    if request.deliver_only {
        route["deliver_only"] = json!(true);
    }
    if let Some(chat) = request.deliver_chat_id {
        route["deliver_extra"] = json!({ "chat_id": chat });
    }
    // The listener would leave out a route it cannot serve; say so now instead.
    let mut warnings = Vec::new();
    if let Err(errors) =
        hermes_webhook::route::Route::parse(FILE, &name, &route, None, &mut warnings)
    {
        for e in errors {
            eprintln!("error: {e}");
        }
        return USAGE;
    }
    let mut subs = match load(path) {
        Ok(subs) => subs,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    let replaced = subs.insert(name.clone(), route).is_some();
    if let Err(e) = save(path, &subs) {
        eprintln!("error: cannot write {}: {e}", path.display());
        return EXIT_FAILURE;
    }
    println!(
        "{} webhook subscription {name}",
        if replaced { "Updated" } else { "Created" }
    );
    println!("  URL:     {}/webhooks/{name}", base_url(home, env));
    println!("  Secret:  {secret}");
    println!(
        "Senders sign each request with this secret (GitHub: X-Hub-Signature-256). The running gateway picks the route up without a restart."
    );
    0
}

fn list(home: &HermesHome, env: &BTreeMap<String, String>, path: &Path, json: bool) -> i32 {
    let subs = match load(path) {
        Ok(subs) => subs,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    if json {
        // Secrets stay in the file; a listing never prints them.
        let shown: Map<String, Value> = subs
            .iter()
            .map(|(name, route)| {
                let mut route = route.clone();
                if let Some(map) = route.as_object_mut() {
                    map.remove("secret");
                }
                (name.clone(), route)
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&shown).unwrap_or_default()
        );
        return 0;
    }
    if subs.is_empty() {
        println!("No webhook subscriptions. Add one with `hermesd webhook subscribe <name>`.");
        return 0;
    }
    let base = base_url(home, env);
    for (name, route) in &subs {
        let events = route["events"]
            .as_array()
            .map(|e| {
                e.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "(all)".to_owned());
        let deliver = route["deliver"].as_str().unwrap_or("log");
        let direct = if route["deliver_only"] == json!(true) {
            " (no agent)"
        } else {
            ""
        };
        println!(
            "{name}\n  URL:     {base}/webhooks/{name}\n  Events:  {events}\n  Deliver: {deliver}{direct}"
        );
    }
    0
}

fn remove(path: &Path, name: &str) -> i32 {
    let name = name.trim().to_lowercase();
    let mut subs = match load(path) {
        Ok(subs) => subs,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    if subs.remove(&name).is_none() {
        eprintln!(
            "error: no subscription named '{name}' (routes in config.yaml are changed there)"
        );
        return EXIT_FAILURE;
    }
    if let Err(e) = save(path, &subs) {
        eprintln!("error: cannot write {}: {e}", path.display());
        return EXIT_FAILURE;
    }
    println!("Removed webhook subscription {name}");
    0
}

fn test(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    path: &Path,
    name: &str,
    payload: Option<String>,
) -> i32 {
    let subs = match load(path) {
        Ok(subs) => subs,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_FAILURE;
        }
    };
    let Some(route) = subs.get(name) else {
        eprintln!("error: no subscription named '{name}'");
        return EXIT_FAILURE;
    };
    let secret = route["secret"].as_str().unwrap_or_default().to_owned();
    let body = payload.unwrap_or_else(|| {
        json!({"event_type": "test", "message": "A test event from hermesd webhook test"})
            .to_string()
    });
    if serde_json::from_str::<Value>(&body).is_err() {
        eprintln!("error: --payload is not JSON");
        return USAGE;
    }
    let url = format!("{}/webhooks/{name}", base_url(home, env));
    let signature = hermes_webhook::signature::github_signature(&secret, body.as_bytes());
    let delivery = format!("test-{:016x}", rand::random::<u64>());
    let sent = super::small_runtime()
        .map_err(|e| e.to_string())
        .and_then(|rt| {
            rt.block_on(async {
                let response = reqwest::Client::new()
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-github-event", "test")
                    .header("x-github-delivery", &delivery)
                    .header("x-hub-signature-256", signature)
                    .body(body)
                    .timeout(std::time::Duration::from_secs(10))
                    .send()
                    .await
                    .map_err(|e| format!("cannot reach {url}: {e}; is the gateway running?"))?;
                let status = response.status();
                Ok((status, response.text().await.unwrap_or_default()))
            })
        });
    match sent {
        Ok((status, text)) => {
            println!("{status} {text}");
            if status.is_success() { 0 } else { EXIT_FAILURE }
        }
        Err(e) => {
            eprintln!("error: {e}");
            EXIT_FAILURE
        }
    }
}

/// The listener's URL as this home configures it (loopback when it listens everywhere).
fn base_url(home: &HermesHome, env: &BTreeMap<String, String>) -> String {
    let extra = crate::config::load(home, env)
        .map(|loaded| loaded.config.platforms.webhook.extra.0)
        .unwrap_or_default();
    let port = env
        .get("WEBHOOK_PORT")
        .cloned()
        .or_else(|| {
            extra
                .get("port")
                .map(|p| p.to_string().trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| hermes_webhook::settings::DEFAULT_PORT.to_string());
    let host = match extra.get("host").and_then(Value::as_str) {
        None | Some("" | "0.0.0.0" | "::") => "127.0.0.1".to_owned(),
        Some(h) if h.contains(':') => format!("[{h}]"),
        Some(h) => h.to_owned(),
    };
    format!("http://{host}:{port}")
}

fn random_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn load(path: &Path) -> Result<Map<String, Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => match serde_json::from_str(&text) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(format!(
                "{} is not a JSON object; fix or remove it",
                path.display()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Writes the whole file to a private temporary sibling, then renames it over the old one.
fn save(path: &Path, subs: &Map<String, Value>) -> std::io::Result<()> {
    let tmp: PathBuf = path.with_file_name(format!(".{FILE}.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(subs).map_err(std::io::Error::other)?;
    let written = (|| {
        let mut file =
            crate::home::private::create_new_with_mode(&tmp, crate::home::private::FILE_MODE)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
