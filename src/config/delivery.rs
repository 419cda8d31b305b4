//! `delivery:` — how long a reply may wait out a platform's flow control. hermesd's own
//! section (Hermes has none): a rate-limit answer (`429` with `retry_after`) is waited out
//! and retried with no attempt cap until this deadline; past it the reply stays owed in the
//! ledger and is resent after a restart.

use serde::{Deserialize, Serialize};

use super::known_keys::warn_unknown;
use super::parse::{Issues, at};
use super::shape::{Section, Unknown};

/// The longest accepted deadline: the ledger abandons a reply a day after it was recorded
/// (Hermes's `STALE_AFTER_SECONDS`), so waiting longer could never deliver it.
pub const MAX_RATE_LIMIT_DEADLINE_SECS: u64 = 86_400;

/// `delivery:` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RawDelivery {
    pub rate_limit_deadline: Option<serde_json::Value>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// The validated `delivery:` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeliveryConfig {
    /// Seconds from the start of a reply's delivery during which rate limits are waited out.
    #[serde(rename = "rate_limit_deadline")]
    pub rate_limit_deadline_secs: u64,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        Self {
            rate_limit_deadline_secs: 3600,
        }
    }
}

pub fn delivery(issues: &mut Issues, section: Option<&Section<RawDelivery>>) -> DeliveryConfig {
    let defaults = DeliveryConfig::default();
    let raw = issues.section("delivery", section).unwrap_or_default();
    warn_unknown(issues, "delivery", &raw.unknown, &[]);
    DeliveryConfig {
        rate_limit_deadline_secs: issues.uint(
            at(
                "delivery.rate_limit_deadline",
                raw.rate_limit_deadline.as_ref(),
            ),
            defaults.rate_limit_deadline_secs,
            1,
            MAX_RATE_LIMIT_DEADLINE_SECS,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn validate(value: serde_json::Value) -> (DeliveryConfig, Vec<String>) {
        let raw: RawDelivery = serde_json::from_value(value).unwrap();
        let mut issues = Issues::default();
        let config = delivery(&mut issues, Some(&Section::Map(raw)));
        (
            config,
            issues.errors.iter().map(|e| e.to_string()).collect(),
        )
    }

    #[test]
    fn the_deadline_defaults_to_an_hour_and_is_bounded_by_the_ledgers_day() {
        assert_eq!(DeliveryConfig::default().rate_limit_deadline_secs, 3600);
        let (config, errors) = validate(json!({"rate_limit_deadline": 90}));
        assert_eq!(config.rate_limit_deadline_secs, 90);
        assert!(errors.is_empty());
        for bad in [
            json!(0),
            json!(86_401),
            json!(1e20),
            json!("soon"),
            json!(-5),
        ] {
            let (config, errors) = validate(json!({"rate_limit_deadline": bad}));
            assert_eq!(config.rate_limit_deadline_secs, 3600, "{bad}");
            assert!(
                errors.len() == 1 && errors[0].contains("delivery.rate_limit_deadline"),
                "{bad}: {errors:?}"
            );
        }
    }
}
