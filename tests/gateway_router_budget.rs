//! The router's turn budget and liveness probe end to end: an idle turn is cancelled and
//! answered once, waiting on a person or a long tool is not idling, and the probe sees a
//! dead state.db writer.

mod router_support;
mod support;

use router_support::*;

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
