//! `/voice`: whether this chat's replies are spoken. `on` (or `enable`) answers voice notes
//! with voice notes, `tts` speaks every reply, `off` (or `disable`) none, `status` tells;
//! a bare `/voice` switches between off and on. Saved per chat in
//! `gateway_voice_mode.json` (`voice_mode.rs`). Discord's voice channels (`channel`, `join`,
//! `leave`) are not available in hermesd. Changing the setting costs the operator speech
//! requests for the whole chat, so guests may only ask for the status.

use super::{CommandCtx, Reply};
use crate::gateway::router::authority::Gate;
use crate::gateway::voice_mode::{self, VoiceMode};

pub(super) fn gate(args: &str) -> Gate {
    match args.split_whitespace().next() {
        Some("status") => Gate::Open,
        _ => Gate::AllowedUsersOnly("it changes whether this chat's replies are spoken"),
    }
}

pub(super) fn apply(ctx: &CommandCtx<'_>) -> Reply {
    let source = &ctx.job.event.source;
    let path = ctx.router.home.voice_mode_json();
    let key = voice_mode::chat_key(&source.platform, &source.chat_id);
    let current = voice_mode::load(&path).get(&key).copied();
    let arg = ctx.command.args.trim().to_lowercase();
    let wanted = match arg.as_str() {
        "on" | "enable" => VoiceMode::VoiceOnly,
        "off" | "disable" => VoiceMode::Off,
        "tts" => VoiceMode::All,
        "" => match current {
            None | Some(VoiceMode::Off) => VoiceMode::VoiceOnly,
            Some(_) => VoiceMode::Off,
        },
        "status" => return Reply::Text(status_text(ctx, current)),
        "channel" | "join" | "leave" => {
            return Reply::Text(
                "Voice channels are not available in hermesd; `/voice on` answers voice \
                 messages with voice messages instead."
                    .to_owned(),
            );
        }
        _ => return Reply::Text(usage().to_owned()),
    };
    if let Err(e) = voice_mode::set(&path, &key, wanted) {
        tracing::warn!(error = %e, "cannot save the /voice setting");
        return Reply::Text("⚠️ I couldn't save the voice setting; nothing changed.".to_owned());
    }
    let mut text = match wanted {
        VoiceMode::VoiceOnly => "🔊 Voice replies are on: I answer voice messages with voice.",
        VoiceMode::All => "🔊 Every reply in this chat will be spoken.",
        VoiceMode::Off => "🔇 Voice replies are off: I answer in text.",
    }
    .to_owned();
    if wanted != VoiceMode::Off
        && let Err(reason) =
            crate::tools::tts::speaker(&ctx.router.live().config.speech, &ctx.router.live().env)
    {
        text.push_str(&format!(
            "\n⚠️ But no speech service can be used yet: {reason}."
        ));
    }
    if arg.is_empty() {
        text.push_str("\n\n");
        text.push_str(usage());
    }
    Reply::Text(text)
}

fn status_text(ctx: &CommandCtx<'_>, current: Option<VoiceMode>) -> String {
    let auto = ctx.router.live().config.speech.auto_tts;
    match current {
        Some(VoiceMode::VoiceOnly) => "🔊 Voice replies: on (voice messages get voice)".to_owned(),
        Some(VoiceMode::All) => "🔊 Voice replies: every reply is spoken".to_owned(),
        Some(VoiceMode::Off) => "🔇 Voice replies: off".to_owned(),
        None if auto => "🔊 Voice replies: on by default (voice.auto_tts)".to_owned(),
        None => "🔇 Voice replies: off (the default)".to_owned(),
    }
}

fn usage() -> &'static str {
    "Usage: `/voice on` (voice messages get voice), `/voice tts` (every reply), `/voice off`, \
     `/voice status`."
}
