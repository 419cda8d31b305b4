//! Process logging: one `tracing` subscriber with a reloadable `RUST_LOG`-style filter
//! ([`LogControl`]), human-readable text on a terminal or JSON lines for a service manager
//! ([`LogFormat`]), and every line passed through the [`Redactor`] so configured secrets
//! never reach the logs, whoever logged them.

mod control;
mod format;
mod redact;
mod secrets;
#[cfg(test)]
mod test_sink;

use std::collections::BTreeMap;

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

pub use control::{LogControl, LogControlError, parse_filter};
pub use format::{LogFormat, resolve_format};
pub use redact::{MASK, MIN_SECRET_CHARS, RedactingMakeWriter, Redactor, mask_token_shapes};
pub use secrets::{
    config_secrets, env_secrets, is_secret_env_name, looks_like_secret_name, reloaded_secrets,
    secrets_for_home, url_password,
};

/// What the process keeps after installing logging: the runtime controls.
#[derive(Debug, Clone)]
pub struct Logging {
    /// Changes the filter at runtime (the admin API's log-level endpoint).
    pub control: LogControl,
    /// Add secrets learned later (after a config reload) with [`Redactor::add_all`].
    pub redactor: Redactor,
    /// The format chosen (after resolving `auto`).
    pub format: LogFormat,
}

static INSTALLED: std::sync::OnceLock<Logging> = std::sync::OnceLock::new();

/// The process's logging controls, once [`install`] ran (the admin API uses them).
pub fn installed() -> Option<&'static Logging> {
    INSTALLED.get()
}

/// `text` with every secret the installed logging knows masked, for what a command prints
/// straight to the terminal (configuration errors can quote a value, and that value can be
/// a secret: `${TOKEN}` in the wrong key). Unchanged when logging is not installed.
pub fn mask(text: &str) -> String {
    match installed() {
        Some(logging) => logging.redactor.redact(text),
        None => text.to_owned(),
    }
}

/// `text` as it may leave the daemon towards the model, a chat or state.db: every secret the
/// installed logging knows and every credential in a known shape masked (shapes only when
/// logging is not installed, as in unit tests).
pub fn mask_secrets(text: &str) -> String {
    match installed() {
        Some(logging) => logging.redactor.redact_all(text),
        None => mask_token_shapes(text).into_owned(),
    }
}

/// Whether `value` is exactly one of the secrets the installed logging knows.
pub fn is_known_secret(value: &str) -> bool {
    installed().is_some_and(|logging| logging.redactor.knows(value))
}

/// Installs the global subscriber writing to stderr. `default_filter` applies when
/// `RUST_LOG` is unset or invalid (an invalid one is reported once, after installation).
pub fn install(
    requested: LogFormat,
    default_filter: &str,
    env: &BTreeMap<String, String>,
    secrets: Vec<String>,
) -> Logging {
    use std::io::IsTerminal;
    let stderr_is_terminal = std::io::stderr().is_terminal();
    let format = resolve_format(
        requested,
        env,
        stderr_is_terminal,
        std::path::Path::new("/.dockerenv").exists(),
    );
    let rust_log = env.get("RUST_LOG").filter(|value| !value.trim().is_empty());
    let (filter, invalid_rust_log) = match rust_log.map(|value| parse_filter(value)) {
        Some(Ok(filter)) => (filter, None),
        Some(Err(e)) => (fallback_filter(default_filter), Some(e)),
        None => (fallback_filter(default_filter), None),
    };
    let redactor = Redactor::new(secrets);
    let (subscriber, control) = build_subscriber(
        format,
        stderr_is_terminal,
        filter,
        redactor.clone(),
        std::io::stderr,
    );
    // Fails only if a subscriber is already installed (a test harness); logging still works
    // through that one.
    let _ = tracing::subscriber::set_global_default(subscriber);
    if let Some(error) = invalid_rust_log {
        tracing::warn!("ignoring RUST_LOG: {error}; using '{default_filter}'");
    }
    let logging = Logging {
        control,
        redactor,
        format,
    };
    let _ = INSTALLED.set(logging.clone());
    logging
}

fn fallback_filter(default_filter: &str) -> EnvFilter {
    parse_filter(default_filter).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// The subscriber [`install`] uses, writing to `writer`; separate so tests can run it
/// scoped (`tracing::subscriber::with_default`) against an in-memory sink.
pub fn build_subscriber<W>(
    format: LogFormat,
    ansi: bool,
    filter: EnvFilter,
    redactor: Redactor,
    writer: W,
) -> (impl tracing::Subscriber + Send + Sync, LogControl)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let (filter, handle) = reload::Layer::<EnvFilter, Registry>::new(filter);
    let writer = RedactingMakeWriter::new(writer, redactor);
    let (json_layer, text_layer) = if format == LogFormat::Json {
        let layer = tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(writer);
        (Some(layer), None)
    } else {
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(writer);
        (None, Some(layer))
    };
    let subscriber = Registry::default()
        .with(filter)
        .with(json_layer)
        .with(text_layer);
    (subscriber, LogControl::new(handle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_sink::SharedSink;

    #[test]
    fn json_lines_are_redacted_and_parse() {
        let sink = SharedSink::default();
        let token = "123456789:AAHfake-token-value-for-tests_0123";
        let (subscriber, _control) = build_subscriber(
            LogFormat::Json,
            false,
            parse_filter("info").unwrap(),
            Redactor::new([token.to_owned()]),
            sink.clone(),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(url = %format!("https://api.telegram.org/bot{token}/getMe"), "calling");
            tracing::warn!("leaked {token} in a message");
        });
        let text = sink.text();
        assert!(!text.contains(token), "{text}");
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["url"], "https://api.telegram.org/bot***/getMe");
        assert_eq!(lines[1]["message"], "leaked *** in a message");
    }

    #[test]
    fn text_lines_are_redacted() {
        let sink = SharedSink::default();
        let (subscriber, _control) = build_subscriber(
            LogFormat::Text,
            false,
            parse_filter("debug").unwrap(),
            Redactor::new(["sk-live-0123456789".to_owned()]),
            sink.clone(),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!(key = "sk-live-0123456789", "model key");
        });
        let text = sink.text();
        assert!(
            text.contains("key=\"***\"") || text.contains("key=***"),
            "{text}"
        );
        assert!(!text.contains("sk-live"), "{text}");
        assert!(
            !text.contains('\u{1b}'),
            "no colours when not a terminal: {text}"
        );
    }
}
