//! `state:` — where hermesd keeps sessions and the gateway's tables. hermesd's own section
//! (issue 22): `sqlite` is `$HERMES_HOME/state.db`, shared with Python Hermes, and the
//! default; `postgres` is a database several instances share.
//!
//! The PostgreSQL backend cannot run the daemon yet, so `backend: postgres` is an error
//! naming the key rather than a setting that would be accepted and not acted on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::choice::StateBackend;
use super::env_overrides::env_leaf;
use super::known_keys::warn_unknown;
use super::parse::{Issues, at};
use super::raw::{Section, Unknown};
use super::secret::Secret;

/// The environment variable that beats `state.postgres_url`.
pub const DATABASE_URL_ENV: &str = "HERMES_DATABASE_URL";

/// `state:` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawState {
    pub backend: Option<serde_json::Value>,
    pub postgres_url: Option<serde_json::Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The validated `state:` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateConfig {
    pub backend: StateBackend,
    /// The PostgreSQL URL; a secret, since it usually holds the password.
    pub postgres_url: Option<Secret>,
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            backend: StateBackend::Sqlite,
            postgres_url: None,
        }
    }
}

pub fn state(
    issues: &mut Issues,
    section: Option<&Section<RawState>>,
    env: &BTreeMap<String, String>,
) -> StateConfig {
    let raw = issues.section("state", section).unwrap_or_default();
    warn_unknown(issues, "state", &raw.unknown, &[]);
    let backend = issues.choice(
        at("state.backend", raw.backend.as_ref()),
        StateBackend::Sqlite,
    );
    let url_leaf = env_leaf(env, DATABASE_URL_ENV)
        .or_else(|| at("state.postgres_url", raw.postgres_url.as_ref()));
    let url_key = url_leaf.as_ref().map(|leaf| leaf.key.clone());
    let postgres_url = issues.secret(url_leaf);
    if let (Some(url), Some(key)) = (&postgres_url, &url_key) {
        let scheme_ok = ["postgres://", "postgresql://"]
            .iter()
            .any(|scheme| url.expose().starts_with(scheme));
        if !scheme_ok {
            // The value is not repeated: it may hold a password.
            issues.error(
                key.clone(),
                "expected a postgres:// or postgresql:// URL (the value is not shown)",
            );
        }
    }
    match backend {
        StateBackend::Postgres => issues.error(
            "state.backend",
            "postgres is not available yet: the PostgreSQL backend cannot run the daemon \
             until issue 22 is finished; remove the key or use sqlite (the default)",
        ),
        StateBackend::Sqlite => {
            if let Some(key) = url_key.filter(|_| postgres_url.is_some()) {
                issues.warn(format!(
                    "{key} is set but state.backend is sqlite: the URL is not used"
                ));
            }
        }
    }
    StateConfig {
        backend,
        postgres_url,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validate(value: serde_json::Value, env: &[(&str, &str)]) -> (StateConfig, Issues) {
        let raw: RawState = serde_json::from_value(value).unwrap();
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut issues = Issues::default();
        let config = state(&mut issues, Some(&Section::Map(raw)), &env);
        (config, issues)
    }

    fn errors(issues: &Issues) -> Vec<String> {
        issues.errors.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn sqlite_is_the_default_and_needs_no_url() {
        let (config, issues) = validate(json!({}), &[]);
        assert_eq!(config, StateConfig::default());
        assert_eq!(config.backend, StateBackend::Sqlite);
        assert!(issues.errors.is_empty() && issues.warnings.is_empty());
    }

    #[test]
    fn postgres_is_refused_naming_the_key_until_the_backend_is_complete() {
        let url = "postgres://hermes:s3cret@db/hermes";
        for env in [vec![], vec![(DATABASE_URL_ENV, url)]] {
            let (_, issues) = validate(json!({"backend": "postgres", "postgres_url": url}), &env);
            let errors = errors(&issues);
            assert_eq!(errors.len(), 1, "{errors:?}");
            assert!(errors[0].contains("state.backend"), "{errors:?}");
            assert!(errors[0].contains("not available yet"), "{errors:?}");
            assert!(!errors[0].contains("s3cret"));
        }
    }

    #[test]
    fn the_url_is_a_secret_and_the_env_var_beats_the_file() {
        let (config, issues) = validate(
            json!({"postgres_url": "postgres://hermes:file@db/a"}),
            &[(DATABASE_URL_ENV, "postgres://hermes:env@db/b")],
        );
        let url = config.postgres_url.as_ref().unwrap();
        assert_eq!(url.expose(), "postgres://hermes:env@db/b");
        assert_eq!(format!("{config:?}").matches("env@").count(), 0);
        assert!(!serde_json::to_string(&config).unwrap().contains("env@"));
        // Set without the postgres backend: said, not silently ignored.
        assert_eq!(issues.warnings.len(), 1, "{:?}", issues.warnings);
        assert!(issues.warnings[0].contains(DATABASE_URL_ENV));
        assert!(issues.errors.is_empty());
    }

    #[test]
    fn a_url_of_another_scheme_is_an_error_that_does_not_show_it() {
        let (_, issues) = validate(json!({"postgres_url": "mysql://root:s3cret@db/x"}), &[]);
        let errors = errors(&issues);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("state.postgres_url"), "{errors:?}");
        assert!(!errors[0].contains("s3cret"), "{errors:?}");
        let (config, issues) = validate(json!({"backend": "mariadb"}), &[]);
        assert_eq!(config.backend, StateBackend::Sqlite);
        assert!(errors_of(&issues).contains("state.backend"));
    }

    fn errors_of(issues: &Issues) -> String {
        errors(issues).join("\n")
    }
}
