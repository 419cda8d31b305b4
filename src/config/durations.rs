//! Bounds for every setting that becomes a `Duration`. `Duration::from_secs_f64` panics on a
//! value past `u64::MAX` seconds and `Instant + Duration` on one past the clock's range, so a
//! typo like `edit_interval: 1e20` must stop at validation (exit 78, naming the key) instead
//! of panicking mid-turn or at start.

use std::collections::BTreeMap;
use std::time::Duration;

use super::error::ConfigError;

/// The longest interval any timing setting may ask for: one year.
pub const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// hermesd's own timing variables, read from the environment map by `hermesd run`.
pub const TIMING_ENV: [&str; 3] = [
    "HERMESD_DRAIN_TIMEOUT_SECS",
    "HERMESD_ADAPTER_BACKOFF_SECS",
    "HERMESD_ADAPTER_BACKOFF_MAX_SECS",
];

/// Why `secs` is not a usable interval, completing "must be ...".
pub fn out_of_range(secs: f64) -> Option<String> {
    if !secs.is_finite() || secs > MAX_SECONDS {
        Some(format!("at most {MAX_SECONDS} seconds (one year)"))
    } else {
        None
    }
}

/// The variable `name` as a duration: `None` when unset, an error naming it when it is not a
/// number of seconds between 0 and [`MAX_SECONDS`].
pub fn env_seconds(
    env: &BTreeMap<String, String>,
    name: &str,
) -> Result<Option<Duration>, ConfigError> {
    let Some(raw) = env.get(name) else {
        return Ok(None);
    };
    let secs = raw.trim().parse::<f64>().map_err(|_| {
        ConfigError::new(name, format!("expected a number of seconds, got '{raw}'"))
    })?;
    if secs < 0.0 || out_of_range(secs).is_some() {
        return Err(ConfigError::new(
            name,
            format!("must be between 0 and {MAX_SECONDS} seconds (one year), got '{raw}'"),
        ));
    }
    Ok(Some(Duration::from_secs_f64(secs)))
}

/// Every [`TIMING_ENV`] variable that is set but unusable.
pub fn check_env(env: &BTreeMap<String, String>) -> Vec<ConfigError> {
    TIMING_ENV
        .iter()
        .filter_map(|name| env_seconds(env, name).err())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str, value: &str) -> BTreeMap<String, String> {
        [(name.to_owned(), value.to_owned())].into()
    }

    #[test]
    fn timing_variables_are_bounded_and_named() {
        let name = "HERMESD_DRAIN_TIMEOUT_SECS";
        assert_eq!(
            env_seconds(&env(name, "2.5"), name),
            Ok(Some(Duration::from_millis(2500)))
        );
        assert_eq!(env_seconds(&BTreeMap::new(), name), Ok(None));
        for bad in ["1e300", "inf", "NaN", "-1", "soon", "31536001"] {
            let error = env_seconds(&env(name, bad), name).unwrap_err();
            assert_eq!(error.key, name, "{bad}");
        }
        let errors = check_env(&env("HERMESD_ADAPTER_BACKOFF_MAX_SECS", "1e20"));
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].key, "HERMESD_ADAPTER_BACKOFF_MAX_SECS");
    }
}
