//! A `tools/call` result as the model reads it, in Hermes's shape: `{"result": text}` (with
//! `structuredContent` beside it when the server sent one), or `{"error": text}` when the
//! server flagged the call as failed.
//!
//! Text blocks are joined by newlines. Images and audio are written to the media cache and
//! named by a `MEDIA:<path>` line, which the gateway turns into an attachment; embedded text
//! resources are included, binary ones and resource links are described. The result is read
//! from the wire JSON (the MCP schema's `content`, `structuredContent`, `isError`), so a
//! block type this code does not know is reported, never silently dropped.

use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Renders `result` (a `CallToolResult` as JSON); binary media go under `media_dir`.
pub fn render(server: &str, result: &Value, media_dir: &Path) -> String {
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|block| render_block(server, block, media_dir))
        .collect();
    let text = parts.join("\n");
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = if text.trim().is_empty() {
            format!("the MCP server '{server}' reported a failure without a message")
        } else {
            text
        };
        return json!({ "error": message }).to_string();
    }
    match result.get("structuredContent").filter(|v| !v.is_null()) {
        Some(structured) if text.is_empty() => json!({ "result": structured }).to_string(),
        Some(structured) => json!({ "result": text, "structuredContent": structured }).to_string(),
        None => json!({ "result": text }).to_string(),
    }
}

fn render_block(server: &str, block: &Value, media_dir: &Path) -> Option<String> {
    let field = |name: &str| block.get(name).and_then(Value::as_str);
    match field("type").unwrap_or_default() {
        "text" => field("text").filter(|t| !t.is_empty()).map(str::to_owned),
        kind @ ("image" | "audio") => {
            let mime = field("mimeType").unwrap_or("application/octet-stream");
            let data = field("data").unwrap_or_default();
            Some(match save_media(data, mime, media_dir) {
                Ok(path) => format!("MEDIA:{}", path.display()),
                Err(reason) => {
                    format!("[{kind} ({mime}) from the tool could not be kept: {reason}]")
                }
            })
        }
        "resource" => {
            let resource = block.get("resource")?;
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("?");
            if let Some(text) = resource.get("text").and_then(Value::as_str) {
                return Some(text.to_owned());
            }
            let mime = resource
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream");
            let bytes = resource
                .get("blob")
                .and_then(Value::as_str)
                .map_or(0, |b| b.len() / 4 * 3);
            Some(format!(
                "[binary resource {uri} ({mime}, about {bytes} bytes)]"
            ))
        }
        "resource_link" => {
            let uri = field("uri").unwrap_or("?");
            let name = field("name").unwrap_or(uri);
            Some(format!("[resource link: {name} <{uri}>]"))
        }
        other => {
            tracing::warn!(
                server,
                block_type = other,
                "MCP result block of an unknown type"
            );
            Some(format!("[a '{other}' block this client cannot show]"))
        }
    }
}

/// Writes base64 `data` to `<dir>/<sha256>.<ext>` (same content, same file).
fn save_media(data: &str, mime: &str, dir: &Path) -> Result<PathBuf, MediaNotKept> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(MediaNotKept::NotBase64)?;
    let ext = match mime {
        "image/png" => "png",
        "image/jpeg" | "image/jpg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/mpeg" | "audio/mp3" => "mp3",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/ogg" => "ogg",
        _ => "bin",
    };
    let name = format!("{}.{ext}", hex::encode(Sha256::digest(&bytes)));
    crate::home::private::create_dir_all(dir).map_err(MediaNotKept::Disk)?;
    let path = dir.join(name);
    crate::home::private::write(&path, &bytes).map_err(MediaNotKept::Disk)?;
    Ok(path)
}

/// Why an image or audio block of a tool result was not saved for the model.
#[derive(Debug, thiserror::Error)]
enum MediaNotKept {
    #[error("not base64 ({0})")]
    NotBase64(#[source] base64::DecodeError),
    #[error("{0}")]
    Disk(#[source] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_structured_errors_and_media_take_the_hermes_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let text = render(
            "s",
            &json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
            dir.path(),
        );
        assert_eq!(text, r#"{"result":"a\nb"}"#);
        let structured = render(
            "s",
            &json!({"content": [], "structuredContent": {"n": 1}}),
            dir.path(),
        );
        assert_eq!(structured, r#"{"result":{"n":1}}"#);
        let failed = render(
            "s",
            &json!({"isError": true, "content": [{"type": "text", "text": "no such file"}]}),
            dir.path(),
        );
        assert_eq!(failed, r#"{"error":"no such file"}"#);
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG fake");
        let image = render(
            "s",
            &json!({"content": [{"type": "image", "data": png, "mimeType": "image/png"}]}),
            dir.path(),
        );
        let value: Value = serde_json::from_str(&image).unwrap();
        let path = value["result"]
            .as_str()
            .unwrap()
            .strip_prefix("MEDIA:")
            .unwrap();
        assert!(path.ends_with(".png"), "{path}");
        assert_eq!(std::fs::read(path).unwrap(), b"\x89PNG fake");
    }
}
