//! `hermesd doctor [--json] [--offline]`: is this home ready to run as a service? One line
//! per check with a fix hint; exit 1 when any check is an error, 0 otherwise (warnings
//! included). Read-only: it never creates the home, migrates state.db or sends a message.

mod check;
mod cron;
mod hooks;
mod local;
mod mcp;
mod network;
mod private_files;
mod probes;
mod terminal;
mod tokens;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use check::{Check, Status};

use super::EXIT_FAILURE;
use crate::agent::provider::ModelClient;
use crate::config::{self, Config, LoadedConfig, PlatformConfig};
use crate::home::HermesHome;
use crate::logging::{Redactor, config_secrets, env_secrets};

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Skip the network checks (token acceptance, model endpoint).
    #[arg(long)]
    pub offline: bool,
    /// Seconds each network check may take.
    #[arg(long, default_value_t = 5, value_name = "SECONDS")]
    pub timeout: u64,
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, args: &DoctorArgs) -> i32 {
    let loaded = config::load(home, env);
    let mut checks = config_checks(&loaded);
    checks.push(local::home_directory(home));
    checks.extend(local::secret_permissions(home));
    checks.extend(private_files::private_files(
        home,
        &local::secret_files(home.path()),
    ));
    checks.push(local::state_db(home));
    checks.extend(cron::jobs_file(
        home,
        loaded.as_ref().ok().map(|l| &l.config),
    ));
    checks.push(local::free_disk(home));
    // Belt and braces: whatever a check says goes through the log redactor's masking too.
    let redactor = Redactor::new(env_secrets(env));
    match &loaded {
        Ok(loaded) => {
            redactor.add_all(config_secrets(&loaded.config));
            redactor.add_all(env_secrets(&loaded.env));
            checks.extend(platform_validation(home, loaded));
            checks.extend(whatsapp_cloud_checks(home, loaded));
            checks.extend(service_checks(&loaded.config, args));
            checks.extend(mcp::checks(
                loaded,
                args.offline,
                Duration::from_secs(args.timeout.max(1)),
            ));
            checks.extend(hooks::checks(loaded, home));
            checks.extend(terminal::checks(
                loaded,
                home,
                args.offline,
                Duration::from_secs(args.timeout.max(1)),
            ));
        }
        Err(_) => {
            // The values `.env` would have supplied can be quoted by the errors.
            redactor.add_all(crate::logging::reloaded_secrets(home, None));
            checks.push(Check::skip(
                "platforms",
                "token and model checks need a valid configuration",
            ));
        }
    }
    let worst = checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok);
    let printed = if args.json {
        print_json(&checks, worst, &redactor)
    } else {
        print_lines(&checks, &redactor)
    };
    if printed.is_err() || worst == Status::Error {
        EXIT_FAILURE
    } else {
        0
    }
}

fn config_checks(loaded: &Result<LoadedConfig, config::ConfigErrors>) -> Vec<Check> {
    match loaded {
        Ok(loaded) => {
            let mut checks = vec![Check::ok(
                "config",
                "config.yaml, .env and the environment are valid",
            )];
            checks.extend(loaded.warnings.iter().map(|warning| {
                Check::warn("config", warning.clone())
                    .hint("fix or remove the key; `hermesd config show` prints what is in effect")
            }));
            checks
        }
        Err(errors) => errors
            .0
            .iter()
            .map(|error| {
                Check::error("config", format!("{}: {}", error.key, error.message))
                    .hint("edit config.yaml or .env; `hermesd config check` lists the same errors")
            })
            .collect(),
    }
}

/// WhatsApp Cloud's settings as the adapter reads them: what it would ignore or refuse
/// (no app secret: every delivery refused; no verify token: Meta cannot subscribe) as
/// warnings, else where Meta must send deliveries. Errors are `platform_validation`'s.
fn whatsapp_cloud_checks(home: &HermesHome, loaded: &LoadedConfig) -> Vec<Check> {
    let platform = &loaded.config.platforms.whatsapp_cloud;
    if !platform.enabled {
        return Vec::new();
    }
    let extra = platform
        .extra
        .0
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let Ok(settings) = hermes_whatsapp::Settings::from_config(
        &extra,
        &loaded.env,
        home.path().to_path_buf(),
        hermes_adapter::net::Net::direct(),
    ) else {
        return Vec::new();
    };
    if settings.warnings.is_empty() {
        return vec![Check::ok(
            "whatsapp_cloud",
            format!(
                "webhook on {}{} (app secret and verify token set), Graph {}",
                settings.addr, settings.webhook_path, settings.api_version
            ),
        )];
    }
    settings
        .warnings
        .into_iter()
        .map(|warning| {
            Check::warn("whatsapp_cloud", warning)
                .hint("see platforms.whatsapp_cloud in config/default.yaml")
        })
        .collect()
}

/// What `hermesd run` refuses before serving (adapter settings, the HTTP API's key), as
/// errors: a home doctor passes must start.
fn platform_validation(home: &HermesHome, loaded: &LoadedConfig) -> Vec<Check> {
    crate::gateway::preflight::platform_errors(home, loaded)
        .into_iter()
        .map(|error| {
            Check::error("config", error)
                .hint("`hermesd run` exits 78 on this; `hermesd config check` lists it too")
        })
        .collect()
}

/// Token shapes always; then, unless `--offline`, whether the platforms and the model
/// endpoint accept the credentials (concurrently, each under `--timeout`).
fn service_checks(config: &Config, args: &DoctorArgs) -> Vec<Check> {
    let platforms = &config.platforms;
    let (network_check, net) = network::summary(config);
    let mut checks = vec![network_check];
    let mut probes: Vec<Probe> = Vec::new();
    for (name, platform) in [
        ("telegram", &platforms.telegram),
        ("discord", &platforms.discord),
        ("slack", &platforms.slack),
    ] {
        if platform.enabled {
            probes.push(Probe::Tls {
                platform: name,
                url: extra_base(platform, name),
            });
        }
    }
    if !platforms.telegram.enabled
        && !platforms.discord.enabled
        && !platforms.slack.enabled
        && !platforms.whatsapp_cloud.enabled
        && !platforms.signal.enabled
    {
        let message = if config.api_server.enabled {
            "no chat platform is enabled (only the HTTP API)"
        } else {
            "no chat platform and no HTTP API is enabled: nobody can reach the agent"
        };
        checks.push(
            Check::warn("platforms", message)
                .hint("set TELEGRAM_BOT_TOKEN, DISCORD_BOT_TOKEN or SLACK_BOT_TOKEN in .env"),
        );
    }
    if platforms.telegram.enabled {
        token_shape(
            &mut checks,
            &mut probes,
            &platforms.telegram,
            "telegram",
            tokens::telegram,
            |base, token| Probe::Telegram { base, token },
        );
    }
    if platforms.slack.enabled {
        token_shape(
            &mut checks,
            &mut probes,
            &platforms.slack,
            "slack",
            |token| tokens::slack(token, "xoxb-"),
            |base, token| Probe::Slack { base, token },
        );
        match platforms.slack.app_token.as_ref() {
            Some(app) => match tokens::slack(app.expose(), "xapp-") {
                Ok(()) => checks.push(Check::ok("slack.app_token", "well-formed (xapp-)")),
                Err(why) => checks.push(
                    Check::error("slack.app_token", format!("malformed: {why}"))
                        .hint("set SLACK_APP_TOKEN to the app-level token (Basic Information → App-Level Tokens, scope connections:write)"),
                ),
            },
            None => checks.push(
                Check::error("slack.app_token", "missing: Socket Mode needs an xapp- token")
                    .hint("set SLACK_APP_TOKEN"),
            ),
        }
    }
    if platforms.signal.enabled
        && let Some(url) = platforms
            .signal
            .extra
            .get("http_url")
            .and_then(|v| v.as_str())
    {
        probes.push(Probe::Signal {
            url: url.trim().to_owned(),
        });
    }
    if platforms.discord.enabled {
        token_shape(
            &mut checks,
            &mut probes,
            &platforms.discord,
            "discord",
            tokens::discord,
            |base, token| Probe::Discord { base, token },
        );
    }
    match ModelClient::from_config(config) {
        Ok(client) => {
            if let Some(endpoint) = client.endpoints().first() {
                probes.push(Probe::Model(endpoint.clone()));
            }
        }
        Err(e) => checks.push(
            Check::error("model", e.to_string())
                .hint("configure model.provider and model.default (see config/default.yaml)"),
        ),
    }
    if args.offline {
        checks.extend(probes.iter().map(|probe| match probe {
            Probe::Model(_) | Probe::Tls { .. } => {
                Check::skip(probe.name(), "not checked (--offline)")
            }
            _ => Check::ok(
                probe.name(),
                "well-formed; not sent to the platform (--offline)",
            ),
        }));
    } else if !probes.is_empty() {
        checks.extend(run_probes(
            &probes,
            Duration::from_secs(args.timeout.max(1)),
            &net.unwrap_or_default(),
        ));
    }
    checks
}

/// A network check to make, with what it needs.
enum Probe {
    Telegram {
        base: String,
        token: String,
    },
    Slack {
        base: String,
        token: String,
    },
    Discord {
        base: String,
        token: String,
    },
    Model(crate::agent::provider::Endpoint),
    /// signal-cli's daemon answers its health check.
    Signal {
        url: String,
    },
    /// A TLS handshake with the platform's API host.
    Tls {
        platform: &'static str,
        url: String,
    },
}

impl Probe {
    fn name(&self) -> String {
        match self {
            Self::Telegram { .. } => "telegram.token".to_owned(),
            Self::Slack { .. } => "slack.token".to_owned(),
            Self::Discord { .. } => "discord.token".to_owned(),
            Self::Model(endpoint) => format!("model.{}", endpoint.provider),
            Self::Signal { .. } => "signal.http_url".to_owned(),
            Self::Tls { platform, .. } => format!("{platform}.tls"),
        }
    }
}

type ProbeFor = fn(base: String, token: String) -> Probe;

fn token_shape(
    checks: &mut Vec<Check>,
    probes: &mut Vec<Probe>,
    platform: &PlatformConfig,
    name: &str,
    shape: impl Fn(&str) -> Result<(), tokens::ShapeError>,
    probe: ProbeFor,
) {
    let key = format!("{name}.token");
    let variable = format!("{}_BOT_TOKEN", name.to_ascii_uppercase());
    let Some(token) = platform.token.as_ref() else {
        checks.push(
            Check::error(&key, "the platform is enabled but has no token")
                .hint(format!("set {variable} in .env")),
        );
        return;
    };
    match shape(token.expose()) {
        Ok(()) => {
            // The acceptance probe reports on this token; its line covers the shape too.
            probes.push(probe(extra_base(platform, name), token.expose().to_owned()));
        }
        Err(why) => checks.push(
            Check::error(&key, format!("malformed: {why}")).hint(format!(
                "set {variable} to the token exactly as the platform issued it"
            )),
        ),
    }
}

/// The API base the adapter uses: `telegram.extra.base_url`, `slack.extra.api_base_url`,
/// `discord.extra.api_base_url`, or the public API.
fn extra_base(platform: &PlatformConfig, name: &str) -> String {
    let (key, default) = match name {
        "telegram" => ("base_url", probes::DEFAULT_TELEGRAM_BASE),
        "slack" => ("api_base_url", probes::DEFAULT_SLACK_BASE),
        _ => ("api_base_url", probes::DEFAULT_DISCORD_BASE),
    };
    platform
        .extra
        .get(key)
        .and_then(|value| value.as_str())
        .map(str::trim)
        .filter(|value| !value.is_empty())
        .unwrap_or(default)
        .to_owned()
}

fn run_probes(probes: &[Probe], timeout: Duration, net: &hermes_adapter::net::Net) -> Vec<Check> {
    let failed = |why: String| {
        probes
            .iter()
            .map(|probe| Check::warn(probe.name(), format!("not checked: {why}")))
            .collect::<Vec<_>>()
    };
    let runtime = match super::small_runtime() {
        Ok(runtime) => runtime,
        Err(e) => return failed(format!("cannot start the runtime: {e}")),
    };
    let client = match probes::client(net, timeout) {
        Ok(client) => client,
        Err(e) => return failed(format!("cannot build the HTTP client: {e}")),
    };
    runtime.block_on(async {
        let checks = probes.iter().map(|probe| async {
            match probe {
                Probe::Telegram { base, token } => probes::telegram(&client, base, token).await,
                Probe::Slack { base, token } => probes::slack(&client, base, token).await,
                Probe::Discord { base, token } => probes::discord(&client, base, token).await,
                Probe::Model(endpoint) => probes::model(&client, endpoint).await,
                Probe::Signal { url } => probes::signal(&client, url).await,
                Probe::Tls { platform, url } => network::tls(net, platform, url, timeout).await,
            }
        });
        futures_util::future::join_all(checks).await
    })
}

fn print_lines(checks: &[Check], redactor: &Redactor) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    for check in checks {
        writeln!(out, "{}", redactor.redact(&check.line()))?;
    }
    let errors = checks.iter().filter(|c| c.status == Status::Error).count();
    let warnings = checks.iter().filter(|c| c.status == Status::Warn).count();
    writeln!(out, "{errors} error(s), {warnings} warning(s)")
}

fn print_json(checks: &[Check], worst: Status, redactor: &Redactor) -> std::io::Result<()> {
    let report = serde_json::json!({
        "ok": worst != Status::Error,
        "status": worst,
        "checks": checks,
    });
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", redactor.redact(&report.to_string()))
}
