//! Spoken replies through the real binary (issue 32): a voice note in gets an Ogg/Opus voice
//! note out (Telegram's `sendVoice`, which the fake Bot API checks is Ogg/Opus; Discord's
//! voice message, which the fake checks against Discord's rules) with the text alongside;
//! `/voice off` makes it text again and is saved in `gateway_voice_mode.json`; a speech
//! service that rate-limits or fails still leaves a text answer; a spoken reply cut off by
//! kill -9 is sent once after the restart. And the two speech APIs' error cases, each
//! becoming one sentence, against the wire-level fake.

#[path = "discord_rig/mod.rs"]
mod discord_rig;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::collections::BTreeMap;

use fake_telegram::{Attachment, Chat, MessageSpec, User};
use support::fake_model::Step;
use support::fake_stt::FakeStt;
use support::fake_tts::{FakeTts, Fault};
use telegram_support::{Rig, start};

fn tts_config(stt: &FakeStt, tts: &FakeTts) -> String {
    format!(
        "stt:\n  provider: openai\n  openai:\n    base_url: \"{}\"\nstt_echo_transcripts: false\n\
         tts:\n  provider: openai\n  openai:\n    base_url: \"{}\"\n    voice: nova\n\
         voice:\n  auto_tts: true\n",
        stt.base_url(),
        tts.openai_base_url()
    )
}

fn send_voice(rig: &Rig) {
    rig.telegram.push_message(
        MessageSpec::text(Chat::private(7), User::new(7, "Bob"), "").with_attachment(
            Attachment::Voice {
                bytes: b"OggS a voice note".to_vec(),
            },
        ),
    );
}

fn send_text(rig: &Rig, text: &str) {
    rig.telegram.push_message(MessageSpec::text(
        Chat::private(7),
        User::new(7, "Bob"),
        text,
    ));
}

/// Successful sendVoice calls so far.
fn voices(rig: &Rig) -> Vec<fake_telegram::Call> {
    rig.telegram
        .calls_of("sendVoice")
        .into_iter()
        .filter(|c| c.status == Some(200))
        .collect()
}

/// Waits for a text message to chat 7 containing `needle`.
async fn wait_text(rig: &Rig, needle: &str) {
    rig.wait_for(&format!("a message containing {needle:?}"), |rig| {
        rig.sent_to(7)
            .iter()
            .any(|m| m.text.replace('\\', "").contains(needle))
            .then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_voice_in_voice_out_then_off_and_a_failing_service() {
    let stt = FakeStt::start("what time is it").await;
    let tts = FakeTts::start("sk-test").await;
    let rig = start("", &tts_config(&stt, &tts), &[]).await;

    // A voice note in (voice.auto_tts): a voice bubble out, the text as its caption.
    rig.model.push(Step::text("It is **noon** now."));
    send_voice(&rig);
    let voice = rig
        .wait_for("a voice note", |rig| voices(rig).into_iter().next())
        .await;
    assert_eq!(voice.i64("chat_id"), Some(7));
    assert_eq!(voice.files.len(), 1);
    assert_eq!(voice.files[0].field, "voice");
    assert_eq!(voice.files[0].audio_format, "ogg_opus", "{voice:?}");
    assert_eq!(voice.files[0].content_type.as_deref(), Some("audio/ogg"));
    // 15 characters at the fake's 60 ms each: 0.9 s, sent as a whole second.
    assert_eq!(voice.i64("duration"), Some(1));
    let caption = voice.str("caption").unwrap_or_default().replace('\\', "");
    assert!(caption.contains("It is *noon* now."), "{caption}");
    let requests = tts.requests();
    assert_eq!(requests.len(), 1);
    // Markdown is not read aloud; an own server is asked for WAV with the config's voice.
    assert_eq!(requests[0].body["input"], "It is noon now.");
    assert_eq!(requests[0].body["voice"], "nova");
    assert_eq!(requests[0].body["response_format"], "wav");
    assert_eq!(requests[0].key.as_deref(), Some("sk-test"));

    // `/voice off`: answered in text, saved where Hermes keeps it.
    send_text(&rig, "/voice off");
    wait_text(&rig, "Voice replies are off").await;
    // The caption carried the text: no separate text message came before this one.
    assert!(
        !rig.sent_to(7).iter().any(|m| m.text.contains("noon")),
        "{:?}",
        rig.sent_to(7)
    );
    let saved: BTreeMap<String, String> = serde_json::from_str(
        &std::fs::read_to_string(rig.home.path().join("gateway_voice_mode.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved["telegram:7"], "off");
    rig.model.push(Step::text("Plain answer."));
    send_voice(&rig);
    wait_text(&rig, "Plain answer.").await;
    assert_eq!(voices(&rig).len(), 1);
    assert_eq!(tts.requests().len(), 1);

    // `/voice tts` with a rate-limiting service: the text answer still arrives.
    send_text(&rig, "/voice tts");
    wait_text(&rig, "Every reply in this chat will be spoken").await;
    tts.fail_next(Fault::RateLimited, 1);
    rig.model.push(Step::text("Still here."));
    send_text(&rig, "hello");
    wait_text(&rig, "Still here.").await;
    tts.fail_next(Fault::ServerError, 1);
    rig.model.push(Step::text("And again."));
    send_text(&rig, "hello again");
    wait_text(&rig, "And again.").await;
    let statuses: Vec<u16> = tts.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 429, 500]);
    assert_eq!(voices(&rig).len(), 1);

    // With the service back, a text message is spoken too.
    rig.model.push(Step::text("Spoken now."));
    send_text(&rig, "and now?");
    rig.wait_for("a second voice note", |rig| {
        (voices(rig).len() == 2).then_some(())
    })
    .await;
    let logs = rig.stop().await;
    assert!(
        logs.iter().any(|l| l.contains("reply not spoken")),
        "the failures are logged"
    );
    assert!(!logs.join("\n").contains("sk-test"), "no key in the logs");
}

/// kill -9 while Telegram holds the `sendVoice` call: after the restart the spoken reply
/// goes out once (under the recovered marker, since the first try may have arrived), from
/// the clip made before the crash; the speech service is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spoken_reply_cut_off_by_kill_9_is_sent_once_after_the_restart() {
    let stt = FakeStt::start("what time is it").await;
    let tts = FakeTts::start("sk-test").await;
    let mut rig = start("", &tts_config(&stt, &tts), &[]).await;
    rig.telegram
        .fail_next("sendVoice", fake_telegram::Fault::Stall, 1);
    rig.model.push(Step::text("It is noon now."));
    send_voice(&rig);
    rig.wait_for("the held sendVoice", |rig| {
        (!rig.telegram.calls_of("sendVoice").is_empty()).then_some(())
    })
    .await;
    rig.crash_and_restart().await;
    let voice = rig
        .wait_for("the voice note after the restart", |rig| {
            voices(rig).into_iter().next()
        })
        .await;
    let caption = voice.str("caption").unwrap_or_default().replace('\\', "");
    assert!(
        caption.starts_with('\u{267b}') && caption.ends_with("It is noon now."),
        "the recovered marker, then the reply: {caption:?}"
    );
    assert_eq!(voice.files[0].audio_format, "ogg_opus");
    // A later message answered proves no second copy is still on its way.
    rig.model.push(Step::text("Plain answer."));
    send_text(&rig, "/voice off");
    wait_text(&rig, "Voice replies are off").await;
    send_text(&rig, "and now?");
    wait_text(&rig, "Plain answer.").await;
    assert_eq!(voices(&rig).len(), 1);
    assert_eq!(tts.requests().len(), 1, "the clip was made once");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_voice_message_in_voice_message_and_text_out() {
    let stt = FakeStt::start("remind me at five").await;
    let tts = FakeTts::start("sk-test-discord-e2e").await;
    let mut rig = discord_rig::Rig::new(std::time::Duration::from_secs(30)).await;
    rig.append_config(&tts_config(&stt, &tts));
    rig.launch().await;
    let dm = rig.dm(&rig.owner);
    rig.model.push(Step::text("Reminder set for five."));
    rig.fake.push_message(
        fake_discord::Incoming::new(&dm, &rig.owner, "").voice_message(b"OggS a voice note"),
    );
    rig.wait_texts(&dm, 2).await;
    let sent = rig.sent_to(&dm);
    // The voice message first (no content: Discord shows none with it), then the text.
    assert_eq!(sent[0].body["flags"], 8192, "{:?}", sent[0].body);
    assert_eq!(sent[0].files, ["voice-message.ogg"]);
    let meta = &sent[0].body["attachments"][0];
    assert!(meta["duration_secs"].as_f64().unwrap() > 1.0, "{meta}");
    assert!(!meta["waveform"].as_str().unwrap().is_empty());
    assert_eq!(discord_rig::content(&sent[0]), "");
    assert_eq!(discord_rig::content(&sent[1]), "Reminder set for five.");
    assert!(rig.model_saw()[0].contains("remind me at five"));
    rig.stop().await;
}

/// Each error case of both APIs, straight through the library (no daemon needed).
#[tokio::test]
async fn service_errors_become_one_sentence_each() {
    use hermesd::config::SpeechConfig;
    use hermesd::tools::tts::speaker;

    let tts = FakeTts::start("xi-good").await;
    let net = hermes_adapter::net::NetSettings::default();
    let mut config = SpeechConfig::default();
    config.tts.provider = "elevenlabs".into();
    config.tts.elevenlabs.base_url = Some(tts.elevenlabs_base_url());
    let env = |key: &str| BTreeMap::from([("ELEVENLABS_API_KEY".to_owned(), key.to_owned())]);

    let good = speaker(&config, &env("xi-good")).unwrap();
    let pcm = good.synthesize(&net, "Hello **there**").await.unwrap();
    assert_eq!(pcm.rate, 24_000);
    // 11 characters spoken (markdown stripped), 60 ms each at 24 kHz.
    assert_eq!(pcm.samples.len(), 11 * 24_000 * 60 / 1000);
    let first = &tts.requests()[0];
    assert_eq!(first.path, "/v1/text-to-speech/pNInz6obpgDQGcFmaJgB");
    assert_eq!(first.query["output_format"], "pcm_24000");
    assert_eq!(first.body["model_id"], "eleven_multilingual_v2");

    let bad_key = speaker(&config, &env("xi-wrong")).unwrap();
    let error = bad_key
        .synthesize(&net, "hi")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("refused the key (HTTP 401)"), "{error}");
    assert!(!error.contains("xi-wrong"));
    tts.fail_next(Fault::RateLimited, 1);
    let error = good.synthesize(&net, "hi").await.unwrap_err().to_string();
    assert!(error.contains("rate-limiting"), "{error}");
    tts.fail_next(Fault::ServerError, 1);
    let error = good.synthesize(&net, "hi").await.unwrap_err().to_string();
    assert!(error.contains("failed (HTTP 500)"), "{error}");

    config.tts.provider = "openai".into();
    config.tts.openai.base_url = Some(tts.openai_base_url());
    let openai_env = BTreeMap::from([("OPENAI_API_KEY".to_owned(), "xi-good".to_owned())]);
    tts.fail_next(Fault::RateLimited, 1);
    let openai = speaker(&config, &openai_env).unwrap();
    let error = openai.synthesize(&net, "hi").await.unwrap_err().to_string();
    assert!(
        error.contains("rate-limiting requests; retry in 7 s"),
        "{error}"
    );
    config.tts.openai.voice = "robot".into();
    let error = speaker(&config, &openai_env)
        .unwrap()
        .synthesize(&net, "hi")
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("refused the request (HTTP 400"), "{error}");
    let no_key = speaker(&config, &BTreeMap::new()).unwrap();
    let error = no_key.synthesize(&net, "hi").await.unwrap_err().to_string();
    assert!(error.contains("HTTP 401"), "{error}");
}
