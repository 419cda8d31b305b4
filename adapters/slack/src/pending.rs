//! Shared files fetched after the ack. A message's files are recorded as pending
//! references (the Slack file objects) and the envelope is acknowledged at once: Slack
//! wants every envelope acked within 3 seconds
//! (<https://api.slack.com/apis/socket-mode#acknowledge>) and a download can take far
//! longer. The core asks for them just before the message's turn
//! (`Adapter::fetch_pending_media`): Slack Connect stubs are completed with `files.info`,
//! each file is downloaded into the cache, small text files are inlined, and what cannot
//! be fetched becomes a line of the attachment notice the model sees.

use hermes_adapter::{MessageEvent, PendingMedia};
use serde_json::Value;

use crate::adapter::Shared;
use crate::files;

/// The pending references of a message's shared files.
pub fn references(event: &Value) -> Vec<PendingMedia> {
    let Some(shared) = event.get("files").and_then(Value::as_array) else {
        return Vec::new();
    };
    shared
        .iter()
        .map(|file| {
            let label = ["name", "id"]
                .iter()
                .find_map(|field| file.get(field).and_then(Value::as_str))
                .filter(|name| !name.is_empty())
                .unwrap_or("file")
                .to_owned();
            PendingMedia {
                reference: file.clone(),
                label,
            }
        })
        .collect()
}

/// The MIME types Slack declared for a message's files (the message type is known before
/// the download; a Slack Connect stub declares none).
pub fn declared_types(pending: &[PendingMedia]) -> Vec<String> {
    pending
        .iter()
        .map(|p| {
            p.reference
                .get("mimetype")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty())
                .unwrap_or("application/octet-stream")
                .to_owned()
        })
        .collect()
}

/// Downloads every pending file of `event` into it; failures become notices in its text.
pub async fn fetch(shared: &Shared, event: &mut MessageEvent) {
    let mut notices = Vec::new();
    let mut inline = Vec::new();
    for pending in std::mem::take(&mut event.pending_media) {
        let file = match complete(shared, &pending.reference).await {
            Ok(file) => file,
            Err(notice) => {
                notices.push(notice);
                continue;
            }
        };
        match files::download(
            &shared.api,
            &file,
            &shared.settings.cache_dir,
            shared.settings.max_attachment_bytes,
        )
        .await
        {
            Ok(cached) => {
                inline.extend(cached.inline_text);
                event.media_paths.push(cached.path);
                event.media_types.push(cached.mime_type);
            }
            Err(notice) => {
                tracing::warn!(platform = "slack", error = %notice, "attachment not cached");
                notices.push(notice);
            }
        }
    }
    for text in inline {
        prepend(&mut event.text, text);
    }
    if !notices.is_empty() {
        let notice = format!("[Slack attachment notice]\n- {}", notices.join("\n- "));
        prepend(&mut event.text, notice);
    }
}

/// The full file object: a Slack Connect stub has no URLs until `files.info` is asked.
async fn complete(shared: &Shared, file: &Value) -> Result<Value, String> {
    if file.get("file_access").and_then(Value::as_str) != Some("check_file_info") {
        return Ok(file.clone());
    }
    let id = file.get("id").and_then(Value::as_str).unwrap_or("");
    match shared
        .api
        .call_form("files.info", &[("file", id.to_owned())])
        .await
    {
        Ok(mut answer) if answer.get("file").is_some() => Ok(answer["file"].take()),
        Ok(_) | Err(_) => Err(format!("file {id} could not be looked up (files.info)")),
    }
}

fn prepend(text: &mut String, before: String) {
    *text = if text.is_empty() {
        before
    } else {
        format!("{before}\n\n{text}")
    };
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn references_keep_the_file_objects_and_name_them() {
        let event = json!({"files": [
            {"id": "F1", "name": "notes.txt", "mimetype": "text/plain"},
            {"id": "F2", "file_access": "check_file_info"},
        ]});
        let pending = references(&event);
        let labels: Vec<&str> = pending.iter().map(|p| p.label.as_str()).collect();
        assert_eq!(labels, ["notes.txt", "F2"]);
        assert_eq!(pending[1].reference["file_access"], "check_file_info");
        assert_eq!(
            declared_types(&pending),
            ["text/plain", "application/octet-stream"]
        );
        assert!(references(&json!({"text": "no files"})).is_empty());
    }
}
