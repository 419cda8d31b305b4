//! Where the Bot API lives, read the way python-telegram-bot reads Hermes's
//! `extra.base_url` / `extra.base_file_url` (`telegram/_bot.py::_parse_base_url`): a
//! `{token}` placeholder is replaced by the token, otherwise the token is appended to the
//! prefix, which by that convention already ends in `/bot` (`https://api.telegram.org/bot`,
//! `http://localhost:8081/bot`). hermesd's older form, a bare server address
//! (`http://localhost:8081`), still works: `/bot` is added when the prefix lacks it.
//!
//! A resolved URL is kept as a *shape* with `{token}` in place of the token, so it can be
//! named in errors and logs without leaking the secret.

/// The placeholders python-telegram-bot accepts (it matches any of these spellings).
const PLACEHOLDERS: [&str; 6] = [
    "{token}",
    "{TOKEN}",
    "{bot_token}",
    "{BOT_TOKEN}",
    "{bot-token}",
    "{BOT-TOKEN}",
];
/// The marker the shapes use for the token.
pub const TOKEN_MARK: &str = "{token}";

/// The public Bot API's method and file prefixes (python-telegram-bot's defaults).
const PUBLIC_API: &str = "https://api.telegram.org/bot{token}";
const PUBLIC_FILES: &str = "https://api.telegram.org/file/bot{token}";

/// The method prefix and the file-download prefix, both as shapes (`…/bot{token}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub api: String,
    pub files: String,
}

impl Default for Endpoints {
    fn default() -> Self {
        Self {
            api: PUBLIC_API.into(),
            files: PUBLIC_FILES.into(),
        }
    }
}

impl Endpoints {
    /// Resolves `base_url` and `base_file_url` (each optional). Without `base_file_url` the
    /// file prefix follows `base_url` as Hermes passes it on (`base_file_url` defaults to
    /// `base_url`), except that a `…/bot` prefix maps to the server's `…/file/bot` (where a
    /// Bot API server serves files; in local mode files are read from disk anyway).
    pub fn resolve(base_url: Option<&str>, base_file_url: Option<&str>) -> Result<Self, String> {
        let mut endpoints = Self::default();
        if let Some(base) = base_url {
            check_scheme("base_url", base)?;
            endpoints.api = shape(base, "/bot");
            endpoints.files = if has_placeholder(base) {
                endpoints.api.clone()
            } else {
                let root = strip_bot(base.trim_end_matches('/'));
                format!("{root}/file/bot{TOKEN_MARK}")
            };
        }
        if let Some(files) = base_file_url {
            check_scheme("base_file_url", files)?;
            endpoints.files = shape(files, "/file/bot");
        }
        Ok(endpoints)
    }
}

impl Endpoints {
    /// The URL of `method`, token filled in.
    pub fn method_url(&self, token: &str, method: &str) -> String {
        format!("{}/{method}", fill(&self.api, token))
    }
}

/// `prefix` as a shape: placeholders unified to `{token}`, else the token appended after
/// `/bot` (added as `default_tail` when the prefix does not end in `/bot`).
fn shape(prefix: &str, default_tail: &str) -> String {
    if has_placeholder(prefix) {
        return PLACEHOLDERS
            .iter()
            .fold(prefix.to_owned(), |s, p| s.replace(p, TOKEN_MARK))
            .trim_end_matches('/')
            .to_owned();
    }
    let trimmed = prefix.trim_end_matches('/');
    if trimmed.ends_with("/bot") {
        format!("{trimmed}{TOKEN_MARK}")
    } else {
        format!("{trimmed}{default_tail}{TOKEN_MARK}")
    }
}

fn has_placeholder(prefix: &str) -> bool {
    PLACEHOLDERS.iter().any(|p| prefix.contains(p))
}

/// `http://host/bot` → `http://host`; anything else unchanged.
fn strip_bot(prefix: &str) -> &str {
    prefix.strip_suffix("/bot").unwrap_or(prefix)
}

fn check_scheme(key: &str, value: &str) -> Result<(), String> {
    let lower = value.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        Ok(())
    } else {
        Err(format!(
            "telegram: extra.{key} must be an http:// or https:// URL (e.g. http://localhost:8081/bot), not {value:?}"
        ))
    }
}

/// `shape` with the token filled in.
pub fn fill(shape: &str, token: &str) -> String {
    shape.replace(TOKEN_MARK, token)
}

/// `shape` as shown to people: the token position marked, the token itself absent.
pub fn display(shape: &str) -> String {
    shape.replace(TOKEN_MARK, "<token>")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(base: &str) -> String {
        Endpoints::resolve(Some(base), None).unwrap().api
    }

    #[test]
    fn python_telegram_bot_forms_resolve_to_the_same_prefix() {
        let expected = "http://localhost:8081/bot{token}";
        // Hermes/python-telegram-bot: the prefix including /bot, the token appended.
        assert_eq!(api("http://localhost:8081/bot"), expected);
        // A placeholder, in any spelling python-telegram-bot accepts.
        assert_eq!(api("http://localhost:8081/bot{token}"), expected);
        assert_eq!(api("http://localhost:8081/bot{BOT_TOKEN}"), expected);
        // hermesd's earlier form, a bare address, with or without a trailing slash.
        assert_eq!(api("http://localhost:8081"), expected);
        assert_eq!(api("http://localhost:8081/"), expected);
        // The test environment form from the python-telegram-bot docs.
        assert_eq!(
            api("https://api.telegram.org/bot{token}/test"),
            "https://api.telegram.org/bot{token}/test"
        );
    }

    #[test]
    fn file_prefix_follows_base_url_unless_given() {
        let defaults = Endpoints::resolve(None, None).unwrap();
        assert_eq!(defaults.files, "https://api.telegram.org/file/bot{token}");
        let local = Endpoints::resolve(Some("http://h:8081/bot"), None).unwrap();
        assert_eq!(local.files, "http://h:8081/file/bot{token}");
        let bare = Endpoints::resolve(Some("http://h:8081"), None).unwrap();
        assert_eq!(bare.files, "http://h:8081/file/bot{token}");
        let both = Endpoints::resolve(Some("http://h/bot"), Some("http://files.example/file/bot"))
            .unwrap();
        assert_eq!(both.files, "http://files.example/file/bot{token}");
        let placeholder = Endpoints::resolve(None, Some("http://f/x/{token}/y")).unwrap();
        assert_eq!(placeholder.files, "http://f/x/{token}/y");
    }

    #[test]
    fn a_prefix_without_a_scheme_is_refused_naming_the_key() {
        let error = Endpoints::resolve(Some("localhost:8081/bot"), None).unwrap_err();
        assert!(error.contains("extra.base_url"), "{error}");
        assert_eq!(
            display("http://h/bot{token}/getMe"),
            "http://h/bot<token>/getMe"
        );
    }
}
