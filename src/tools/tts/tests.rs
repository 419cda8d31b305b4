//! Which service the settings name, the text limits, and how failures read.

use std::collections::BTreeMap;

use super::*;

fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn the_provider_decides_endpoint_key_and_limits() {
    let mut config = SpeechConfig::default();
    assert_eq!(
        speaker(&config, &env(&[("OPENAI_API_KEY", "sk")])),
        Err(SetupError::Unsupported("edge".into()))
    );

    config.tts.provider = "openai".into();
    assert_eq!(speaker(&config, &env(&[])), Err(SetupError::NoOpenAiKey));
    let s = speaker(
        &config,
        &env(&[
            ("OPENAI_API_KEY", "sk-b"),
            ("VOICE_TOOLS_OPENAI_KEY", "sk-a"),
        ]),
    )
    .unwrap();
    assert_eq!(s.api_key.unwrap().expose(), "sk-a");
    assert_eq!(s.base_url, OPENAI_BASE_URL);
    assert_eq!(
        (s.model.as_str(), s.voice.as_str()),
        ("gpt-4o-mini-tts", "alloy")
    );
    assert_eq!((s.speed, s.max_chars, s.custom_server), (None, 4096, false));

    // A server of one's own needs no key; speed falls back to tts.speed and is clamped.
    config.tts.openai.base_url = Some("http://127.0.0.1:8880/v1".into());
    config.tts.speed = 9.0;
    let s = speaker(&config, &env(&[])).unwrap();
    assert!(s.api_key.is_none() && s.custom_server);
    assert_eq!(s.speed, Some(4.0));

    config.tts.provider = "elevenlabs".into();
    assert_eq!(
        speaker(&config, &env(&[])),
        Err(SetupError::NoElevenLabsKey)
    );
    let s = speaker(&config, &env(&[("ELEVENLABS_API_KEY", "xi")])).unwrap();
    assert_eq!(s.base_url, ELEVENLABS_BASE_URL);
    assert_eq!(s.max_chars, 10_000);
    config.tts.elevenlabs.model_id = "eleven_v3".into();
    assert_eq!(
        speaker(&config, &env(&[("ELEVENLABS_API_KEY", "xi")]))
            .unwrap()
            .max_chars,
        5_000
    );
    config.tts.elevenlabs.max_text_length = Some(12);
    assert_eq!(
        speaker(&config, &env(&[("ELEVENLABS_API_KEY", "xi")]))
            .unwrap()
            .max_chars,
        12
    );
}

#[test]
fn failures_read_as_sentences_without_the_body_text() {
    let cases = [
        (401, None, None, "refused the key (HTTP 401)"),
        (429, Some(7), None, "rate-limiting requests; retry in 7 s"),
        (429, None, None, "rate-limiting requests"),
        (503, None, None, "failed (HTTP 503)"),
        (
            400,
            None,
            Some("invalid_voice".to_owned()),
            "refused the request (HTTP 400: invalid_voice)",
        ),
    ];
    for (status, wait, code, expected) in cases {
        let text = http_error(status, wait, code).to_string();
        assert!(text.contains(expected), "{status}: {text}");
    }
    assert_eq!(
        error_code(
            r#"{"error":{"message":"Incorrect API key sk-123","type":"invalid_request_error","code":"invalid_api_key"}}"#
        ),
        Some("invalid_api_key".to_owned())
    );
    assert_eq!(
        error_code(r#"{"detail":{"status":"too_many_concurrent_requests","message":"..."}}"#),
        Some("too_many_concurrent_requests".to_owned())
    );
    assert_eq!(
        error_code(r#"{"detail":[{"type":"missing","loc":["body","text"]}]}"#),
        Some("missing".to_owned())
    );
    // Free text is never taken as a code.
    assert_eq!(error_code(r#"{"error":{"code":"key sk-1 is bad"}}"#), None);
    assert_eq!(error_code("<html>"), None);
}

#[tokio::test]
async fn nothing_left_to_say_is_not_sent() {
    let mut config = SpeechConfig::default();
    config.tts.provider = "openai".into();
    // Port 9 (discard) is never contacted: the text is empty once the code block is gone.
    config.tts.openai.base_url = Some("http://127.0.0.1:9/v1".into());
    let s = speaker(&config, &env(&[])).unwrap();
    let err = s
        .synthesize(&NetSettings::default(), "```\ncode only\n```")
        .await
        .unwrap_err();
    assert!(matches!(err, TtsError::NoText), "{err}");
}

#[tokio::test]
async fn voice_notes_are_written_for_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache/audio/x.ogg");
    write_private(&path, b"OggS").await.unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let dir_mode = std::fs::metadata(path.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    assert_eq!(std::fs::read(&path).unwrap(), b"OggS");
}
