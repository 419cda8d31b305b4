//! `/steer` texts (and busy messages in `steer` mode) wait in the running turn's inbox until
//! its next tool round. A turn that ends without another tool round leaves them unread; they
//! become the session's next turn, journaled like any inbound event so a restart still runs
//! them, instead of vanishing after the user was told they were steered.

use std::sync::atomic::{AtomicU64, Ordering};

use hermes_adapter::MessageEvent;

use super::handles::Stopping;
use super::slot::{Job, QUEUE_CAP, Running, Slot};
use crate::state::{InboundRecord, Store};

/// Puts `text` in the running turn's steer inbox; `false` when the inbox already holds
/// `QUEUE_CAP` texts (the caller answers as it does for a full queue).
pub(super) fn push_steer(running: &Running, text: &str) -> bool {
    let mut inbox = running.steer.lock().unwrap_or_else(|e| e.into_inner());
    if inbox.len() >= QUEUE_CAP {
        return false;
    }
    inbox.push(text.to_owned());
    true
}

/// The answer when the queue or the steer inbox is full.
pub(super) fn full_text() -> String {
    format!("⏳ {QUEUE_CAP} messages are already waiting; wait for the current task or /stop it.")
}

/// Takes what the finished turn never read out of its steer inbox.
pub(super) fn leftover(running: &Running) -> Vec<String> {
    std::mem::take(&mut *running.steer.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The event id of a turn made of `parent`'s leftover steer texts: derived, so a retried
/// journal write after a crash is deduplicated like a platform redelivery.
fn steer_event_id(parent: &str) -> String {
    format!("{parent}#steer")
}

/// Journals the leftover steer texts of `job`'s turn as a new event and puts it at the
/// head of the slot's queue (unless shutting down: the journal then hands it to the next
/// start, which runs every unfinished event). `true` when the slot has no worker and the
/// caller must start one.
pub(super) async fn carry_over_steer(
    store: &Store,
    stopping: &Stopping,
    depth: &AtomicU64,
    slot: &Slot,
    job: &Job,
    texts: Vec<String>,
) -> bool {
    if texts.is_empty() || job.api.is_some() {
        return false;
    }
    let mut event = MessageEvent::text(
        &steer_event_id(&job.event.event_id),
        job.event.source.clone(),
        &texts.join("\n"),
    );
    event.timestamp = crate::state::now_epoch();
    let payload = serde_json::to_value(&event).unwrap_or_default();
    let recorded = store
        .record_inbound(&event.source.platform, &event.event_id, &slot.key, payload)
        .await;
    match recorded {
        Ok(InboundRecord::Recorded) => {}
        Ok(InboundRecord::Duplicate) => return false,
        Err(e) => {
            tracing::error!(session_key = %slot.key, event_id = %event.event_id, error = %e,
                "cannot journal leftover steer text; it is lost");
            return false;
        }
    }
    tracing::debug!(session_key = %slot.key, event_id = %event.event_id, "leftover steer text becomes the next turn");
    if stopping.is_set() {
        return false;
    }
    let mut state = slot.lock();
    state.queue.push_front(Job {
        event,
        resumed: false,
        api: None,
        authority: job.authority,
    });
    depth.fetch_add(1, Ordering::Relaxed);
    state.claim_worker()
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use hermes_adapter::SessionSource;
    use tokio_util::sync::CancellationToken;

    use super::*;

    fn running() -> Running {
        Running {
            source: SessionSource::dm("telegram", "1", "1"),
            cancel: CancellationToken::new(),
            started: Instant::now(),
            event_id: "e".into(),
            steer: Arc::new(Mutex::new(Vec::new())),
            stopped: false,
            activity: Default::default(),
            timed_out: false,
        }
    }

    #[test]
    fn the_inbox_is_capped_like_the_queue_and_leftovers_drain_it() {
        let running = running();
        for i in 0..QUEUE_CAP {
            assert!(push_steer(&running, &format!("t{i}")));
        }
        assert!(!push_steer(&running, "one too many"));
        let left = leftover(&running);
        assert_eq!(left.len(), QUEUE_CAP);
        assert_eq!(left[0], "t0");
        assert!(leftover(&running).is_empty());
        assert!(push_steer(&running, "room again"));
    }
}
