//! Signal end to end: the real `hermesd run` binary against the wire-level fake signal-cli
//! daemon (`tests/fake-signal`: JSON-RPC and the event stream) and the fake model.
//!
//! Covered: the first reply in a DM with typing shown; a duplicate delivery of one envelope
//! answered once; group gating (a group not allowed, no mention, then a mention answered in
//! the group) under Hermes's session keys; a stranger kept from the model; an attachment in (fetched into the home's
//! cache) and out (a `MEDIA:` reply uploaded as a data URI); an approval prompt answered by
//! a numbered reaction (an outsider's reaction in a group answering nothing); pairing a
//! stranger with the CLI; kill -9 three times with a turn in
//! flight, nothing lost or doubled; a message sent while hermesd was down answered when it is
//! back (signal-cli in on-connection receive mode).

mod support;

use std::path::Path;
use std::time::Duration;

use fake_signal::{FakeSignal, Sent};
use serde_json::json;
use support::daemon::{Daemon, base_env};
use support::fake_model::{FakeModel, Reply, Step};

const WAIT: Duration = Duration::from_secs(60);
const BOT: &str = "+15550000001";
const OWNER: &str = "+15551110001";
const STRANGER: &str = "+15559990009";
const GROUP: &str = "R3JvdXBPbmU=";

struct SignalRun {
    signal: FakeSignal,
    model: FakeModel,
    daemon: Option<Daemon>,
    home: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl SignalRun {
    async fn start() -> SignalRun {
        let signal = FakeSignal::start(BOT).await;
        let model = FakeModel::start().await;
        let home = tempfile::tempdir().expect("temp home");
        std::fs::write(
            home.path().join("config.yaml"),
            "signal:\n  extra:\n    require_mention: true\n    unauthorized_dm_behavior: pair\n",
        )
        .unwrap();
        let mut env = base_env(home.path());
        env.extend(
            [
                ("SIGNAL_HTTP_URL", signal.url().as_str()),
                ("SIGNAL_ACCOUNT", BOT),
                ("SIGNAL_ALLOWED_USERS", OWNER),
                ("SIGNAL_GROUP_ALLOWED_USERS", GROUP),
                ("API_SERVER_ENABLED", "false"),
                ("OPENAI_BASE_URL", &model.base_url()),
                ("OPENAI_API_KEY", "sk-test-model-key"),
                ("HERMES__MODEL__PROVIDER", "openai"),
                ("HERMES__MODEL__DEFAULT", "fake-model"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
        );
        let mut run = SignalRun {
            signal,
            model,
            daemon: None,
            home,
            env,
        };
        run.launch().await;
        run
    }

    /// Starts the binary and waits until it listens on the event stream.
    async fn launch(&mut self) {
        let (home, env) = (self.home.path().to_path_buf(), self.env.clone());
        let daemon = tokio::task::spawn_blocking(move || Daemon::start(&home, &env))
            .await
            .expect("start hermesd");
        self.daemon = Some(daemon);
        self.signal.wait_listeners(1).await;
    }

    async fn kill9(&mut self) {
        let daemon = self.daemon.take().expect("running");
        tokio::task::spawn_blocking(move || daemon.kill9())
            .await
            .unwrap();
    }

    /// Waits until `chat` got a message with exactly `text`.
    async fn reply(&self, chat: &str, text: &str) -> Sent {
        let wait = async {
            loop {
                let found = self
                    .signal
                    .sent()
                    .into_iter()
                    .find(|s| s.chat == chat && s.message == text);
                if let Some(found) = found {
                    return found;
                }
                let count = self.signal.sent().len();
                self.signal.wait_sent(count + 1).await;
            }
        };
        tokio::time::timeout(WAIT, wait).await.unwrap_or_else(|_| {
            panic!(
                "{text:?} never sent to {chat}: {:#?}\n{:#?}",
                self.signal.sent(),
                self.daemon.as_ref().map(|d| d.logs())
            )
        })
    }

    fn sent_to(&self, chat: &str) -> Vec<Sent> {
        self.signal
            .sent()
            .into_iter()
            .filter(|s| s.chat == chat)
            .collect()
    }

    /// The session keys of state.db's routing index (Hermes's `gateway_routing`).
    fn routing_keys(&self) -> Vec<String> {
        let db = rusqlite::Connection::open(self.home.path().join("state.db")).expect("state.db");
        let mut query = db
            .prepare("SELECT session_key FROM gateway_routing ORDER BY session_key")
            .unwrap();
        let keys = query.query_map([], |row| row.get(0)).unwrap();
        keys.map(Result::unwrap).collect()
    }

    fn user_texts(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .map(|r| r.last_message_text())
            .collect()
    }

    async fn stop(mut self) {
        if let Some(daemon) = self.daemon.take() {
            tokio::task::spawn_blocking(move || daemon.terminate())
                .await
                .unwrap();
        }
        assert_eq!(self.signal.unexpected(), Vec::<String>::new());
    }
}

fn mention_bot() -> serde_json::Value {
    json!([{"name": BOT, "number": BOT, "uuid": format!("uuid-{BOT}"), "start": 0, "length": 1}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_reply_duplicates_groups_strangers_and_attachments() {
    let run = SignalRun::start().await;

    // The first reply, with typing shown while the turn ran.
    run.signal.push_dm(OWNER, "hello there");
    run.reply(OWNER, "echo: hello there").await;
    assert!(run.signal.typing() > 0, "typing was shown");

    // One envelope delivered twice (the stream reopened mid-delivery): answered once.
    let ts = 1_800_000_000_000;
    let message = json!({"timestamp": ts, "message": "only once please"});
    run.signal.push_envelope(OWNER, ts, message.clone());
    run.signal.push_envelope(OWNER, ts, message);

    // Groups: one not allowed, one allowed but not mentioned, then a mention.
    run.signal
        .push_group(OWNER, "T3RoZXI=", "\u{FFFC} not here", mention_bot());
    run.signal.push_group(OWNER, GROUP, "no mention", json!([]));
    run.signal
        .push_group(OWNER, GROUP, "\u{FFFC} status please", mention_bot());
    run.reply(&format!("group:{GROUP}"), "echo: status please")
        .await;
    run.reply(OWNER, "echo: only once please").await;

    // A stranger never reaches the model.
    run.signal.push_dm(STRANGER, "let me in");

    // An attachment in: fetched into the home's cache for the turn.
    run.signal
        .add_attachment("att-doc-1", b"quarterly numbers: 42".to_vec());
    run.signal
        .push_attachment(OWNER, "read this", "att-doc-1", "text/plain");
    // ...and one out: the model answers with a MEDIA: tag.
    let outgoing = run.home.path().join("summary.txt");
    std::fs::write(&outgoing, b"the summary").unwrap();
    run.model.push(Step::text(format!(
        "Here you go.\nMEDIA:{}",
        outgoing.display()
    )));
    run.reply(OWNER, "Here you go.").await;
    let uploads = run
        .signal
        .wait_sent(run.signal.sent().len())
        .await
        .into_iter()
        .filter(|s| !s.attachments.is_empty())
        .collect::<Vec<_>>();
    let upload = match uploads.as_slice() {
        [one] => one.clone(),
        [] => {
            // The upload follows the text; wait for it.
            let count = run.signal.sent().len();
            run.signal.wait_sent(count + 1).await;
            run.signal
                .sent()
                .into_iter()
                .find(|s| !s.attachments.is_empty())
                .expect("the attachment was sent")
        }
        many => panic!("{many:#?}"),
    };
    assert_eq!(upload.chat, OWNER);
    assert_eq!(
        upload.attachments,
        [(
            "text/plain".to_owned(),
            "summary.txt".to_owned(),
            b"the summary".to_vec()
        )]
    );
    let cached = find_file(
        &run.home.path().join("cache/signal"),
        b"quarterly numbers: 42",
    );
    assert!(cached, "the inbound attachment is in the home's cache");

    let texts = run.user_texts();
    assert!(texts.iter().all(|t| !t.contains("let me in")), "{texts:#?}");
    assert!(
        texts
            .iter()
            .all(|t| !t.contains("not here") && !t.contains("no mention"))
    );
    let once = texts
        .iter()
        .filter(|t| t.contains("only once please"))
        .count();
    assert_eq!(once, 1, "{texts:#?}");
    let group_replies = run.sent_to(&format!("group:{GROUP}"));
    assert_eq!(group_replies.len(), 1, "{group_replies:#?}");
    // Session keys as Hermes forms them: a DM by the number, a group member by the uuid
    // signal-cli names them with (`sourceUuid`), which stays when the number changes.
    assert_eq!(
        run.routing_keys(),
        [
            format!("agent:main:signal:dm:{OWNER}"),
            format!("agent:main:signal:group:group:{GROUP}:uuid-{OWNER}"),
        ]
    );
    assert!(run.sent_to("group:T3RoZXI=").is_empty());
    let owner_texts: Vec<String> = run.sent_to(OWNER).into_iter().map(|s| s.message).collect();
    assert_eq!(
        owner_texts
            .iter()
            .filter(|t| *t == "echo: only once please")
            .count(),
        1,
        "{owner_texts:#?}"
    );
    run.stop().await;
}

fn find_file(dir: &Path, content: &[u8]) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|entry| std::fs::read(entry.path()).is_ok_and(|bytes| bytes == content))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_prompt_is_answered_by_reaction() {
    let run = SignalRun::start().await;
    let victim = run.home.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    run.model.push_all([
        Step::Reply(Reply::tool_call(
            "terminal",
            json!({"command": format!("rm -rf {}", victim.display())}),
        )),
        Step::text("Removed it."),
    ]);
    run.signal.push_dm(OWNER, "clean up");
    let prompt = async {
        loop {
            let count = run.signal.sent().len();
            if let Some(p) = run
                .signal
                .sent()
                .into_iter()
                .find(|s| s.message.contains("React to answer"))
            {
                return p;
            }
            run.signal.wait_sent(count + 1).await;
        }
    };
    let prompt = tokio::time::timeout(WAIT, prompt).await.expect("a prompt");
    assert!(
        prompt.message.contains("Approval Required"),
        "{}",
        prompt.message
    );
    assert!(victim.exists());
    // A reaction that is no choice does nothing; the first choice approves once.
    run.signal
        .push_reaction(OWNER, OWNER, "👍", prompt.timestamp);
    run.signal
        .push_reaction(OWNER, OWNER, hermes_signal::CHOICES[0], prompt.timestamp);
    run.reply(OWNER, "Removed it.").await;
    assert!(!victim.exists(), "the approved command ran");

    // Pairing: a stranger's DM gets a code and nothing else; once the owner approves the
    // code with the CLI, the stranger is answered.
    run.signal.push_dm(STRANGER, "let me in");
    let code = async {
        loop {
            let count = run.signal.sent().len();
            if let Some(sent) = run.sent_to(STRANGER).first() {
                return sent.message.clone();
            }
            run.signal.wait_sent(count + 1).await;
        }
    };
    let code_text = tokio::time::timeout(WAIT, code)
        .await
        .expect("a pairing code");
    assert!(code_text.contains("pairing code"), "{code_text}");
    // Signal shows the code's backticks as a monospace range, so the text has none.
    let code: String = code_text
        .split_once("pairing code is ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(|w| {
            w.trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_owned()
        })
        .unwrap_or_else(|| panic!("a code in {code_text:?}"));
    assert_eq!(code.len(), 8, "{code_text}");
    let approve = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["pairing", "approve", "signal", &code])
        .env("HERMES_HOME", run.home.path())
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .expect("run hermesd pairing approve");
    assert!(approve.status.success(), "{approve:?}");
    run.signal.push_dm(STRANGER, "now a friend");
    run.reply(STRANGER, "echo: now a friend").await;
    assert!(
        run.user_texts().iter().all(|t| !t.contains("let me in")),
        "the stranger's first message never reached the model"
    );

    // In a group, a reaction from someone not allowed answers nothing: the outsider's
    // "allow" comes first (events are handed over in order), the owner's "deny" decides.
    let spare = run.home.path().join("spare");
    std::fs::create_dir_all(&spare).unwrap();
    run.model.push_all([
        Step::Reply(Reply::tool_call(
            "terminal",
            json!({"command": format!("rm -rf {}", spare.display())}),
        )),
        Step::text("Left it alone."),
    ]);
    let group = format!("group:{GROUP}");
    run.signal
        .push_group(OWNER, GROUP, "\u{FFFC} clean the spare", mention_bot());
    let prompt = async {
        loop {
            let count = run.signal.sent().len();
            let found = run
                .sent_to(&group)
                .into_iter()
                .find(|s| s.message.contains("React to answer"));
            if let Some(found) = found {
                return found;
            }
            run.signal.wait_sent(count + 1).await;
        }
    };
    let prompt = tokio::time::timeout(WAIT, prompt)
        .await
        .expect("a group prompt");
    let outsider = "+15558880008";
    run.signal.push_reaction(
        outsider,
        &group,
        hermes_signal::CHOICES[0],
        prompt.timestamp,
    );
    run.signal
        .push_reaction(OWNER, &group, hermes_signal::CHOICES[3], prompt.timestamp);
    run.reply(&group, "Left it alone.").await;
    assert!(spare.exists(), "the outsider's reaction did not approve");
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_three_times_loses_and_doubles_nothing() {
    let mut run = SignalRun::start().await;
    for round in 0..3 {
        // The model never answers this turn's first request: the turn is in flight, its
        // message journaled, when the process dies.
        run.model.push(Step::Stall);
        let before = run.model.requests().len();
        run.signal.push_dm(OWNER, &format!("survive {round}"));
        run.model.wait_for_requests(before + 1, WAIT).await;
        run.kill9().await;
        run.launch().await;
        run.reply(OWNER, &format!("echo: survive {round}")).await;
    }
    let texts: Vec<String> = run.sent_to(OWNER).into_iter().map(|s| s.message).collect();
    for round in 0..3 {
        let want = format!("echo: survive {round}");
        assert_eq!(
            texts.iter().filter(|t| **t == want).count(),
            1,
            "{texts:#?}"
        );
    }
    run.stop().await;
}

/// With signal-cli run as `daemon --receive-mode=on-connection` (what docs and the setup
/// hint ask for), a message sent while hermesd is down waits on Signal's servers and is
/// answered, once, when hermesd is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_while_hermesd_is_down_is_answered_when_it_is_back() {
    let mut run = SignalRun::start().await;
    run.signal.receive_on_connection();
    run.signal.push_dm(OWNER, "before");
    run.reply(OWNER, "echo: before").await;
    run.kill9().await;
    run.signal.wait_streams_closed().await;
    run.signal.push_dm(OWNER, "while you were away");
    run.launch().await;
    run.reply(OWNER, "echo: while you were away").await;
    let answers = run
        .sent_to(OWNER)
        .into_iter()
        .filter(|s| s.message == "echo: while you were away")
        .count();
    assert_eq!(answers, 1);
    run.stop().await;
}
