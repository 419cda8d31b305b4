//! WhatsApp Cloud through the real `hermesd run` binary against the fake Meta
//! (tests/support/fake_whatsapp.rs): Meta's subscription handshake, a first reply with the
//! read receipt and typing shown, after a rate limit waited out, a redelivered notification answered once, a stranger and
//! a forged delivery getting nothing, an attachment in and out, an approval answered by a
//! button, three `kill -9`s mid-turn ending in exactly one answer, and a reply whose
//! connection broke after Meta took it never sent again silently, and a webhook route
//! delivering to WhatsApp inside the 24-hour window (outside it, the log says why).

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use support::conditions::wait_until;
use support::daemon::{Daemon, base_env};
use support::fake_model::{FakeModel, Reply, Step};
use support::fake_whatsapp::{self, FakeMeta};

const WAIT: Duration = Duration::from_secs(90);
const OWNER: &str = "4915100000001";
const STRANGER: &str = "4915100000666";

fn env(home: &Path, model: &FakeModel, meta: &FakeMeta) -> Vec<(String, String)> {
    let mut env = base_env(home);
    env.extend(
        [
            ("API_SERVER_ENABLED", "false".to_owned()),
            ("OPENAI_BASE_URL", model.base_url()),
            ("OPENAI_API_KEY", "sk-test".to_owned()),
            ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
            ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
            ("HERMESD_DRAIN_TIMEOUT_SECS", "2".to_owned()),
            (
                "WHATSAPP_CLOUD_PHONE_NUMBER_ID",
                fake_whatsapp::PHONE_NUMBER_ID.to_owned(),
            ),
            (
                "WHATSAPP_CLOUD_ACCESS_TOKEN",
                fake_whatsapp::TOKEN.to_owned(),
            ),
            (
                "WHATSAPP_CLOUD_APP_SECRET",
                fake_whatsapp::APP_SECRET.to_owned(),
            ),
            (
                "WHATSAPP_CLOUD_VERIFY_TOKEN",
                fake_whatsapp::VERIFY_TOKEN.to_owned(),
            ),
            ("WHATSAPP_CLOUD_WEBHOOK_HOST", "127.0.0.1".to_owned()),
            ("WHATSAPP_CLOUD_WEBHOOK_PORT", "0".to_owned()),
            ("WHATSAPP_CLOUD_GRAPH_API_URL", meta.url()),
            // Written as a phone number: reduced to the bare wa_id, as Hermes does.
            (
                "WHATSAPP_CLOUD_ALLOWED_USERS",
                "+49 151 00000001".to_owned(),
            ),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    env
}

/// Starts the daemon, points the fake Meta's webhook at it, and returns it with its base URL.
async fn start(home: &Path, env: &[(String, String)], meta: &FakeMeta) -> (Daemon, String) {
    let (home, env) = (home.to_path_buf(), env.to_vec());
    let (daemon, base) = tokio::task::spawn_blocking(move || {
        let daemon = Daemon::spawn(&home, &env, false);
        let Some(line) = daemon.wait_for_line("WhatsApp webhook listener ready", WAIT) else {
            panic!("the WhatsApp listener never started: {:#?}", daemon.logs());
        };
        let addr =
            support::daemon::field(&line, "addr").unwrap_or_else(|| panic!("no addr in {line}"));
        (daemon, format!("http://{addr}"))
    })
    .await
    .unwrap();
    meta.set_webhook(&format!("{base}/whatsapp/webhook"));
    (daemon, base)
}

fn texts_to(meta: &FakeMeta, wa_id: &str) -> Vec<String> {
    meta.sent_to(wa_id).into_iter().map(|s| s.text).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_reply_duplicates_strangers_and_attachments() {
    let meta = FakeMeta::start().await;
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = env(home.path(), &model, &meta);
    let (daemon, base) = start(home.path(), &env, &meta).await;

    // Meta's subscription handshake.
    let challenge = reqwest::get(format!(
        "{base}/whatsapp/webhook?hub.mode=subscribe&hub.verify_token={}&hub.challenge=8842",
        fake_whatsapp::VERIFY_TOKEN
    ))
    .await
    .unwrap();
    assert_eq!(challenge.status(), 200);
    assert_eq!(challenge.text().await.unwrap(), "8842");

    // First reply, in WhatsApp's formatting, after the read receipt and typing; Meta's
    // throughput limit refuses the first attempt, which is waited out, not dropped.
    model.push(Step::Reply(Reply::text("**Hello** from hermes")));
    meta.fail_next(fake_whatsapp::Fault::Throughput(Some(1)));
    let hello = meta.push_text(OWNER, "hi there");
    assert_eq!(meta.wait_answered(&hello).await, 200);
    let sent = meta.wait_sent(1).await;
    assert_eq!(sent[0].to, OWNER);
    assert_eq!(sent[0].text, "*Hello* from hermes");
    assert!(meta.read().contains(&hello), "the message was marked read");
    assert!(meta.typing_shown() >= 1);
    assert_eq!(meta.refused(), 1, "the first attempt met the rate limit");

    // The same notification again (Meta delivers at least once): answered 200, run never.
    let again = FakeMeta::notification(
        OWNER,
        json!([{"from": OWNER, "id": hello,
        "timestamp": "1700000000", "type": "text", "text": {"body": "hi there"}}]),
    );
    let signature = fake_whatsapp::hub_signature(fake_whatsapp::APP_SECRET, &again);
    assert_eq!(meta.post_once(again.clone(), Some(&signature)).await, 200);
    // A forged delivery is refused and records nothing.
    let forged = fake_whatsapp::hub_signature("guessed-secret", &again);
    assert_eq!(meta.post_once(again, Some(&forged)).await, 401);
    // A stranger is not answered by the model.
    let stranger = meta.push_text(STRANGER, "let me in");
    assert_eq!(meta.wait_answered(&stranger).await, 200);

    // An attachment in: the model's turn gets the picture; an attachment out: a document.
    let report = home.path().join("report.pdf");
    std::fs::write(&report, b"%PDF-1.4 the report").unwrap();
    model.push(Step::Reply(Reply::text(format!(
        "Here is the report.\nMEDIA:{}",
        report.display()
    ))));
    let png = support::images::png();
    let media_id = meta.add_user_media("image/png", &png);
    meta.push_image(OWNER, &media_id, "what is in this picture?");
    // Sent to the owner by now: the first answer, a note that this model cannot see
    // images, and the report's text and document (the last two waited for by name).
    wait_until("the report and its text are sent", WAIT, || {
        let sent = meta.sent_to(OWNER);
        sent.iter().any(|s| s.kind == "document")
            && sent.iter().any(|s| s.text.contains("Here is the report."))
    })
    .await;
    let to_owner = meta.sent_to(OWNER);
    let document = to_owner
        .iter()
        .find(|s| s.kind == "document")
        .unwrap_or_else(|| panic!("no document in {to_owner:#?}"));
    assert_eq!(document.media.as_deref(), Some(&b"%PDF-1.4 the report"[..]));
    assert!(
        texts_to(&meta, OWNER)
            .iter()
            .any(|t| t.contains("Here is the report."))
    );
    let cached = std::fs::read_dir(home.path().join("cache").join("whatsapp_cloud"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .any(|bytes| bytes == png);
    assert!(cached, "the user's picture was fetched into the cache");

    // Everything above ran the model exactly twice: no duplicate, no stranger's turn.
    assert_eq!(model.requests().len(), 2, "{:#?}", model.requests());
    assert!(
        meta.sent_to(STRANGER)
            .iter()
            .all(|s| !s.text.contains("Hello"))
    );
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_answered_by_a_button() {
    let meta = FakeMeta::start().await;
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let victim = home.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    model.push_all([
        Step::Reply(Reply::tool_call(
            "terminal",
            json!({"command": format!("rm -rf {}", victim.display())}),
        )),
        Step::text("Removed it."),
    ]);
    let env = env(home.path(), &model, &meta);
    let (daemon, _) = start(home.path(), &env, &meta).await;
    meta.push_text(OWNER, "clean up");
    wait_until("the approval prompt is sent", WAIT, || {
        meta.sent_to(OWNER).iter().any(|s| !s.buttons.is_empty())
    })
    .await;
    let prompt = meta
        .sent_to(OWNER)
        .into_iter()
        .find(|s| !s.buttons.is_empty())
        .unwrap();
    assert!(prompt.text.contains("rm -rf"), "{}", prompt.text);
    let (label, data) = prompt
        .buttons
        .iter()
        .find(|(_, data)| data == "/approve")
        .cloned()
        .unwrap_or_else(|| panic!("no /approve button: {:?}", prompt.buttons));
    // A stranger's tap changes nothing.
    let tap = meta.push_tap(STRANGER, &data, &label);
    assert_eq!(meta.wait_answered(&tap).await, 200);
    assert!(victim.exists());
    meta.push_tap(OWNER, &data, &label);
    wait_until("the turn finishes", WAIT, || {
        texts_to(&meta, OWNER).iter().any(|t| t == "Removed it.")
    })
    .await;
    assert!(!victim.exists(), "the approved command ran");
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_kill_9s_mid_turn_end_in_one_answer() {
    let meta = FakeMeta::start().await;
    let model = FakeModel::start().await;
    // Three model calls never answer: the daemon is killed while each waits.
    model.push_all([Step::Stall, Step::Stall, Step::Stall]);
    model.push(Step::Reply(Reply::text("Survived three crashes.")));
    let home = tempfile::tempdir().unwrap();
    let env = env(home.path(), &model, &meta);
    let (mut daemon, _) = start(home.path(), &env, &meta).await;
    let wamid = meta.push_text(OWNER, "please survive");
    assert_eq!(meta.wait_answered(&wamid).await, 200);
    for crash in 1..=3 {
        model.wait_for_requests(crash, WAIT).await;
        daemon.kill9();
        daemon = start(home.path(), &env, &meta).await.0;
    }
    meta.wait_sent(1).await;
    // A later message answered proves no late copy of the first answer is still coming.
    model.push(Step::Reply(Reply::text("And the next one.")));
    meta.push_text(OWNER, "next");
    wait_until("the next answer is sent", WAIT, || {
        meta.sent_to(OWNER).len() >= 2
    })
    .await;
    assert_eq!(
        texts_to(&meta, OWNER),
        ["Survived three crashes.", "And the next one."]
    );
    daemon.terminate();
}

/// Meta accepts a reply and the connection breaks before its answer: the user has the
/// reply, and hermesd cannot know it. It is never sent again silently: the next turns go on,
/// and after a restart it goes out once more only under the recovered marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_whose_connection_broke_is_not_sent_again_silently() {
    let meta = FakeMeta::start().await;
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let env = env(home.path(), &model, &meta);
    let (daemon, _) = start(home.path(), &env, &meta).await;
    model.push(Step::Reply(Reply::text("First answer.")));
    meta.fail_next(fake_whatsapp::Fault::Disconnect);
    meta.push_text(OWNER, "one");
    meta.wait_sent(1).await;
    model.push(Step::Reply(Reply::text("Second answer.")));
    meta.push_text(OWNER, "two");
    meta.wait_sent(2).await;
    daemon.terminate();

    let (daemon, _) = start(home.path(), &env, &meta).await;
    model.push(Step::Reply(Reply::text("Third answer.")));
    meta.push_text(OWNER, "three");
    wait_until("the third answer is sent", WAIT, || {
        texts_to(&meta, OWNER).iter().any(|t| t == "Third answer.")
    })
    .await;
    let texts = texts_to(&meta, OWNER);
    assert_eq!(
        texts[..2],
        ["First answer.", "Second answer."],
        "{texts:#?}"
    );
    let mut after_restart = texts[2..].to_vec();
    after_restart.sort();
    assert_eq!(after_restart.len(), 2, "{texts:#?}");
    assert_eq!(after_restart[0], "Third answer.");
    let resent = &after_restart[1];
    assert!(
        resent.starts_with('\u{267b}') && resent.ends_with("\n\nFirst answer."),
        "the possible copy carries the recovered marker: {resent:?}"
    );
    daemon.terminate();
}

/// A signed webhook's route delivers to WhatsApp: to a user inside the 24-hour window the
/// rendered text is sent; to one outside it nothing goes out, and the log says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_route_delivers_to_whatsapp_inside_the_window() {
    const SECRET: &str = "route-secret-7c1e";
    const LAPSED: &str = "4915100000777";
    let meta = FakeMeta::start().await;
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    let route = |name: &str, to: &str| {
        format!(
            "        {name}:\n          deliver: whatsapp_cloud\n          deliver_only: true\n          \
             prompt: \"Deploy {{status}}\"\n          deliver_extra:\n            chat_id: \"{to}\"\n"
        )
    };
    let config = format!(
        "platforms:\n  webhook:\n    enabled: true\n    extra:\n      host: 127.0.0.1\n      port: 0\n      \
         secret: \"{SECRET}\"\n      routes:\n{}{}",
        route("owner", OWNER),
        route("lapsed", LAPSED)
    );
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let env = env(home.path(), &model, &meta);
    let (daemon, _) = start(home.path(), &env, &meta).await;
    let hooks = daemon
        .wait_for_line_where(|l| l.contains("\"webhook listener ready\""), WAIT)
        .unwrap_or_else(|| panic!("no webhook listener: {:#?}", daemon.logs()));
    let hooks = support::daemon::field(&hooks, "addr").expect("addr");
    meta.user_wrote(OWNER, 60);
    meta.user_wrote(LAPSED, 25 * 60 * 60);
    let post = |route: &'static str, id: &'static str| {
        let url = format!("http://{hooks}/webhooks/{route}");
        async move {
            reqwest::Client::new()
                .post(url)
                .header("x-gitlab-token", SECRET)
                .header("x-gitlab-event-uuid", id)
                .body(r#"{"status": "green"}"#)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(post("owner", "w-1").await, 202);
    meta.wait_sent(1).await;
    assert_eq!(texts_to(&meta, OWNER), ["Deploy green"]);
    assert_eq!(post("lapsed", "w-2").await, 202);
    let said = daemon.wait_for_line_where(|l| l.contains("24-hour") && l.contains(LAPSED), WAIT);
    assert!(said.is_some(), "the window is named: {:#?}", daemon.logs());
    assert!(meta.sent_to(LAPSED).is_empty());
    assert!(model.requests().is_empty(), "deliver_only runs no model");
    daemon.terminate();
}
