//! The limits every model call runs under, shared by the client, the retry policy and the
//! transport.

use std::time::Duration;

/// Timeouts and retry limits of model calls.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpSettings {
    pub connect_timeout: Duration,
    /// Non-streamed: the whole reply. Streamed: until the response headers arrive.
    pub request_timeout: Duration,
    /// Streamed: the longest silence between two chunks. Reasoning models think quietly for
    /// minutes, hence Hermes' generous default.
    pub stall_timeout: Duration,
    /// The longest `retry-after` we wait on one endpoint before moving to the next.
    pub max_retry_after: Duration,
    /// Retries per endpoint (for 429 with `retry-after`, 5xx, connection errors).
    pub retries: u32,
    /// The first retry's wait when the server names none; doubled for each further retry.
    pub retry_backoff: Duration,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(15),
            request_timeout: Duration::from_secs(600),
            stall_timeout: Duration::from_secs(180),
            max_retry_after: Duration::from_secs(30),
            retries: 2,
            retry_backoff: Duration::from_secs(2),
        }
    }
}
