//! Long polling with crash-safe offsets. Telegram forgets an update once a `getUpdates`
//! offset passes it, so the offset only moves past an update after the intake says it may
//! be acknowledged (recorded, duplicate or ignored). Updates still in flight (waiting for a
//! merge window or the core) are re-sent by Telegram on each poll and skipped here; an update
//! whose record failed is submitted again on the next poll. Each completed poll reports
//! progress; a poll that outlives `timeout + margin` is abandoned and restarted.
//!
//! The backlog a poller finds when it starts (everything Telegram still holds, fetched with
//! non-blocking polls until a page comes back short) may already be journaled by an earlier
//! run that was killed before its offset moved. A merged event carries its first update's id
//! and the core dedupes by that id alone, so backlog updates are handed over one by one,
//! never merged: merged with a newer update (say the user's next message, sent once the
//! earlier run had answered), a journaled update would make the whole event a duplicate and
//! the offset would move past the newer update without it ever being recorded.
//! (Left open: a backlog update that an earlier run merged into another update's event is
//! not known to the core by its own id, so it is recorded and answered again.)

use std::collections::BTreeSet;
use std::time::Duration;

use hermes_adapter::{AdapterContext, AdapterError, DeadLetter, RecordOutcome};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::api::types::Update;
use crate::api::{ApiError, BotApi};
use crate::intake::{Completion, Disposition, IntakeHandle};
use crate::settings::Settings;

/// While updates are in flight, Telegram answers a poll at once (the in-flight updates are
/// still pending), so a long poll is impossible and the poller re-polls on a pace instead.
/// The pace starts at `IN_FLIGHT_PACE_MIN` (new messages keep flowing while earlier ones
/// wait out their short merge window) and doubles with every poll that brings nothing new,
/// up to `IN_FLIGHT_PACE_MAX`: a download or hand-over that lasts minutes costs 2 polls a
/// second, not 50. A poll that brings something new resets it; the wait ends early when the
/// last in-flight update completes.
pub const IN_FLIGHT_PACE_MIN: Duration = Duration::from_millis(20);
pub const IN_FLIGHT_PACE_MAX: Duration = Duration::from_millis(500);

/// The in-flight pace after `idle_polls` consecutive polls that brought nothing new.
pub fn in_flight_pace(idle_polls: u32) -> Duration {
    (IN_FLIGHT_PACE_MIN * 2u32.pow(idle_polls.min(8))).min(IN_FLIGHT_PACE_MAX)
}
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Consecutive failed polls (not counting 409s) before giving the adapter back to the
/// runner's supervisor.
const GIVE_UP_AFTER: u32 = 20;
/// Updates asked for per `getUpdates` (Telegram's maximum); a shorter page is the last one.
const POLL_LIMIT: usize = 100;

/// The offset bookkeeping, kept apart from I/O so it can be reasoned about (and tested).
#[derive(Debug, Default)]
pub struct Offsets {
    /// Submitted, not yet answered.
    in_flight: BTreeSet<i64>,
    /// Answered Acknowledge, but above an update that is still open.
    acknowledged: BTreeSet<i64>,
    /// Answered Retry: open until submitted again.
    failed: BTreeSet<i64>,
    max_seen: Option<i64>,
}

impl Offsets {
    /// Whether an update from a poll should be submitted now.
    pub fn accept(&mut self, update_id: i64) -> bool {
        if update_id < self.offset()
            || self.in_flight.contains(&update_id)
            || self.acknowledged.contains(&update_id)
        {
            return false;
        }
        self.failed.remove(&update_id);
        self.in_flight.insert(update_id);
        self.max_seen = Some(self.max_seen.map_or(update_id, |m| m.max(update_id)));
        true
    }

    pub fn resolve(&mut self, update_id: i64, disposition: Disposition) {
        self.in_flight.remove(&update_id);
        match disposition {
            Disposition::Acknowledge => {
                self.acknowledged.insert(update_id);
            }
            Disposition::Retry => {
                self.failed.insert(update_id);
            }
        }
        let offset = self.offset();
        self.acknowledged.retain(|id| *id >= offset);
    }

    /// The `getUpdates` offset: the lowest open update, else one past the highest seen.
    pub fn offset(&self) -> i64 {
        let open = self
            .in_flight
            .iter()
            .chain(self.failed.iter())
            .min()
            .copied();
        open.unwrap_or_else(|| self.max_seen.map_or(0, |m| m + 1))
    }

    pub fn has_in_flight(&self) -> bool {
        !self.in_flight.is_empty()
    }
}

pub struct Poller<'a> {
    pub api: &'a BotApi,
    pub settings: &'a Settings,
    pub intake: IntakeHandle,
    pub ctx: &'a AdapterContext,
}

impl Poller<'_> {
    pub async fn run(self) -> Result<(), AdapterError> {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel();
        let mut offsets = Offsets::default();
        let mut failures = 0u32;
        let mut refused_records = 0u32;
        let mut conflicts = 0u32;
        let mut last_poll_had_new = false;
        // Polls in a row, with updates in flight, that brought nothing new (sets the pace).
        let mut idle_polls = 0u32;
        let mut carried_retry = false;
        // Still fetching what was pending before this poller started (see the module doc).
        let mut backlog = true;
        loop {
            let mut retry_pending = std::mem::take(&mut carried_retry);
            while let Ok((id, disposition)) = done_rx.try_recv() {
                retry_pending |= disposition == Disposition::Retry;
                offsets.resolve(id, disposition);
            }
            if retry_pending {
                // The core could not record: give it a moment rather than hammering it.
                refused_records += 1;
                if !self.pause(backoff(refused_records)).await {
                    return Ok(());
                }
            } else if !offsets.has_in_flight() {
                refused_records = 0;
                idle_polls = 0;
            }
            if !retry_pending && offsets.has_in_flight() && !last_poll_had_new {
                // Telegram answers a poll at once while earlier updates are unconfirmed, so
                // a long poll is impossible: poll again after the pace (sooner when the last
                // in-flight update completes), taking completions as they come. New updates
                // keep flowing while earlier ones wait for their merge window or the core.
                let next_poll = tokio::time::Instant::now() + in_flight_pace(idle_polls);
                idle_polls = idle_polls.saturating_add(1);
                loop {
                    tokio::select! {
                        Some((id, disposition)) = done_rx.recv() => {
                            carried_retry |= disposition == Disposition::Retry;
                            offsets.resolve(id, disposition);
                            if carried_retry || !offsets.has_in_flight() {
                                break;
                            }
                        }
                        _ = tokio::time::sleep_until(next_poll) => break,
                        _ = self.ctx.shutdown.cancelled() => return Ok(()),
                    }
                }
                if carried_retry {
                    continue;
                }
            }
            let wait = if backlog || offsets.has_in_flight() {
                Duration::ZERO
            } else {
                self.settings.poll_timeout
            };
            let poll = tokio::select! {
                result = self.get_updates(offsets.offset(), wait) => result,
                _ = self.ctx.shutdown.cancelled() => return Ok(()),
            };
            match poll {
                Ok(updates) => {
                    self.ctx.progress.report();
                    if conflicts > 0 {
                        tracing::info!(
                            platform = "telegram",
                            "getUpdates works again after the 409 Conflict"
                        );
                    }
                    (failures, conflicts) = (0, 0);
                    last_poll_had_new = false;
                    let page = updates.len();
                    for (id, update) in updates {
                        if !offsets.accept(id) {
                            continue;
                        }
                        last_poll_had_new = true;
                        idle_polls = 0;
                        match update {
                            Ok(update) => {
                                let done = Completion::channel(id, done_tx.clone());
                                if backlog {
                                    self.intake.submit_unmerged(update, done).await
                                } else {
                                    self.intake.submit(update, done).await
                                }
                            }
                            // Kept by the core before the offset passes it.
                            Err(letter) => {
                                let disposition = match self.ctx.dead_letter(letter).await {
                                    RecordOutcome::Failed => Disposition::Retry,
                                    _ => Disposition::Acknowledge,
                                };
                                offsets.resolve(id, disposition);
                            }
                        }
                    }
                    if page < POLL_LIMIT {
                        backlog = false;
                    }
                }
                Err(e) if e.is_unauthorized() => {
                    return Err(AdapterError::Fatal(format!(
                        "telegram: the bot token was rejected by getUpdates: {e}"
                    )));
                }
                Err(e) if e.is_conflict() => {
                    conflicts += 1;
                    if conflicts == 1 {
                        tracing::error!(
                            platform = "telegram",
                            "getUpdates answered 409 Conflict: another poller (or a webhook) is using this bot token; retrying with backoff"
                        );
                    }
                    if !self.pause(backoff(conflicts)).await {
                        return Ok(());
                    }
                }
                Err(e) => {
                    failures += 1;
                    if matches!(e, ApiError::TimedOut(_)) {
                        tracing::warn!(platform = "telegram", error = %e, window_s = (wait + self.settings.poll_margin).as_secs_f64(), "getUpdates did not complete within its window; abandoning it and polling again");
                    } else {
                        tracing::warn!(platform = "telegram", error = %e, "getUpdates failed");
                    }
                    if failures >= GIVE_UP_AFTER {
                        return Err(AdapterError::Retryable(format!(
                            "telegram: getUpdates failed {failures} times in a row: {e}"
                        )));
                    }
                    // Flood control on getUpdates itself: wait at least what Telegram asks.
                    let asked = match &e {
                        ApiError::Api {
                            retry_after: Some(seconds),
                            ..
                        } => Duration::from_secs(*seconds),
                        _ => Duration::ZERO,
                    };
                    if !self.pause(backoff(failures).max(asked)).await {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// One poll; each element is (update id, the update or, if it does not decode, its
    /// dead letter).
    async fn get_updates(
        &self,
        offset: i64,
        wait: Duration,
    ) -> Result<Vec<(i64, Result<Update, DeadLetter>)>, ApiError> {
        let params = json!({
            "offset": offset,
            "timeout": wait.as_secs(),
            "limit": POLL_LIMIT,
            "allowed_updates": ["message", "channel_post", "callback_query"],
        });
        let window = wait + self.settings.poll_margin;
        let result = self.api.call("getUpdates", &params, window).await?;
        let Value::Array(items) = result else {
            return Err(ApiError::NoAnswer("getUpdates result is not a list".into()));
        };
        Ok(items
            .into_iter()
            .filter_map(|item| {
                let id = item["update_id"].as_i64()?;
                let update = serde_json::from_value::<Update>(item.clone())
                    .map_err(|e| crate::dead_letter::dead_letter(id, &item, &e));
                Some((id, update))
            })
            .collect())
    }

    /// Waits `duration` unless shutdown comes first (then returns false).
    async fn pause(&self, duration: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(duration) => true,
            _ = self.ctx.shutdown.cancelled() => false,
        }
    }
}

/// 0.5 s, 1 s, 2 s… capped at 30 s.
pub fn backoff(attempt: u32) -> Duration {
    let exponent = attempt.saturating_sub(1).min(10);
    (Duration::from_millis(500) * 2u32.pow(exponent)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_never_passes_an_open_update() {
        let mut offsets = Offsets::default();
        assert_eq!(offsets.offset(), 0);
        for id in [10, 11, 12] {
            assert!(offsets.accept(id));
        }
        assert!(!offsets.accept(11), "in flight is not resubmitted");
        offsets.resolve(11, Disposition::Acknowledge);
        offsets.resolve(12, Disposition::Acknowledge);
        assert_eq!(offsets.offset(), 10, "10 is still open");
        assert!(!offsets.accept(12), "acknowledged is not resubmitted");
        offsets.resolve(10, Disposition::Retry);
        assert_eq!(offsets.offset(), 10, "a failed record holds the offset");
        assert!(offsets.accept(10), "and is submitted again");
        offsets.resolve(10, Disposition::Acknowledge);
        assert_eq!(offsets.offset(), 13);
        assert!(!offsets.accept(12));
    }

    #[test]
    fn the_in_flight_pace_slows_to_two_polls_a_second() {
        assert_eq!(in_flight_pace(0), Duration::from_millis(20));
        assert_eq!(in_flight_pace(3), Duration::from_millis(160));
        assert_eq!(in_flight_pace(5), IN_FLIGHT_PACE_MAX);
        assert_eq!(in_flight_pace(u32::MAX), IN_FLIGHT_PACE_MAX);
    }

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::from_millis(500));
        assert_eq!(backoff(3), Duration::from_secs(2));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }
}
