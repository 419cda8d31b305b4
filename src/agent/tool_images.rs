//! Images an MCP tool returned, shown to a model that can see them. The MCP client saves each
//! image block under `cache/mcp/` and names it in the result text by a `MEDIA:<path>` line
//! (`tools/mcp/result.rs`); for a vision model the files named there are loaded and ride on
//! the tool message as image parts, which each API mode renders in its own shape (Hermes sends
//! MCP images to vision models as content parts of the tool message too). A model without
//! vision gets the text alone, the line naming the file.
//!
//! Like a chat photo, the pixels live only in memory for the turn: the stored message keeps
//! its text.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::deps::AgentDeps;
use super::media::{image, vision};
use super::message::ChatMessage;
use crate::tools::mcp::schema::TOOL_PREFIX;

/// Attaches the images an MCP tool's result names, when `model` takes images.
pub async fn attach(deps: &AgentDeps, model: &str, message: &mut ChatMessage) {
    let from_mcp = message
        .name
        .as_deref()
        .is_some_and(|name| name.starts_with(TOOL_PREFIX));
    if !from_mcp
        || !vision::takes_images(
            deps.settings.image_input_mode,
            deps.settings.supports_vision,
            model,
        )
    {
        return;
    }
    let cache = deps.home.path().join("cache").join("mcp");
    for path in media_paths(message.text(), &cache) {
        let shown = path.display().to_string();
        match tokio::task::spawn_blocking(move || image::load(&path)).await {
            Ok(Ok(part)) => message.images.push(part),
            Ok(Err(error)) => {
                tracing::warn!(file = %shown, %error, "an MCP tool's image cannot be shown to the model");
            }
            Err(error) => tracing::warn!(%error, "loading an MCP tool's image failed"),
        }
    }
}

/// The image files a rendered MCP result names, only those inside `cache` (a server's text
/// cannot make us read any other file).
fn media_paths(result: &str, cache: &Path) -> Vec<PathBuf> {
    let text = match serde_json::from_str::<Value>(result) {
        Ok(Value::Object(map)) => match map.get("result") {
            Some(Value::String(text)) => text.clone(),
            _ => return Vec::new(),
        },
        _ => return Vec::new(),
    };
    let Ok(cache) = cache.canonicalize() else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("MEDIA:"))
        .filter_map(|path| Path::new(path.trim()).canonicalize().ok())
        .filter(|path| path.starts_with(&cache))
        .filter(|path| {
            path.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| ["png", "jpg", "gif", "webp"].contains(&e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_images_in_the_cache_are_taken() {
        let home = tempfile::tempdir().unwrap();
        let cache = home.path().join("cache/mcp");
        std::fs::create_dir_all(&cache).unwrap();
        let inside = cache.join("a.png");
        let audio = cache.join("b.mp3");
        let outside = home.path().join("c.png");
        for file in [&inside, &audio, &outside] {
            std::fs::write(file, b"x").unwrap();
        }
        let text = format!(
            "before\nMEDIA:{}\nMEDIA:{}\nMEDIA:{}\nMEDIA:{}/../c.png",
            inside.display(),
            audio.display(),
            outside.display(),
            cache.display()
        );
        let result = json!({ "result": text }).to_string();
        assert_eq!(
            media_paths(&result, &cache),
            [inside.canonicalize().unwrap()]
        );
        let error = json!({ "error": format!("MEDIA:{}", inside.display()) }).to_string();
        assert!(media_paths(&error, &cache).is_empty());
    }
}
