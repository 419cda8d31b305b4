//! `mcp_servers.<name>.sampling` — whether a server may ask our model for a completion
//! (`sampling/createMessage`), through which model, and within which limits. Keys and
//! defaults are Hermes's (`tools/mcp_tool.py`, `SamplingHandler`): on unless `enabled:
//! false`, 10 requests a minute, 4096 tokens at most, 30 s per request.
//!
//! `max_tool_rounds` governs tool use inside sampling, which hermesd does not offer (it does
//! not advertise the `sampling.tools` capability); set, it is reported as not supported.

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::known_keys::join;
use super::parse::{Issues, at, kind};

/// One server's sampling settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpSampling {
    pub enabled: bool,
    /// The model asked instead of the server's hint or our default.
    pub model: Option<String>,
    /// The most tokens a request may ask for (the server's `maxTokens` is capped to it).
    pub max_tokens_cap: u32,
    #[serde(with = "secs")]
    pub timeout: Duration,
    /// Requests per sliding minute.
    pub max_rpm: u32,
    /// When not empty, the only models a request may resolve to.
    pub allowed_models: Vec<String>,
    /// The level of the per-request log lines: `debug`, `info` or `warning`.
    pub log_level: SamplingLogLevel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingLogLevel {
    Debug,
    Info,
    Warning,
}

impl Default for McpSampling {
    fn default() -> Self {
        Self {
            enabled: true,
            model: None,
            max_tokens_cap: 4096,
            timeout: Duration::from_secs(30),
            max_rpm: 10,
            allowed_models: Vec::new(),
            log_level: SamplingLogLevel::Info,
        }
    }
}

mod secs {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(value.as_secs_f64())
    }
}

const KEYS: &[&str] = &[
    "enabled",
    "model",
    "max_tokens_cap",
    "timeout",
    "max_rpm",
    "allowed_models",
    "log_level",
];

/// Validates `<prefix>.sampling` (absent or null: the defaults).
pub fn sampling(issues: &mut Issues, prefix: &str, value: Option<&Value>) -> McpSampling {
    let key = join(prefix, "sampling");
    let defaults = McpSampling::default();
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return defaults;
    };
    let Some(map) = value.as_object() else {
        issues.error(&key, format!("expected a mapping, got {}", kind(value)));
        return defaults;
    };
    for (name, value) in map {
        if super::known_keys::IGNORED_MCP_SAMPLING.contains(&name.as_str()) {
            if super::unsupported::is_set(value) {
                issues.ignored.push(join(&key, name));
            }
        } else if !KEYS.contains(&name.as_str()) {
            issues.warn(format!("unknown key '{}'", join(&key, name)));
        }
    }
    let field = |name: &str| at(join(&key, name), map.get(name));
    let log_level = match issues
        .string(field("log_level"))
        .map(|l| l.to_ascii_lowercase())
    {
        None => defaults.log_level,
        Some(level) => match level.as_str() {
            "debug" => SamplingLogLevel::Debug,
            "info" => SamplingLogLevel::Info,
            "warning" => SamplingLogLevel::Warning,
            other => {
                issues.error(
                    join(&key, "log_level"),
                    format!("expected debug, info or warning, got '{other}'"),
                );
                defaults.log_level
            }
        },
    };
    let timeout = issues.float(
        field("timeout"),
        defaults.timeout.as_secs_f64(),
        |n| n > 0.0,
        "a positive number of seconds",
    );
    McpSampling {
        enabled: issues.bool(field("enabled"), true),
        model: issues.string(field("model")).filter(|m| !m.is_empty()),
        max_tokens_cap: issues.uint(field("max_tokens_cap"), 4096, 1, u64::from(u32::MAX)) as u32,
        timeout: Duration::from_secs_f64(timeout),
        max_rpm: issues.uint(field("max_rpm"), 10, 0, u64::from(u32::MAX)) as u32,
        allowed_models: issues
            .list(field("allowed_models"), false)
            .unwrap_or_default(),
        log_level,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_values_and_errors_name_the_key() {
        let mut issues = Issues::default();
        assert_eq!(
            sampling(&mut issues, "mcp_servers.s", None),
            McpSampling::default()
        );
        let read = sampling(
            &mut issues,
            "mcp_servers.s",
            Some(
                &json!({"enabled": false, "model": "m", "max_tokens_cap": 100, "timeout": 5,
                         "max_rpm": 2, "allowed_models": ["m"], "log_level": "DEBUG",
                         "max_tool_rounds": 3}),
            ),
        );
        assert!(issues.errors.is_empty(), "{:?}", issues.errors);
        assert!(!read.enabled);
        assert_eq!(read.model.as_deref(), Some("m"));
        assert_eq!((read.max_tokens_cap, read.max_rpm), (100, 2));
        assert_eq!(read.timeout, Duration::from_secs(5));
        assert_eq!(read.log_level, SamplingLogLevel::Debug);
        assert_eq!(issues.ignored, ["mcp_servers.s.sampling.max_tool_rounds"]);
        sampling(
            &mut issues,
            "mcp_servers.s",
            Some(&json!({"max_rpm": -1, "log_level": "loud"})),
        );
        let errors: Vec<String> = issues.errors.iter().map(|e| e.to_string()).collect();
        assert!(
            errors
                .iter()
                .any(|e| e.contains("mcp_servers.s.sampling.max_rpm")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("mcp_servers.s.sampling.log_level")),
            "{errors:?}"
        );
    }
}
