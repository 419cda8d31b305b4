//! The typing indicator while a turn runs (Hermes's `_keep_typing`): one `Typing` send per
//! interval, each bounded so a slow platform cannot stall the cadence, a cool-down after the
//! platform pushes back, paused while an approval is pending, stopped when dropped — or
//! when the platform forbids it (repeating a refused call only earns more refusals, and
//! Discord counts each toward its invalid-request limit, then bans the IP for a while).
//! In a cluster each send is checked against the turn's session hold first
//! (`delivery/fenced.rs`): one the hold may not outlive is skipped.

use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{Adapter, Outbound, OutboundKind, SendErrorKind};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

/// Hermes's refresh interval: platform typing bubbles expire after about five seconds.
pub const DEFAULT_TYPING_INTERVAL: Duration = Duration::from_secs(2);
/// The cool-down after a rate-limit or transient failure without `retry_after`.
const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30);
const MIN_COOLDOWN: Duration = Duration::from_secs(1);
const MAX_COOLDOWN: Duration = Duration::from_secs(300);

/// The bound on one typing send: `max(0.25, min(1.5, interval − 0.25))` seconds, so a slow
/// call is abandoned before the next tick is due.
pub fn typing_send_timeout(interval: Duration) -> Duration {
    let bounded = interval
        .saturating_sub(Duration::from_millis(250))
        .min(Duration::from_millis(1500));
    bounded.max(Duration::from_millis(250))
}

/// A running typing loop. Dropping it (or [`TypingLoop::stop`]) ends the loop.
#[derive(Debug)]
pub struct TypingLoop {
    paused: watch::Sender<bool>,
    _stop: DropGuard,
}

impl TypingLoop {
    /// Starts sending `Typing` to the chat now and every `interval` after. Platforms
    /// without a typing indicator get no sends.
    pub fn start(
        adapter: Arc<dyn Adapter>,
        chat_id: &str,
        thread_id: Option<&str>,
        interval: Duration,
    ) -> Self {
        let stop = CancellationToken::new();
        let (paused, paused_rx) = watch::channel(false);
        let outbound = Outbound {
            chat_id: chat_id.to_owned(),
            thread_id: thread_id.map(str::to_owned),
            kind: OutboundKind::Typing,
        };
        if adapter.capabilities().typing {
            tokio::spawn(crate::coord::inherit_fence(run(
                adapter,
                outbound,
                interval,
                paused_rx,
                stop.clone(),
            )));
        }
        Self {
            paused,
            _stop: stop.drop_guard(),
        }
    }

    /// Stops sending until [`TypingLoop::resume`] (an approval prompt is waiting for the
    /// user, who must be able to type).
    pub fn pause(&self) {
        self.paused
            .send_if_modified(|p| !std::mem::replace(p, true));
    }

    /// Sends again right away, then every interval.
    pub fn resume(&self) {
        // Only a real change wakes the loop, so resuming an unpaused loop cannot cut a
        // rate-limit cool-down short.
        self.paused
            .send_if_modified(|p| std::mem::replace(p, false));
    }

    pub fn stop(self) {}
}

async fn run(
    adapter: Arc<dyn Adapter>,
    outbound: Outbound,
    interval: Duration,
    mut paused: watch::Receiver<bool>,
    stop: CancellationToken,
) {
    let send_timeout = typing_send_timeout(interval);
    loop {
        let mut wait = interval;
        if !*paused.borrow_and_update() {
            let send = tokio::time::timeout(
                send_timeout,
                crate::gateway::delivery::send_checked(adapter.as_ref(), outbound.clone()),
            );
            let result = tokio::select! {
                _ = stop.cancelled() => return,
                result = send => result,
            };
            match result {
                // Skipped: the session hold may end first.
                Ok(None) => {}
                Ok(Some(result)) => {
                    if let Some((kind, error)) = &result.error {
                        tracing::debug!(platform = adapter.platform(), ?kind, %error,
                            "typing indicator failed");
                        if *kind == SendErrorKind::Forbidden {
                            return;
                        }
                        if matches!(kind, SendErrorKind::RateLimited | SendErrorKind::Transient) {
                            wait = result
                                .retry_after
                                .unwrap_or(DEFAULT_COOLDOWN)
                                .clamp(MIN_COOLDOWN, MAX_COOLDOWN);
                        }
                    }
                }
                // Slow platform: abandon this tick and keep the cadence.
                Err(_elapsed) => {}
            }
        }
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = &mut sleep => break,
                changed = paused.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    // Resuming sends at once; pausing just waits out the tick.
                    if !*paused.borrow() {
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_timeout_is_bounded_like_the_reference() {
        let ms = |ms| Duration::from_millis(ms);
        assert_eq!(typing_send_timeout(ms(2000)), ms(1500));
        assert_eq!(typing_send_timeout(ms(1000)), ms(750));
        assert_eq!(typing_send_timeout(ms(300)), ms(250));
        assert_eq!(typing_send_timeout(ms(5000)), ms(1500));
    }
}
