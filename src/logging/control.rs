//! Changing the log filter of a running process (the admin API's log-level endpoint calls
//! [`LogControl::set_filter`]): a `reload` handle on the one `EnvFilter` of the subscriber.

use tracing_subscriber::reload;
use tracing_subscriber::{EnvFilter, Registry};

/// Why a new filter was not applied.
#[derive(Debug, thiserror::Error)]
pub enum LogControlError {
    #[error("invalid log filter '{directives}': {reason}")]
    InvalidFilter { directives: String, reason: String },
    #[error("the logging subscriber is gone; the filter cannot be changed")]
    SubscriberGone,
}

/// A handle on the live log filter. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LogControl {
    handle: reload::Handle<EnvFilter, Registry>,
}

impl LogControl {
    pub(super) fn new(handle: reload::Handle<EnvFilter, Registry>) -> Self {
        Self { handle }
    }

    /// Replaces the filter with `directives` (`RUST_LOG` syntax: `info`,
    /// `hermesd=debug,hyper=warn`). An invalid filter changes nothing.
    pub fn set_filter(&self, directives: &str) -> Result<(), LogControlError> {
        let filter = parse_filter(directives)?;
        self.handle
            .reload(filter)
            .map_err(|_| LogControlError::SubscriberGone)
    }

    /// The filter in effect, in `RUST_LOG` syntax.
    pub fn current(&self) -> Result<String, LogControlError> {
        self.handle
            .with_current(|filter| filter.to_string())
            .map_err(|_| LogControlError::SubscriberGone)
    }
}

/// Parses `RUST_LOG`-style directives strictly: a typo is an error, not a silent no-op.
pub fn parse_filter(directives: &str) -> Result<EnvFilter, LogControlError> {
    let directives = directives.trim();
    if directives.is_empty() {
        return Err(LogControlError::InvalidFilter {
            directives: String::new(),
            reason: "the filter is empty".to_owned(),
        });
    }
    EnvFilter::builder()
        .parse(directives)
        .map_err(|e| LogControlError::InvalidFilter {
            directives: directives.to_owned(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::{LogFormat, Redactor, build_subscriber, test_sink::SharedSink};

    #[test]
    fn set_filter_changes_what_is_logged_at_runtime() {
        let sink = SharedSink::default();
        let (subscriber, control) = build_subscriber(
            LogFormat::Text,
            false,
            parse_filter("info").unwrap(),
            Redactor::default(),
            sink.clone(),
        );
        tracing::subscriber::with_default(subscriber, || {
            tracing::debug!("hidden before");
            control.set_filter("debug").expect("valid filter");
            tracing::debug!("shown after");
            assert_eq!(control.current().unwrap(), "debug");
            control.set_filter("warn").expect("valid filter");
            tracing::info!("hidden again");
        });
        let text = sink.text();
        assert!(!text.contains("hidden before"), "{text}");
        assert!(text.contains("shown after"), "{text}");
        assert!(!text.contains("hidden again"), "{text}");
    }

    #[test]
    fn an_invalid_filter_is_refused_and_the_old_one_stays() {
        let sink = SharedSink::default();
        let (subscriber, control) = build_subscriber(
            LogFormat::Json,
            false,
            parse_filter("info").unwrap(),
            Redactor::default(),
            sink.clone(),
        );
        tracing::subscriber::with_default(subscriber, || {
            let error = control.set_filter("hermesd=loud").unwrap_err();
            assert!(error.to_string().contains("hermesd=loud"), "{error}");
            assert!(control.set_filter("  ").is_err());
            assert_eq!(control.current().unwrap(), "info");
            tracing::info!(answer = 42, "still info");
        });
        let line: serde_json::Value =
            serde_json::from_str(sink.text().lines().next().expect("one line")).unwrap();
        assert_eq!(line["message"], "still info");
        assert_eq!(line["answer"], 42);
        assert_eq!(line["level"], "INFO");
    }
}
