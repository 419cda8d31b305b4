//! Flood control on `sendMessage`, as the Bot API documents it.
//!
//! Telegram answers a bot that sends too fast with `429 Too Many Requests: retry after N` and
//! `parameters.retry_after` = "the number of seconds left to wait before the request can be
//! repeated" (<https://core.telegram.org/bots/api#responseparameters>). Limits are per chat
//! (about one message a second, 20 a minute in groups) and overall, and a bot that keeps
//! sending while limited is limited again; group flood waits can be minutes
//! (<https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this>).
//!
//! The fake models that as: a seeded share of sends answered 429 with a `retry_after` drawn
//! from a range, chats held under a fixed (long) `retry_after`, and a per-chat window: a send
//! before the window ends is refused again with the seconds left and logged as early. Every
//! 429 and every send after one is logged per chat with its time, so a test can prove that
//! each retry came no earlier than the platform asked.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What happened to one `sendMessage` under flood control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloodOutcome {
    /// Refused with 429 and this `retry_after` (seconds).
    Limited { retry_after: u64 },
    /// Sent before the chat's window ended: refused again with the seconds left.
    Early { retry_after: u64 },
    /// Accepted (only logged for chats that were limited before).
    Accepted,
}

/// One logged send on a chat under flood control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloodEvent {
    pub chat_id: i64,
    pub at: Instant,
    pub outcome: FloodOutcome,
}

/// The flood-control switches and log (off by default).
#[derive(Debug, Default)]
pub(crate) struct FloodControl {
    random: Option<RandomFlood>,
    /// Chats whose next sends are refused with a fixed `retry_after`: (seconds, sends left).
    held: HashMap<i64, (u64, usize)>,
    /// Until when each limited chat must wait.
    windows: HashMap<i64, Instant>,
    pub log: Vec<FloodEvent>,
}

#[derive(Debug)]
struct RandomFlood {
    rng: StdRng,
    share: f64,
    retry_after: std::ops::RangeInclusive<u64>,
}

impl FloodControl {
    /// Refuses a `share` (0..=1) of sends, chosen by a generator seeded with `seed`, each with
    /// a `retry_after` drawn from `retry_after`.
    pub fn set_random(
        &mut self,
        seed: u64,
        share: f64,
        retry_after: std::ops::RangeInclusive<u64>,
    ) {
        self.random = Some(RandomFlood {
            rng: StdRng::seed_from_u64(seed),
            share: share.clamp(0.0, 1.0),
            retry_after,
        });
    }

    /// Refuses the next `sends` sends to `chat_id` with `retry_after` seconds.
    pub fn hold(&mut self, chat_id: i64, retry_after: u64, sends: usize) {
        self.held.insert(chat_id, (retry_after, sends));
    }

    /// Ends every limit on `chat_id` (the platform's wait is over).
    pub fn release(&mut self, chat_id: i64) {
        self.held.remove(&chat_id);
        self.windows.remove(&chat_id);
    }

    /// Decides one `sendMessage` to `chat_id`: `Some(retry_after)` to refuse it with 429.
    pub fn check(&mut self, chat_id: i64, now: Instant) -> Option<u64> {
        let outcome = self.decide(chat_id, now);
        let tracked = self.log.iter().any(|e| e.chat_id == chat_id);
        if outcome != FloodOutcome::Accepted || tracked {
            self.log.push(FloodEvent {
                chat_id,
                at: now,
                outcome,
            });
        }
        match outcome {
            FloodOutcome::Limited { retry_after } | FloodOutcome::Early { retry_after } => {
                Some(retry_after)
            }
            FloodOutcome::Accepted => None,
        }
    }

    fn decide(&mut self, chat_id: i64, now: Instant) -> FloodOutcome {
        if let Some(until) = self.windows.get(&chat_id).copied() {
            if now < until {
                // Whole seconds left, rounded up, as the API reports them.
                let left = (until - now).as_millis().div_ceil(1000) as u64;
                return FloodOutcome::Early {
                    retry_after: left.max(1),
                };
            }
            self.windows.remove(&chat_id);
        }
        let retry_after = if let Some((seconds, left)) = self.held.get_mut(&chat_id) {
            let seconds = *seconds;
            *left -= 1;
            if *left == 0 {
                self.held.remove(&chat_id);
            }
            Some(seconds)
        } else {
            self.random.as_mut().and_then(|random| {
                let limited = random.rng.random_bool(random.share);
                let seconds = random.rng.random_range(random.retry_after.clone());
                limited.then_some(seconds)
            })
        };
        match retry_after {
            Some(retry_after) => {
                self.windows
                    .insert(chat_id, now + Duration::from_secs(retry_after));
                FloodOutcome::Limited { retry_after }
            }
            None => FloodOutcome::Accepted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_chat_is_refused_again_until_its_window_ends() {
        let mut flood = FloodControl::default();
        flood.hold(5, 3, 1);
        let t0 = Instant::now();
        assert_eq!(flood.check(5, t0), Some(3));
        assert_eq!(flood.check(5, t0 + Duration::from_millis(1200)), Some(2));
        assert_eq!(flood.check(6, t0), None, "other chats are not limited");
        assert_eq!(flood.check(5, t0 + Duration::from_secs(3)), None);
        let outcomes: Vec<FloodOutcome> = flood.log.iter().map(|e| e.outcome).collect();
        assert_eq!(
            outcomes,
            [
                FloodOutcome::Limited { retry_after: 3 },
                FloodOutcome::Early { retry_after: 2 },
                FloodOutcome::Accepted
            ]
        );
    }

    #[test]
    fn the_random_share_is_reproducible_from_its_seed() {
        let run = |seed| {
            let mut flood = FloodControl::default();
            flood.set_random(seed, 0.4, 1..=2);
            let t0 = Instant::now();
            (0..200)
                .map(|chat| flood.check(chat, t0).is_some())
                .collect::<Vec<_>>()
        };
        let refused = run(9).iter().filter(|r| **r).count();
        assert!((50..=110).contains(&refused), "{refused} of 200");
        assert_eq!(run(9), run(9));
    }
}
