//! Attachments fetched after the ack: an adapter may record an event whose files are not
//! downloaded yet (`MessageEvent::pending_media`), so the platform's ack deadline never
//! waits for a download. Just before the event's turn runs (before it takes a turn permit),
//! the router has the event's adapter fetch them (`Adapter::fetch_pending_media`); what is
//! still missing afterwards (no such adapter, a failed download) becomes a one-line note, so
//! the model always learns that something was attached.

use hermes_adapter::MessageEvent;

use crate::gateway::router::responder::Responder;
use crate::gateway::router::slot::Job;
use crate::gateway::router::turn::TYPING_INTERVAL;
use crate::gateway::typing::TypingLoop;

/// `job` with its pending attachments fetched, before its turn takes a turn permit (the
/// workers call this; every turn comes through them): a download slowed by the
/// platform's rate limits holds no permit other chats need. Typing shows during the
/// download; the adapter's own transfer timeouts bound it. A resumed turn has its user
/// message stored already, and an API request carries no attachments.
pub(in crate::gateway::router) async fn with_media_fetched(
    responder: &Responder,
    mut job: Job,
) -> Job {
    if job.resumed || job.api.is_some() || job.event.pending_media.is_empty() {
        return job;
    }
    if let Some(link) = responder.link(&job.event.source.platform) {
        let event = &job.event;
        let _typing = link.typing.then(|| {
            TypingLoop::start(
                link.adapter.clone(),
                &event.source.chat_id,
                event.source.thread_id.as_deref(),
                TYPING_INTERVAL,
            )
        });
        link.adapter.fetch_pending_media(&mut job.event).await;
    }
    note_unfetched(&mut job.event);
    job
}

/// Turns attachments still pending into a note ahead of the text.
fn note_unfetched(event: &mut MessageEvent) {
    if event.pending_media.is_empty() {
        return;
    }
    let names: Vec<String> = event
        .pending_media
        .drain(..)
        .map(|pending| pending.label)
        .collect();
    let note = format!("[Attachment not fetched: {}]", names.join(", "));
    event.text = if event.text.is_empty() {
        note
    } else {
        format!("{note}\n\n{}", event.text)
    };
}

#[cfg(test)]
mod tests {
    use hermes_adapter::{PendingMedia, SessionSource};
    use serde_json::json;

    use super::*;

    #[test]
    fn what_stays_pending_becomes_a_note() {
        let mut event =
            MessageEvent::text("e1", SessionSource::dm("slack", "D1", "U1"), "see these");
        for label in ["a.txt", "b.png"] {
            event.pending_media.push(PendingMedia {
                reference: json!({"id": label}),
                label: label.into(),
            });
        }
        note_unfetched(&mut event);
        assert!(event.pending_media.is_empty());
        assert_eq!(
            event.text,
            "[Attachment not fetched: a.txt, b.png]\n\nsee these"
        );
        let mut bare = MessageEvent::text("e2", SessionSource::dm("slack", "D1", "U1"), "");
        bare.pending_media.push(PendingMedia {
            reference: json!(null),
            label: "c.pdf".into(),
        });
        note_unfetched(&mut bare);
        assert_eq!(bare.text, "[Attachment not fetched: c.pdf]");
    }
}
