//! Photos and voice from chats, turned into what the agent's turn is made of: photos become
//! image parts of the user message (or a description from `auxiliary.vision`), voice
//! messages and audio files become their transcript. What cannot be used is said to the
//! user in one line per attachment; a message left with nothing for the model is answered
//! with those lines alone.

pub mod image;
pub mod transcribe;
pub mod vision;

use std::collections::BTreeMap;
use std::path::Path;

use hermes_adapter::{MessageEvent, MessageType};

use crate::agent::message::ImagePart;
use crate::config::Config;
use vision::Route;

/// The turn an event becomes.
#[derive(Debug, Default)]
pub struct TurnInput {
    /// The user message's text: transcripts and descriptions first, then the event's text.
    pub text: String,
    pub images: Vec<ImagePart>,
    /// Transcripts to show in the chat before the answer (`stt.echo_transcripts`).
    pub echoes: Vec<String>,
    /// One line per attachment the model cannot get.
    pub notices: Vec<String>,
    /// Whether anything is left for the model; if not, the notices are the whole answer.
    pub usable: bool,
}

/// Whether the event carries an attachment this module handles.
pub fn has_media(event: &MessageEvent) -> bool {
    (0..event.media_paths.len()).any(|i| is_image(event, i) || is_speech(event, i))
}

/// Builds the turn for `event`. `base_text` is the event's text as the agent sees it (quotes
/// and attachment paths included); `model` is the model that will answer.
pub async fn prepare(
    event: &MessageEvent,
    base_text: &str,
    config: &Config,
    env: &BTreeMap<String, String>,
    model: &str,
) -> TurnInput {
    let mut input = TurnInput::default();
    let mut leading: Vec<String> = Vec::new();
    // Whether the model gets anything besides failure markers.
    let mut content = !event.text.trim().is_empty();
    let mut transcriber = None;
    for (index, path) in event.media_paths.iter().enumerate() {
        let mime_type = event.media_types.get(index).map_or("", String::as_str);
        if is_image(event, index) {
            content |= photo(config, model, Path::new(path), &mut input, &mut leading).await;
        } else if is_speech(event, index) {
            let found = transcriber.get_or_insert_with(|| transcribe::transcriber(config, env));
            let result = match found {
                Ok(service) => transcribe::transcribe(config, service, Path::new(path), mime_type)
                    .await
                    .map_err(|e| e.to_string()),
                Err(reason) => Err(reason.clone()),
            };
            match result {
                Ok(text) if !text.is_empty() => {
                    if config.media.stt.echo_transcripts {
                        input.echoes.push(format!("🎙️ \"{text}\""));
                    }
                    leading.push(format!("\"{text}\""));
                    content = true;
                }
                Ok(_) => {
                    input
                        .notices
                        .push("🎙️ I could not make out any speech in your voice message.".into());
                    leading.push("[The voice message held no recognisable speech.]".into());
                }
                Err(reason) => {
                    tracing::info!(platform = %event.source.platform, error = %reason, "voice message not transcribed");
                    input.notices.push(format!(
                        "🎙️ I can't listen to your voice message: {reason}."
                    ));
                    leading.push("[A voice message came that could not be transcribed.]".into());
                }
            }
        } else {
            // A document or video: the agent gets its path.
            content = true;
        }
    }
    input.usable = content;
    leading.push(base_text.to_owned());
    input.text = leading
        .into_iter()
        .filter(|part| !part.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    input
}

/// One photo: as an image part, as a description, or a notice. True when the model gets it.
async fn photo(
    config: &Config,
    model: &str,
    path: &Path,
    input: &mut TurnInput,
    leading: &mut Vec<String>,
) -> bool {
    let route = vision::route(config, model);
    if route == Route::Unseen {
        input.notices.push(format!(
            "📷 The model {model} can't see images, so it won't see your photo (set \
             auxiliary.vision to a model that can describe it, or model.supports_vision: true \
             if this one takes images)."
        ));
        leading.push("[A photo came that the model cannot see.]".into());
        return false;
    }
    let owned = path.to_path_buf();
    let loaded = tokio::task::spawn_blocking(move || image::load(&owned))
        .await
        .map_err(|e| e.to_string())
        .and_then(|result| result.map_err(|e| e.to_string()));
    let image = match loaded {
        Ok(image) => image,
        Err(reason) => {
            tracing::info!(path = %path.display(), error = %reason, "photo not usable");
            input
                .notices
                .push(format!("📷 I couldn't use your photo: {reason}."));
            leading.push("[A photo came that could not be read.]".into());
            return false;
        }
    };
    match route {
        Route::Native => {
            input.images.push(image);
            true
        }
        Route::Described => match vision::describe(config, &image).await {
            Ok(description) => {
                leading.push(format!(
                    "[Image, as described by the vision model: {description}]"
                ));
                true
            }
            Err(reason) => {
                tracing::warn!(error = %reason, "auxiliary.vision could not describe a photo");
                input.notices.push(format!(
                    "📷 Your photo could not be described (auxiliary.vision: {reason})."
                ));
                leading.push("[A photo came that could not be described.]".into());
                false
            }
        },
        Route::Unseen => false,
    }
}

/// An image by its own MIME type; by the message's type only when the MIME is unknown, so a
/// document sent beside a photo is not taken for one (Hermes's rule).
fn is_image(event: &MessageEvent, index: usize) -> bool {
    match event.media_types.get(index).filter(|m| !m.is_empty()) {
        Some(mime) => mime.starts_with("image/"),
        None => event.message_type == MessageType::Photo,
    }
}

/// Speech to transcribe: a voice note, an audio file, or audio by MIME type; never a file
/// sent as a document.
fn is_speech(event: &MessageEvent, index: usize) -> bool {
    if event.message_type == MessageType::Document {
        return false;
    }
    match event.media_types.get(index).filter(|m| !m.is_empty()) {
        Some(mime) => mime.starts_with("audio/"),
        None => matches!(event.message_type, MessageType::Voice | MessageType::Audio),
    }
}
