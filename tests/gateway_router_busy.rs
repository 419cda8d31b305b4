//! The router end to end while a session is busy: interrupt, queue and steer modes,
//! leftover steer text, `/stop`, plain-word approvals mid-turn, and what goes with an
//! evicted slot.

mod router_support;
mod support;

use router_support::*;

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
