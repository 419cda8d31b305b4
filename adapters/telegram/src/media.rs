//! Inbound attachments: photo (largest size), document, voice, audio and video are fetched
//! through getFile and downloaded into the cache directory (when the turn runs, see
//! `pending.rs`), refusing anything over the size cap; outbound files are sent natively with the method their extension calls for.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::api::types::{File, Message};
use crate::api::{ApiError, BotApi};
use crate::settings::Settings;

/// One attachment to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    pub file_id: String,
    pub declared_size: Option<u64>,
    pub subdir: &'static str,
    pub file_name: String,
    pub mime_type: String,
}

/// The attachment a message carries, if any.
pub fn attachment(message: &Message) -> Option<Attachment> {
    if let Some(photo) = message.photo.iter().max_by_key(|p| {
        (
            p.file_size.unwrap_or(0),
            u64::from(p.width) * u64::from(p.height),
        )
    }) {
        return Some(Attachment {
            file_id: photo.file_id.clone(),
            declared_size: photo.file_size,
            subdir: "images",
            file_name: "photo.jpg".into(),
            mime_type: "image/jpeg".into(),
        });
    }
    let (file, subdir, default_name, default_mime) = if let Some(f) = &message.voice {
        (f, "audio", "voice.ogg", "audio/ogg")
    } else if let Some(f) = &message.audio {
        (f, "audio", "audio.mp3", "audio/mpeg")
    } else if let Some(f) = &message.video {
        (f, "videos", "video.mp4", "video/mp4")
    } else if let Some(f) = &message.document {
        (f, "documents", "document", "application/octet-stream")
    } else {
        return None;
    };
    Some(Attachment {
        file_id: file.file_id.clone(),
        declared_size: file.file_size,
        subdir,
        file_name: file
            .file_name
            .clone()
            .unwrap_or_else(|| default_name.into()),
        mime_type: file
            .mime_type
            .clone()
            .unwrap_or_else(|| default_mime.into()),
    })
}

/// Why an attachment was not saved.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    #[error("the attachment is {size} bytes, over the {cap}-byte cap")]
    TooLarge { size: u64, cap: u64 },
    #[error("{0}")]
    Api(#[from] ApiError),
    #[error("cache directory {0}: {1}")]
    Cache(PathBuf, std::io::Error),
}

impl MediaError {
    /// Flood control's wait, when Telegram asked for one (429 with `parameters.retry_after`).
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            MediaError::Api(ApiError::Api {
                retry_after: Some(seconds),
                ..
            }) => Some(std::time::Duration::from_secs(*seconds)),
            _ => None,
        }
    }

    /// A failure worth trying again (the network, a 429, a 5xx).
    pub fn is_transient(&self) -> bool {
        match self {
            MediaError::Api(
                ApiError::Unreachable(_) | ApiError::NoAnswer(_) | ApiError::TimedOut(_),
            ) => true,
            MediaError::Api(e) => e.status().is_some_and(|s| s == 429 || s >= 500),
            _ => false,
        }
    }
}

/// The refusal of an attachment Telegram declared larger than the cap (checked before any
/// request, at intake and again before a download).
pub fn declared_over_cap(attachment: &Attachment, settings: &Settings) -> Option<MediaError> {
    let cap = settings.max_media_bytes;
    attachment
        .declared_size
        .filter(|size| *size > cap)
        .map(|size| MediaError::TooLarge { size, cap })
}

/// Downloads `attachment` into `settings.cache_dir/<subdir>/`; returns the local path.
pub async fn download(
    api: &BotApi,
    settings: &Settings,
    update_id: i64,
    attachment: &Attachment,
) -> Result<PathBuf, MediaError> {
    if let Some(refused) = declared_over_cap(attachment, settings) {
        return Err(refused);
    }
    let cap = settings.max_media_bytes;
    let file: File = serde_json::from_value(
        api.call(
            "getFile",
            &json!({"file_id": attachment.file_id}),
            settings.request_timeout,
        )
        .await?,
    )
    .map_err(|e| malformed(format!("getFile answer not understood: {e}")))?;
    if let Some(size) = file.file_size.filter(|s| *s > cap) {
        return Err(MediaError::TooLarge { size, cap });
    }
    let file_path = file
        .file_path
        .ok_or_else(|| malformed("getFile gave no file_path".into()))?;
    let dir = settings.cache_dir.join(attachment.subdir);
    hermes_adapter::media_cache::create_private_dir(&dir)
        .await
        .map_err(|e| MediaError::Cache(dir.clone(), e))?;
    let dest = dir.join(format!(
        "tg_{update_id}_{}",
        hermes_adapter::media_cache::safe_file_name(&attachment.file_name)
    ));
    if settings.local_mode && Path::new(&file_path).is_absolute() {
        return copy_local(Path::new(&file_path), &dest, cap).await;
    }
    let timeout = settings.request_timeout * 6;
    match api.download(&file_path, &dest, cap, timeout).await {
        Ok(_) => Ok(dest),
        Err(ApiError::Api { status: 413, .. }) => Err(MediaError::TooLarge { size: cap + 1, cap }),
        Err(e) => Err(e.into()),
    }
}

/// A local Bot API server started with `--local` answers getFile with an absolute path on
/// its own filesystem (https://github.com/tdlib/telegram-bot-api#usage), which shares a disk
/// with us; the file is copied from there instead of downloaded.
async fn copy_local(source: &Path, dest: &Path, cap: u64) -> Result<PathBuf, MediaError> {
    let unreadable = |e: std::io::Error| {
        malformed(format!(
            "local_mode: getFile's path {} cannot be read: {e}",
            source.display()
        ))
    };
    let size = tokio::fs::metadata(source).await.map_err(unreadable)?.len();
    if size > cap {
        return Err(MediaError::TooLarge { size, cap });
    }
    tokio::fs::copy(source, dest).await.map_err(unreadable)?;
    Ok(dest.to_path_buf())
}

/// A getFile answer that cannot be used; retrying would not change it.
fn malformed(description: String) -> ApiError {
    ApiError::Api {
        status: 200,
        description,
        retry_after: None,
    }
}

/// The Bot API method and field for sending `path` natively.
pub fn send_method(path: &Path) -> (&'static str, &'static str) {
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match extension.as_str() {
        "png" | "jpg" | "jpeg" | "webp" => ("sendPhoto", "photo"),
        "gif" => ("sendAnimation", "animation"),
        "ogg" | "opus" => ("sendVoice", "voice"),
        "mp3" | "m4a" | "wav" | "flac" => ("sendAudio", "audio"),
        "mp4" | "mov" | "webm" => ("sendVideo", "video"),
        _ => ("sendDocument", "document"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_methods_follow_the_extension() {
        assert_eq!(send_method(Path::new("/a/b.PNG")), ("sendPhoto", "photo"));
        assert_eq!(send_method(Path::new("/a/b.opus")), ("sendVoice", "voice"));
        assert_eq!(
            send_method(Path::new("/a/b.tar.gz")),
            ("sendDocument", "document")
        );
    }
}
