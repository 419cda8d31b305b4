//! Supervising one adapter task: run it, judge liveness by reported progress (never by
//! socket state), restart it alone with backoff when it fails or goes silent, and mark it
//! failed when it says retrying cannot help. Its inbound events are handed to the router.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, DeadLetterInbound, Inbound, Ingress, Liveness, Progress,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::adapter_health::{AdapterHealth, AdapterState};
use super::ingress_lease::LeaseClaims;
use super::router::Router;

/// Restart delays: doubling from `initial` to `max`; a run that stayed up for `reset_after`
/// starts the sequence over.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    pub reset_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(30),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(300),
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (1-based).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
        self.initial.saturating_mul(factor).min(self.max)
    }
}

/// How long to wait for a stalled adapter to wind down after it was told to stop.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Inbound events an adapter may have in flight to the router.
const INBOUND_QUEUE: usize = 256;
/// Undecodable items an adapter may have in flight to the router.
const DEAD_LETTER_QUEUE: usize = 16;

/// Runs `adapter` until `shutdown` fires or it fails for good.
pub async fn supervise(
    adapter: Arc<dyn Adapter>,
    router: Arc<Router>,
    health: Arc<AdapterHealth>,
    backoff: Backoff,
    shutdown: CancellationToken,
) {
    let name = adapter.platform();
    health.register(name);
    let (inbound, events) = mpsc::channel(INBOUND_QUEUE);
    // Dead letters are rare: a small queue of their own, pumped apart from the events.
    let (dead_letters, letters) = mpsc::channel(DEAD_LETTER_QUEUE);
    let letters_pump = tokio::spawn(pump_dead_letters(letters, router.clone()));
    // Intake points only one instance may use (Telegram polling, Discord shards) are
    // claimed through leases when the state is shared.
    let claims = LeaseClaims::for_store(router.store(), name);
    let ingress = LeaseClaims::ingress(claims.as_ref());
    let pump = tokio::spawn(pump(events, router));
    let mut failures = 0u32;
    while !shutdown.is_cancelled() {
        let started = Instant::now();
        // Counted among the instances running this platform's intake (fair shares of its
        // shards) while the adapter runs, not while it waits out a backoff.
        let membership = claims.as_ref().map(|c| c.stay_member(&shutdown));
        let outcome = run_once(
            &adapter,
            (&inbound, &dead_letters),
            &ingress,
            &health,
            &shutdown,
        )
        .await;
        drop(membership);
        if shutdown.is_cancelled() {
            break;
        }
        if started.elapsed() >= backoff.reset_after {
            failures = 0;
        }
        let delay = match outcome {
            RunOutcome::Fatal(message) => {
                // The state first, then the line: whoever reads the line finds /ready agreeing.
                health.set(name, AdapterState::Failed, Some(&message));
                tracing::error!(adapter = name, error = %message, "adapter failed and will not be restarted; fix the cause and restart hermesd");
                break;
            }
            RunOutcome::Stalled(silent) => {
                let message = format!("no progress for {}s; restarting", silent.as_secs());
                health.set(name, AdapterState::Degraded, Some(&message));
                tracing::warn!(adapter = name, "{message}");
                Duration::ZERO
            }
            RunOutcome::Ended(message) => {
                failures += 1;
                let delay = backoff.delay(failures);
                health.set(name, AdapterState::Degraded, Some(&message));
                tracing::warn!(adapter = name, error = %message, retry_in_secs = delay.as_secs(), "adapter stopped; restarting with backoff");
                delay
            }
        };
        health.record_restart(name);
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(delay) => {}
        }
    }
    drop((inbound, dead_letters));
    let _ = pump.await;
    let _ = letters_pump.await;
}

enum RunOutcome {
    Fatal(String),
    Ended(String),
    Stalled(Duration),
}

async fn run_once(
    adapter: &Arc<dyn Adapter>,
    (inbound, dead_letters): (&mpsc::Sender<Inbound>, &mpsc::Sender<DeadLetterInbound>),
    ingress: &Ingress,
    health: &AdapterHealth,
    shutdown: &CancellationToken,
) -> RunOutcome {
    let name = adapter.platform();
    let progress = Progress::new();
    let stop = shutdown.child_token();
    let ctx = AdapterContext {
        inbound: inbound.clone(),
        dead_letters: dead_letters.clone(),
        progress: progress.clone(),
        shutdown: stop.clone(),
        ingress: ingress.clone(),
    };
    health.starting(name);
    let window = adapter.liveness_window();
    let check_every = (window / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let mut run = adapter.run(ctx);
    let mut ticks = tokio::time::interval(check_every);
    loop {
        tokio::select! {
            result = &mut run => {
                return match result {
                    Ok(()) => RunOutcome::Ended("the adapter returned".to_owned()),
                    Err(AdapterError::Fatal(m)) => RunOutcome::Fatal(m),
                    Err(AdapterError::Retryable(m)) => RunOutcome::Ended(m),
                };
            }
            _ = ticks.tick() => {
                match progress.liveness(window) {
                    Liveness::Live if progress.reports() > 0 => {
                        let recovered = health.state(name) == Some(AdapterState::Degraded);
                        health.set(name, AdapterState::Live, None);
                        if recovered {
                            tracing::info!(adapter = name, "adapter live again");
                        }
                    }
                    Liveness::Live => {}
                    Liveness::Silent { for_ } => {
                        stop.cancel();
                        let _ = tokio::time::timeout(STOP_GRACE, &mut run).await;
                        return RunOutcome::Stalled(for_);
                    }
                }
            }
        }
    }
}

/// Hands each inbound event to the router and answers the adapter with the outcome.
async fn pump(mut events: mpsc::Receiver<Inbound>, router: Arc<Router>) {
    while let Some(Inbound { event, recorded }) = events.recv().await {
        let outcome = router.handle_inbound(event).await;
        let _ = recorded.send(outcome);
    }
}

/// Hands each dead letter to the router and answers the adapter with the outcome.
async fn pump_dead_letters(mut letters: mpsc::Receiver<DeadLetterInbound>, router: Arc<Router>) {
    while let Some(DeadLetterInbound { letter, recorded }) = letters.recv().await {
        let outcome = router.handle_dead_letter(letter).await;
        let _ = recorded.send(outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap() {
        let b = Backoff::default();
        let delays: Vec<u64> = (1..=6).map(|n| b.delay(n).as_secs()).collect();
        assert_eq!(delays, [30, 60, 120, 240, 300, 300]);
    }
}
