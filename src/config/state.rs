//! `state:` — where hermesd keeps sessions and the gateway's tables. hermesd's own section
//! (issue 22): `sqlite` is `$HERMES_HOME/state.db`, shared with Python Hermes, and the
//! default; `postgres` is a database several instances share (`postgres_url` or
//! `HERMES_DATABASE_URL`), coordinated by leases that outlive a silent holder by
//! `lease_seconds`, each instance named by `instance_id` (a fresh unique name by default).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::choice::StateBackend;
use super::env_overrides::env_leaf;
use super::known_keys::warn_unknown;
use super::parse::{Issues, at};
use super::secret::Secret;
use super::shape::{Section, Unknown};

/// The environment variable that beats `state.postgres_url`.
pub const DATABASE_URL_ENV: &str = "HERMES_DATABASE_URL";

/// `state:` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawState {
    pub backend: Option<serde_json::Value>,
    pub postgres_url: Option<serde_json::Value>,
    pub lease_seconds: Option<serde_json::Value>,
    pub instance_id: Option<serde_json::Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The validated `state:` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateConfig {
    pub backend: StateBackend,
    /// The PostgreSQL URL; a secret, since it usually holds the password.
    pub postgres_url: Option<Secret>,
    /// How long a lease (a session's turn, an instance's liveness) outlives its holder's
    /// last renewal: the failover time after an instance dies.
    pub lease_ttl: Duration,
    /// This instance's name among those sharing the database; `None` draws a fresh one at
    /// each start.
    pub instance_id: Option<String>,
}

/// `state.lease_seconds` unless set.
pub const DEFAULT_LEASE_SECONDS: f64 = 15.0;

/// The longest lease accepted: a day (a longer one would make failover meaningless, and the
/// value must fit the database's interval arithmetic).
const MAX_LEASE_SECONDS: f64 = 86_400.0;

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            backend: StateBackend::Sqlite,
            postgres_url: None,
            lease_ttl: Duration::from_secs_f64(DEFAULT_LEASE_SECONDS),
            instance_id: None,
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
    let lease_seconds = issues.float(
        at("state.lease_seconds", raw.lease_seconds.as_ref()),
        DEFAULT_LEASE_SECONDS,
        |n| n > 0.0 && n <= MAX_LEASE_SECONDS,
        "a positive number of seconds (at most 86400)",
    );
    let instance_id = issues.string(at("state.instance_id", raw.instance_id.as_ref()));
    match backend {
        StateBackend::Postgres => {
            if postgres_url.is_none() && url_key.is_none() {
                issues.error(
                    "state.postgres_url",
                    format!(
                        "state.backend is postgres but no database is named: set \
                         state.postgres_url or {DATABASE_URL_ENV}"
                    ),
                );
            }
        }
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
        lease_ttl: Duration::from_secs_f64(lease_seconds),
        instance_id,
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
    fn postgres_runs_with_a_url_from_the_file_or_the_environment() {
        let url = "postgres://hermes:s3cret@db/hermes";
        for (file, env) in [
            (json!({"backend": "postgres", "postgres_url": url}), vec![]),
            (
                json!({"backend": "postgres"}),
                vec![(DATABASE_URL_ENV, url)],
            ),
        ] {
            let (config, issues) = validate(file, &env);
            assert!(issues.errors.is_empty(), "{:?}", errors(&issues));
            assert!(issues.warnings.is_empty(), "{:?}", issues.warnings);
            assert_eq!(config.backend, StateBackend::Postgres);
            assert_eq!(config.postgres_url.unwrap().expose(), url);
            assert_eq!(config.lease_ttl, Duration::from_secs(15));
            assert_eq!(config.instance_id, None);
        }
    }

    #[test]
    fn postgres_without_a_url_is_an_error_naming_both_places() {
        let (_, issues) = validate(json!({"backend": "postgres"}), &[]);
        let errors = errors(&issues);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("state.postgres_url"), "{errors:?}");
        assert!(errors[0].contains(DATABASE_URL_ENV), "{errors:?}");
    }

    #[test]
    fn lease_seconds_and_instance_id_are_read_and_checked() {
        let (config, issues) = validate(
            json!({"lease_seconds": 2.5, "instance_id": " edge-1 "}),
            &[],
        );
        assert!(issues.errors.is_empty(), "{:?}", errors(&issues));
        assert_eq!(config.lease_ttl, Duration::from_millis(2500));
        assert_eq!(config.instance_id.as_deref(), Some("edge-1"));
        for bad in [json!(0), json!(-3), json!("soon"), json!(100000)] {
            let (config, issues) = validate(json!({"lease_seconds": bad.clone()}), &[]);
            let errors = errors(&issues);
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert!(errors[0].contains("state.lease_seconds"), "{errors:?}");
            assert_eq!(config.lease_ttl, Duration::from_secs(15));
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
