//! Handing an event to the core until it is recorded. Discord never redelivers a message,
//! so a `Failed` answer (the core could not journal it) is retried here with backoff,
//! rather than left for a backfill that may never scan its channel; only shutdown ends the
//! retries (the next start's backfill then finds the message in history).

use std::time::Duration;

use hermes_adapter::{AdapterContext, MessageEvent, RecordOutcome};

const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(30);

/// Delivers `event`, retrying `Failed` with doubling delays (200 ms … 30 s).
pub async fn deliver(ctx: &AdapterContext, event: MessageEvent) -> RecordOutcome {
    let mut delay = FIRST_RETRY;
    loop {
        let outcome = ctx.deliver(event.clone()).await;
        if outcome != RecordOutcome::Failed {
            return outcome;
        }
        tracing::warn!(
            platform = "discord",
            event_id = %event.event_id,
            retry_in_ms = delay.as_millis() as u64,
            "the core could not record a message; offering it again"
        );
        tokio::select! {
            () = ctx.shutdown.cancelled() => return RecordOutcome::Failed,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(MAX_RETRY);
    }
}
