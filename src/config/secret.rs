//! `Secret`: a token or API key that never shows up in logs, errors or `config show`.

use std::fmt;

use serde::{Serialize, Serializer};

/// What every redacted value prints as.
pub const REDACTED: &str = "***";

/// A credential. `Debug`, `Display` and `Serialize` all print `***`; only [`Secret::expose`]
/// hands out the value, so every place that really sends a token is easy to find with grep.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The plain value, for the one call that must send it (an HTTP header, a URL).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Length in characters, so validation can talk about a key's length without showing it.
    pub fn char_count(&self) -> usize {
        self.0.chars().count()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(REDACTED)
    }
}

/// Whether a free-form key (in a platform's `extra` map) names something secret.
pub fn looks_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key == "key"
        || key.ends_with("_key")
        || ["token", "secret", "password", "apikey"]
            .iter()
            .any(|word| key.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rendering_is_redacted() {
        let secret = Secret::new("123456:ABC-very-secret");
        assert_eq!(format!("{secret}"), "***");
        assert_eq!(format!("{secret:?}"), "***");
        assert_eq!(serde_json::to_string(&secret).unwrap(), "\"***\"");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(***)");
        assert_eq!(secret.expose(), "123456:ABC-very-secret");
        assert_eq!(secret.char_count(), 22);
    }

    #[test]
    fn secret_looking_keys() {
        for key in [
            "token",
            "bot_token",
            "webhook_secret",
            "password",
            "api_key",
            "key",
            "signing_key",
        ] {
            assert!(looks_secret(key), "{key}");
        }
        for key in [
            "require_mention",
            "keyboard",
            "monkey_mode",
            "allowed_chats",
            "base_url",
        ] {
            assert!(!looks_secret(key), "{key}");
        }
    }
}
