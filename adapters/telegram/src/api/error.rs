//! What can go wrong talking to the Bot API, and how each failure maps onto the core's
//! `SendErrorKind`.

use std::time::Duration;

use hermes_adapter::{SendErrorKind, SendResult};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// Telegram answered `ok: false` (or a non-JSON error page with an HTTP status).
    #[error("Telegram API error {status}: {description}")]
    Api {
        status: u16,
        description: String,
        retry_after: Option<u64>,
    },
    /// The group became a supergroup: the request must go to `to_chat_id` instead
    /// (400 with `parameters.migrate_to_chat_id`,
    /// https://core.telegram.org/bots/api#responseparameters).
    #[error("Telegram API error 400: {description} (moved to chat {to_chat_id})")]
    Migrated {
        to_chat_id: i64,
        description: String,
    },
    /// The request never reached Telegram (connect refused, DNS): safe to retry.
    #[error("could not reach the Bot API: {0}")]
    Unreachable(String),
    /// The request was sent but no complete answer came back (timeout, dropped
    /// connection): Telegram may or may not have acted on it.
    #[error("no answer from the Bot API: {0}")]
    NoAnswer(String),
    /// Like `NoAnswer`, because the request's time window ran out.
    #[error("the Bot API did not answer in time: {0}")]
    TimedOut(String),
}

impl ApiError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Api { status, .. } => Some(*status),
            ApiError::Migrated { .. } => Some(400),
            _ => None,
        }
    }

    pub fn description(&self) -> &str {
        match self {
            ApiError::Api { description, .. } | ApiError::Migrated { description, .. } => {
                description
            }
            ApiError::Unreachable(m) | ApiError::NoAnswer(m) | ApiError::TimedOut(m) => m,
        }
    }

    /// Whether Telegram's description contains `needle` (case-insensitive).
    pub fn says(&self, needle: &str) -> bool {
        matches!(self, ApiError::Api { .. } | ApiError::Migrated { .. })
            && self
                .description()
                .to_ascii_lowercase()
                .contains(&needle.to_ascii_lowercase())
    }

    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    pub fn is_unauthorized(&self) -> bool {
        // A malformed token gets 404 "Not Found" for every method, a revoked one 401.
        self.status() == Some(401)
            || (self.status() == Some(404) && self.description() == "Not Found")
    }

    /// The core's view of this failure.
    pub fn to_send_result(&self) -> SendResult {
        if let ApiError::Api {
            retry_after: Some(seconds),
            ..
        } = self
        {
            return SendResult::rate_limited(Duration::from_secs(*seconds));
        }
        SendResult::failed(self.kind(), self.to_string())
    }

    fn kind(&self) -> SendErrorKind {
        match self {
            ApiError::Unreachable(_) => SendErrorKind::Transient,
            ApiError::NoAnswer(_) | ApiError::TimedOut(_) => SendErrorKind::Ambiguous,
            // Only reaches the core when the resend to the supergroup failed too.
            ApiError::Migrated { .. } => SendErrorKind::NotFound,
            ApiError::Api { status, .. } => match status {
                429 => SendErrorKind::RateLimited,
                401 | 403 => SendErrorKind::Forbidden,
                s if *s >= 500 => SendErrorKind::Transient,
                _ if self.says("can't parse entities") || self.says("can't find end") => {
                    SendErrorKind::BadFormat
                }
                _ if self.says("too long") => SendErrorKind::TooLong,
                _ if self.says("not found") || self.says("chat not found") => {
                    SendErrorKind::NotFound
                }
                // Refusals that no retry changes: the bot lacks rights in the chat, the forum
                // topic is closed, the user blocked the bot or removed it.
                _ if self.says("bot was blocked")
                    || self.says("kicked")
                    || self.says("not enough rights")
                    || self.says("topic_closed") =>
                {
                    SendErrorKind::Forbidden
                }
                _ => SendErrorKind::Unknown,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, description: &str) -> ApiError {
        ApiError::Api {
            status,
            description: description.into(),
            retry_after: None,
        }
    }

    #[test]
    fn failures_map_to_the_core_kinds() {
        let cases = [
            (
                api(400, "Bad Request: can't parse entities: x"),
                SendErrorKind::BadFormat,
            ),
            (
                api(400, "Bad Request: message is too long"),
                SendErrorKind::TooLong,
            ),
            (
                api(400, "Bad Request: chat not found"),
                SendErrorKind::NotFound,
            ),
            (
                api(400, "Bad Request: message thread not found"),
                SendErrorKind::NotFound,
            ),
            (
                api(403, "Forbidden: bot was blocked by the user"),
                SendErrorKind::Forbidden,
            ),
            (
                api(
                    400,
                    "Bad Request: not enough rights to send text messages to the chat",
                ),
                SendErrorKind::Forbidden,
            ),
            (
                api(400, "Bad Request: TOPIC_CLOSED"),
                SendErrorKind::Forbidden,
            ),
            (
                api(400, "Bad Request: bot was blocked by the user"),
                SendErrorKind::Forbidden,
            ),
            (api(500, "Internal Server Error"), SendErrorKind::Transient),
            (api(502, "HTTP 502"), SendErrorKind::Transient),
            (
                ApiError::Unreachable("refused".into()),
                SendErrorKind::Transient,
            ),
            (
                ApiError::NoAnswer("timed out".into()),
                SendErrorKind::Ambiguous,
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(error.to_send_result().kind(), Some(kind), "{error}");
        }
        let limited = ApiError::Api {
            status: 429,
            description: "Too Many Requests: retry after 7".into(),
            retry_after: Some(7),
        };
        assert_eq!(
            limited.to_send_result().retry_after,
            Some(Duration::from_secs(7))
        );
    }
}
