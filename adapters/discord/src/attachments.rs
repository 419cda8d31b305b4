//! Inbound attachments: downloaded into `cache_dir` (Discord CDN URLs expire) under the
//! per-attachment size cap, named `<attachment id>_<safe file name>` (the contract's one
//! naming rule, `media_cache::safe_file_name`).

use std::path::PathBuf;

use hermes_adapter::{MessageType, media_cache};

use crate::model::Attachment;
use crate::rest::RestClient;
use crate::settings::Settings;

/// The event type an attachment makes (reference: the first attachment decides).
pub fn message_type_of(attachment: &Attachment) -> MessageType {
    match attachment.content_type.as_deref() {
        Some(t) if t.starts_with("image/") => MessageType::Photo,
        Some(t) if t.starts_with("video/") => MessageType::Video,
        Some(t) if t.starts_with("audio/") => MessageType::Audio,
        _ => MessageType::Document,
    }
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
