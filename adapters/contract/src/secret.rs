//! `Secret`: the one wrapper for tokens and keys, in the adapters and in the core alike, so a
//! credential never reaches a log line, an error or a `Debug` dump by accident.

use std::fmt;

use serde::{Serialize, Serializer};

/// What every hidden value prints as.
pub const REDACTED: &str = "***";

/// A credential. `Debug`, `Display` and `Serialize` all print `***`; only [`Secret::expose`]
/// hands out the value, so every place that really sends a token is found with one grep.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The plain value, for the one call that must send it (an HTTP header, a URL path).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Length in characters, so validation can speak about a key's length without showing it.
    pub fn char_count(&self) -> usize {
        self.0.chars().count()
    }

    /// `text` with every occurrence of the value replaced by `***`: foreign error text (an
    /// HTTP client's error carries the request URL, and Telegram puts the token in it) is
    /// scrubbed before it is logged or returned.
    pub fn redact(&self, text: &str) -> String {
        if self.0.is_empty() {
            return text.to_owned();
        }
        text.replace(&self.0, REDACTED)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_rendering_shows_the_value() {
        let secret = Secret::new("123456:ABC-very-secret");
        assert_eq!(format!("{secret}"), "***");
        assert_eq!(format!("{secret:?}"), "***");
        assert_eq!(format!("{:?}", Some(secret.clone())), "Some(***)");
        assert_eq!(serde_json::to_string(&secret).unwrap(), "\"***\"");
        assert_eq!(secret.expose(), "123456:ABC-very-secret");
        assert_eq!(secret.char_count(), 22);
    }

    #[test]
    fn redact_scrubs_the_value_out_of_foreign_text() {
        let token = Secret::new("123:abc");
        assert_eq!(
            token.redact("GET https://api/bot123:abc/getMe failed"),
            "GET https://api/bot***/getMe failed"
        );
        assert_eq!(Secret::new("").redact("untouched"), "untouched");
    }
}
