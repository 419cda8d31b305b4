//! A reply with `MEDIA:` tags: the text without the tags goes first (chunked, as any reply),
//! then each attachment that passes [`MediaPolicy::validate`] as a native upload with the
//! same retry rules. A refused path is logged and skipped (the tag is never shown as text);
//! an attachment the platform refuses for good is logged and the rest still go; an upload
//! whose outcome is unknown stops the reply as ambiguous, like a text chunk would.

use hermes_adapter::OutboundKind;

use super::retry::FailureClass;
use super::{Attempt, Deliverer, DeliveryOutcome, DeliveryReport, Target};
use crate::config::ReplyToMode;
use crate::gateway::media_tags::{self, MediaPolicy};

impl Deliverer {
    /// Turns `MEDIA:` tags in the replies this deliverer sends into attachments.
    pub fn with_media_policy(mut self, policy: MediaPolicy) -> Self {
        self.media = Some(policy);
        self
    }

    /// Delivers an agent's reply: its text, then its attachments (when a media policy is set).
    pub async fn deliver_reply(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        text: &str,
        reply_to: Option<String>,
        reply_to_mode: ReplyToMode,
    ) -> DeliveryReport {
        let extracted = match &self.media {
            Some(_) => media_tags::extract(text),
            None => media_tags::Extracted {
                text: String::new(),
                paths: Vec::new(),
            },
        };
        let (Some(policy), false) = (&self.media, extracted.paths.is_empty()) else {
            return self
                .deliver(chat_id, thread_id, text, reply_to, reply_to_mode)
                .await;
        };
        let mut report = if extracted.text.trim().is_empty() {
            DeliveryReport {
                sent_message_ids: Vec::new(),
                outcome: DeliveryOutcome::Delivered,
            }
        } else {
            self.deliver(chat_id, thread_id, &extracted.text, reply_to, reply_to_mode)
                .await
        };
        if report.outcome != DeliveryOutcome::Delivered {
            return report;
        }
        let target = Target {
            chat_id,
            thread_id,
            deadline: Some(tokio::time::Instant::now() + self.policy.rate_limit_deadline),
        };
        let platform = self.adapter.platform();
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
            match self.send_with_retry(&target, &kind).await {
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
                Attempt::Rejected(_, failure) | Attempt::Exhausted(failure) => {
                    tracing::warn!(platform, chat_id, path = %path, error = %failure, "attachment not delivered");
                }
            }
        }
        report
    }
}
