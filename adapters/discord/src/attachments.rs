//! Inbound attachments: journaled with their event as references (the attachment object
//! Discord sent) and downloaded just before the turn, by whichever process runs it
//! (`Adapter::fetch_pending_media`; a CDN URL is not tied to the connection that received
//! it, and stays valid for about a day, far longer than a turn waits), into `cache_dir`
//! under the per-attachment size cap, named `<attachment id>_<safe file name>` (the
//! contract's one naming rule, `media_cache::safe_file_name`).

use std::path::PathBuf;

use hermes_adapter::{MessageEvent, MessageType, PendingMedia, media_cache};

use crate::model::Attachment;
use crate::rest::RestClient;
use crate::settings::Settings;

/// The event type an attachment makes (reference: the first attachment decides). Audio
/// with a duration and a waveform is a voice message recorded in the client (the
/// reference's `is_voice_message` test).
pub fn message_type_of(attachment: &Attachment) -> MessageType {
    match attachment.content_type.as_deref() {
        Some(t)
            if t.starts_with("audio/")
                && attachment.duration_secs.is_some()
                && attachment.waveform.is_some() =>
        {
            MessageType::Voice
        }
        Some(t) if t.starts_with("image/") => MessageType::Photo,
        Some(t) if t.starts_with("video/") => MessageType::Video,
        Some(t) if t.starts_with("audio/") => MessageType::Audio,
        _ => MessageType::Document,
    }
}

/// The reference journaled for `attachment`.
pub fn reference(attachment: &Attachment) -> PendingMedia {
    PendingMedia {
        reference: serde_json::json!({
            "id": attachment.id,
            "filename": attachment.filename,
            "content_type": attachment.content_type,
            "size": attachment.size,
            "url": attachment.url,
        }),
        label: if attachment.filename.is_empty() {
            "attachment".into()
        } else {
            attachment.filename.clone()
        },
    }
}

/// Downloads `event`'s pending attachments into it; one over the cap or failing stays
/// pending (logged), and the core tells the model it could not be fetched.
pub async fn fetch_pending(rest: &RestClient, settings: &Settings, event: &mut MessageEvent) {
    let mut left = Vec::new();
    for pending in std::mem::take(&mut event.pending_media) {
        let cached = match serde_json::from_value::<Attachment>(pending.reference.clone()) {
            Ok(attachment) => cache(rest, settings, &attachment).await,
            Err(error) => {
                tracing::warn!(platform = "discord", %error, "an attachment reference could not be read back");
                None
            }
        };
        match cached {
            Some((path, mime)) => {
                event.media_paths.push(path);
                event.media_types.push(mime);
            }
            None => left.push(pending),
        }
    }
    event.pending_media = left;
}

/// Downloads one attachment; `None` (logged) when it is over the cap or fails.
pub async fn cache(
    rest: &RestClient,
    settings: &Settings,
    attachment: &Attachment,
) -> Option<(String, String)> {
    let cap = settings.max_attachment_bytes;
    if cap > 0 && attachment.size > cap {
        tracing::warn!(
            platform = "discord",
            size = attachment.size,
            cap,
            "attachment over the size cap, skipped"
        );
        return None;
    }
    let bytes = match rest.download(&attachment.url, cap).await {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::warn!(platform = "discord", %error, "attachment download failed");
            return None;
        }
    };
    let path: PathBuf = settings.cache_dir.join(format!(
        "{}_{}",
        attachment.id,
        media_cache::safe_file_name(&attachment.filename)
    ));
    let written = media_cache::write_private(&settings.cache_dir, &path, &bytes);
    if let Err(error) = written.await {
        tracing::warn!(platform = "discord", %error, "cannot cache an attachment");
        return None;
    }
    let mime = attachment
        .content_type
        .clone()
        .unwrap_or_else(|| "application/octet-stream".into());
    Some((path.to_string_lossy().into_owned(), mime))
}
