//! Attachments: shared files are downloaded with the bot token into the cache directory
//! (size-capped, Slack's HTML sign-in page refused), and local files are sent with Slack's
//! external upload flow (`files.getUploadURLExternal` → POST the bytes →
//! `files.completeUploadExternal`), as the reference's `files_upload_v2` does.

use std::path::{Path, PathBuf};

use hermes_adapter::media_cache;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};

use crate::api::{ApiError, Token, WebApi};

/// A file saved for the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedFile {
    pub path: String,
    pub mime_type: String,
    /// `[Content of name]:` + the text, for small text files the agent should read inline
    /// (reference: UTF-8, ≤ 100 KiB, a text extension or `text/*`).
    pub inline_text: Option<String>,
}

/// The reference's `MAX_TEXT_INJECT_BYTES`.
const MAX_INLINE_TEXT_BYTES: usize = 100 * 1024;

/// The reference's `_TEXT_INJECT_EXTENSIONS`: formats safe to inline as text.
const TEXT_EXTENSIONS: &[&str] = &[
    "txt",
    "md",
    "markdown",
    "csv",
    "tsv",
    "log",
    "json",
    "jsonl",
    "ndjson",
    "xml",
    "yaml",
    "yml",
    "toml",
    "ini",
    "cfg",
    "conf",
    "env",
    "properties",
    "html",
    "htm",
    "css",
    "scss",
    "sass",
    "less",
    "py",
    "pyi",
    "js",
    "mjs",
    "cjs",
    "ts",
    "tsx",
    "jsx",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "bat",
    "c",
    "h",
    "cpp",
    "cc",
    "hpp",
    "cs",
    "java",
    "kt",
    "go",
    "rs",
    "rb",
    "php",
    "pl",
    "lua",
    "r",
    "jl",
    "swift",
    "m",
    "scala",
    "clj",
    "ex",
    "exs",
    "erl",
    "sql",
    "graphql",
    "proto",
    "tf",
    "hcl",
    "dockerfile",
    "makefile",
    "cmake",
    "gradle",
    "rst",
    "tex",
    "srt",
    "vtt",
    "diff",
    "patch",
];

/// The inline text of a small text file, `None` for anything else.
fn inline_text(name: &str, mime_type: &str, bytes: &[u8]) -> Option<String> {
    let ext = Path::new(name)
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let textual = TEXT_EXTENSIONS.contains(&ext.as_str()) || mime_type.starts_with("text/");
    if !textual || bytes.len() > MAX_INLINE_TEXT_BYTES {
        return None;
    }
    let content = std::str::from_utf8(bytes).ok()?;
    let display: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | ' ') {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(format!("[Content of {display}]:\n{content}"))
}

/// Downloads one shared file (a Slack file object) into `cache_dir`.
pub async fn download(
    api: &WebApi,
    file: &Value,
    cache_dir: &Path,
    max_bytes: u64,
) -> Result<CachedFile, String> {
    let id = file.get("id").and_then(Value::as_str).unwrap_or("file");
    let name = file.get("name").and_then(Value::as_str).unwrap_or("file");
    let url = file
        .get("url_private_download")
        .or_else(|| file.get("url_private"))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("file {id} has no download URL"))?;
    let declared = file.get("size").and_then(Value::as_u64).unwrap_or(0);
    if declared > max_bytes {
        return Err(format!(
            "file {id} is {declared} bytes, over the {max_bytes}-byte limit"
        ));
    }
    let mut response = api
        .transfer(reqwest::Method::GET, url)
        .send()
        .await
        .map_err(|e| format!("downloading file {id}: {}", e.without_url()))?;
    if !response.status().is_success() {
        return Err(format!("downloading file {id}: HTTP {}", response.status()));
    }
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    if content_type.contains("text/html") {
        return Err(format!(
            "Slack returned a web page instead of file {id}; check the bot's files:read scope"
        ));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("downloading file {id}: {}", e.without_url()))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max_bytes {
            return Err(format!("file {id} is over the {max_bytes}-byte limit"));
        }
    }
    let path: PathBuf = cache_dir.join(format!(
        "{}_{}",
        media_cache::safe_file_name(id),
        media_cache::safe_file_name(name)
    ));
    media_cache::write_private(cache_dir, &path, &bytes)
        .await
        .map_err(|e| format!("caching {}: {e}", path.display()))?;
    let mime_type = file
        .get("mimetype")
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .unwrap_or("application/octet-stream")
        .to_owned();
    let media = ["image/", "audio/", "video/"];
    let inline_text = if media.iter().any(|m| mime_type.starts_with(m)) {
        None
    } else {
        inline_text(name, &mime_type, &bytes)
    };
    Ok(CachedFile {
        path: path.to_string_lossy().into_owned(),
        mime_type,
        inline_text,
    })
}

/// Why an upload failed before any Slack call (a missing local file).
#[derive(Debug)]
pub enum UploadError {
    Local(String),
    Api(ApiError),
}

/// Uploads a local file into `channel` (in `thread_ts` when given) with an optional caption.
/// Returns the Slack file id.
pub async fn upload(
    api: &WebApi,
    channel: &str,
    thread_ts: Option<&str>,
    path: &str,
    caption: Option<&str>,
) -> Result<String, UploadError> {
    let bytes = tokio::fs::read(path)
        .await
        .map_err(|e| UploadError::Local(format!("reading {path}: {e}")))?;
    let filename = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_owned());
    let ticket = api
        .call_form(
            "files.getUploadURLExternal",
            &[
                ("filename", filename.clone()),
                ("length", bytes.len().to_string()),
            ],
        )
        .await
        .map_err(UploadError::Api)?;
    let (Some(upload_url), Some(file_id)) = (
        ticket.get("upload_url").and_then(Value::as_str),
        ticket.get("file_id").and_then(Value::as_str),
    ) else {
        return Err(UploadError::Api(ApiError::Ambiguous(
            "files.getUploadURLExternal answered without upload_url/file_id".into(),
        )));
    };
    let response = api
        .transfer(reqwest::Method::POST, upload_url)
        .body(bytes)
        .send()
        .await
        .map_err(|e| UploadError::Api(crate::api::classify(e)))?;
    if !response.status().is_success() {
        return Err(UploadError::Api(ApiError::Status(
            response.status().as_u16(),
        )));
    }
    let mut complete = json!({
        "files": [{"id": file_id, "title": filename}],
        "channel_id": channel,
    });
    if let Some(caption) = caption.filter(|c| !c.is_empty()) {
        complete["initial_comment"] = json!(caption);
    }
    if let Some(thread_ts) = thread_ts {
        complete["thread_ts"] = json!(thread_ts);
    }
    api.call("files.completeUploadExternal", Token::Bot, &complete)
        .await
        .map_err(UploadError::Api)?;
    Ok(file_id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_small_utf8_text_files_are_inlined() {
        assert_eq!(
            inline_text("a b/c.json", "application/json", b"{}").as_deref(),
            Some("[Content of a b_c.json]:\n{}")
        );
        assert!(inline_text("notes", "text/plain", b"hi").is_some());
        assert_eq!(inline_text("x.pdf", "application/pdf", b"%PDF"), None);
        assert_eq!(inline_text("x.txt", "text/plain", &[0xff, 0xfe]), None);
        assert_eq!(
            inline_text("x.txt", "text/plain", &vec![b'a'; 100 * 1024 + 1]),
            None
        );
    }
}
