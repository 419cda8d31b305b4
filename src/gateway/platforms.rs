//! Building the enabled chat platforms' adapters from the configuration: each adapter crate
//! reads its own `extra` keys and env vars; the core adds what only it knows (the home's
//! cache directory, the command menu, conversations to watch for missed messages).

use std::collections::BTreeMap;
use std::sync::Arc;

use hermes_adapter::Adapter;
use hermes_adapter::net::Net;
use serde_json::{Map, Value};

use crate::config::{LoadedConfig, PlatformConfig};
use crate::gateway::router::commands::COMMANDS;
use crate::home::HermesHome;
use crate::state::Store;

/// The enabled adapters, plus the concrete handles the core talks to directly.
#[derive(Default)]
pub struct Built {
    pub adapters: Vec<Arc<dyn Adapter>>,
    pub discord: Option<hermes_discord::DiscordAdapter>,
    /// HTTP routes platforms push events to (Telegram webhook mode), with where to serve them.
    pub webhooks: Vec<(std::net::SocketAddr, axum::Router)>,
    /// The webhook platform's listener, when enabled (tests and the log ask where it bound).
    pub webhook: Option<hermes_webhook::WebhookAdapter>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.adapters.iter().map(|a| a.platform()).collect();
        f.debug_struct("Built").field("adapters", &names).finish()
    }
}

fn extra_map(platform: &PlatformConfig) -> Map<String, Value> {
    platform
        .extra
        .0
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn token(name: &str, platform: &PlatformConfig) -> Result<String, Vec<String>> {
    platform
        .token
        .as_ref()
        .map(|t| t.expose().to_owned())
        .ok_or_else(|| vec![format!("{name}: enabled but no bot token is set")])
}

/// The home's attachment cache for `platform`.
pub fn cache_dir(home: &HermesHome, platform: &str) -> std::path::PathBuf {
    home.path().join("cache").join(platform)
}

/// The adapters of every enabled chat platform, or every reason one cannot be built.
pub fn build_adapters(home: &HermesHome, loaded: &LoadedConfig) -> Result<Built, Vec<String>> {
    let platforms = &loaded.config.platforms;
    let env: &BTreeMap<String, String> = &loaded.env;
    let mut built = Built::default();
    let mut errors = Vec::new();
    // One proxy rule and one TLS configuration for every platform (and the model client,
    // which builds the same settings into the same shared `Net`).
    let net = hermes_adapter::net::Net::new(&loaded.config.network).map_err(|e| e.0)?;
    if platforms.discord.enabled {
        match discord(
            home,
            &platforms.discord,
            env,
            &net,
            &menu(home, loaded, "discord"),
        ) {
            Ok(adapter) => {
                built.adapters.push(Arc::new(adapter.clone()));
                built.discord = Some(adapter);
            }
            Err(e) => errors.extend(e),
        }
    }
    if platforms.telegram.enabled {
        match telegram(
            home,
            &platforms.telegram,
            env,
            &net,
            &menu(home, loaded, "telegram"),
        ) {
            Ok(adapter) => {
                if let Some(router) = adapter.webhook_router() {
                    match webhook_addr(env) {
                        Ok(addr) => built.webhooks.push((addr, router)),
                        Err(e) => errors.push(e.to_string()),
                    }
                }
                built.adapters.push(Arc::new(adapter));
            }
            Err(e) => errors.extend(e),
        }
    }
    if platforms.slack.enabled {
        match slack(home, &platforms.slack, env, &net) {
            Ok(adapter) => built.adapters.push(Arc::new(adapter)),
            Err(e) => errors.extend(e),
        }
    }
    if platforms.whatsapp_cloud.enabled {
        match whatsapp_cloud(home, &platforms.whatsapp_cloud, env, &net) {
            Ok(adapter) => built.adapters.push(Arc::new(adapter)),
            Err(e) => errors.extend(e),
        }
    }
    if platforms.signal.enabled {
        match signal(home, &platforms.signal, env, &net) {
            Ok(adapter) => built.adapters.push(Arc::new(adapter)),
            Err(e) => errors.extend(e),
        }
    }
    if platforms.webhook.enabled {
        match webhook(home, loaded, &net) {
            Ok(adapter) => {
                built.adapters.push(Arc::new(adapter.clone()));
                built.webhook = Some(adapter);
            }
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(built)
    } else {
        Err(errors)
    }
}

/// The command menu for `platform`: the gateway's commands, then the skills enabled there
/// (within the platforms' 100-command limit).
fn menu(home: &HermesHome, loaded: &LoadedConfig, platform: &str) -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = COMMANDS
        .iter()
        .map(|(name, description)| ((*name).to_owned(), (*description).to_owned()))
        .collect();
    let skills = crate::skills::enabled(home, &loaded.config.skills, &loaded.env, Some(platform));
    let reserved: Vec<&str> = COMMANDS.iter().map(|(name, _)| *name).collect();
    entries.extend(crate::skills::command::menu(&skills, &reserved));
    entries
}

fn discord(
    home: &HermesHome,
    config: &PlatformConfig,
    env: &BTreeMap<String, String>,
    net: &Net,
    menu: &[(String, String)],
) -> Result<hermes_discord::DiscordAdapter, Vec<String>> {
    let token = token("discord", config)?;
    let extra = extra_map(config);
    let mut settings = hermes_discord::Settings::from_config(&token, &extra, env)?;
    settings.net = net.clone();
    if !extra.contains_key("cache_dir") {
        settings.cache_dir = cache_dir(home, "discord");
    }
    settings.slash_commands = menu
        .iter()
        .map(|(name, description)| hermes_discord::SlashCommand {
            name: name.clone(),
            description: description.clone(),
            takes_args: true,
        })
        .collect();
    Ok(hermes_discord::DiscordAdapter::new(settings))
}

fn telegram(
    home: &HermesHome,
    config: &PlatformConfig,
    env: &BTreeMap<String, String>,
    net: &Net,
    menu: &[(String, String)],
) -> Result<hermes_telegram::TelegramAdapter, Vec<String>> {
    let token = token("telegram", config)?;
    let extra = extra_map(config);
    let mut settings = hermes_telegram::Settings::from_config(&token, &extra, env)?;
    settings.net = net.clone();
    if !extra.contains_key("cache_dir") {
        settings.cache_dir = cache_dir(home, "telegram");
    }
    settings.commands = menu.to_vec();
    Ok(hermes_telegram::TelegramAdapter::new(settings))
}

fn slack(
    home: &HermesHome,
    config: &PlatformConfig,
    env: &BTreeMap<String, String>,
    net: &Net,
) -> Result<hermes_slack::SlackAdapter, Vec<String>> {
    let token = token("slack", config)?;
    let app_token = config
        .app_token
        .as_ref()
        .map(|t| t.expose().to_owned())
        .ok_or_else(|| {
            vec!["slack: enabled but SLACK_APP_TOKEN (Socket Mode) is not set".to_owned()]
        })?;
    let extra = extra_map(config);
    let mut settings = hermes_slack::Settings::from_config(&token, &app_token, &extra, env)?;
    settings.net = net.clone();
    if !extra.contains_key("cache_dir") {
        settings.cache_dir = cache_dir(home, "slack");
    }
    Ok(hermes_slack::SlackAdapter::new(settings))
}

/// WhatsApp Cloud (`platforms.whatsapp_cloud`): the adapter reads its `extra` keys and the
/// `WHATSAPP_CLOUD_*` variables itself; attachments go to the home's cache.
fn whatsapp_cloud(
    home: &HermesHome,
    config: &PlatformConfig,
    env: &BTreeMap<String, String>,
    net: &Net,
) -> Result<hermes_whatsapp::WhatsAppAdapter, Vec<String>> {
    let settings = hermes_whatsapp::Settings::from_config(
        &extra_map(config),
        env,
        cache_dir(home, hermes_whatsapp::PLATFORM),
        net.clone(),
    )?;
    Ok(hermes_whatsapp::WhatsAppAdapter::new(settings))
}

/// Signal through signal-cli's HTTP daemon; `SIGNAL_HTTP_URL`/`SIGNAL_ACCOUNT` and the
/// adapter's other keys are read and checked by the adapter crate.
fn signal(
    home: &HermesHome,
    config: &PlatformConfig,
    env: &BTreeMap<String, String>,
    net: &Net,
) -> Result<hermes_signal::SignalAdapter, Vec<String>> {
    let extra = extra_map(config);
    let mut settings = hermes_signal::Settings::from_config(&extra, env).map_err(|errors| {
        errors
            .into_iter()
            .map(|e| format!("signal: {e}"))
            .collect::<Vec<_>>()
    })?;
    settings.net = net.clone();
    if !extra.contains_key("cache_dir") {
        settings.cache_dir = cache_dir(home, "signal");
    }
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    Ok(hermes_signal::SignalAdapter::new(settings))
}

/// The webhook platform (`platforms.webhook`): its routes may deliver to the chat platforms
/// enabled beside it (to their home channel when a route names no chat), and a route's
/// `skills` become the home's skill instructions around the rendered prompt.
fn webhook(
    home: &HermesHome,
    loaded: &LoadedConfig,
    net: &Net,
) -> Result<hermes_webhook::WebhookAdapter, Vec<String>> {
    let platforms = &loaded.config.platforms;
    let targets = [
        ("telegram", &platforms.telegram),
        ("discord", &platforms.discord),
        ("slack", &platforms.slack),
        ("signal", &platforms.signal),
        // Free-form messages reach only users inside the 24-hour window; a delivery to
        // anyone else fails with the adapter's error naming the window, in the log.
        ("whatsapp_cloud", &platforms.whatsapp_cloud),
    ]
    .into_iter()
    .filter(|(_, platform)| platform.enabled)
    .map(|(name, platform)| {
        let home = platform.home_channel.as_ref();
        (
            name.to_owned(),
            hermes_webhook::DeliverTarget {
                home_chat: home.map(|h| h.chat_id.clone()),
                home_thread: home.and_then(|h| h.thread_id.clone()),
            },
        )
    })
    .collect();
    let extra = extra_map_of(&platforms.webhook.extra);
    let mut settings = hermes_webhook::Settings::from_config(
        &extra,
        &loaded.env,
        home.path().to_path_buf(),
        targets,
    )?;
    settings.net = net.clone();
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }
    let skills = crate::skills::enabled(
        home,
        &loaded.config.skills,
        &loaded.env,
        Some(hermes_adapter::WEBHOOK_PLATFORM),
    );
    let fill = loaded.config.skills.template_vars;
    settings.skill_message = Some(Arc::new(move |name: &str, prompt: &str| {
        let skill = crate::skills::command::find(&skills, name)?;
        crate::skills::command::invocation(skill, prompt, fill.then_some(None))
            .inspect_err(
                |e| tracing::warn!(skill = %skill.name, error = %e, "cannot read the skill"),
            )
            .ok()
    }));
    Ok(hermes_webhook::WebhookAdapter::new(settings))
}

fn extra_map_of(extra: &crate::config::Extra) -> Map<String, Value> {
    extra
        .0
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Where Telegram's webhook is served: `TELEGRAM_WEBHOOK_HOST` (default `0.0.0.0`, as the
/// reference listens) and `TELEGRAM_WEBHOOK_PORT` (default 8443).
fn webhook_addr(env: &BTreeMap<String, String>) -> Result<std::net::SocketAddr, WebhookAddrError> {
    let host = env
        .get("TELEGRAM_WEBHOOK_HOST")
        .map(|h| h.trim())
        .filter(|h| !h.is_empty())
        .unwrap_or("0.0.0.0");
    let port = env
        .get("TELEGRAM_WEBHOOK_PORT")
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .unwrap_or("8443");
    let ip: std::net::IpAddr = host
        .parse()
        .map_err(|_| WebhookAddrError::Host(host.to_owned()))?;
    let port: u16 = port
        .parse()
        .map_err(|_| WebhookAddrError::Port(port.to_owned()))?;
    Ok(std::net::SocketAddr::new(ip, port))
}

/// A Telegram webhook listen address the environment got wrong.
#[derive(Debug, thiserror::Error)]
enum WebhookAddrError {
    #[error("TELEGRAM_WEBHOOK_HOST: {0:?} is not an IP address")]
    Host(String),
    #[error("TELEGRAM_WEBHOOK_PORT: {0:?} is not a port number")]
    Port(String),
}

/// Serves the platforms' webhook routes until `stop` fires (TCP_NODELAY on).
pub async fn serve_webhooks(
    webhooks: Vec<(std::net::SocketAddr, axum::Router)>,
    stop: tokio_util::sync::CancellationToken,
) -> std::io::Result<Vec<std::net::SocketAddr>> {
    let mut bound = Vec::new();
    for (addr, router) in webhooks {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        bound.push(listener.local_addr()?);
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let stop = stop.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "webhook server failed");
            }
        });
    }
    Ok(bound)
}

/// Claims each enabled platform's credential for this home (the reference's scope names),
/// so two gateways never drive one bot. Errors name the other gateway, never the token.
pub fn claim_tokens(
    home: &HermesHome,
    loaded: &LoadedConfig,
) -> Result<Vec<crate::gateway::token_lock::ScopedLock>, String> {
    let platforms = &loaded.config.platforms;
    let claims = [
        (
            "telegram-bot-token",
            &platforms.telegram,
            platforms.telegram.token.as_ref(),
        ),
        (
            "discord-bot-token",
            &platforms.discord,
            platforms.discord.token.as_ref(),
        ),
        (
            "slack-app-token",
            &platforms.slack,
            platforms.slack.app_token.as_ref(),
        ),
    ];
    // Signal's credential is its account: two gateways on one number would both answer.
    let signal_account = platforms
        .signal
        .extra
        .get("account")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| loaded.env.get("SIGNAL_ACCOUNT").cloned())
        .map(crate::config::Secret::new);
    let claims =
        claims
            .into_iter()
            .chain([("signal-phone", &platforms.signal, signal_account.as_ref())]);
    let mut locks = Vec::new();
    for (scope, platform, token) in claims {
        let (true, Some(token)) = (platform.enabled, token) else {
            continue;
        };
        let lock = crate::gateway::token_lock::ScopedLock::acquire(
            scope,
            token.expose(),
            home.path(),
            &loaded.env,
        )
        .map_err(|e| format!("{scope}: {e}"))?;
        locks.push(lock);
    }
    Ok(locks)
}

/// Tells the Discord adapter which DMs and threads hold conversations, so messages sent
/// there while hermesd was down are backfilled after a restart.
pub async fn remember_discord_conversations(
    home: &HermesHome,
    store: &Store,
    discord: &hermes_discord::DiscordAdapter,
) {
    let scope = crate::state::routing_scope(home, store);
    let Ok(routes) = store.load_routing(&scope).await else {
        return;
    };
    let channels = routes.values().filter_map(|entry| {
        let origin = entry.get("origin")?;
        if origin.get("platform")?.as_str()? != "discord" {
            return None;
        }
        let thread = origin.get("thread_id").and_then(Value::as_str);
        let chat = origin.get("chat_id").and_then(Value::as_str);
        thread.or(chat).map(str::to_owned)
    });
    discord.remember_conversations(channels.collect::<Vec<_>>());
}
