//! The `text_to_speech` tool (toolset `tts`): speaks a text with the configured service and
//! saves an Ogg/Opus voice note. The result carries the `MEDIA:` tag the reply uses to
//! attach it, with `[[audio_as_voice]]` first where the chat shows voice bubbles. Offered
//! only when a service is usable (a key, or an own server for openai).
//!
//! The model chooses `output_path`, so it gets the file tools' rules: under an allowed
//! root, no `..` component, no protected place, and an `.ogg`/`.opus` name (the file is
//! always Ogg/Opus).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::context::ToolCtx;
use super::error::ToolError;
use super::registry::{ToolEntry, check_fn, handler};
use super::tts::{SetupError, speaker};

/// Platforms whose chats show a voice note as a voice bubble.
pub const VOICE_PLATFORMS: &[&str] = &["telegram", "discord"];

pub fn schema() -> Value {
    json!({
        "name": "text_to_speech",
        "description": "Turn text into speech and save it as an Ogg/Opus voice note. The \
            result's media_tag, placed in your reply, sends the audio to the user (as a voice \
            message where the chat supports them). Markdown is not read aloud.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "What to say."},
                "output_path": {
                    "type": "string",
                    "description": "Where to save the .ogg file (optional; default: the \
                        audio cache in the Hermes home)."
                }
            },
            "required": ["text"]
        }
    })
}

pub fn entry() -> ToolEntry {
    ToolEntry::new(
        "text_to_speech",
        "tts",
        schema(),
        handler(
            |ctx: ToolCtx, args: Value| async move { Ok::<_, ToolError>(run(ctx, args).await) },
        ),
    )
    .with_check(check_fn(|ctx: &ToolCtx| {
        speaker(&ctx.speech.config, &ctx.env).is_ok()
    }))
    .with_emoji("🔊")
}

fn failure(message: impl Into<String>) -> String {
    json!({"success": false, "error": message.into()}).to_string()
}

async fn run(ctx: ToolCtx, args: Value) -> String {
    let Some(text) = args.get("text").and_then(Value::as_str) else {
        return failure("text is required (a string)");
    };
    if text.trim().is_empty() {
        return failure("text is empty");
    }
    let speaker = match speaker(&ctx.speech.config, &ctx.env) {
        Ok(speaker) => speaker,
        Err(e @ SetupError::Unsupported(_)) => return failure(e.to_string()),
        Err(e) => return failure(e.to_string()),
    };
    let path = match args.get("output_path").and_then(Value::as_str) {
        Some(raw) if !raw.trim().is_empty() => match chosen_path(&ctx, raw.trim()) {
            Ok(path) => path,
            Err(message) => return failure(message),
        },
        _ => default_path(&ctx),
    };
    let settings = Arc::clone(&ctx.speech);
    let spoken = speaker.speak_to_file(&settings.network, text, &path);
    let clip = tokio::select! {
        clip = spoken => clip,
        () = ctx.cancel.cancelled() => return failure("interrupted"),
    };
    match clip {
        Ok(clip) => {
            let voice_compatible = ctx
                .platform
                .as_deref()
                .or(Some(ctx.caller.platform.as_str()))
                .is_some_and(|p| VOICE_PLATFORMS.contains(&p));
            let shown = path.display().to_string();
            let media_tag = if voice_compatible {
                format!("[[audio_as_voice]]\nMEDIA:{shown}")
            } else {
                format!("MEDIA:{shown}")
            };
            json!({
                "success": true,
                "file_path": shown,
                "media_tag": media_tag,
                "provider": speaker.provider,
                "voice_compatible": voice_compatible,
                "duration_secs": (clip.duration_secs * 100.0).round() / 100.0,
            })
            .to_string()
        }
        Err(e) => {
            tracing::warn!(provider = speaker.provider, error = %e, "text_to_speech failed");
            failure(format!("Speech synthesis failed: {e}"))
        }
    }
}

/// `<home>/cache/audio/tts_<UTC time>.ogg`.
fn default_path(ctx: &ToolCtx) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%d_%H%M%S_%3f");
    ctx.home.audio_cache_dir().join(format!("tts_{stamp}.ogg"))
}

fn chosen_path(ctx: &ToolCtx, raw: &str) -> Result<PathBuf, String> {
    if Path::new(raw)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(format!("output_path {raw} has a '..' component"));
    }
    let extension = Path::new(raw)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if !matches!(extension.as_deref(), Some("ogg" | "opus")) {
        return Err(format!(
            "output_path {raw} must end in .ogg or .opus (the voice note is Ogg/Opus)"
        ));
    }
    let resolved = crate::tools::paths::resolve(ctx, raw).map_err(|e| e.to_string())?;
    if let Some(refusal) = crate::tools::paths::write_block_error(ctx, &resolved, raw) {
        return Err(refusal);
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::tts::tool::SpeechSettings;

    fn ctx(dir: &Path, provider: &str) -> ToolCtx {
        let mut ctx = ToolCtx::for_tests(dir);
        let mut settings = SpeechSettings::default();
        settings.config.tts.provider = provider.to_owned();
        settings.config.tts.openai.base_url = Some("http://127.0.0.1:9/v1".to_owned());
        ctx.speech = Arc::new(settings);
        ctx
    }

    #[tokio::test]
    async fn bad_arguments_and_paths_are_refused_before_any_request() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ctx(dir.path(), "openai");
        let cases = [
            (json!({}), "text is required"),
            (json!({"text": "  "}), "text is empty"),
            (json!({"text": "hi", "output_path": "a/../b.ogg"}), "'..'"),
            (
                json!({"text": "hi", "output_path": "voice.mp3"}),
                ".ogg or .opus",
            ),
            (
                json!({"text": "hi", "output_path": "/etc/x.ogg"}),
                "/etc/x.ogg",
            ),
        ];
        for (args, expected) in cases {
            let out: Value = serde_json::from_str(&run(ctx.clone(), args.clone()).await).unwrap();
            assert_eq!(out["success"], false, "{args}");
            let error = out["error"].as_str().unwrap();
            assert!(error.contains(expected), "{args}: {error}");
        }
    }

    #[test]
    fn the_tool_is_offered_only_with_a_usable_service() {
        let dir = tempfile::tempdir().unwrap();
        let check = entry().check_fn.unwrap();
        assert!(check(&ctx(dir.path(), "openai")));
        assert!(!check(&ctx(dir.path(), "edge")));
        let mut no_key = ctx(dir.path(), "elevenlabs");
        assert!(!check(&no_key));
        no_key
            .env
            .insert("ELEVENLABS_API_KEY".to_owned(), "xi-test".to_owned());
        assert!(check(&no_key));
    }
}
