//! Photos and voice from chats, turned into what the agent's turn is made of: photos become
//! image parts of the user message (or a description from `auxiliary.vision`), voice
//! messages and audio files become their transcript. What cannot be used is said to the
//! user in one line per attachment; a message left with nothing for the model is answered
//! with those lines alone.

pub mod transcribe;

pub use crate::agent::media::{image, vision};

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

/// The photos of one message together, as base64: Anthropic refuses requests over 32 MB
/// (https://docs.anthropic.com/en/api/overview#request-size-limits), and the history and
/// tools need room too. A ten-photo Telegram album of ordinary photos is far below it.
pub const MAX_TURN_IMAGES_BASE64: usize = 24 * 1024 * 1024;

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
    prepare_within(event, base_text, config, env, model, MAX_TURN_IMAGES_BASE64).await
}

/// [`prepare`] with the photos' total size capped at `image_budget` base64 bytes.
async fn prepare_within(
    event: &MessageEvent,
    base_text: &str,
    config: &Config,
    env: &BTreeMap<String, String>,
    model: &str,
    image_budget: usize,
) -> TurnInput {
    let mut input = TurnInput::default();
    let mut leading: Vec<String> = Vec::new();
    // Whether the model gets anything besides failure markers.
    let mut content = !event.text.trim().is_empty();
    let mut transcriber = None;
    for (index, path) in event.media_paths.iter().enumerate() {
        let mime_type = event.media_types.get(index).map_or("", String::as_str);
        if is_image(event, index) {
            let place = Placement {
                input: &mut input,
                leading: &mut leading,
                budget: image_budget,
            };
            content |= photo(config, model, Path::new(path), place).await;
        } else if is_speech(event, index) {
            let found = transcriber.get_or_insert_with(|| transcribe::transcriber(config, env));
            let result = match found {
                Ok(service) => transcribe::transcribe(config, service, Path::new(path), mime_type)
                    .await
                    .map_err(|e| e.to_string()),
                Err(reason) => Err(reason.to_string()),
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
async fn photo(config: &Config, model: &str, path: &Path, place: Placement<'_>) -> bool {
    let Placement {
        input,
        leading,
        budget,
    } = place;
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
            let used: usize = input.images.iter().map(|i| i.base64().len()).sum();
            if used + image.base64().len() > budget {
                input.notices.push(format!(
                    "📷 One photo was left out: the photos of a message may take {} MB together.",
                    budget / (1024 * 1024)
                ));
                leading.push("[A photo came that was left out for size.]".into());
                return false;
            }
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

/// Where a photo's outcome goes.
struct Placement<'a> {
    input: &'a mut TurnInput,
    leading: &'a mut Vec<String>,
    /// Base64 bytes all the message's image parts may take together.
    budget: usize,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ImageInputMode;
    use hermes_adapter::SessionSource;

    fn png(dir: &Path, name: &str, shade: u8) -> String {
        let path = dir.join(name);
        ::image::RgbImage::from_pixel(4, 4, ::image::Rgb([shade, 0, 0]))
            .save(&path)
            .unwrap();
        path.display().to_string()
    }

    fn album(paths: Vec<String>) -> MessageEvent {
        let mut event = MessageEvent::text("e1", SessionSource::dm("telegram", "7", "7"), "");
        event.message_type = MessageType::Photo;
        event.media_types = vec!["image/png".to_owned(); paths.len()];
        event.media_paths = paths;
        event
    }

    #[tokio::test]
    async fn photos_past_the_budget_are_left_out_with_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let event = album(vec![
            png(dir.path(), "a.png", 10),
            png(dir.path(), "b.png", 200),
        ]);
        let mut config = Config::default();
        config.media.image_input_mode = ImageInputMode::Native;
        let one = image::load(Path::new(&event.media_paths[0])).unwrap();
        let budget = one.base64().len();
        let input = prepare_within(&event, "", &config, &BTreeMap::new(), "m", budget).await;
        assert_eq!(input.images, vec![one]);
        assert_eq!(input.notices.len(), 1, "{:?}", input.notices);
        assert!(input.notices[0].contains("left out"));
        assert!(input.usable);
        assert!(input.text.contains("left out for size"), "{}", input.text);

        let whole = prepare(&event, "", &config, &BTreeMap::new(), "m").await;
        assert_eq!(whole.images.len(), 2);
        assert!(whole.notices.is_empty());
    }

    #[tokio::test]
    async fn a_document_is_not_taken_for_a_photo_or_speech() {
        let mut event = album(vec!["/tmp/report.pdf".to_owned()]);
        event.media_types = vec!["application/pdf".to_owned()];
        assert!(!has_media(&event));
        event.message_type = MessageType::Document;
        event.media_types = vec!["audio/mpeg".to_owned()];
        assert!(!has_media(&event), "audio sent as a document is a file");
        event.message_type = MessageType::Voice;
        event.media_types = vec![String::new()];
        assert!(has_media(&event), "a voice note without a MIME type");
    }
}
