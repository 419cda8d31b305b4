//! The gateway core end to end, in process: the real GatewayRunner, router, state.db and
//! agent, a fake model server at the wire level, and a chat platform speaking the adapter
//! contract. Routing, redelivery, authorization and pairing, commands, busy modes, resets,
//! restarts and chunking.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::{LengthUnit, RecordOutcome};
use hermesd::agent::provider::ApiMode;
use hermesd::config::LoadedConfig;
use hermesd::gateway::delivery::RetryPolicy;
use hermesd::gateway::runner::{GatewayRunner, RunnerOptions};
use hermesd::home::HermesHome;
use hermesd::state::{InboundState, Store};
use support::fake_model::{FakeModel, Reply, Step};
use support::test_platform::{TestPlatform, dm, group};

const WAIT: Duration = Duration::from_secs(60);

struct Rig {
    dir: tempfile::TempDir,
    home: HermesHome,
    model: FakeModel,
    store: Store,
    platform: Arc<TestPlatform>,
    runner: Option<GatewayRunner>,
    yaml: String,
    env: BTreeMap<String, String>,
}

fn loaded(home: &HermesHome, env: &BTreeMap<String, String>) -> LoadedConfig {
    hermesd::config::load(home, env).expect("config")
}

impl Rig {
    async fn start(yaml: &str, env: &[(&str, &str)]) -> Rig {
        Self::start_with(
            yaml,
            env,
            TestPlatform::new("telegram", 4096, LengthUnit::Utf16),
        )
        .await
    }

    async fn start_with(yaml: &str, env: &[(&str, &str)], platform: TestPlatform) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        let yaml = format!("admin:\n  port: 0\n{yaml}");
        let mut env_map: BTreeMap<String, String> =
            [("HOME".to_owned(), dir.path().display().to_string())].into();
        env_map.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let model = FakeModel::start().await;
        let store = Store::open(&home.state_db()).unwrap();
        let mut rig = Rig {
            dir,
            home,
            model,
            store,
            platform: Arc::new(platform),
            runner: None,
            yaml,
            env: env_map,
        };
        rig.boot().await;
        rig
    }

    async fn boot(&mut self) {
        std::fs::write(self.home.config_yaml(), &self.yaml).unwrap();
        let client = support::providers::client(&self.model, ApiMode::ChatCompletions);
        let runner = GatewayRunner::start(
            &self.home,
            loaded(&self.home, &self.env),
            self.store.clone(),
            RunnerOptions {
                adapters: vec![self.platform.clone()],
                client: Some(client),
                retry: RetryPolicy::seeded(7),
                drain_timeout: Duration::from_secs(1),
                ..RunnerOptions::default()
            },
        )
        .await
        .expect("runner starts");
        self.runner = Some(runner);
    }

    /// Shuts the runner down and starts a new one on the same home and store.
    async fn restart(&mut self, yaml: Option<&str>) {
        self.runner.take().unwrap().shutdown().await;
        if let Some(yaml) = yaml {
            self.yaml = format!("admin:\n  port: 0\n{yaml}");
        }
        let platform = TestPlatform::new("telegram", 4096, LengthUnit::Utf16);
        self.platform = Arc::new(platform);
        self.boot().await;
    }

    async fn say(&self, event_id: &str, user: &str, text: &str) -> Vec<String> {
        let before = self.platform.texts_to(user).len();
        // Refused: an unknown user's message is acknowledged but answered only by pairing.
        let outcome = self.platform.inject(dm(event_id, user, text)).await;
        assert!(
            matches!(outcome, RecordOutcome::Recorded | RecordOutcome::Refused),
            "{outcome:?}"
        );
        self.platform.wait_texts(user, before + 1).await[before..].to_vec()
    }

    async fn routing(&self) -> BTreeMap<String, serde_json::Value> {
        let scope = std::fs::canonicalize(self.dir.path().join("sessions"))
            .unwrap_or_else(|_| self.dir.path().join("sessions"));
        self.store
            .load_routing(&scope.display().to_string())
            .await
            .unwrap()
    }

    async fn session_of(&self, key: &str) -> String {
        self.routing().await[key]["session_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

const ALLOW: &[(&str, &str)] = &[("TELEGRAM_ALLOWED_USERS", "42,43,44,45")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_gets_exactly_one_reply_and_redeliveries_are_dropped() {
    let rig = Rig::start("", ALLOW).await;
    let replies = rig.say("u1", "42", "hello").await;
    assert_eq!(replies, ["echo: hello"]);
    let again = rig.platform.inject(dm("u1", "42", "hello")).await;
    assert_eq!(again, RecordOutcome::Duplicate);
    let key = "agent:main:telegram:dm:42";
    let session_id = rig.session_of(key).await;
    let session = rig.store.get_session(&session_id).await.unwrap().unwrap();
    assert_eq!(session.source, "telegram");
    assert_eq!(session.message_count, 2);
    let journaled = rig
        .store
        .get_inbound("telegram", "u1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(journaled.state, InboundState::Answered);
    // The ledger marks the reply delivered just after the platform confirmed the send that
    // `say` saw, on the chat's delivery lane: wait for it (bounded).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let obligation = rig
            .store
            .get_obligation(&journaled.reply_obligation_ids[0])
            .await
            .unwrap()
            .unwrap();
        if obligation.state == hermesd::state::ObligationState::Delivered {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reply was never marked delivered: {:?}",
            obligation.state
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The reply quoted the user's message (reply_to_mode: first).
    let quoted = rig.platform.sent().into_iter().find_map(|o| match o.kind {
        hermes_adapter::OutboundKind::Text { reply_to, .. } => reply_to,
        _ => None,
    });
    assert_eq!(quoted.as_deref(), Some("in-u1"));
    assert_eq!(rig.model.requests().len(), 1);
    assert_eq!(rig.platform.texts_to("42").len(), 1, "no second reply");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_and_thread_sessions_follow_the_key_rules() {
    let rig = Rig::start("", &[("TELEGRAM_ALLOWED_USERS", "42,43")]).await;
    rig.platform.inject(group("g1", "-100", "42", "a")).await;
    rig.platform.inject(group("g2", "-100", "43", "b")).await;
    rig.platform.wait_texts("-100", 2).await;
    let routing = rig.routing().await;
    assert!(
        routing.contains_key("agent:main:telegram:group:-100:42"),
        "{routing:?}"
    );
    assert!(routing.contains_key("agent:main:telegram:group:-100:43"));
    let mut threaded = group("g3", "-100", "42", "c");
    threaded.source.thread_id = Some("5".into());
    rig.platform.inject(threaded).await;
    rig.platform.wait_texts("-100", 3).await;
    assert!(
        rig.routing()
            .await
            .contains_key("agent:main:telegram:group:-100:5")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_users_get_a_pairing_code_and_approval_unlocks_them() {
    let rig = Rig::start("", &[]).await;
    let replies = rig.say("p1", "77", "let me in").await;
    let text = &replies[0];
    assert!(text.contains("pairing code"), "{text}");
    let code: String = text
        .split('`')
        .nth(1)
        .expect("code between backticks")
        .to_owned();
    assert_eq!(code.len(), 8);
    assert!(
        rig.model.requests().is_empty(),
        "unauthorized text reached the model"
    );
    assert!(
        rig.store
            .recent_sessions(None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(rig.routing().await.is_empty());
    // A group message from a stranger is dropped silently.
    rig.platform.inject(group("p2", "-5", "77", "hi all")).await;
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["pairing", "approve", "telegram", &code])
        .env("HERMES_HOME", rig.dir.path())
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let replies = rig.say("p3", "77", "now?").await;
    assert_eq!(replies, ["echo: now?"]);
    assert!(rig.platform.texts_to("-5").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_are_answered_without_the_model() {
    let rig = Rig::start("", ALLOW).await;
    rig.say("c0", "42", "first message").await;
    let calls = rig.model.requests().len();
    let cases: &[(&str, &str)] = &[
        ("/help", "/new"),
        ("/commands", "Commands (page 1/"),
        ("/commands 9", "Usage: `/commands [page]`"),
        ("/version", "hermesd"),
        ("/whoami", "ID: 42"),
        ("/status", "**Agent Running:** No"),
        ("/usage", "Session Token Usage"),
        ("/model", "fake-model"),
        ("/stop", "No active task to stop."),
        ("/approve", "No pending command to approve."),
        ("/deny", "No pending command to deny."),
        ("/queue", "Usage: /queue <prompt>"),
        ("/steer", "Usage: /steer <prompt>"),
        ("/title", "No title set"),
        (
            "/title Trip planning",
            "Session title set: **Trip planning**",
        ),
        ("/title", "Title: **Trip planning**"),
        ("/sessions", "Trip planning"),
        ("/platform list", "telegram: active"),
        ("/platform pause nope", "Unknown platform"),
        ("/frobnicate", "I don't know `/frobnicate`."),
        ("/help@hermes_bot", "/new"),
        ("/undo 0", "Invalid count"),
        ("/resume", "Trip planning"),
        ("/sethome", "Home channel set"),
        ("/start", ""),
    ];
    for (i, (command, expected)) in cases.iter().enumerate() {
        let id = format!("c{}", i + 1);
        let before = rig.platform.texts_to("42").len();
        rig.platform.inject(dm(&id, "42", command)).await;
        if expected.is_empty() {
            continue;
        }
        let texts = rig.platform.wait_texts("42", before + 1).await;
        assert!(
            texts[before].contains(expected),
            "{command}: {}",
            texts[before]
        );
    }
    assert_eq!(
        rig.model.requests().len(),
        calls,
        "a command reached the model"
    );
    let dotenv = std::fs::read_to_string(rig.dir.path().join(".env")).unwrap();
    assert!(dotenv.contains("TELEGRAM_HOME_CHANNEL=42"), "{dotenv}");

    // /new [name] starts a fresh titled session; /resume goes back.
    let old = rig.session_of("agent:main:telegram:dm:42").await;
    let reply = rig.say("n1", "42", "/new Second topic").await;
    assert_eq!(reply, ["✨ New session started: Second topic"]);
    let new = rig.session_of("agent:main:telegram:dm:42").await;
    assert_ne!(old, new);
    let ended = rig.store.get_session(&old).await.unwrap().unwrap();
    assert_eq!(ended.end_reason.as_deref(), Some("session_reset"));
    let reply = rig.say("n2", "42", "/resume Trip planning").await;
    assert!(
        reply[0].starts_with("↻ Resumed session **Trip planning** (2 messages)"),
        "{reply:?}"
    );
    assert_eq!(rig.session_of("agent:main:telegram:dm:42").await, old);

    // /retry runs the last message again; /undo removes exchanges.
    let reply = rig.say("r1", "42", "/retry").await;
    assert_eq!(reply, ["echo: first message"]);
    let reply = rig.say("u1", "42", "/undo").await;
    assert!(
        reply[0].starts_with("↩️ Undid 1 turn(s) (2 message(s))."),
        "{reply:?}"
    );
    let session = rig.store.get_session(&old).await.unwrap().unwrap();
    assert_eq!(session.message_count, 0);
    let reply = rig.say("u2", "42", "/undo").await;
    assert_eq!(reply, ["Nothing to undo."]);
    let reply = rig.say("x1", "42", "/restart").await;
    assert!(reply[0].contains("Restarting"), "{reply:?}");
    tokio::time::timeout(WAIT, rig.runner.as_ref().unwrap().restart_requested())
        .await
        .expect("restart requested");
}

/// Starts a turn the model holds until the returned gate is released.
async fn held_turn(
    rig: &Rig,
    event_id: &str,
    user: &str,
    reply: &str,
) -> Arc<tokio::sync::Semaphore> {
    let (step, gate) = Step::gated(reply);
    rig.model.push(step);
    let before = rig.model.requests().len();
    rig.platform
        .inject(dm(event_id, user, "start a long task"))
        .await;
    rig.model.wait_for_requests(before + 1, WAIT).await;
    gate
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cut_by_shutdown_is_finished_once_after_the_restart() {
    let mut rig = Rig::start("", ALLOW).await;
    let _gate = held_turn(&rig, "k1", "42", "never shown").await;
    let old_platform = rig.platform.clone();
    rig.restart(None).await;
    let texts = rig.platform.wait_texts("42", 1).await;
    assert_eq!(texts, ["echo: start a long task"]);
    assert!(old_platform.texts_to("42").is_empty());
    let event = rig
        .store
        .get_inbound("telegram", "k1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(event.state, InboundState::Answered);
    // The resumed turn did not store the user's message a second time.
    let session = rig.session_of("agent:main:telegram:dm:42").await;
    let messages = rig.store.get_messages(&session).await.unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_mode_acks_stops_the_turn_and_answers_the_new_message() {
    let rig = Rig::start("", ALLOW).await;
    let _gate = held_turn(&rig, "i1", "42", "never shown").await;
    rig.platform
        .inject(dm("i2", "42", "actually, do this"))
        .await;
    let texts = rig.platform.wait_texts("42", 2).await;
    assert_eq!(
        texts[0],
        "⚡ Stopping the current task to answer this message."
    );
    // As in Hermes, the next turn's user text is "<interrupted>\n\n<new>".
    assert_eq!(texts[1], "echo: start a long task\n\nactually, do this");
    let first = rig
        .store
        .get_inbound("telegram", "i1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.state, InboundState::Answered);
    assert!(first.reply_obligation_ids.is_empty());
    // The interrupted message is in the history the next turn saw.
    let last = rig.model.requests().last().unwrap().body["messages"].to_string();
    assert!(last.contains("start a long task"), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_mode_answers_both_in_order() {
    let rig = Rig::start("display:\n  busy_input_mode: queue\n", ALLOW).await;
    let gate = held_turn(&rig, "q1", "42", "first answer").await;
    rig.platform.inject(dm("q2", "42", "second")).await;
    let texts = rig.platform.wait_texts("42", 1).await;
    assert_eq!(
        texts[0],
        "⏳ Queued: I'll answer this when the current task is done."
    );
    gate.add_permits(1);
    let texts = rig.platform.wait_texts("42", 3).await;
    assert_eq!(texts[1..], ["first answer", "echo: second"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_mode_delivers_the_text_after_the_next_tool_call() {
    let rig = Rig::start("display:\n  busy_input_mode: steer\n", ALLOW).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let arguments =
        serde_json::json!({"todos": [{"id": "1", "content": "x", "status": "pending"}]});
    rig.model.push(Step::Gated {
        reply: Reply::tool_call("todo", arguments),
        gate: gate.clone(),
    });
    rig.model.push(Step::text("done with steering"));
    rig.platform.inject(dm("s1", "42", "plan it")).await;
    rig.model.wait_for_requests(1, WAIT).await;
    rig.platform.inject(dm("s2", "42", "use blue")).await;
    let texts = rig.platform.wait_texts("42", 1).await;
    assert!(
        texts[0].starts_with("⏩ Passed to the running task;"),
        "{texts:?}"
    );
    gate.add_permits(1);
    rig.platform
        .wait_until("42", |texts| {
            texts.iter().any(|t| t == "done with steering")
        })
        .await;
    let second = rig.model.requests()[1].body["messages"].to_string();
    assert!(
        second.contains("USER MESSAGE SENT DURING THIS TURN"),
        "{second}"
    );
    assert!(second.contains("use blue"), "{second}");
}

/// A steer that comes while the model's last reply needs no tool call is never read by the
/// turn; it must become the next turn (as in Hermes), not vanish after its ack. The inbox is
/// capped like the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leftover_steer_text_becomes_the_next_turn_and_the_inbox_is_capped() {
    let rig = Rig::start("display:\n  busy_input_mode: steer\n", ALLOW).await;
    let gate = held_turn(&rig, "l1", "42", "plain answer").await;
    for i in 0..32 {
        rig.platform
            .inject(dm(&format!("l-steer-{i}"), "42", &format!("also {i}")))
            .await;
    }
    rig.platform
        .inject(dm("l-full", "42", "one too many"))
        .await;
    rig.platform
        .inject(dm("l-cmd", "42", "/steer and this"))
        .await;
    let texts = rig.platform.wait_texts("42", 34).await;
    let steered = texts
        .iter()
        .filter(|t| t.starts_with("⏩ Passed to the running task;"))
        .count();
    assert_eq!(steered, 32, "{texts:?}");
    let full = "⏳ 32 messages are already waiting; wait for the current task or /stop it.";
    assert_eq!(texts.iter().filter(|t| *t == full).count(), 2, "{texts:?}");
    gate.add_permits(1);
    let texts = rig
        .platform
        .wait_until("42", |texts| texts.iter().any(|t| t.starts_with("echo: ")))
        .await;
    assert_eq!(texts[34], "plain answer", "{texts:?}");
    let expected: Vec<String> = (0..32).map(|i| format!("also {i}")).collect();
    assert_eq!(texts[35], format!("echo: {}", expected.join("\n")));
    assert_eq!(texts.len(), 36, "{texts:?}");
    let carried = rig
        .store
        .get_inbound("telegram", "l1#steer")
        .await
        .unwrap()
        .expect("the leftover turn is journaled");
    assert_eq!(carried.state, InboundState::Answered);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_interrupts_and_discards_the_queue() {
    let rig = Rig::start("display:\n  busy_input_mode: queue\n", ALLOW).await;
    let _gate = held_turn(&rig, "t1", "42", "never shown").await;
    rig.platform.inject(dm("t2", "42", "queued one")).await;
    rig.platform.wait_texts("42", 1).await;
    rig.platform.inject(dm("t3", "42", "/stop")).await;
    let texts = rig.platform.wait_texts("42", 2).await;
    assert_eq!(texts[1], "⚡ Stopped. You can continue this session.");
    let reply = rig.say("t4", "42", "still there?").await;
    assert_eq!(reply, ["echo: start a long task\n\nstill there?"]);
    let texts = rig.platform.texts_to("42");
    assert!(!texts.iter().any(|t| t.contains("queued one")), "{texts:?}");
    for id in ["t1", "t2"] {
        let event = rig
            .store
            .get_inbound("telegram", id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(event.state, InboundState::Answered, "{id}");
    }
}

/// What the agent keeps per session in memory (to-do list, session approvals, shell cwd)
/// goes with the session's slot; a to-do list comes back from the history afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_session_state_is_evicted_with_the_slot_and_todos_come_back_from_history() {
    let rig = Rig::start("", ALLOW).await;
    let router = rig.runner.as_ref().unwrap().router.clone();
    let deps = router.agent_deps().expect("a model is configured");
    let todos = serde_json::json!({"todos": [{"id": "1", "content": "paint it blue", "status": "pending"}]});
    rig.model.push_all([
        Step::Reply(Reply::tool_call("todo", todos)),
        Step::Reply(Reply::tool_call(
            "terminal",
            serde_json::json!({"command": "echo hi"}),
        )),
        Step::text("planned"),
    ]);
    rig.platform.inject(dm("m1", "42", "plan it")).await;
    rig.platform
        .wait_until("42", |texts| texts.iter().any(|t| t == "planned"))
        .await;
    let session = rig.session_of("agent:main:telegram:dm:42").await;
    deps.approvals.approve_session(&session, "recursive delete");
    assert_eq!(deps.sessions_in_memory(), (1, 1, 1));

    // The worker clears its flag just after the reply went out; wait for the slot to idle.
    let deadline = std::time::Instant::now() + WAIT;
    while router.evict_idle(Duration::ZERO) == 0 {
        assert!(std::time::Instant::now() < deadline, "the slot never idled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(deps.sessions_in_memory(), (0, 0, 0));

    rig.model.push_all([
        Step::Reply(Reply::tool_call("todo", serde_json::json!({}))),
        Step::text("still planned"),
    ]);
    rig.platform
        .inject(dm("m2", "42", "what was the plan?"))
        .await;
    rig.platform
        .wait_until("42", |texts| texts.iter().any(|t| t == "still planned"))
        .await;
    let requests = rig.model.requests();
    let messages = requests.last().unwrap().body["messages"].clone();
    let read_back = messages.as_array().unwrap().last().unwrap();
    assert_eq!(read_back["role"], "tool", "{messages}");
    assert!(
        read_back["content"]
            .as_str()
            .unwrap()
            .contains("paint it blue"),
        "{messages}"
    );
}

async fn health(url: &str) -> (u16, String) {
    let response = reqwest::get(url).await.expect("GET /health");
    let code = response.status().as_u16();
    (code, response.text().await.expect("body"))
}

/// A turn idle past `agent.gateway_timeout` (here a model call that never returns) is
/// warned about once at `agent.gateway_timeout_warning`, then cancelled and its event
/// answered once with the timeout notice; the session answers the
/// next message, the late model answer is never sent, and the liveness probe stays healthy
/// (it reports only a turn whose cancellation is stuck). The budget used to be reported by
/// the probe but never enforced, so systemd restarted the daemon instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_idle_past_its_budget_is_cancelled_and_answered_once() {
    let rig = Rig::start(
        "agent:\n  gateway_timeout: 2\n  gateway_timeout_warning: 1\n",
        ALLOW,
    )
    .await;
    let runner = rig.runner.as_ref().unwrap();
    let url = format!("http://{}/health", runner.admin_addr.expect("admin API"));
    let gate = held_turn(&rig, "b1", "42", "late answer").await;
    let texts = rig
        .platform
        .wait_until("42", |texts| {
            texts
                .iter()
                .any(|t| t == hermesd::gateway::router::TURN_TIMEOUT_NOTICE)
        })
        .await;
    assert_eq!(
        texts,
        [
            hermesd::gateway::router::TURN_IDLE_WARNING,
            hermesd::gateway::router::TURN_TIMEOUT_NOTICE
        ],
        "one warning, then one answer"
    );
    assert_eq!(health(&url).await.0, 200);
    assert!(runner.is_healthy());
    let event = rig
        .store
        .get_inbound("telegram", "b1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(event.state, InboundState::Answered);

    // The gate opened now answers nobody: the cancelled call is gone.
    gate.add_permits(1);
    rig.platform.inject(dm("b2", "42", "hello again")).await;
    let texts = rig.platform.wait_texts("42", 3).await;
    // The fake model echoes every user message since its last answer: the cancelled one too.
    assert!(
        texts[2].starts_with("echo: ") && texts[2].ends_with("hello again"),
        "{texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "late answer"), "{texts:?}");
}

/// Waiting for the user's approval is not idling: with a 1 s budget, a turn whose command
/// waits for approval outlives two other sessions' turns cancelled one after the other by
/// the same budget (the proof that the budget passed twice over, no sleeps), then runs on
/// once approved and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_an_approval_does_not_count_against_the_budget() {
    let rig = Rig::start("agent:\n  gateway_timeout: 1\n", ALLOW).await;
    let target = rig.dir.path().join("junk");
    std::fs::create_dir_all(&target).unwrap();
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        serde_json::json!({"command": format!("rm -rf {}", target.display())}),
    )));
    rig.platform.inject(dm("w1", "42", "clean up")).await;
    rig.platform
        .wait_until("42", |texts| {
            texts
                .iter()
                .any(|t| t.contains("Command Approval Required"))
        })
        .await;
    for (id, user) in [("w2", "43"), ("w3", "44")] {
        let _gate = held_turn(&rig, id, user, "never shown").await;
        rig.platform
            .wait_until(user, |texts| {
                texts
                    .iter()
                    .any(|t| t == hermesd::gateway::router::TURN_TIMEOUT_NOTICE)
            })
            .await;
    }
    assert!(
        !rig.platform
            .texts_to("42")
            .iter()
            .any(|t| t == hermesd::gateway::router::TURN_TIMEOUT_NOTICE),
        "the waiting turn was cut"
    );
    // Queued only now: the model's script is shared by every session.
    rig.model.push(Step::text("deleted it"));
    rig.platform.inject(dm("w4", "42", "yes")).await;
    rig.platform
        .wait_until("42", |texts| texts.iter().any(|t| t == "deleted it"))
        .await;
}

/// A tool running longer than the budget is work, not idling (Hermes's terminal keeps its
/// activity clock going while the command runs): the turn finishes and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_running_past_the_budget_is_not_cut() {
    let rig = Rig::start("agent:\n  gateway_timeout: 1\n", ALLOW).await;
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        serde_json::json!({"command": "sleep 3"}),
    )));
    rig.model.push(Step::text("slept"));
    rig.platform.inject(dm("t1", "42", "take your time")).await;
    let texts = rig
        .platform
        .wait_until("42", |texts| {
            texts
                .iter()
                .any(|t| t == "slept" || t == hermesd::gateway::router::TURN_TIMEOUT_NOTICE)
        })
        .await;
    assert!(texts.iter().any(|t| t == "slept"), "{texts:?}");
}

/// The probe that gates the systemd watchdog ping, also behind `/health`, sees a dead
/// state.db writer (it used to say "ok" whatever happened).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_liveness_probe_sees_a_dead_writer() {
    let rig = Rig::start("", ALLOW).await;
    let runner = rig.runner.as_ref().unwrap();
    let url = format!("http://{}/health", runner.admin_addr.expect("admin API"));
    assert_eq!(health(&url).await.0, 200);
    assert!(runner.is_healthy());
    rig.store.close().await;
    let (code, body) = health(&url).await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("writer"), "{body}");
    assert!(!runner.is_healthy());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_yes_approves_a_dangerous_command_mid_turn() {
    let rig = Rig::start("", ALLOW).await;
    let target = rig.dir.path().join("junk");
    std::fs::create_dir_all(target.join("inner")).unwrap();
    let command = format!("rm -rf {}", target.display());
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        serde_json::json!({"command": command}),
    )));
    rig.model.push(Step::text("deleted it"));
    rig.platform.inject(dm("a1", "42", "clean up")).await;
    rig.platform
        .wait_until("42", |texts| {
            texts
                .iter()
                .any(|t| t.contains("Command Approval Required"))
        })
        .await;
    let buttons = rig.platform.sent().into_iter().find_map(|o| match o.kind {
        hermes_adapter::OutboundKind::Prompt { buttons, .. } => Some(buttons),
        _ => None,
    });
    let data: Vec<String> = buttons.unwrap().into_iter().map(|b| b.data).collect();
    assert!(data.contains(&"/approve session".to_owned()), "{data:?}");
    rig.platform.inject(dm("a2", "42", "yes")).await;
    let texts = rig
        .platform
        .wait_until("42", |texts| {
            texts.iter().any(|t| t == "✅ Approved once.")
                && texts.iter().any(|t| t == "deleted it")
        })
        .await;
    let journaled = rig
        .store
        .get_inbound("telegram", "a2")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(journaled.state, InboundState::Answered, "{texts:?}");
    assert!(!target.exists(), "the approved command ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_survive_a_restart_and_idle_resets_notify() {
    let mut rig = Rig::start("", ALLOW).await;
    rig.say("r1", "42", "my name is Ada").await;
    let key = "agent:main:telegram:dm:42";
    let first = rig.session_of(key).await;
    rig.restart(None).await;
    rig.say("r2", "42", "what is my name?").await;
    assert_eq!(rig.session_of(key).await, first);
    let sent = rig.model.requests().last().unwrap().body["messages"].to_string();
    assert!(sent.contains("my name is Ada"), "{sent}");

    // Make the conversation look two hours old, then restart with an idle policy.
    let mut entry = rig.routing().await[key].clone();
    entry["updated_at"] = serde_json::json!("2001-01-01T00:00:00.000000");
    let scope = std::fs::canonicalize(rig.dir.path().join("sessions")).unwrap();
    rig.store
        .save_routing_entry(&scope.display().to_string(), key, &entry)
        .await
        .unwrap();
    rig.restart(Some("session_reset:\n  mode: idle\n  idle_minutes: 60\n"))
        .await;
    let texts = rig.say("r3", "42", "hello again").await;
    let all = rig.platform.wait_texts("42", 2).await;
    assert!(
        all[0].starts_with("◐ New session started (inactive for "),
        "{all:?} {texts:?}"
    );
    assert_eq!(all[1], "echo: hello again");
    let second = rig.session_of(key).await;
    assert_ne!(second, first);
    let old = rig.store.get_session(&first).await.unwrap().unwrap();
    assert_eq!(old.end_reason.as_deref(), Some("session_reset"));
}

/// Seeded text with emoji, CJK and code fences.
fn long_reply(seed: u64, chars: usize) -> String {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let words = [
        "hello", "世界", "😀😀", "naïve", "`code`", "data", "🇺🇳", "längere",
    ];
    let mut text = String::new();
    let mut in_fence = false;
    while text.chars().count() < chars {
        if rng.random_ratio(1, 40) {
            text.push_str(if in_fence { "\n```\n" } else { "\n```rust\n" });
            in_fence = !in_fence;
        }
        text.push_str(words[rng.random_range(0..words.len())]);
        text.push(if rng.random_ratio(1, 12) { '\n' } else { ' ' });
    }
    if in_fence {
        text.push_str("\n```\n");
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_arrive_whole_in_chunks_within_the_platform_limit() {
    let seed: u64 = rand::random();
    println!("seed = {seed}");
    let rig = Rig::start("", ALLOW).await;
    let reply = long_reply(seed, 10_000);
    rig.model.push(Step::text(reply.clone()));
    rig.platform.inject(dm("l1", "42", "write a lot")).await;
    // Every chunk carries " (i/N)"; wait for the last one.
    let chunks = rig
        .platform
        .wait_until("42", |texts| {
            texts.last().is_some_and(|last| {
                last.rsplit_once(" (")
                    .and_then(|(_, s)| s.strip_suffix(')'))
                    .and_then(|s| s.split_once('/'))
                    .is_some_and(|(i, n)| i == n)
            })
        })
        .await;
    let total = chunks.len();
    for (i, chunk) in chunks.iter().enumerate() {
        let units = chunk.encode_utf16().count();
        assert!(
            units <= 4096,
            "chunk {i} has {units} UTF-16 units (seed {seed})"
        );
        assert_eq!(
            chunk.matches("```").count() % 2,
            0,
            "unbalanced fence in chunk {i} (seed {seed})"
        );
        assert!(
            chunk.ends_with(&format!(" ({}/{total})", i + 1)),
            "chunk {i} suffix (seed {seed})"
        );
    }
    let letters = |s: &str| -> String { s.chars().filter(|c| c.is_alphanumeric()).collect() };
    let joined: String = chunks
        .iter()
        .map(|c| {
            let suffix = c.rfind(" (").unwrap();
            letters(&c[..suffix].replace("```rust", "```"))
        })
        .collect();
    assert_eq!(
        joined,
        letters(&reply.replace("```rust", "```")),
        "seed {seed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_previews_are_edited_in_place_and_the_final_text_arrives_once() {
    let rig = Rig::start(
        "streaming:\n  enabled: true\n  edit_interval: 0.1\n  buffer_threshold: 5\n",
        ALLOW,
    )
    .await;
    let words: Vec<String> = (0..20).map(|i| format!("word{i}")).collect();
    let reply = words.join(" ");
    rig.model.push(Step::Slow {
        reply: Reply::text(reply.clone()),
        delay: Duration::from_millis(60),
    });
    rig.platform.inject(dm("st1", "42", "stream please")).await;
    use hermes_adapter::OutboundKind;
    // The answer fits one message: the preview is edited into it (finishing in place).
    let sent = rig
        .platform
        .wait_sent(|sent| {
            sent.iter()
                .any(|o| matches!(&o.kind, OutboundKind::Edit { text, .. } if text == &reply))
        })
        .await;
    let preview_at = sent
        .iter()
        .position(|o| matches!(&o.kind, OutboundKind::Text { plain: true, text, .. } if text.starts_with("word0")))
        .expect("a preview was sent");
    let final_edits: Vec<usize> = sent
        .iter()
        .enumerate()
        .filter(|(_, o)| matches!(&o.kind, OutboundKind::Edit { text, .. } if text == &reply))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(final_edits.len(), 1, "the final text exactly once");
    assert!(preview_at < final_edits[0]);
    assert!(
        !sent
            .iter()
            .any(|o| matches!(o.kind, OutboundKind::Delete { .. })),
        "the preview stays: it became the answer"
    );
    assert!(
        !sent
            .iter()
            .any(|o| matches!(&o.kind, OutboundKind::Text { text, .. } if text == &reply)),
        "no second message with the answer"
    );
}
