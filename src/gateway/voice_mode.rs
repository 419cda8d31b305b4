//! Each chat's `/voice` setting, kept where Hermes keeps it: `gateway_voice_mode.json` in the
//! home, one JSON object mapping `"<platform>:<chat_id>"` to `off`, `voice_only` or `all`
//! (indented by two spaces, as Python's `json.dumps(indent=2)` writes it, so both programs
//! read each other's file). Invalid values and keys without a `:` are dropped on load; a
//! missing or unreadable file is an empty map. Writes go through a temporary file renamed
//! into place, mode 0600.
//!
//! And the rule for when a reply is spoken ([`speaks`]).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use serde_json::Value;

/// One chat's setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoiceMode {
    /// Never spoken.
    Off,
    /// Voice notes are answered with voice notes (`/voice on`).
    VoiceOnly,
    /// Every reply is spoken (`/voice tts`).
    All,
}

impl VoiceMode {
    pub fn name(self) -> &'static str {
        match self {
            VoiceMode::Off => "off",
            VoiceMode::VoiceOnly => "voice_only",
            VoiceMode::All => "all",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "off" => Some(VoiceMode::Off),
            "voice_only" => Some(VoiceMode::VoiceOnly),
            "all" => Some(VoiceMode::All),
            _ => None,
        }
    }
}

/// The file's key for a chat.
pub fn chat_key(platform: &str, chat_id: &str) -> String {
    format!("{platform}:{chat_id}")
}

/// Every chat's setting from `path`.
pub fn load(path: &Path) -> BTreeMap<String, VoiceMode> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return BTreeMap::new();
    };
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&text) else {
        tracing::warn!(path = %path.display(), "the /voice settings file is not a JSON object; ignoring it");
        return BTreeMap::new();
    };
    let mut modes = BTreeMap::new();
    for (key, value) in map {
        if !key.contains(':') {
            tracing::warn!(key, "dropping a /voice setting whose key names no platform");
            continue;
        }
        if let Some(mode) = value.as_str().and_then(VoiceMode::from_name) {
            modes.insert(key, mode);
        }
    }
    modes
}

/// Serialises writers within this process (the file is read-modify-written).
static WRITE: Mutex<()> = Mutex::new(());

/// Sets one chat's mode and writes the file.
pub fn set(path: &Path, key: &str, mode: VoiceMode) -> std::io::Result<()> {
    let _guard = WRITE.lock().unwrap_or_else(|e| e.into_inner());
    let mut modes = load(path);
    modes.insert(key.to_owned(), mode);
    save(path, &modes)
}

fn save(path: &Path, modes: &BTreeMap<String, VoiceMode>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let object: serde_json::Map<String, Value> = modes
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.name())))
        .collect();
    let text = serde_json::to_string_pretty(&Value::Object(object))?;
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Whether a reply is spoken: `off` never; `all` always; `voice_only` (or no setting with
/// `voice.auto_tts`) when the message was a voice note. Never for an empty reply, an error
/// (`Error:`), or a reply that already carries media (the agent's own `text_to_speech`
/// among them).
pub fn speaks(mode: Option<VoiceMode>, auto_tts: bool, voice_input: bool, reply: &str) -> bool {
    let wanted = match mode {
        Some(VoiceMode::Off) => false,
        Some(VoiceMode::All) => true,
        Some(VoiceMode::VoiceOnly) => voice_input,
        None => auto_tts && voice_input,
    };
    let reply = reply.trim();
    wanted
        && !reply.is_empty()
        && !reply.starts_with("Error:")
        && crate::gateway::media_tags::extract(reply).paths.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_python_wrote_loads_and_ours_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway_voice_mode.json");
        // As Python's json.dumps(indent=2) writes it, with one invalid value and one
        // legacy key without a platform.
        let python = "{\n  \"telegram:123\": \"voice_only\",\n  \"discord:9\": \"all\",\n  \
                      \"slack:C1\": \"loud\",\n  \"456\": \"all\"\n}";
        std::fs::write(&path, python).unwrap();
        let modes = load(&path);
        assert_eq!(
            modes,
            BTreeMap::from([
                ("discord:9".to_owned(), VoiceMode::All),
                ("telegram:123".to_owned(), VoiceMode::VoiceOnly),
            ])
        );
        set(&path, "telegram:123", VoiceMode::Off).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            written,
            "{\n  \"discord:9\": \"all\",\n  \"telegram:123\": \"off\"\n}"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_missing_or_broken_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gateway_voice_mode.json");
        assert!(load(&path).is_empty());
        std::fs::write(&path, "[1, 2]").unwrap();
        assert!(load(&path).is_empty());
        std::fs::write(&path, "{not json").unwrap();
        assert!(load(&path).is_empty());
    }

    #[test]
    fn when_a_reply_is_spoken() {
        use VoiceMode::*;
        // (mode, auto_tts, voice input) → spoken
        let table = [
            (None, false, true, false),
            (None, true, true, true),
            (None, true, false, false),
            (Some(Off), true, true, false),
            (Some(VoiceOnly), false, true, true),
            (Some(VoiceOnly), false, false, false),
            (Some(All), false, false, true),
        ];
        for (mode, auto, voice, spoken) in table {
            assert_eq!(
                speaks(mode, auto, voice, "Hello there"),
                spoken,
                "{mode:?} {auto} {voice}"
            );
        }
        assert!(!speaks(Some(All), true, true, "  "));
        assert!(!speaks(Some(All), true, true, "Error: the model failed"));
        assert!(!speaks(
            Some(All),
            true,
            true,
            "Here it is\nMEDIA:/tmp/x.ogg"
        ));
    }
}
