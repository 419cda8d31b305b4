//! Several hermesd instances on one PostgreSQL database, through the real binary (issue 22):
//! one instance answers chat and HTTP API traffic with its rows in PostgreSQL; a session's
//! messages posted to different instances are answered exactly once, in order, one turn at
//! a time; a killed instance's turn is finished by a survivor within the lease time; and a
//! paused instance that lost its lease writes and sends nothing once it runs again; and a
//! message reaching another instance than the session's holder acts on the running turn
//! (interrupts it, answers its approval, stops it) as it would on one instance.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use std::time::Duration;

use cluster_support::{ClusterRig, WAIT};
use support::fake_model::{Reply, Step};

/// Short leases keep failover quick in tests.
const LEASE_SECONDS: f64 = 2.0;

/// The instance holding a live session lease, or (with `not`) the first other instance to
/// have taken it, waiting (bounded) until there is one.
async fn session_holder(rig: &ClusterRig, not: Option<&str>) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pool = sqlx::postgres::PgPool::connect(&rig.pg.url())
            .await
            .expect("connect");
        let row: Option<(String, bool)> = sqlx::query_as(
            "SELECT holder, expires_at > now() FROM hermesd_leases WHERE scope = 'session'",
        )
        .fetch_optional(&pool)
        .await
        .expect("read leases");
        pool.close().await;
        // The first holder is one whose lease is current. A taker may hold the lease only
        // briefly (its turn is quick, then it releases), so any row naming another holder
        // counts: the paused instance cannot have written it.
        let found = row.filter(|(holder, current)| match not {
            None => *current,
            Some(not) => holder != not,
        });
        if let Some((holder, _)) = found {
            return holder;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no session lease taken"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (bounded) until one of the user's messages contains `part`; returns them all.
async fn wait_text(rig: &ClusterRig, part: &str) -> Vec<String> {
    let mut sent = rig.wait_sent(1).await;
    loop {
        let texts: Vec<String> = sent.iter().map(|m| m.text.clone()).collect();
        if texts.iter().any(|t| t.contains(part)) {
            return texts;
        }
        sent = rig.wait_sent(sent.len() + 1).await;
    }
}

fn index_of(rig: &ClusterRig, name: &str) -> usize {
    rig.instances
        .iter()
        .position(|i| i.name == name)
        .expect("a known instance")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_on_postgres_answers_chat_and_api_with_its_rows_in_postgres() {
    let rig = ClusterRig::start(1, LEASE_SECONDS).await;
    assert_eq!(rig.post(0, 1, "hello from telegram").await, 200);
    let sent = rig.wait_sent(1).await;
    assert_eq!(sent[0].text, "echo: hello from telegram");
    let answer = rig.api_chat(0, "api-conv-1", "hello from the api").await;
    assert_eq!(
        answer["choices"][0]["message"]["content"], "echo: hello from the api",
        "{answer}"
    );
    // Both conversations are stored in PostgreSQL, and the chat event is answered there.
    assert_eq!(
        rig.count("SELECT count(*) FROM messages WHERE role = 'user'")
            .await,
        2
    );
    assert_eq!(
        rig.count("SELECT count(*) FROM messages WHERE role = 'assistant'")
            .await,
        2
    );
    assert_eq!(
        rig.count("SELECT count(*) FROM hermesd_inbound_events WHERE state = 'answered'")
            .await,
        1
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_sessions_messages_spread_over_three_instances_run_one_at_a_time_in_order() {
    // Queue mode: a message that reaches the holder mid-turn waits its turn (the default,
    // interrupt, would cancel the running turn and answer only the newer message).
    let rig =
        ClusterRig::start_with(3, LEASE_SECONDS, "display:\n  busy_input_mode: queue\n").await;
    const MESSAGES: usize = 6;
    let delay = Duration::from_millis(300);
    rig.model.push_all((0..MESSAGES).map(|i| Step::Slow {
        reply: Reply::text(format!("reply {i}")),
        delay,
    }));
    // A round-robin balancer: message i goes to instance i % 3.
    for i in 0..MESSAGES {
        let status = rig.post(i % 3, i as i64 + 1, &format!("message {i}")).await;
        assert_eq!(status, 200, "message {i}");
    }
    let replies = |sent: &[fake_telegram::SentMessage]| -> Vec<String> {
        // The holder acknowledges a message queued behind its running turn (once per 30 s).
        sent.iter()
            .map(|m| m.text.clone())
            .filter(|t| !t.starts_with("⏳"))
            .collect()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut sent = rig.wait_sent(MESSAGES).await;
    while replies(&sent).len() < MESSAGES && tokio::time::Instant::now() < deadline {
        sent = rig.wait_sent(sent.len() + 1).await;
    }
    let texts = replies(&sent);
    let expected: Vec<String> = (0..MESSAGES).map(|i| format!("reply {i}")).collect();
    assert_eq!(texts, expected, "each answered once, in order");
    // Never two turns of the session at once: each request came after the previous
    // (which took `delay` to answer) was done.
    let requests = rig.model.requests();
    let saw: Vec<String> = requests.iter().map(|r| r.last_message_text()).collect();
    let asked: Vec<String> = (0..MESSAGES).map(|i| format!("message {i}")).collect();
    assert_eq!(saw, asked);
    for pair in requests.windows(2) {
        assert!(
            pair[1].received_at >= pair[0].received_at + delay,
            "two turns of one session overlapped"
        );
    }
    assert_eq!(
        rig.count("SELECT count(*) FROM delivery_obligations").await,
        MESSAGES as i64
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_instances_turn_is_answered_once_by_a_survivor() {
    let mut rig = ClusterRig::start(2, LEASE_SECONDS).await;
    let (held, _gate) = Step::gated("never sent: its instance dies");
    rig.model.push(held);
    assert_eq!(rig.post(0, 1, "finish me").await, 200);
    rig.model.wait_for_requests(1, WAIT).await;
    let holder = session_holder(&rig, None).await;
    let victim = index_of(&rig, &holder);
    rig.kill9(victim);
    // The survivor takes the expired lease and resumes the started turn from its history.
    let sent = rig.wait_sent(1).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text, "echo: finish me");
    assert_eq!(
        rig.count("SELECT count(*) FROM delivery_obligations").await,
        1
    );
    assert_eq!(
        rig.count("SELECT count(*) FROM messages WHERE role = 'user'")
            .await,
        1,
        "the resumed turn did not store the user's message again"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_instance_that_lost_its_lease_writes_and_sends_nothing() {
    let rig = ClusterRig::start(2, LEASE_SECONDS).await;
    let (held, gate) = Step::gated("late reply from the paused instance");
    rig.model.push(held);
    assert_eq!(rig.post(0, 1, "who answers?").await, 200);
    rig.model.wait_for_requests(1, WAIT).await;
    let holder = session_holder(&rig, None).await;
    let paused = index_of(&rig, &holder);
    rig.signal(paused, "-STOP");
    // Past the lease, the other instance takes the session and answers.
    let taker = session_holder(&rig, Some(&holder)).await;
    assert_ne!(taker, holder);
    let sent = rig.wait_sent(1).await;
    assert_eq!(sent[0].text, "echo: who answers?");
    // The paused instance's model call completes, then it runs again.
    gate.add_permits(1);
    rig.signal(paused, "-CONT");
    let daemon = rig.instances[paused].daemon();
    tokio::task::block_in_place(|| daemon.wait_for_line("session lease lost mid-turn", WAIT))
        .expect("the resumed instance noticed it lost the session");
    assert_eq!(rig.sent().len(), 1, "the paused instance sent nothing");
    assert_eq!(
        rig.count(
            "SELECT count(*) FROM messages WHERE content LIKE '%late reply from the paused%'"
        )
        .await,
        0,
        "the paused instance wrote nothing"
    );
    assert_eq!(
        rig.count("SELECT count(*) FROM delivery_obligations").await,
        1
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_through_another_instance_acts_on_the_holders_running_turn() {
    let rig = ClusterRig::start(2, LEASE_SECONDS).await;
    let other = |holder: &str| 1 - index_of(&rig, holder);

    // Interrupt (the default busy mode): the new message stops the running turn, and the
    // next turn answers both, as on one instance.
    let (held, _gate) = Step::gated("never sent: interrupted");
    rig.model.push(held);
    assert_eq!(rig.post(0, 1, "start a long task").await, 200);
    rig.model.wait_for_requests(1, WAIT).await;
    let holder = session_holder(&rig, None).await;
    assert_eq!(rig.post(other(&holder), 2, "actually, do this").await, 200);
    let texts = wait_text(&rig, "actually, do this").await;
    assert!(texts[0].contains("Stopping the current task"), "{texts:?}");
    assert_eq!(
        texts.last().unwrap(),
        "echo: start a long task\n\nactually, do this"
    );

    // An approval the holder's turn waits for is answered through the other instance.
    let doomed = tempfile::tempdir().unwrap();
    let target = doomed.path().join("junk");
    std::fs::create_dir_all(target.join("inner")).unwrap();
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        serde_json::json!({"command": format!("rm -rf {}", target.display())}),
    )));
    rig.model.push(Step::text("deleted it"));
    assert_eq!(rig.post(0, 3, "clean up").await, 200);
    wait_text(&rig, "Approval Required").await;
    let holder = session_holder(&rig, None).await;
    assert_eq!(rig.post(other(&holder), 4, "yes").await, 200);
    let texts = wait_text(&rig, "deleted it").await;
    assert!(
        texts.iter().any(|t| t.contains("Approved once")),
        "{texts:?}"
    );
    assert!(!target.exists(), "the approved command ran");

    // `/stop` through the other instance stops the holder's turn.
    let (held, _gate) = Step::gated("never sent: stopped");
    rig.model.push(held);
    let before = rig.model.requests().len();
    assert_eq!(rig.post(0, 5, "another long task").await, 200);
    rig.model.wait_for_requests(before + 1, WAIT).await;
    let holder = session_holder(&rig, None).await;
    assert_eq!(rig.post(other(&holder), 6, "/stop").await, 200);
    let texts = wait_text(&rig, "Stopped").await;
    assert!(!texts.iter().any(|t| t.contains("never sent")), "{texts:?}");
    // Every journaled event is closed; each got exactly the replies above.
    assert_eq!(
        rig.count(
            "SELECT count(*) FROM hermesd_inbound_events WHERE state IN ('received', 'processing')"
        )
        .await,
        0
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_turn_that_lost_its_lease_is_finished_once_when_the_lease_is_back() {
    let rig = ClusterRig::start(1, LEASE_SECONDS).await;
    let (held, gate) = Step::gated("refused: written under a lost lease");
    rig.model.push(held);
    let api = rig.instances[0].daemon().api_url();
    let request = rig.api_chat_at(&api, "api-lease", "what is owed?");
    let thief = async {
        rig.model.wait_for_requests(1, WAIT).await;
        // Mid-turn, the session's lease goes to someone else (as when this instance stalls
        // past it and another takes it) for one lease time.
        let pool = sqlx::postgres::PgPool::connect(&rig.pg.url())
            .await
            .expect("connect");
        let taken = sqlx::query(
            "UPDATE hermesd_leases SET holder = 'thief', \
                 token = nextval('hermesd_lease_tokens'), acquired_at = now(), \
                 expires_at = now() + interval '2 seconds' \
             WHERE scope = 'session'",
        )
        .execute(&pool)
        .await
        .expect("take the lease");
        assert_eq!(taken.rows_affected(), 1);
        pool.close().await;
        gate.add_permits(1);
    };
    let ((status, answer), ()) = tokio::join!(request, thief);
    // The client gets one answer, from the turn taken up again once the lease came back:
    // it continued from the stored user message (the model saw it once) instead of failing.
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["choices"][0]["message"]["content"],
        "echo: what is owed?"
    );
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 2);
    let resumed = requests[1].body["messages"].to_string();
    assert_eq!(resumed.matches("what is owed?").count(), 1, "{resumed}");
    assert_eq!(
        rig.count("SELECT count(*) FROM messages WHERE role = 'user'")
            .await,
        1
    );
    assert_eq!(
        rig.count("SELECT count(*) FROM messages WHERE content LIKE '%lost lease%'")
            .await,
        0,
        "nothing was written under the lost lease"
    );
    rig.stop().await;
}
