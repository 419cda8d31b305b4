//! Why a model call failed, classified for the fallback policy, and the one line the user
//! sees when every provider failed. No variant ever carries an API key: provider messages are
//! passed through [`clean_message`] when they are captured.

use std::fmt::Write as _;
use std::time::Duration;

use crate::agent::message::HistoryError;
use crate::config::Secret;

/// A failed model call.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{0}")]
    NotConfigured(String),
    #[error("invalid conversation history: {0}")]
    InvalidHistory(#[from] HistoryError),
    #[error("rate limited (HTTP 429){}", retry_after_text(*retry_after))]
    RateLimited { retry_after: Option<Duration> },
    #[error("server error (HTTP {status})")]
    Server { status: u16 },
    #[error("authentication failed (HTTP {status}); check the API key")]
    Auth { status: u16 },
    /// Any other 4xx: the provider refused this request (bad request, unknown model, ...).
    #[error("request refused (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    /// `stalled`: a stream sent nothing for `after`; otherwise no complete answer in `after`.
    #[error("{}", timeout_text(*stalled, *after))]
    Timeout { stalled: bool, after: Duration },
    #[error("connection failed: {0}")]
    Connect(String),
    #[error("unusable response: {0}")]
    BadResponse(String),
    /// Every endpoint of the chain failed. Displays as one line naming each attempt.
    #[error("{}", all_failed_line(attempts))]
    AllFailed { attempts: Vec<Attempt> },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// One endpoint's final failure within a fallback chain.
#[derive(Debug)]
pub struct Attempt {
    pub provider: String,
    pub model: String,
    pub error: ProviderError,
}

impl ProviderError {
    /// The kind's short name (`rate_limited`, `server`, `auth`, `timeout`, ...), for logs and
    /// tests.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotConfigured(_) => "not_configured",
            Self::InvalidHistory(_) => "invalid_history",
            Self::RateLimited { .. } => "rate_limited",
            Self::Server { .. } => "server",
            Self::Auth { .. } => "auth",
            Self::Rejected { .. } => "rejected",
            Self::Timeout { .. } => "timeout",
            Self::Connect(_) => "connect",
            Self::BadResponse(_) => "bad_response",
            Self::AllFailed { .. } => "all_failed",
            Self::Client(_) => "client",
        }
    }

    /// The attempts of an `AllFailed`, empty for every other kind.
    pub fn attempts(&self) -> &[Attempt] {
        match self {
            Self::AllFailed { attempts } => attempts,
            _ => &[],
        }
    }
}

fn retry_after_text(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(wait) => format!(", retry after {}", seconds(wait)),
        None => String::new(),
    }
}

fn timeout_text(stalled: bool, after: Duration) -> String {
    if stalled {
        format!("timed out: the stream sent nothing for {}", seconds(after))
    } else {
        format!(
            "timed out after {} without a complete answer",
            seconds(after)
        )
    }
}

fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}s")
    } else {
        format!("{secs:.1}s")
    }
}

fn all_failed_line(attempts: &[Attempt]) -> String {
    let mut line = match attempts.len() {
        0 => return "no model provider could be tried".to_owned(),
        1 => "the model provider failed: ".to_owned(),
        n => format!("all {n} model providers failed: "),
    };
    for (index, attempt) in attempts.iter().enumerate() {
        let separator = if index == 0 { "" } else { "; " };
        let error = clean_message(&attempt.error.to_string(), None);
        let _ = write!(
            line,
            "{separator}{} ({}): {error}",
            attempt.provider, attempt.model
        );
    }
    line
}

/// Longest provider message kept in an error.
const MAX_MESSAGE_CHARS: usize = 300;

/// A provider's message made safe for an error line: the key (if the provider echoed it),
/// every other secret the daemon knows and every credential in a known shape are replaced
/// by `***`, whitespace runs (newlines included) become one space, and the text is
/// cut to a few hundred characters.
pub fn clean_message(text: &str, key: Option<&Secret>) -> String {
    let mut text = text.to_owned();
    if let Some(key) = key.map(Secret::expose).filter(|key| key.len() >= 4) {
        text = text.replace(key, "***");
    }
    let text = crate::logging::mask_secrets(&text);
    let mut clean: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = clean.char_indices().nth(MAX_MESSAGE_CHARS) {
        clean.truncate(cut);
        clean.push('…');
    }
    clean
}

/// The human message inside a provider's error body: OpenAI's `{"error":{"message"}}`,
/// Anthropic's `{"type":"error","error":{"message"}}`, a bare `{"message"}`, or the text.
pub fn error_body_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return text.into_owned();
    };
    let message = value
        .pointer("/error/message")
        .or_else(|| value.get("message"))
        .or_else(|| value.get("error").filter(|error| error.is_string()))
        .and_then(serde_json::Value::as_str);
    match message {
        Some(message) => message.to_owned(),
        None => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_failed_is_one_line_naming_each_attempt() {
        let error = ProviderError::AllFailed {
            attempts: vec![
                Attempt {
                    provider: "openrouter".into(),
                    model: "m1".into(),
                    error: ProviderError::RateLimited {
                        retry_after: Some(Duration::from_secs(30)),
                    },
                },
                Attempt {
                    provider: "anthropic".into(),
                    model: "m2".into(),
                    error: ProviderError::Rejected {
                        status: 404,
                        message: "no such\nmodel".into(),
                    },
                },
            ],
        };
        assert_eq!(
            error.to_string(),
            "all 2 model providers failed: openrouter (m1): rate limited (HTTP 429), retry after 30s; \
             anthropic (m2): request refused (HTTP 404): no such model"
        );
    }

    #[test]
    fn messages_lose_the_key_newlines_and_length() {
        let key = Secret::new("sk-live-123456");
        let cleaned = clean_message("Incorrect API key provided:\n sk-live-123456.", Some(&key));
        assert_eq!(cleaned, "Incorrect API key provided: ***.");
        let long = "x".repeat(1000);
        assert_eq!(
            clean_message(&long, None).chars().count(),
            MAX_MESSAGE_CHARS + 1
        );
    }

    #[test]
    fn error_bodies() {
        let openai = br#"{"error":{"message":"Rate limit reached","type":"requests"}}"#;
        assert_eq!(error_body_message(openai), "Rate limit reached");
        let anthropic =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_body_message(anthropic), "Overloaded");
        assert_eq!(error_body_message(br#"{"error":"bad model"}"#), "bad model");
        assert_eq!(error_body_message(b"<html>502</html>"), "<html>502</html>");
    }
}
