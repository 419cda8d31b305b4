//! Credentials in the configuration: the shared `Secret` type, and which free-form keys
//! name one, so a token never shows up in logs, errors or `config show`.

/// The one `Secret` (Debug, Display and Serialize print `***`; `expose()` hands out the
/// value) lives in the adapter contract so the adapters and the core share it.
pub use hermes_adapter::{REDACTED, Secret};

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
