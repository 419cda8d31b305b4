//! The fallback policy: after a failed call, retry the same endpoint, move to the next one,
//! or give up at once.

use std::time::Duration;

use super::error::ProviderError;
use super::settings::HttpSettings;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NextStep {
    /// Call the same endpoint again after this wait.
    Retry(Duration),
    /// Move to the next endpoint of the chain.
    Fallback,
    /// Return this error: no other attempt would do better.
    GiveUp,
}

/// `retries_done` counts the retries already made on this endpoint.
///
/// - 429 with a `retry-after` within `max_retry_after`: wait that long and retry; with none,
///   or a longer one, move on (another provider is likely free now).
/// - 5xx, connection errors and unusable replies: retry with exponential backoff, then move on.
/// - Timeouts move on at once: the user has already waited a full timeout.
/// - 401/403 and other refusals (402 billing, 404 unknown model) move on: another provider
///   has other credentials and models.
/// - 400/413/422 give up: the request itself is wrong and would fail everywhere (the agent
///   loop reads the message, e.g. to compress an over-long context).
pub(crate) fn next_step(
    error: &ProviderError,
    retries_done: u32,
    settings: &HttpSettings,
) -> NextStep {
    let may_retry = retries_done < settings.retries;
    match error {
        ProviderError::RateLimited {
            retry_after: Some(wait),
        } if may_retry && *wait <= settings.max_retry_after => NextStep::Retry(*wait),
        ProviderError::RateLimited { .. } => NextStep::Fallback,
        ProviderError::Server { .. }
        | ProviderError::Connect(_)
        | ProviderError::BadResponse(_)
            if may_retry =>
        {
            NextStep::Retry(backoff(settings, retries_done))
        }
        ProviderError::Server { .. }
        | ProviderError::Connect(_)
        | ProviderError::BadResponse(_)
        | ProviderError::Timeout { .. }
        | ProviderError::Auth { .. } => NextStep::Fallback,
        ProviderError::Rejected {
            status: 400 | 413 | 422,
            ..
        } => NextStep::GiveUp,
        ProviderError::Rejected { .. } => NextStep::Fallback,
        ProviderError::NotConfigured(_)
        | ProviderError::InvalidHistory(_)
        | ProviderError::AllFailed { .. }
        | ProviderError::Client(_) => NextStep::GiveUp,
    }
}

/// `retry_backoff × 2^retries`, capped at `max_retry_after`, plus up to 25 % jitter so that
/// many sessions failing together do not retry together.
fn backoff(settings: &HttpSettings, retries_done: u32) -> Duration {
    let base = settings
        .retry_backoff
        .saturating_mul(2u32.saturating_pow(retries_done))
        .min(settings.max_retry_after);
    base + base.mul_f64(rand::random::<f64>() * 0.25)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(retries: u32) -> HttpSettings {
        HttpSettings {
            retries,
            retry_backoff: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(30),
            ..HttpSettings::default()
        }
    }

    fn rate_limited(secs: Option<u64>) -> ProviderError {
        ProviderError::RateLimited {
            retry_after: secs.map(Duration::from_secs),
        }
    }

    #[test]
    fn rate_limits_wait_only_when_told_and_within_the_cap() {
        let s = settings(1);
        assert_eq!(
            next_step(&rate_limited(Some(5)), 0, &s),
            NextStep::Retry(Duration::from_secs(5))
        );
        assert_eq!(next_step(&rate_limited(Some(5)), 1, &s), NextStep::Fallback);
        assert_eq!(
            next_step(&rate_limited(Some(31)), 0, &s),
            NextStep::Fallback
        );
        assert_eq!(next_step(&rate_limited(None), 0, &s), NextStep::Fallback);
    }

    #[test]
    fn transient_failures_back_off_then_move_on() {
        let s = settings(2);
        let server = ProviderError::Server { status: 503 };
        for (retries, base) in [(0, 1), (1, 2)] {
            let NextStep::Retry(wait) = next_step(&server, retries, &s) else {
                panic!("should retry")
            };
            let base = Duration::from_secs(base);
            assert!(wait >= base && wait <= base.mul_f64(1.25), "{wait:?}");
        }
        assert_eq!(next_step(&server, 2, &s), NextStep::Fallback);
        let timeout = ProviderError::Timeout {
            stalled: true,
            after: Duration::from_secs(1),
        };
        assert_eq!(next_step(&timeout, 0, &s), NextStep::Fallback);
    }

    #[test]
    fn auth_and_refusals() {
        let s = settings(2);
        assert_eq!(
            next_step(&ProviderError::Auth { status: 401 }, 0, &s),
            NextStep::Fallback
        );
        let refused = |status| ProviderError::Rejected {
            status,
            message: String::new(),
        };
        assert_eq!(next_step(&refused(404), 0, &s), NextStep::Fallback);
        assert_eq!(next_step(&refused(402), 0, &s), NextStep::Fallback);
        assert_eq!(next_step(&refused(400), 0, &s), NextStep::GiveUp);
        assert_eq!(next_step(&refused(413), 0, &s), NextStep::GiveUp);
    }
}
