//! `/background <prompt>` (alias `/bg`): runs the prompt as a task of its own while the chat
//! stays free, and posts the task's answer to the chat when it is done.
//!
//! The task is a synthetic journaled event (docs/adr/0039): `bg:<task id>`, the same platform
//! and sender as the command (so a restart decides the same authority for it: a guest's task
//! runs with a guest's tools), its answer aimed back at the chat through `reply_target`, and
//! a [`BackgroundTag`] that gives it a session key of its own (`session_key.rs`). The
//! command's acknowledgement and the task's event are recorded in one transaction
//! ([`Store::answer_and_spawn`](crate::state::Store::answer_and_spawn)); the task is then
//! placed like any inbound event, in its own slot. After `kill -9` the task is an unfinished
//! journal row like any other and is resumed, and its answer goes through the delivery ledger
//! like any reply: it arrives once.

use hermes_adapter::{BackgroundTag, MessageEvent, MessageType, ReplyTarget};
use sha2::{Digest, Sha256};

use super::{CommandCtx, Reply};
use crate::gateway::router::responder::outbox::Outgoing;
use crate::gateway::router::slot::Job;
use crate::gateway::session_key::event_session_key;
use crate::state::{InboundRecord, NewInbound, NewObligation};

/// Characters of the prompt quoted back to the chat.
pub const PREVIEW_CHARS: usize = 60;

/// The prefix of a spawned task's event id.
pub const EVENT_PREFIX: &str = "bg:";

pub(super) const USAGE: &str = "Usage: `/background <prompt>` (or `/bg <prompt>`) runs the prompt as a \
     separate task; its answer is posted here when it is done, and you can keep chatting \
     meanwhile.";

/// The task id for the command event `event`: `bg_<HHMMSS>_<6 hex>` (Hermes's shape), the
/// time of day (UTC) the event was sent and six hex digits of a hash of its platform and
/// id, so the same command event always names the same task.
pub fn task_id(event: &MessageEvent) -> String {
    let sent = if event.timestamp > 0.0 {
        event.timestamp
    } else {
        crate::state::now_epoch()
    };
    let of_day = (sent as i64).rem_euclid(86_400);
    let digest = Sha256::digest(format!("{}|{}", event.source.platform, event.event_id));
    format!(
        "bg_{:02}{:02}{:02}_{}",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        &hex::encode(digest)[..6]
    )
}

/// The start of `prompt` as the chat is shown it: at most [`PREVIEW_CHARS`] characters, one
/// line, with `...` when cut.
pub fn preview(prompt: &str) -> String {
    let flat = prompt.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= PREVIEW_CHARS {
        return flat;
    }
    let mut cut: String = flat.chars().take(PREVIEW_CHARS).collect();
    cut.push_str("...");
    cut
}

/// The acknowledgement of a started task.
pub fn started_text(tag: &BackgroundTag) -> String {
    format!(
        "🔄 Background task `{}` started: \"{}\"\nIts answer comes to this chat when it \
         finishes; keep chatting meanwhile.",
        tag.task_id, tag.preview
    )
}

/// The task event for the command event `command`, running `prompt`.
pub fn spawned_event(command: &MessageEvent, prompt: &str) -> MessageEvent {
    let tag = BackgroundTag {
        task_id: task_id(command),
        preview: preview(prompt),
    };
    let mut event = command.clone();
    event.event_id = format!("{EVENT_PREFIX}{}", tag.task_id);
    event.text = prompt.to_owned();
    event.message_type = if command.media_paths.is_empty() && command.pending_media.is_empty() {
        MessageType::Text
    } else {
        command.message_type
    };
    event.message_id = None;
    event.reply_to_message_id = None;
    event.reply_to_text = None;
    event.reply_to_is_own_message = false;
    event.merge = None;
    event.reply_target = Some(ReplyTarget {
        platform: command.source.platform.clone(),
        chat_id: command.source.chat_id.clone(),
        thread_id: command.source.thread_id.clone(),
        verbatim: false,
    });
    event.background = Some(tag);
    event
}

/// Applies `/background`: records the acknowledgement with the spawned task, sends the
/// acknowledgement and places the task in its own slot.
pub(super) async fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let prompt = ctx.command.args.trim();
    if prompt.is_empty() {
        return Reply::Text(USAGE.to_owned());
    }
    let router = ctx.router;
    let command = &ctx.job.event;
    let event = spawned_event(command, prompt);
    let Some(tag) = event.background.clone() else {
        return Reply::Text(USAGE.to_owned());
    };
    let key = event_session_key(&event, router.key_policy);
    let ack = NewObligation {
        session_key: router.session_key(command),
        message_ref: command.event_id.clone(),
        platform: command.source.platform.clone(),
        chat_id: command.source.chat_id.clone(),
        thread_id: command.source.thread_id.clone(),
        content: started_text(&tag),
    };
    let spawn = NewInbound {
        platform: event.source.platform.clone(),
        event_id: event.event_id.clone(),
        session_key: key.clone(),
        payload_json: serde_json::to_string(&event).unwrap_or_default(),
    };
    let recorded = router
        .store
        .answer_and_spawn(
            &command.source.platform,
            &command.event_id,
            vec![ack],
            spawn,
        )
        .await;
    let ids = match recorded {
        Ok((InboundRecord::Recorded, ids)) => ids,
        Ok((InboundRecord::Duplicate, _)) => {
            tracing::info!(task_id = %tag.task_id, "background task already started; not started again");
            router.responder.answer_silently(ctx.job).await;
            return Reply::Later;
        }
        Err(e) => {
            // Nothing was recorded: the command stays unfinished and a restart runs it again.
            tracing::error!(task_id = %tag.task_id, error = %e, "cannot record a background task");
            return Reply::Later;
        }
    };
    tracing::info!(task_id = %tag.task_id, session_key = %key, "background task started");
    let replies = ids
        .into_iter()
        .map(|obligation_id| Outgoing {
            obligation_id,
            reply_to: command.message_id.clone(),
            event_id: Some(command.event_id.clone()),
        })
        .collect();
    router
        .responder
        .send_later(&command.source.platform, &command.source.chat_id, replies);
    let job = Job {
        event,
        resumed: false,
        api: None,
        authority: ctx.job.authority,
    };
    match &router.cluster {
        Some(link) => link.offer(&router.arc(), key, job),
        None => router.place(key, job),
    }
    Reply::Later
}

#[cfg(test)]
mod tests {
    use super::*;
    use hermes_adapter::SessionSource;

    fn command(id: &str, timestamp: f64) -> MessageEvent {
        let mut event = MessageEvent::text(
            id,
            SessionSource::dm("telegram", "42", "7"),
            "/bg sum it up",
        );
        event.timestamp = timestamp;
        event.message_id = Some("99".into());
        event
    }

    #[test]
    fn task_ids_have_hermes_shape_and_are_stable_per_event() {
        // 2026-12-04 13:05:09 UTC.
        let id = task_id(&command("u1", 1_796_389_509.0));
        assert!(id.starts_with("bg_130509_"), "{id}");
        assert_eq!(id.len(), "bg_130509_".len() + 6);
        assert!(id[10..].chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_eq!(id, task_id(&command("u1", 1_796_389_509.0)));
        assert_ne!(id, task_id(&command("u2", 1_796_389_509.0)));
    }

    #[test]
    fn previews_are_one_line_and_cut_at_sixty_characters() {
        assert_eq!(preview("short\nprompt"), "short prompt");
        let long = "é".repeat(70);
        assert_eq!(preview(&long), format!("{}...", "é".repeat(60)));
        assert_eq!(preview(&"a".repeat(60)), "a".repeat(60));
    }

    #[test]
    fn the_task_answers_the_chat_in_a_session_of_its_own() {
        let mut source = SessionSource::dm("telegram", "42", "7");
        source.thread_id = Some("5".into());
        let mut cmd = MessageEvent::text("u1", source, "/bg /model gpt-x");
        cmd.reply_to_message_id = Some("3".into());
        let event = spawned_event(&cmd, "/model gpt-x");
        let tag = event.background.clone().unwrap();
        assert_eq!(event.event_id, format!("bg:{}", tag.task_id));
        assert_eq!(event.source, cmd.source);
        let target = event.reply_target.clone().unwrap();
        assert_eq!(
            (target.chat_id.as_str(), target.thread_id.as_deref()),
            ("42", Some("5"))
        );
        assert!(!target.verbatim);
        assert_eq!(event.reply_to_message_id, None);
        // The prompt is the model's input even when it looks like a command.
        assert_eq!(event.command(), None);
        let key = event_session_key(&event, Default::default());
        assert_eq!(key, format!("bg:telegram:{}", tag.task_id));
        assert_ne!(key, event_session_key(&cmd, Default::default()));
        // It survives the journal; a row journaled before the tag existed loads without it.
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(serde_json::from_value::<MessageEvent>(json).unwrap(), event);
        let mut old = serde_json::to_value(&cmd).unwrap();
        old.as_object_mut().unwrap().remove("background");
        assert_eq!(
            serde_json::from_value::<MessageEvent>(old)
                .unwrap()
                .background,
            None
        );
    }

    #[test]
    fn the_acknowledgement_names_the_task() {
        let tag = BackgroundTag {
            task_id: "bg_010203_abcdef".into(),
            preview: "sum it up".into(),
        };
        let text = started_text(&tag);
        assert!(
            text.contains("`bg_010203_abcdef`") && text.contains("\"sum it up\""),
            "{text}"
        );
    }
}
