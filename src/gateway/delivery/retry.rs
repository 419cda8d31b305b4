//! The send-retry policy: Hermes's `_send_with_retry` for ordinary failures (which are
//! retried, jittered exponential backoff, `max_retries`), our rule for flow control (a
//! rate-limit answer is waited out, as long as the platform asks, with no attempt cap, until
//! the reply's delivery deadline), and the exact texts sent when a reply cannot go out as
//! written.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hermes_adapter::SendErrorKind;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Sent once when a reply could not be delivered after every retry.
pub const FAILURE_NOTICE: &str = "\u{26a0}\u{fe0f} Your message was handled, but the answer could not be delivered despite several tries. Please send it again.";

/// Prefix of the plain-text fallback sent after a formatting failure.
pub const FORMAT_FALLBACK_PREFIX: &str =
    "(Sent as plain text: the formatted version was refused)\n\n";

/// How much of the content the plain-text fallback carries (Hermes's `content[:3500]`).
pub const FORMAT_FALLBACK_MAX_CHARS: usize = 3500;

/// Error texts that mean the request never reached the platform (Hermes's
/// `_RETRYABLE_ERROR_PATTERNS`), so a retry cannot produce a duplicate.
const RETRYABLE_PATTERNS: [&str; 9] = [
    "connecterror",
    "connectionerror",
    "connectionreset",
    "connectionrefused",
    "connecttimeout",
    "network",
    "broken pipe",
    "remotedisconnected",
    "eoferror",
];

/// Error texts of read/write timeouts: the send may have landed before the timeout.
const TIMEOUT_PATTERNS: [&str; 3] = ["timed out", "readtimeout", "writetimeout"];

/// What the deliverer does about one failed send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// Nothing reached the platform: wait and send again.
    Retryable,
    /// The send may have happened: never re-send blindly.
    Ambiguous,
    /// The platform refused the length: split the piece further.
    TooLong,
    /// The platform refused the formatting: send it as plain text.
    Format,
    /// Retrying cannot help (forbidden, chat not found).
    Permanent,
}

/// Classifies a failure as Hermes does: the adapter's kind first, and for unclassified
/// errors the retryable substrings before the timeout substrings (a connect timeout never
/// reached the platform; a read timeout may have).
pub(crate) fn classify(kind: SendErrorKind, message: &str) -> FailureClass {
    match kind {
        SendErrorKind::RateLimited | SendErrorKind::Transient => FailureClass::Retryable,
        SendErrorKind::Ambiguous => FailureClass::Ambiguous,
        SendErrorKind::TooLong => FailureClass::TooLong,
        SendErrorKind::BadFormat => FailureClass::Format,
        SendErrorKind::Forbidden | SendErrorKind::NotFound => FailureClass::Permanent,
        SendErrorKind::Unknown => {
            let lowered = message.to_lowercase();
            if RETRYABLE_PATTERNS.iter().any(|p| lowered.contains(p)) {
                FailureClass::Retryable
            } else if TIMEOUT_PATTERNS.iter().any(|p| lowered.contains(p)) {
                FailureClass::Ambiguous
            } else {
                // Hermes answers any other non-network failure with the plain-text fallback.
                FailureClass::Format
            }
        }
    }
}

/// The `U(0,1)` seconds added to every retry delay. Seeded in tests so delays are exact.
#[derive(Debug, Clone)]
pub enum Jitter {
    Random(Arc<Mutex<StdRng>>),
    /// Always this much (clamped below one second); for tests.
    Fixed(Duration),
}

impl Jitter {
    pub fn from_os_rng() -> Self {
        Self::Random(Arc::new(Mutex::new(StdRng::from_os_rng())))
    }

    pub fn seeded(seed: u64) -> Self {
        Self::Random(Arc::new(Mutex::new(StdRng::seed_from_u64(seed))))
    }

    /// A value in `[0, 1)` seconds.
    pub fn sample(&self) -> Duration {
        match self {
            Self::Random(rng) => {
                // A poisoned lock only means another sender panicked mid-sample; the RNG
                // state is still usable.
                let mut rng = rng.lock().unwrap_or_else(|e| e.into_inner());
                Duration::from_secs_f64(rng.random_range(0.0..1.0))
            }
            Self::Fixed(value) => (*value).min(Duration::from_millis(999)),
        }
    }
}

/// The default of `delivery.rate_limit_deadline`: how long a reply may wait out flow control.
pub const DEFAULT_RATE_LIMIT_DEADLINE: Duration = Duration::from_secs(3600);

/// The longest backoff between rate-limit retries when the platform names no wait: the
/// exponential ladder must stay bounded when the attempts are not.
pub const MAX_RATE_LIMIT_BACKOFF: Duration = Duration::from_secs(60);

/// How often and how patiently a reply chunk is re-sent (Hermes: 2 retries, base 2 s, for
/// ordinary failures; rate limits are waited out until `rate_limit_deadline`).
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Retries of ordinary retryable failures (network, 5xx); rate limits do not count.
    pub max_retries: u32,
    pub base_delay: Duration,
    pub jitter: Jitter,
    /// From the start of a reply's delivery: a rate-limit wait that would end later than
    /// this defers the reply (it stays owed in the ledger) instead of retrying.
    pub rate_limit_deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            base_delay: Duration::from_secs(2),
            jitter: Jitter::from_os_rng(),
            rate_limit_deadline: DEFAULT_RATE_LIMIT_DEADLINE,
        }
    }
}

impl RetryPolicy {
    /// The Hermes defaults with a seeded jitter.
    pub fn seeded(seed: u64) -> Self {
        Self {
            jitter: Jitter::seeded(seed),
            ..Self::default()
        }
    }

    /// The wait before retry `attempt` (1-based): `retry_after + U(0,1)` when the server
    /// asked for it, else `base·2^(attempt−1) + U(0,1)`.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let base = match retry_after {
            Some(retry_after) => retry_after,
            None => self
                .base_delay
                .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))),
        };
        base + self.jitter.sample()
    }

    /// The wait before the `n`th retry (1-based) after a rate-limit answer: the platform's
    /// `retry_after` in full however long it is (retrying earlier only earns another refusal),
    /// else the backoff ladder capped at [`MAX_RATE_LIMIT_BACKOFF`]; plus `U(0,1)` s, so a
    /// retry is never early and retries of many chats do not land together.
    pub fn rate_limit_delay(&self, n: u32, retry_after: Option<Duration>) -> Duration {
        let base = match retry_after {
            Some(retry_after) => retry_after,
            None => self
                .base_delay
                .saturating_mul(2u32.saturating_pow(n.saturating_sub(1)))
                .min(MAX_RATE_LIMIT_BACKOFF),
        };
        base + self.jitter.sample()
    }
}

/// The plain-text fallback for `content`: the prefix plus at most 3500 characters, cut
/// further if needed so the whole text fits `limit` in `unit`.
pub(crate) fn format_fallback(
    content: &str,
    limit: usize,
    unit: hermes_adapter::LengthUnit,
) -> String {
    let mut text = String::from(FORMAT_FALLBACK_PREFIX);
    let mut used = unit.measure(&text);
    for c in content.chars().take(FORMAT_FALLBACK_MAX_CHARS) {
        let width = unit.measure(c.encode_utf8(&mut [0; 4]));
        if used + width > limit {
            break;
        }
        used += width;
        text.push(c);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::LengthUnit;

    #[test]
    fn classification_follows_the_reference() {
        use SendErrorKind::*;
        assert_eq!(classify(RateLimited, ""), FailureClass::Retryable);
        assert_eq!(classify(Transient, ""), FailureClass::Retryable);
        assert_eq!(classify(Ambiguous, ""), FailureClass::Ambiguous);
        assert_eq!(
            classify(Unknown, "httpx.ConnectTimeout: timed out"),
            FailureClass::Retryable
        );
        assert_eq!(
            classify(Unknown, "ReadTimeout: timed out"),
            FailureClass::Ambiguous
        );
        assert_eq!(classify(Unknown, "Broken pipe"), FailureClass::Retryable);
        assert_eq!(classify(Unknown, "weird"), FailureClass::Format);
        assert_eq!(classify(Forbidden, "network"), FailureClass::Permanent);
    }

    #[test]
    fn delays_are_exponential_or_the_servers_plus_under_a_second() {
        let policy = RetryPolicy::seeded(7);
        for attempt in 1..=3u32 {
            let base = Duration::from_secs(2 * 2u64.pow(attempt - 1));
            let delay = policy.delay(attempt, None);
            assert!(delay >= base && delay < base + Duration::from_secs(1));
        }
        let delay = policy.delay(1, Some(Duration::from_secs(9)));
        assert!(delay >= Duration::from_secs(9) && delay < Duration::from_secs(10));
        let a: Vec<_> = (0..5).map(|_| Jitter::seeded(3).sample()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]), "seeded jitter repeats");
    }

    #[test]
    fn rate_limit_waits_take_the_whole_retry_after_and_a_bounded_ladder() {
        let policy = RetryPolicy {
            jitter: Jitter::Fixed(Duration::from_millis(100)),
            ..RetryPolicy::default()
        };
        // Minutes of group flood control are waited in full, however many tries came before.
        let long = Duration::from_secs(47 * 60);
        assert_eq!(
            policy.rate_limit_delay(40, Some(long)),
            long + Duration::from_millis(100)
        );
        assert_eq!(
            policy.rate_limit_delay(1, None),
            Duration::from_millis(2100)
        );
        assert_eq!(
            policy.rate_limit_delay(30, None),
            MAX_RATE_LIMIT_BACKOFF + Duration::from_millis(100)
        );
    }

    #[test]
    fn fallback_is_prefixed_capped_and_fits_the_limit() {
        let long = "é".repeat(5000);
        let fallback = format_fallback(&long, 100_000, LengthUnit::Chars);
        assert_eq!(
            fallback.chars().count(),
            FORMAT_FALLBACK_PREFIX.chars().count() + FORMAT_FALLBACK_MAX_CHARS
        );
        let fallback = format_fallback(&long, 2000, LengthUnit::Bytes);
        assert!(fallback.starts_with(FORMAT_FALLBACK_PREFIX) && fallback.len() <= 2000);
    }
}
