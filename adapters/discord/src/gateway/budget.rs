//! The identify budget: Discord allows a bot `session_start_limit.total` new sessions per
//! day (`remaining` left, refilled after `reset_after` ms) and `max_concurrency` IDENTIFYs
//! per 5 seconds (<https://discord.com/developers/docs/events/gateway#session-start-limit-object>,
//! <https://discord.com/developers/docs/events/gateway#identifying>). Spending it on a socket
//! that keeps closing right after IDENTIFY would lock the bot out until the reset; the
//! session loop asks this budget how long to wait before each IDENTIFY (RESUMEs are free).

use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

/// Discord's identify window.
const IDENTIFY_WINDOW: Duration = Duration::from_secs(5);

/// One bot's budget, shared by the sessions of all its shards: Discord counts IDENTIFYs per
/// bot, not per connection.
pub type SharedBudget = std::sync::Arc<std::sync::Mutex<IdentifyBudget>>;

#[derive(Debug, Clone)]
pub struct IdentifyBudget {
    total: u32,
    remaining: u32,
    reset_at: Instant,
    /// The shortest time between two IDENTIFYs (the 5 s window ÷ `max_concurrency`).
    gap: Duration,
    last: Option<Instant>,
}

impl IdentifyBudget {
    /// From `GET /gateway/bot`'s `session_start_limit`; `None` when it has none.
    /// `window` is Discord's 5 s (shorter in tests).
    pub fn from_lookup(limit: &Value, window: Option<Duration>) -> Option<Self> {
        let total = u32::try_from(limit["total"].as_u64()?).ok()?;
        let remaining = u32::try_from(limit["remaining"].as_u64()?).ok()?;
        let reset_after = Duration::from_millis(limit["reset_after"].as_u64().unwrap_or(0));
        let concurrency = u32::try_from(limit["max_concurrency"].as_u64().unwrap_or(1))
            .unwrap_or(1)
            .max(1);
        Some(Self {
            total,
            remaining,
            reset_at: Instant::now() + reset_after,
            gap: window.unwrap_or(IDENTIFY_WINDOW) / concurrency,
            last: None,
        })
    }

    /// How long to wait before the next IDENTIFY; the IDENTIFY is counted as spent.
    pub fn before_identify(&mut self, now: Instant) -> Duration {
        if now >= self.reset_at && self.remaining == 0 {
            // Refilled; the next reset is a day later.
            self.remaining = self.total;
            self.reset_at = now + Duration::from_secs(24 * 3600);
        }
        let mut wait = Duration::ZERO;
        if self.remaining == 0 {
            wait = self.reset_at.saturating_duration_since(now);
            self.remaining = self.total;
            self.reset_at += Duration::from_secs(24 * 3600);
        }
        if let Some(last) = self.last {
            wait = wait.max((last + self.gap).saturating_duration_since(now));
        }
        self.remaining = self.remaining.saturating_sub(1);
        self.last = Some(now + wait);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_empty_budget_waits_for_its_reset_and_identifies_are_spaced() {
        let limit =
            json!({"total": 1000, "remaining": 1, "reset_after": 60_000, "max_concurrency": 1});
        let mut budget = IdentifyBudget::from_lookup(&limit, None).unwrap();
        let now = Instant::now();
        assert_eq!(budget.before_identify(now), Duration::ZERO);
        let wait = budget.before_identify(now + Duration::from_secs(1));
        assert!(
            wait > Duration::from_secs(58) && wait <= Duration::from_secs(59),
            "{wait:?}"
        );
        // Refilled: two IDENTIFYs in a row keep Discord's 5 s spacing.
        let later = now + Duration::from_secs(120);
        assert_eq!(budget.before_identify(later), Duration::ZERO);
        assert_eq!(budget.before_identify(later), Duration::from_secs(5));
    }
}
