//! `cron:` and the top-level `timezone` — how scheduled jobs run inside the daemon. Hermes's
//! keys keep their meaning (`max_parallel_jobs`, `output_retention`, `wrap_response`,
//! `script_timeout_seconds`); `run_timeout` and `tick_seconds` are hermesd's own.
//! `HERMES_TIMEZONE` overrides `timezone` and `HERMES_CRON_SCRIPT_TIMEOUT` overrides
//! `script_timeout_seconds`, as in Hermes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::known_keys::{IGNORED_CRON, warn_unknown};
use super::parse::{Issues, at};
use super::shape::{Section, Unknown};

/// `cron:` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawCron {
    pub max_parallel_jobs: Option<Value>,
    pub output_retention: Option<Value>,
    pub wrap_response: Option<Value>,
    pub run_timeout: Option<Value>,
    pub tick_seconds: Option<Value>,
    pub script_timeout_seconds: Option<Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The validated cron settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CronConfig {
    /// Jobs running at once; more due jobs wait for a free place.
    pub max_parallel_jobs: u64,
    /// Run records kept per job under `cron/output/<id>/` (0 keeps all).
    pub output_retention: u64,
    /// Delivered output carries the job's name and id around it.
    pub wrap_response: bool,
    /// Seconds a run may take before it is stopped and reported as failed.
    #[serde(rename = "run_timeout")]
    pub run_timeout_secs: u64,
    /// Seconds between two looks at `jobs.json`.
    pub tick_seconds: u64,
    /// Seconds a job's `script` may run before it is killed and reported as failed.
    pub script_timeout_seconds: u64,
    /// The IANA zone cron expressions and naive timestamps are read in ("" = the host's).
    #[serde(skip)]
    pub timezone: String,
}

impl Default for CronConfig {
    fn default() -> Self {
        Self {
            max_parallel_jobs: 4,
            output_retention: 50,
            wrap_response: true,
            run_timeout_secs: 600,
            tick_seconds: 60,
            script_timeout_seconds: 3600,
            timezone: String::new(),
        }
    }
}

pub fn cron(
    issues: &mut Issues,
    section: Option<&Section<RawCron>>,
    timezone: Option<&Value>,
    env: &BTreeMap<String, String>,
) -> CronConfig {
    let d = CronConfig::default();
    let raw = issues.section("cron", section).unwrap_or_default();
    warn_unknown(issues, "cron", &raw.unknown, &[IGNORED_CRON]);
    let env_zone = env
        .get("HERMES_TIMEZONE")
        .map(|z| z.trim().to_owned())
        .filter(|z| !z.is_empty());
    let (zone_key, zone) = match env_zone {
        Some(zone) => ("HERMES_TIMEZONE", Some(zone)),
        None => ("timezone", issues.string(at("timezone", timezone))),
    };
    let zone = zone.unwrap_or_default();
    let env_script_timeout = env
        .get("HERMES_CRON_SCRIPT_TIMEOUT")
        .map(|t| Value::String(t.trim().to_owned()))
        .filter(|t| t.as_str().is_some_and(|t| !t.is_empty()));
    let script_timeout = match &env_script_timeout {
        Some(value) => at("HERMES_CRON_SCRIPT_TIMEOUT", Some(value)),
        None => at(
            "cron.script_timeout_seconds",
            raw.script_timeout_seconds.as_ref(),
        ),
    };
    if let Err(e) = super::zone::Zone::parse(&zone) {
        issues.error(zone_key, e.to_string());
    }
    CronConfig {
        max_parallel_jobs: issues.uint(
            at("cron.max_parallel_jobs", raw.max_parallel_jobs.as_ref()),
            d.max_parallel_jobs,
            1,
            256,
        ),
        output_retention: issues.uint(
            at("cron.output_retention", raw.output_retention.as_ref()),
            d.output_retention,
            0,
            1_000_000,
        ),
        wrap_response: issues.bool(
            at("cron.wrap_response", raw.wrap_response.as_ref()),
            d.wrap_response,
        ),
        run_timeout_secs: issues.uint(
            at("cron.run_timeout", raw.run_timeout.as_ref()),
            d.run_timeout_secs,
            1,
            86_400,
        ),
        tick_seconds: issues.uint(
            at("cron.tick_seconds", raw.tick_seconds.as_ref()),
            d.tick_seconds,
            1,
            3600,
        ),
        script_timeout_seconds: issues.uint(script_timeout, d.script_timeout_seconds, 1, 86_400),
        timezone: zone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validate(
        value: Value,
        zone: Option<Value>,
        env: &[(&str, &str)],
    ) -> (CronConfig, Vec<String>) {
        let raw: RawCron = serde_json::from_value(value).unwrap();
        let env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let mut issues = Issues::default();
        let config = cron(&mut issues, Some(&Section::Map(raw)), zone.as_ref(), &env);
        (
            config,
            issues.errors.iter().map(|e| e.to_string()).collect(),
        )
    }

    #[test]
    fn settings_are_read_and_bad_values_name_their_key() {
        let (config, errors) = validate(
            json!({"max_parallel_jobs": 2, "output_retention": 0, "wrap_response": false}),
            Some(json!("Asia/Kolkata")),
            &[],
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(config.max_parallel_jobs, 2);
        assert_eq!(config.output_retention, 0);
        assert!(!config.wrap_response);
        assert_eq!(config.timezone, "Asia/Kolkata");
        let (_, errors) = validate(
            json!({"max_parallel_jobs": 0}),
            Some(json!("Nowhere/City")),
            &[],
        );
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors.iter().any(|e| e.contains("cron.max_parallel_jobs")));
        assert!(
            errors
                .iter()
                .any(|e| e.contains("timezone") && e.contains("Nowhere/City"))
        );
        let (config, errors) = validate(
            json!({}),
            Some(json!("UTC")),
            &[("HERMES_TIMEZONE", "Europe/Paris")],
        );
        assert!(errors.is_empty());
        assert_eq!(config.timezone, "Europe/Paris");
    }

    #[test]
    fn the_script_timeout_is_read_and_its_variable_wins() {
        let (config, errors) = validate(json!({"script_timeout_seconds": 90}), None, &[]);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(config.script_timeout_seconds, 90);
        let (config, _) = validate(
            json!({"script_timeout_seconds": 90}),
            None,
            &[("HERMES_CRON_SCRIPT_TIMEOUT", "15")],
        );
        assert_eq!(config.script_timeout_seconds, 15);
        let (_, errors) = validate(json!({}), None, &[("HERMES_CRON_SCRIPT_TIMEOUT", "soon")]);
        assert!(
            errors
                .iter()
                .any(|e| e.contains("HERMES_CRON_SCRIPT_TIMEOUT")),
            "{errors:?}"
        );
        assert_eq!(
            validate(json!({}), None, &[]).0.script_timeout_seconds,
            3600
        );
    }
}
