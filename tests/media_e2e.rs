//! Photos and voice from chats through the real binary, the fake Bot API, the fake model and
//! a fake OpenAI transcription server: a photo reaches a vision model as an image part in
//! each API mode (and only in its own turn), a model without vision gets the photo described
//! by `auxiliary.vision` or the user is told in one line, a voice note is transcribed and
//! the transcript is the user's text (echoed to the chat), a file over 25 MB is refused
//! before any upload, and with no transcription set up the user is told in one line.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::io::Cursor;

use base64::Engine;
use fake_telegram::{Attachment, Chat, MessageSpec, User};
use serde_json::Value;
use support::fake_model::Step;
use support::fake_stt::FakeStt;
use telegram_support::{Rig, start};

/// A real 8×6 PNG (small enough to be sent as it is).
fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn send_photo(rig: &Rig, caption: &str, bytes: Vec<u8>) {
    rig.telegram.push_message(
        MessageSpec::text(Chat::private(7), User::new(7, "Bob"), caption)
            .with_attachment(Attachment::Photo { bytes }),
    );
}

fn send_voice(rig: &Rig, bytes: Vec<u8>) {
    rig.telegram.push_message(
        MessageSpec::text(Chat::private(7), User::new(7, "Bob"), "")
            .with_attachment(Attachment::Voice { bytes }),
    );
}

/// Every image the request's user messages carry, as (media type, base64), in any of the
/// three wire formats.
fn images_in(body: &Value) -> Vec<(String, String)> {
    let messages = body
        .get("messages")
        .or_else(|| body.get("input"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut found = Vec::new();
    for part in messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
    {
        let data_url = match part["type"].as_str() {
            Some("image_url") => part["image_url"]["url"].as_str(),
            Some("input_image") => part["image_url"].as_str(),
            Some("image") => {
                found.push((
                    part["source"]["media_type"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    part["source"]["data"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                ));
                None
            }
            _ => None,
        };
        if let Some(url) = data_url {
            let (head, data) = url.split_once(',').expect("a data URL");
            let media_type = head
                .strip_prefix("data:")
                .and_then(|h| h.strip_suffix(";base64"))
                .expect("a base64 data URL");
            found.push((media_type.to_owned(), data.to_owned()));
        }
    }
    found
}

/// The whole request as text (for "does the model see this").
fn request_text(body: &Value) -> String {
    body.to_string()
}

/// The downloaded media under `home/cache` is the owner's only (issue 27: private on disk),
/// whatever the umask the test runs under (typically 022).
fn assert_cache_is_private(home: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut pending = vec![home.join("cache")];
    let mut files = 0;
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{} is mode {mode:04o}", path.display());
        if meta.is_dir() {
            pending.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .flatten()
                    .map(|e| e.path()),
            );
        } else {
            files += 1;
        }
    }
    assert!(files > 0, "no media was cached under {}", home.display());
}

async fn photo_reaches_the_model_as_an_image(mode: &str) {
    let rig = start(
        "",
        "",
        &[
            ("HERMES__MODEL__API_MODE", mode),
            ("HERMES__MODEL__SUPPORTS_VISION", "true"),
        ],
    )
    .await;
    let photo = support::images::png();
    rig.model.push(Step::text("A small gradient."));
    send_photo(&rig, "what is this?", photo.clone());
    let sent = rig.wait_sent_to(7, 1).await;
    assert_eq!(sent[0].text.replace('\\', ""), "A small gradient.");
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(
        images_in(&requests[0].body),
        vec![("image/png".to_owned(), b64(&photo))],
        "{mode}: the photo, unchanged, as the mode's image part"
    );
    assert!(request_text(&requests[0].body).contains("what is this?"));
    assert_cache_is_private(rig.home.path());

    // The next turn carries no image: the photo was for its own turn only.
    rig.model.push(Step::text("You're welcome."));
    rig.telegram
        .push_text(Chat::private(7), User::new(7, "Bob"), "thanks");
    rig.wait_sent_to(7, 2).await;
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 2);
    assert!(images_in(&requests[1].body).is_empty(), "{mode}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_reaches_chat_completions_as_image_url() {
    photo_reaches_the_model_as_an_image("chat_completions").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_reaches_anthropic_messages_as_an_image_block() {
    photo_reaches_the_model_as_an_image("anthropic_messages").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_reaches_responses_as_input_image() {
    photo_reaches_the_model_as_an_image("codex_responses").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_photo_is_reencoded_under_the_cap() {
    let rig = start("", "", &[("HERMES__MODEL__SUPPORTS_VISION", "true")]).await;
    let seed = 11u32;
    println!("seed {seed}");
    let mut state = seed;
    let noisy = image::RgbImage::from_fn(2600, 2000, |_, _| {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let [a, b, c, _] = state.to_le_bytes();
        image::Rgb([a, b, c])
    });
    let mut photo = Vec::new();
    image::DynamicImage::ImageRgb8(noisy)
        .write_to(&mut Cursor::new(&mut photo), image::ImageFormat::Png)
        .unwrap();
    assert!(
        photo.len() > 5 * 1024 * 1024,
        "the test photo must be over the cap"
    );
    send_photo(&rig, "look", photo);
    let sent = rig.wait_sent_to(7, 1).await;
    assert_eq!(rig.model.requests().len(), 1, "{sent:?}");
    let images = images_in(&rig.model.requests()[0].body);
    assert_eq!(images.len(), 1);
    assert_eq!(images[0].0, "image/jpeg");
    assert!(images[0].1.len() <= 5 * 1024 * 1024);
    let decoded = image::load_from_memory(
        &base64::engine::general_purpose::STANDARD
            .decode(&images[0].1)
            .unwrap(),
    )
    .unwrap();
    assert!(decoded.width() <= 2048 && decoded.height() <= 2048);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_for_a_model_without_vision_is_answered_in_one_line() {
    // `fake-model` is no known vision model and nothing says otherwise.
    let rig = start("", "", &[]).await;
    send_photo(&rig, "", support::images::png());
    let sent = rig.wait_sent_to(7, 1).await;
    let text = sent[0].text.replace('\\', "");
    assert!(text.contains("can't see images"), "{text}");
    assert!(text.contains("auxiliary.vision"), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(rig.model.requests().is_empty(), "the model is not asked");

    // With a caption there is still something to answer: the line, then the model's reply
    // to the caption, which says a photo came that it cannot see.
    rig.model.push(Step::text("I can only read your words."));
    send_photo(&rig, "what colour is it?", support::images::png());
    let sent = rig.wait_sent_to(7, 3).await;
    assert!(sent[1].text.replace('\\', "").contains("can't see images"));
    assert_eq!(
        sent[2].text.replace('\\', ""),
        "I can only read your words."
    );
    let seen = rig.model_saw();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].contains("what colour is it?"), "{seen:?}");
    assert!(seen[0].contains("cannot see"), "{seen:?}");
    assert!(images_in(&rig.model.requests()[0].body).is_empty());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auxiliary_vision_describes_the_photo_for_a_text_model() {
    let model = support::fake_model::FakeModel::start().await;
    let tail = format!(
        "auxiliary:\n  vision:\n    base_url: \"{}\"\n    model: eyes-model\n    api_key: sk-vision\n",
        model.base_url()
    );
    let rig = start("", &tail, &[("HERMES__MODEL__SUPPORTS_VISION", "false")]).await;
    model.push(Step::text("A purple gradient of eight by six pixels."));
    rig.model.push(Step::text("It is a tiny purple gradient."));
    let photo = support::images::png();
    send_photo(&rig, "what is it?", photo.clone());
    let sent = rig.wait_sent_to(7, 1).await;
    assert_eq!(
        sent[0].text.replace('\\', ""),
        "It is a tiny purple gradient."
    );
    let described = model.requests();
    assert_eq!(described.len(), 1);
    assert_eq!(described[0].model(), Some("eyes-model"));
    assert_eq!(
        described[0].header("authorization"),
        Some("Bearer sk-vision")
    );
    assert_eq!(
        images_in(&described[0].body),
        vec![("image/png".to_owned(), b64(&photo))]
    );
    let main = rig.model.requests();
    assert_eq!(main.len(), 1);
    assert!(
        images_in(&main[0].body).is_empty(),
        "the text model gets no pixels"
    );
    let seen = request_text(&main[0].body);
    assert!(
        seen.contains("A purple gradient of eight by six pixels."),
        "{seen}"
    );
    assert!(seen.contains("what is it?"), "{seen}");
    rig.stop().await;
}

fn stt_config(stt: &FakeStt) -> String {
    format!(
        "stt:\n  provider: openai\n  openai:\n    base_url: \"{}\"\n    model: whisper-1\n",
        stt.base_url()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_and_the_transcript_is_the_message() {
    let stt = FakeStt::start("turn on the kitchen lights").await;
    let rig = start("", &stt_config(&stt), &[]).await;
    let voice = b"OggS fake opus frames".to_vec();
    send_voice(&rig, voice.clone());
    // The echo, then the answer (the fake model echoes the user's text).
    let sent = rig.wait_sent_to(7, 2).await;
    assert_eq!(
        sent[0].text.replace('\\', ""),
        "🎙️ \"turn on the kitchen lights\""
    );
    assert!(
        sent[1].text.contains("turn on the kitchen lights"),
        "{:?}",
        sent[1].text
    );
    let uploads = stt.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].bytes, voice);
    assert_eq!(uploads[0].model, "whisper-1");
    assert!(
        uploads[0].file_name.ends_with(".ogg"),
        "{}",
        uploads[0].file_name
    );
    assert_eq!(uploads[0].response_format.as_deref(), Some("json"));
    // No stt.openai.api_key: the OpenAI key of the environment is used.
    assert_eq!(uploads[0].authorization, "Bearer sk-test");
    let seen = rig.model_saw();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].starts_with("\"turn on the kitchen lights\""),
        "{seen:?}"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transcripts_are_not_echoed_when_echo_is_off() {
    let stt = FakeStt::start("quiet please").await;
    let tail = format!("{}stt_echo_transcripts: false\n", stt_config(&stt));
    let rig = start("", &tail, &[]).await;
    rig.model.push(Step::text("Done."));
    send_voice(&rig, b"OggS".to_vec());
    let sent = rig.wait_sent_to(7, 1).await;
    assert_eq!(sent[0].text.replace('\\', ""), "Done.");
    assert!(rig.model_saw()[0].contains("quiet please"));
    rig.stop().await;
    assert_eq!(stt.uploads().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audio_file_over_25_mb_is_refused_before_upload() {
    let stt = FakeStt::start("never").await;
    let local = tempfile::tempdir().unwrap();
    let rig = start("local_mode: true", &stt_config(&stt), &[]).await;
    rig.telegram.enable_local_mode(local.path());
    send_voice(&rig, vec![0u8; 26 * 1024 * 1024]);
    let sent = rig.wait_sent_to(7, 1).await;
    let text = sent[0].text.replace('\\', "");
    assert!(text.contains("25 MB"), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert_eq!(stt.requests(), 0, "nothing was uploaded");
    assert!(rig.model.requests().is_empty());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_transcription_set_up_the_user_is_told_in_one_line() {
    // Hermes's default provider (local) cannot run in hermesd.
    let rig = start("", "", &[]).await;
    send_voice(&rig, b"OggS".to_vec());
    let sent = rig.wait_sent_to(7, 1).await;
    let text = sent[0].text.replace('\\', "");
    assert!(
        text.contains("no transcription service is set up"),
        "{text}"
    );
    assert!(text.contains("stt.provider"), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(rig.model.requests().is_empty());
    rig.stop().await;
}

mod slack_support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slack_file_reaches_the_model_as_an_image() {
    use serde_json::json;
    let run = slack_support::SlackRun::start(
        &[],
        &[
            ("HERMES__MODEL__SUPPORTS_VISION", "true"),
            ("HERMES__MODEL__API_MODE", "codex_responses"),
        ],
    )
    .await;
    let photo = support::images::png();
    let file = run.slack.add_file("chart.png", "image/png", photo.clone());
    let ts = run.slack.next_ts();
    let mut event = fake_slack::events::dm("D0PIC", slack_support::OWNER, "what is this?", &ts);
    event["subtype"] = json!("file_share");
    event["files"] = json!([file]);
    run.slack.push_event(event);
    run.posts_in("D0PIC", 1).await;
    let requests = run.model_requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        images_in(&requests[0].body),
        vec![("image/png".to_owned(), b64(&photo))]
    );
    run.stop().await;
}

#[path = "discord_rig/mod.rs"]
mod discord_rig;

/// An audio file (not a voice note) from Discord, transcribed by the `groq` provider: its
/// key and base URL come from GROQ_API_KEY / GROQ_BASE_URL, as in Hermes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discord_audio_file_is_transcribed_through_groq() {
    let stt = FakeStt::start("meeting moved to friday").await;
    let mut rig = discord_rig::Rig::new(std::time::Duration::from_secs(30)).await;
    rig.append_config("stt:\n  provider: groq\n");
    rig.set_env("GROQ_API_KEY", "gsk-test");
    rig.set_env("GROQ_BASE_URL", &stt.base_url());
    rig.launch().await;
    let dm = rig.dm(&rig.owner);
    let audio = b"ID3 fake mp3 frames".to_vec();
    rig.fake.push_message(
        fake_discord::Incoming::new(&dm, &rig.owner, "").with_attachment(
            "memo.mp3",
            "audio/mpeg",
            &audio,
        ),
    );
    let texts = rig.wait_texts(&dm, 2).await;
    assert_eq!(texts[0], "🎙️ \"meeting moved to friday\"");
    assert!(texts[1].contains("meeting moved to friday"), "{texts:?}");
    let uploads = stt.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].bytes, audio);
    assert_eq!(uploads[0].model, "whisper-large-v3-turbo");
    assert_eq!(uploads[0].authorization, "Bearer gsk-test");
    assert!(
        uploads[0].file_name.ends_with(".mp3"),
        "{}",
        uploads[0].file_name
    );
    rig.stop().await;
}

/// kill -9 while the model is answering a photo: the restarted daemon resumes the turn and
/// sends the same image part again (the pixels were kept under the home, not in state.db),
/// then forgets them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_resumed_after_a_crash_sends_its_photo_again() {
    let mut rig = start("", "", &[("HERMES__MODEL__SUPPORTS_VISION", "true")]).await;
    let photo = support::images::png();
    rig.model.push(Step::Stall);
    send_photo(&rig, "what is this?", photo.clone());
    rig.model.wait_for_requests(1, telegram_support::WAIT).await;
    let expected = vec![("image/png".to_owned(), b64(&photo))];
    assert_eq!(images_in(&rig.model.requests()[0].body), expected);

    rig.model.push(Step::text("A small gradient, after all."));
    rig.crash_and_restart().await;
    let sent = rig.wait_sent_to(7, 1).await;
    assert_eq!(
        sent[0].text.replace('\\', ""),
        "A small gradient, after all."
    );
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 2, "{requests:#?}");
    assert_eq!(
        images_in(&requests[1].body),
        expected,
        "the resumed turn carries the photo"
    );
    assert!(request_text(&requests[1].body).contains("what is this?"));
    let kept = rig.home.path().join("cache/turn_images");
    let left: Vec<_> = std::fs::read_dir(&kept)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "the photo is forgotten after the turn: {left:?}"
    );
    rig.stop().await;
}

/// `stt.provider: elevenlabs`: the voice note goes to Scribe's own API with the key from
/// ELEVENLABS_API_KEY and the configured options, and its transcript is the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_is_transcribed_by_elevenlabs() {
    let stt = FakeStt::start("book a table for two").await;
    let tail = format!(
        "stt:\n  provider: elevenlabs\n  elevenlabs:\n    base_url: \"{}\"\n    language_code: eng\n    diarize: true\n",
        stt.base_url()
    );
    let rig = start("", &tail, &[("ELEVENLABS_API_KEY", "xi-test-key")]).await;
    let voice = b"OggS fake opus frames".to_vec();
    send_voice(&rig, voice.clone());
    let sent = rig.wait_sent_to(7, 2).await;
    assert_eq!(
        sent[0].text.replace('\\', ""),
        "🎙️ \"book a table for two\""
    );
    let uploads = stt.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].bytes, voice);
    assert_eq!(uploads[0].model, "scribe_v2");
    assert_eq!(uploads[0].authorization, "xi-test-key");
    for field in [
        ("language_code", "eng"),
        ("diarize", "true"),
        ("tag_audio_events", "false"),
    ] {
        assert!(
            uploads[0]
                .fields
                .contains(&(field.0.to_owned(), field.1.to_owned())),
            "{field:?} in {:?}",
            uploads[0].fields
        );
    }
    assert!(
        rig.model_saw()[0].starts_with("\"book a table for two\""),
        "{:?}",
        rig.model_saw()
    );
    rig.stop().await;
}
