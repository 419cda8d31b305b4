//! A reply with `MEDIA:` tags: the text without the tags goes first (chunked, as any reply),
//! then each attachment that passes [`MediaPolicy::validate`] as a native upload with the
//! same retry rules. A refused path is logged and skipped (the tag is never shown as text);
//! an attachment the platform refuses for good is logged and the rest still go; an upload
//! whose outcome is unknown stops the reply as ambiguous, like a text chunk would.
//!
//! A reply marked `[[audio_as_voice]]` whose attachment is an Ogg/Opus file that reads back
//! as one (`tools::tts::opus::probe`) goes as a voice note first: with the text as its
//! caption where the platform takes a caption that long (then no separate text), else
//! followed by the text. A voice note the platform refuses for good is logged and the text
//! still goes, as its own message.

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
            as_voice: false,
        },
    };
    let (Some(policy), false) = (media, extracted.paths.is_empty()) else {
        let target = sender.reply_target(chat_id, thread_id);
        return sender
            .deliver_to(&target, text, reply_to, reply_to_mode)
            .await;
    };
    let target = sender.reply_target(chat_id, thread_id);
    let platform = sender.adapter.platform();
    let mut paths = extracted.paths.clone();
    let mut text_sent = false;
    let mut voice_ids = Vec::new();
    if extracted.as_voice
        && let Some((index, kind)) = voice_note(sender, policy, &paths, &extracted.text).await
    {
        let captioned = matches!(
            &kind,
            OutboundKind::Voice {
                caption: Some(_),
                ..
            }
        );
        paths.remove(index);
        match sender.send_with_retry(&target, &kind).await {
            Attempt::Sent(id) => {
                voice_ids.extend(id);
                text_sent = captioned;
            }
            // Nothing of the reply is known to be out yet: the whole reply is owed.
            Attempt::Rejected(FailureClass::Ambiguous, failure) => {
                return DeliveryReport {
                    sent_message_ids: Vec::new(),
                    outcome: DeliveryOutcome::Ambiguous {
                        after_chunk: 0,
                        error: failure.message,
                    },
                };
            }
            Attempt::Deferred(error) => {
                return DeliveryReport {
                    sent_message_ids: Vec::new(),
                    outcome: DeliveryOutcome::Deferred {
                        after_chunk: 0,
                        error,
                    },
                };
            }
            Attempt::Fenced(error) => {
                return DeliveryReport {
                    sent_message_ids: Vec::new(),
                    outcome: DeliveryOutcome::Fenced {
                        after_chunk: 0,
                        error,
                    },
                };
            }
            Attempt::Rejected(_, failure) | Attempt::Exhausted(failure) => {
                tracing::warn!(platform, chat_id, error = %failure, "voice note not delivered; sending the text");
            }
        }
    }
    let mut report = if text_sent || extracted.text.trim().is_empty() {
        DeliveryReport {
            sent_message_ids: Vec::new(),
            outcome: DeliveryOutcome::Delivered,
        }
    } else {
        sender
            .deliver_to(&target, &extracted.text, reply_to, reply_to_mode)
            .await
    };
    // The voice note went first.
    voice_ids.append(&mut report.sent_message_ids);
    report.sent_message_ids = voice_ids;
    if report.outcome != DeliveryOutcome::Delivered {
        return report;
    }
    for path in &paths {
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

/// The voice note to send for a `[[audio_as_voice]]` reply: the first tagged `.ogg`/`.opus`
/// file that passes the policy and reads back as Ogg/Opus, with its index among `paths`.
async fn voice_note(
    sender: &Sender,
    policy: &MediaPolicy,
    paths: &[String],
    text: &str,
) -> Option<(usize, OutboundKind)> {
    let caps = sender.adapter.capabilities();
    for (index, path) in paths.iter().enumerate() {
        let lower = path.to_ascii_lowercase();
        if !(lower.ends_with(".ogg") || lower.ends_with(".opus")) {
            continue;
        }
        let Ok(file) = policy.validate(path) else {
            continue;
        };
        let read = file.clone();
        let probed = tokio::task::spawn_blocking(move || {
            let bytes = std::fs::read(&read).map_err(|e| e.to_string())?;
            crate::tools::tts::opus::probe(&bytes).map_err(|e| e.to_string())
        })
        .await;
        let probe = match probed {
            Ok(Ok(probe)) => probe,
            Ok(Err(reason)) => {
                tracing::warn!(path = %path, reason, "not sent as a voice note");
                continue;
            }
            Err(_) => continue,
        };
        let text = text.trim();
        let caption = caps
            .voice_caption_limit
            .filter(|limit| !text.is_empty() && caps.length_unit.measure(text) <= *limit)
            .map(|_| text.to_owned());
        return Some((
            index,
            OutboundKind::Voice {
                path: file.to_string_lossy().into_owned(),
                caption,
                duration_secs: probe.duration_secs,
                waveform: probe.waveform,
            },
        ));
    }
    None
}
