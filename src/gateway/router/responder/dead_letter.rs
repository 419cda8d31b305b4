//! Inbound items an adapter could not decode: kept in `hermesd_dead_letters` before the
//! adapter acknowledges them, counted, logged as errors, and, when the raw item still shows
//! the chat and its sender may use the bot, answered with one line saying so.

use hermes_adapter::{DeadLetter, RecordOutcome};

use crate::gateway::authorize::is_authorized;
use crate::gateway::metrics::GatewayMetrics;
use crate::gateway::router::Router;

/// What the user is told about a message hermesd received but could not read.
pub const DEAD_LETTER_NOTICE: &str =
    "I couldn't read that message, so I can't answer it. Please send it again in another form.";

/// Keeps `letter`; the answer tells the adapter whether it may acknowledge the item.
pub(in crate::gateway::router) async fn handle_dead_letter(
    router: &Router,
    letter: DeadLetter,
) -> RecordOutcome {
    let DeadLetter {
        platform,
        item_id,
        source,
        raw,
        error,
    } = letter;
    let chat_id = source.as_ref().map(|s| s.chat_id.as_str());
    let kept = router
        .store
        .record_dead_letter(&platform, &item_id, chat_id, &raw, &error)
        .await;
    match kept {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!(%platform, %item_id, "dead letter redelivered; already kept");
            return RecordOutcome::Duplicate;
        }
        Err(e) => {
            tracing::error!(%platform, %item_id, error = %e, "cannot keep an undecodable item; the platform will redeliver it");
            return RecordOutcome::Failed;
        }
    }
    GatewayMetrics::incr(&router.metrics.dead_letters);
    tracing::error!(%platform, %item_id, chat_id = chat_id.unwrap_or(""), error = %error, "inbound item could not be decoded; kept in hermesd_dead_letters");
    if let Some(source) = source {
        // Told off the adapter's path: the item is kept, so it may be acknowledged now.
        let router = router.arc();
        tokio::spawn(async move {
            let asker = source.clone();
            let checker = router.clone();
            let authorized = tokio::task::spawn_blocking(move || {
                is_authorized(&asker, &checker.live().auth, &checker.gate.pairing)
            })
            .await
            .unwrap_or(false);
            if authorized {
                router
                    .responder
                    .send_direct(&source, DEAD_LETTER_NOTICE)
                    .await;
            }
        });
    }
    RecordOutcome::Recorded
}
