//! The gateway core end to end, in process: the real GatewayRunner, router, state.db and
//! agent, a fake model server at the wire level, and a chat platform speaking the adapter
//! contract. Routing, redelivery, authorization and pairing, commands, restarts, chunking
//! and streaming. Busy sessions are `gateway_router_busy.rs`, turn budgets and liveness
//! `gateway_router_budget.rs`; the rig is `router_support/`.

mod router_support;
mod support;

use router_support::*;

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
