//! A reply with `MEDIA:` tags: the text without the tags goes first (chunked, as any reply),
//! then each attachment that passes [`MediaPolicy::validate`] as a native upload with the
//! same retry rules. A refused path is logged and skipped (the tag is never shown as text);
//! an attachment the platform refuses for good is logged and the rest still go; an upload
//! whose outcome is unknown stops the reply as ambiguous, like a text chunk would.

use hermes_adapter::OutboundKind;

use super::retry::FailureClass;
use super::sender::Sender;
use super::{Attempt, DeliveryOutcome, DeliveryReport};
use crate::config::ReplyToMode;
use crate::gateway::media_tags::{self, MediaPolicy};

/// Delivers an agent's reply: its text, then its attachments (when `media` is set). The
/// text and the attachments each wait out rate limits until a deadline counted from when
/// they start.
pub(super) async fn deliver_with_attachments(
    sender: &Sender,
    media: Option<&MediaPolicy>,
    (chat_id, thread_id): (&str, Option<&str>),
    text: &str,
    reply_to: Option<String>,
    reply_to_mode: ReplyToMode,
) -> DeliveryReport {
    let extracted = match media {
        Some(_) => media_tags::extract(text),
        None => media_tags::Extracted {
            text: String::new(),
            paths: Vec::new(),
        },
    };
    let (Some(policy), false) = (media, extracted.paths.is_empty()) else {
        let target = sender.reply_target(chat_id, thread_id);
        return sender
            .deliver_to(&target, text, reply_to, reply_to_mode)
            .await;
    };
    let mut report = if extracted.text.trim().is_empty() {
        DeliveryReport {
            sent_message_ids: Vec::new(),
            outcome: DeliveryOutcome::Delivered,
        }
    } else {
        let target = sender.reply_target(chat_id, thread_id);
        sender
            .deliver_to(&target, &extracted.text, reply_to, reply_to_mode)
            .await
    };
    if report.outcome != DeliveryOutcome::Delivered {
        return report;
    }
    let target = sender.reply_target(chat_id, thread_id);
    let platform = sender.adapter.platform();
    for path in &extracted.paths {
        let file = match policy.validate(path) {
            Ok(file) => file,
            Err(reason) => {
                tracing::warn!(platform, chat_id, path = %path, reason, "MEDIA tag not delivered");
                continue;
            }
        };
        let kind = OutboundKind::Media {
            path: file.to_string_lossy().into_owned(),
            caption: None,
        };
        match sender.send_with_retry(&target, &kind).await {
            Attempt::Sent(id) => report.sent_message_ids.extend(id),
            Attempt::Rejected(FailureClass::Ambiguous, failure) => {
                report.outcome = DeliveryOutcome::Ambiguous {
                    after_chunk: report.sent_message_ids.len(),
                    error: failure.message,
                };
                return report;
            }
            Attempt::Deferred(error) => {
                report.outcome = DeliveryOutcome::Deferred {
                    after_chunk: report.sent_message_ids.len(),
                    error,
                };
                return report;
            }
            Attempt::Fenced(error) => {
                report.outcome = DeliveryOutcome::Fenced {
                    after_chunk: report.sent_message_ids.len(),
                    error,
                };
                return report;
            }
            Attempt::Rejected(_, failure) | Attempt::Exhausted(failure) => {
                tracing::warn!(platform, chat_id, path = %path, error = %failure, "attachment not delivered");
            }
        }
    }
    report
}
