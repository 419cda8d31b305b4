//! Attachments fetched after the ack. The intake records a message's file as a pending
//! reference (its `file_id` and what Telegram declared about it) and lets the update be
//! acknowledged at once; the core asks for the file just before the message's turn
//! (`Adapter::fetch_pending_media`). A `file_id` is valid for every process using the same
//! bot token ("file_id ... can be used to download or reuse the file",
//! <https://core.telegram.org/bots/api#file>), so in a cluster the instance that holds the
//! session fetches the file itself, whichever instance received the update.

use std::time::Duration;

use hermes_adapter::{MessageEvent, PendingMedia};
use serde_json::{Value, json};

use crate::api::BotApi;
use crate::media::{self, Attachment, MediaError};
use crate::settings::Settings;

/// Attempts at a download that fails for a passing reason (the network, a 5xx); a 429's
/// `retry_after` is waited out and does not count as an attempt.
const ATTEMPTS: u32 = 3;
/// The longest 429 wait honoured in one fetch before the file is given up as a notice.
const MAX_FLOOD_WAIT: Duration = Duration::from_secs(120);

/// The reference the intake journals for `attachment`, which came with update `update_id` (an
/// album's parts share one event but keep their own updates, and so their own cache names).
pub fn reference(attachment: &Attachment, update_id: i64) -> PendingMedia {
    PendingMedia {
        reference: json!({
            "update_id": update_id,
            "file_id": attachment.file_id,
            "file_size": attachment.declared_size,
            "subdir": attachment.subdir,
            "file_name": attachment.file_name,
            "mime_type": attachment.mime_type,
        }),
        label: attachment.file_name.clone(),
    }
}

/// The attachment a journaled reference stands for, and its update; `None` for one this
/// adapter never wrote.
fn attachment(reference: &Value) -> Option<(Attachment, i64)> {
    let text = |field: &str| reference.get(field).and_then(Value::as_str);
    let subdir = match text("subdir")? {
        "images" => "images",
        "audio" => "audio",
        "videos" => "videos",
        _ => "documents",
    };
    let attachment = Attachment {
        file_id: text("file_id")?.to_owned(),
        declared_size: reference.get("file_size").and_then(Value::as_u64),
        subdir,
        file_name: text("file_name").unwrap_or("file").to_owned(),
        mime_type: text("mime_type")
            .unwrap_or("application/octet-stream")
            .to_owned(),
    };
    Some((attachment, reference.get("update_id")?.as_i64()?))
}

/// Downloads every pending file of `event` into it; what cannot be fetched becomes a note in
/// its text, as a refused file did before the deferral.
pub async fn fetch(api: &BotApi, settings: &Settings, event: &mut MessageEvent) {
    for pending in std::mem::take(&mut event.pending_media) {
        let Some((attachment, update_id)) = attachment(&pending.reference) else {
            note_not_saved(event, &format!("{} could not be read back", pending.label));
            continue;
        };
        match download_patiently(api, settings, update_id, &attachment).await {
            Ok(path) => {
                event.media_paths.push(path.to_string_lossy().into_owned());
                event.media_types.push(attachment.mime_type.clone());
            }
            Err(e) => {
                tracing::warn!(platform = "telegram", update_id, error = %e, "attachment not saved");
                note_not_saved(event, &e.to_string());
            }
        }
    }
}

/// [`media::download`], waiting out flood control and retrying passing failures.
async fn download_patiently(
    api: &BotApi,
    settings: &Settings,
    update_id: i64,
    attachment: &Attachment,
) -> Result<std::path::PathBuf, MediaError> {
    let mut failures = 0;
    let mut flood_waited = Duration::ZERO;
    loop {
        match media::download(api, settings, update_id, attachment).await {
            Ok(path) => return Ok(path),
            Err(e) => {
                let wait = match e.retry_after() {
                    Some(wait) if flood_waited + wait <= MAX_FLOOD_WAIT => {
                        flood_waited += wait;
                        wait
                    }
                    _ if e.is_transient() && failures + 1 < ATTEMPTS => {
                        failures += 1;
                        Duration::from_secs(1 << failures)
                    }
                    _ => return Err(e),
                };
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Adds the line saying a file was not saved, and why, to the event's text.
pub fn note_not_saved(event: &mut MessageEvent, reason: &str) {
    let note = format!("[The attached file was not saved: {reason}]");
    event.text = if event.text.is_empty() {
        note
    } else {
        format!("{}\n{note}", event.text)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_reads_back_as_the_attachment_it_was_made_from() {
        let original = Attachment {
            file_id: "AgAD-1".into(),
            declared_size: Some(1234),
            subdir: "images",
            file_name: "photo.jpg".into(),
            mime_type: "image/jpeg".into(),
        };
        let pending = reference(&original, 77);
        assert_eq!(pending.label, "photo.jpg");
        // Through the journal (JSON) and back.
        let journaled: PendingMedia =
            serde_json::from_str(&serde_json::to_string(&pending).unwrap()).unwrap();
        assert_eq!(attachment(&journaled.reference), Some((original, 77)));
        assert_eq!(attachment(&json!({"label": "x"})), None);
    }
}
