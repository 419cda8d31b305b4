//! Configuration errors: each names the key (or env var, or file) and what is wrong with it.

use std::fmt;

/// One problem with the configuration. `key` is a dotted config key (`approvals.timeout`), an
/// environment variable (`API_SERVER_PORT`) or a file path; `message` never contains a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

impl ConfigError {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "config error: {}: {}", self.key, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in one load, reported together so one edit can fix them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    pub fn single(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self(vec![ConfigError::new(key, message)])
    }
}

impl fmt::Display for ConfigErrors {
    /// One line per error: `config error: <key>: <message>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_error() {
        let errors = ConfigErrors(vec![
            ConfigError::new("approvals.mode", "expected one of manual, off; got 'maybe'"),
            ConfigError::new("API_SERVER_PORT", "must be between 0 and 65535, got 70000"),
        ]);
        assert_eq!(
            errors.to_string(),
            "config error: approvals.mode: expected one of manual, off; got 'maybe'\n\
             config error: API_SERVER_PORT: must be between 0 and 65535, got 70000"
        );
    }
}
