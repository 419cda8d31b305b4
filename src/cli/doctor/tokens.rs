//! Whether a platform token has the shape its platform issues. A malformed token is never
//! sent anywhere, and never printed: messages talk about its length and prefix only.

/// How a token differs from its platform's shape; lengths and prefixes only, never the
/// token itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    #[error("expected <bot id>:<secret> (no ':' found)")]
    NoColon,
    #[error("expected <bot id>:<secret>, the part before ':' must be digits")]
    BotIdNotDigits,
    #[error("expected 30 or more of A-Z a-z 0-9 _ - after ':', got {chars} characters")]
    BadTelegramSecret { chars: usize },
    /// `shown` is the token's first five characters in quotes when they look like another
    /// Slack prefix, else the words "something else".
    #[error("expected a token starting '{expected}', got one starting {shown}")]
    WrongPrefix { expected: String, shown: String },
    #[error("expected '{prefix}' followed by letters, digits and '-', got {chars} characters")]
    BadSlackBody { prefix: String, chars: usize },
    #[error("expected three dot-separated base64 parts, got {parts} part(s) of {chars} characters")]
    BadDiscordParts { parts: usize, chars: usize },
}

/// Telegram: `<bot id>:<30+ of A-Z a-z 0-9 _ ->`.
pub fn telegram(token: &str) -> Result<(), ShapeError> {
    let (id, secret) = token.split_once(':').ok_or(ShapeError::NoColon)?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ShapeError::BotIdNotDigits);
    }
    let secret_ok = secret
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if secret.len() < 30 || !secret_ok {
        return Err(ShapeError::BadTelegramSecret {
            chars: secret.chars().count(),
        });
    }
    Ok(())
}

/// Slack: a bot token starts `xoxb-`, a Socket Mode app token `xapp-`.
pub fn slack(token: &str, prefix: &str) -> Result<(), ShapeError> {
    let rest = token.strip_prefix(prefix).ok_or_else(|| {
        let shown: String = token.chars().take(5).collect();
        let shown = if shown.starts_with("xox") || shown.starts_with("xap") {
            format!("'{shown}'")
        } else {
            "something else".to_owned()
        };
        ShapeError::WrongPrefix {
            expected: prefix.to_owned(),
            shown,
        }
    })?;
    let body_ok = rest.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if rest.len() < 10 || !body_ok {
        return Err(ShapeError::BadSlackBody {
            prefix: prefix.to_owned(),
            chars: token.chars().count(),
        });
    }
    Ok(())
}

/// Discord: three dot-separated base64url parts (user id, timestamp, HMAC).
pub fn discord(token: &str) -> Result<(), ShapeError> {
    let parts: Vec<&str> = token.split('.').collect();
    let base64url = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    if parts.len() != 3 || !parts.iter().all(|part| base64url(part)) {
        return Err(ShapeError::BadDiscordParts {
            parts: parts.len(),
            chars: token.chars().count(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn telegram_tokens() {
        assert!(telegram("123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0").is_ok());
        for bad in [
            "",
            "123456789",
            "abc:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0",
            "1:short",
        ] {
            assert!(telegram(bad).is_err(), "{bad}");
        }
        let error = telegram("1:has spaces in it but long enough....")
            .unwrap_err()
            .to_string();
        assert!(!error.contains("spaces"), "{error}");
    }

    #[test]
    fn slack_tokens() {
        assert!(slack("xoxb-1234-5678-abcdefABCDEF", "xoxb-").is_ok());
        assert!(slack("xapp-1-A0123-4567-abcdef0123", "xapp-").is_ok());
        let error = slack("xoxp-1234-5678-abcdefABCDEF", "xoxb-")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("'xoxp-'") && !error.contains("5678"),
            "{error}"
        );
        assert!(slack("xoxb-", "xoxb-").is_err());
        assert!(
            slack("plain-secret-value", "xoxb-")
                .unwrap_err()
                .to_string()
                .contains("something else")
        );
    }

    #[test]
    fn discord_tokens() {
        assert!(
            discord("MTA0OTk5OTk5OTk5OTk5OTk5.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789_-")
                .is_ok()
        );
        for bad in ["", "one.two", "a..c", "a.b.c.d", "a b.c.d"] {
            assert!(discord(bad).is_err(), "{bad}");
        }
    }
}
