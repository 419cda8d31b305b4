//! The spoken reply: when the chat's `/voice` setting (or `voice.auto_tts` for a voice note)
//! asks for it, the finished reply is synthesized before it is recorded, and the recorded
//! reply names the clip with Hermes's own directive (`[[audio_as_voice]]` and a `MEDIA:`
//! line) ahead of the text. Delivery then sends the voice note first and the text with it or
//! after it. Any failure (no service, a refused key, a rate limit, a timeout) is logged and
//! the reply goes as text: a voice note is never worth losing the answer.
//!
//! The clip's name comes from the event, so a turn resumed after a crash writes the same
//! file again rather than a second one.

use std::time::Duration;

use hermes_adapter::{MessageEvent, MessageType};
use sha2::{Digest, Sha256};

use crate::agent::AgentDeps;
use crate::gateway::router::live::Live;
use crate::gateway::voice_mode;

/// Longest a spoken reply may hold up the answer.
const SPEAK_DEADLINE: Duration = Duration::from_secs(60);

/// `reply`, prefixed with a voice note of itself when this chat's replies are spoken.
pub(super) async fn maybe_speak(
    live: &Live,
    deps: &AgentDeps,
    event: &MessageEvent,
    reply: String,
) -> String {
    let speech = &live.config.speech;
    // Without a usable provider nothing is spoken, and the settings file is not even read.
    // The HTTP API answers in JSON: nothing to play there.
    if !speech.tts.provider_supported()
        || event.source.platform == crate::gateway::router::API_PLATFORM
    {
        return reply;
    }
    let source = &event.source;
    let key = voice_mode::chat_key(&source.platform, &source.chat_id);
    let mode = voice_mode::load(&deps.home.voice_mode_json())
        .get(&key)
        .copied();
    let voice_input = event.message_type == MessageType::Voice;
    if !voice_mode::speaks(mode, speech.auto_tts, voice_input, &reply) {
        return reply;
    }
    let speaker = match crate::tools::tts::speaker(speech, &live.env) {
        Ok(speaker) => speaker,
        Err(reason) => {
            tracing::warn!(platform = %source.platform, %reason, "reply not spoken");
            return reply;
        }
    };
    let path = deps.home.audio_cache_dir().join(format!(
        "reply_{}.ogg",
        clip_name(&source.platform, &event.event_id)
    ));
    let spoken = tokio::time::timeout(
        SPEAK_DEADLINE,
        speaker.speak_to_file(&live.config.network, &reply, &path),
    )
    .await;
    match spoken {
        Ok(Ok(clip)) => {
            tracing::info!(platform = %source.platform, provider = speaker.provider,
                seconds = clip.duration_secs, bytes = clip.bytes, "reply spoken");
            format!("[[audio_as_voice]]\nMEDIA:{}\n{reply}", path.display())
        }
        Ok(Err(error)) => {
            tracing::warn!(platform = %source.platform, provider = speaker.provider, %error,
                "reply not spoken; answering in text");
            reply
        }
        Err(_) => {
            tracing::warn!(platform = %source.platform, provider = speaker.provider,
                "the speech service took too long; answering in text");
            reply
        }
    }
}

/// A file name from the event's identity (hex, 16 characters).
fn clip_name(platform: &str, event_id: &str) -> String {
    let digest = Sha256::digest(format!("{platform}\n{event_id}").as_bytes());
    hex::encode(&digest[..8])
}
