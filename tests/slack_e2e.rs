//! Slack end to end: the real `hermesd run` binary connected over Socket Mode to a
//! wire-level fake Slack, answering through the fake model. Each test asserts the exact
//! observables: which channel and thread `chat.postMessage` got which text, how often, and
//! what the model saw.
//!
//! Covered here: a DM conversation whose thread keeps its history; channel mention gating
//! (plain message ignored, `app_mention` answered in its thread with the mention stripped,
//! a free-response channel, one session per thread); `!status` and `!new` typed in a
//! thread; strangers (a pairing code in a DM, nothing in a channel, nothing reaching the
//! model); a reply longer than Slack's 39,000 characters in chunks; a 429 with
//! `Retry-After` on `chat.postMessage` delaying a reply without losing or doubling it.

mod slack_support;
mod support;

use fake_slack::{Fault, events};
use slack_support::{FRIEND, OWNER, STRANGER, SlackRun, conversation, last_user_text};
use support::fake_model::Step;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_conversation_keeps_its_history_in_its_thread() {
    let run = SlackRun::start(&[], &[]).await;
    let dm = "D0OWNER";

    let (_, first_ts) = run.dm(dm, OWNER, "hello there");
    let first = run.next_post(dm, 0).await;
    assert_eq!(first.text, "echo: hello there");
    assert_eq!(first.thread_ts.as_deref(), Some(first_ts.as_str()));

    // The second turn, in the thread the bot answered in: same session, history kept.
    run.dm_in_thread(dm, OWNER, "and what did I say?", &first_ts);
    let second = run.next_post(dm, 1).await;
    // A thread reply quotes its parent, as the reference does.
    let quoted = "[Replying to: \"hello there\"]\n\nand what did I say?";
    assert_eq!(second.text, format!("echo: {quoted}"));
    assert_eq!(second.thread_ts.as_deref(), Some(first_ts.as_str()));
    let requests = run.model_requests();
    assert_eq!(
        conversation(&requests[1]),
        [
            "user: hello there",
            "assistant: echo: hello there",
            &format!("user: {quoted}"),
        ]
    );

    // A new top-level DM starts its own session (dm_top_level_threads_as_sessions).
    let (_, fresh_ts) = run.dm(dm, OWNER, "something else");
    let third = run.next_post(dm, 2).await;
    assert_eq!(third.text, "echo: something else");
    assert_eq!(third.thread_ts.as_deref(), Some(fresh_ts.as_str()));
    let requests = run.model_requests();
    assert_eq!(conversation(&requests[2]), ["user: something else"]);

    assert_eq!(run.posts(dm).len(), 3, "{:#?}", run.posts(dm));
    assert_eq!(run.model_requests().len(), 3);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_mentions_threads_and_bang_commands() {
    let run = SlackRun::start(&[("free_response_channels", "[C0FREE]")], &[]).await;
    let general = "C0GENERAL";

    // A plain channel message is acknowledged and ignored; the mention after it (Slack
    // sends `message` and `app_mention` for it) is answered once, in its thread.
    let plain_ts = run.slack.next_ts();
    let plain = run.slack.push_event(events::channel_message(
        general,
        OWNER,
        "just chatting",
        &plain_ts,
    ));
    let mention_ts = run.mention(general, OWNER, "what is up?");
    let reply = run.next_post(general, 0).await;
    run.wait_for_ack(&plain).await;
    assert_eq!(reply.text, "echo: what is up?");
    assert_eq!(reply.thread_ts.as_deref(), Some(mention_ts.as_str()));
    let requests = run.model_requests();
    assert_eq!(
        requests.len(),
        1,
        "the plain message never reached the model"
    );
    assert_eq!(last_user_text(&requests[0]), "what is up?");

    // A follow-up in that thread needs no mention and continues the same session.
    run.thread_reply(general, OWNER, "tell me more", &mention_ts);
    let reply = run.next_post(general, 1).await;
    let quoted = "[Replying to: \"what is up?\"]\n\ntell me more";
    assert_eq!(reply.text, format!("echo: {quoted}"));
    assert_eq!(reply.thread_ts.as_deref(), Some(mention_ts.as_str()));
    let seen = conversation(&run.model_requests()[1]);
    assert_eq!(seen.len(), 3, "{seen:#?}");
    assert_eq!(seen[0], "user: what is up?");
    assert_eq!(seen[1], "assistant: echo: what is up?");
    assert_eq!(seen[2], format!("user: {quoted}"));

    // `!status` and `!new` typed in the thread are the gateway's commands: no model call.
    run.thread_reply(general, OWNER, "!status", &mention_ts);
    let status = run.next_post(general, 2).await;
    assert!(
        status.text.starts_with("📊 *Hermes Gateway Status*"),
        "{}",
        status.text
    );
    assert!(status.text.contains("*Session ID:*"), "{}", status.text);
    assert!(status.text.contains("*Platform:* slack"), "{}", status.text);
    assert_eq!(status.thread_ts.as_deref(), Some(mention_ts.as_str()));
    run.thread_reply(general, OWNER, "!new", &mention_ts);
    let reset = run.next_post(general, 3).await;
    assert_eq!(reset.text, "✨ Session reset! Starting fresh.");
    assert_eq!(reset.thread_ts.as_deref(), Some(mention_ts.as_str()));
    assert_eq!(
        run.model_requests().len(),
        2,
        "commands never call the model"
    );

    // After the reset the thread's session starts empty.
    run.thread_reply(general, OWNER, "after the reset", &mention_ts);
    let reply = run.next_post(general, 4).await;
    let quoted = "[Replying to: \"what is up?\"]\n\nafter the reset";
    assert_eq!(reply.text, format!("echo: {quoted}"));
    assert_eq!(
        conversation(&run.model_requests()[2]),
        [format!("user: {quoted}")]
    );

    // Another mention is another thread, another session.
    let other_ts = run.mention(general, FRIEND, "a new topic");
    let reply = run.next_post(general, 5).await;
    assert_eq!(reply.text, "echo: a new topic");
    assert_eq!(reply.thread_ts.as_deref(), Some(other_ts.as_str()));
    assert_eq!(
        conversation(&run.model_requests()[3]),
        ["user: a new topic"]
    );

    // A free-response channel answers without a mention, in the message's thread.
    let free_ts = run.slack.next_ts();
    run.slack.push_event(events::channel_message(
        "C0FREE",
        FRIEND,
        "no mention needed",
        &free_ts,
    ));
    let reply = run.next_post("C0FREE", 0).await;
    assert_eq!(reply.text, "echo: no mention needed");
    assert_eq!(reply.thread_ts.as_deref(), Some(free_ts.as_str()));

    assert_eq!(run.posts(general).len(), 6, "{:#?}", run.posts(general));
    assert_eq!(run.posts("C0FREE").len(), 1);
    assert_eq!(run.model_requests().len(), 5);
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_get_a_pairing_code_in_a_dm_and_nothing_in_a_channel() {
    let run = SlackRun::start(&[("unauthorized_dm_behavior", "pair")], &[]).await;

    let (_, _) = run.dm("D0STRANGER", STRANGER, "let me in");
    let code_reply = run.next_post("D0STRANGER", 0).await;
    assert!(
        code_reply
            .text
            .starts_with("I don't know you yet. Your pairing code is `"),
        "{}",
        code_reply.text
    );
    let code = code_reply
        .text
        .split('`')
        .nth(1)
        .expect("code in backticks")
        .to_owned();
    assert_eq!(code.len(), 8, "{code}");

    // In a channel a stranger's mention gets nothing; the owner's mention after it is the
    // barrier proving the stranger's was handled (envelopes are handled in order).
    let stranger_ts = run.mention("C0GENERAL", STRANGER, "answer me");
    let owner_ts = run.mention("C0GENERAL", OWNER, "hello from the owner");
    let reply = run.next_post("C0GENERAL", 0).await;
    assert_eq!(reply.text, "echo: hello from the owner");
    assert_eq!(reply.thread_ts.as_deref(), Some(owner_ts.as_str()));
    let requests = run.model_requests();
    assert_eq!(
        requests.len(),
        1,
        "nothing from the stranger reached the model"
    );
    assert_eq!(last_user_text(&requests[0]), "hello from the owner");
    assert!(
        run.posts("C0GENERAL")
            .iter()
            .all(|p| p.thread_ts.as_deref() != Some(stranger_ts.as_str())),
        "{:#?}",
        run.posts("C0GENERAL")
    );

    // Once the owner approves the code, the stranger's DMs are answered.
    let approve = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["pairing", "approve", "slack", &code])
        .env("HERMES_HOME", run.home.path())
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .expect("run hermesd pairing approve");
    assert!(approve.status.success(), "{approve:?}");
    run.dm("D0STRANGER", STRANGER, "now a friend");
    let reply = run.next_post("D0STRANGER", 1).await;
    assert_eq!(reply.text, "echo: now a friend");
    assert_eq!(run.posts("D0STRANGER").len(), 2);
    assert_eq!(run.posts("C0GENERAL").len(), 1);
    run.stop().await;
}

/// Text of about `chars` characters from a seeded word list, with newlines now and then.
fn seeded_long_text(seed: u64, chars: usize) -> String {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let words = ["hello", "世界", "😀", "naïve", "données", "text", "slack"];
    let mut text = String::new();
    while text.chars().count() < chars {
        text.push_str(words[rng.random_range(0..words.len())]);
        text.push(if rng.random_ratio(1, 40) { '\n' } else { ' ' });
    }
    text.trim_end().to_owned()
}

/// Strips the chunker's ` (i/N)` suffix; returns the text and (i, N).
fn numbered(chunk: &str) -> (String, usize, usize) {
    let (body, suffix) = chunk.rsplit_once(" (").expect("a numbered chunk");
    let (i, n) = suffix
        .strip_suffix(')')
        .and_then(|s| s.split_once('/'))
        .expect("(i/N)");
    (
        body.to_owned(),
        i.parse().expect("chunk index"),
        n.parse().expect("chunk count"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_replies_arrive_in_chunks_and_rate_limits_delay_without_loss() {
    let seed: u64 = rand::random();
    println!("seed = {seed}");
    let run = SlackRun::start(&[], &[]).await;
    let dm = "D0OWNER";

    let long = seeded_long_text(seed, 90_000);
    run.model.push(Step::text(long.clone()));
    let (_, ts) = run.dm(dm, OWNER, "write a lot");
    let first = run.next_post(dm, 0).await;
    let (_, _, total) = numbered(&first.text);
    assert!(total >= 3, "seed {seed}: {total} chunks");
    let chunks = run.posts_in(dm, total).await;
    let mut words = Vec::new();
    for (k, chunk) in chunks.iter().enumerate() {
        let length = chunk.text.chars().count();
        assert!(
            length <= 39_000,
            "seed {seed}: chunk {k} has {length} chars"
        );
        assert_eq!(chunk.thread_ts.as_deref(), Some(ts.as_str()));
        let (body, i, n) = numbered(&chunk.text);
        assert_eq!((i, n), (k + 1, total), "seed {seed}: chunks in order");
        words.extend(body.split_whitespace().map(str::to_owned));
    }
    let expected: Vec<String> = long.split_whitespace().map(str::to_owned).collect();
    assert!(words == expected, "seed {seed}: chunks do not reassemble");

    // Slack rate-limits the next reply once: it arrives after Retry-After, exactly once.
    run.slack.fail_next(
        "chat.postMessage",
        Fault::RateLimited {
            retry_after_secs: 1,
        },
    );
    run.dm(dm, OWNER, "after the rate limit");
    let reply = run.next_post(dm, total).await;
    assert_eq!(reply.text, "echo: after the rate limit");
    let attempts: Vec<_> = run
        .slack
        .calls("chat.postMessage")
        .into_iter()
        .filter(|c| c.str("text") == Some("echo: after the rate limit"))
        .collect();
    assert_eq!(attempts.len(), 2, "one refused attempt, one accepted");
    // Proof it was not lost later either: one more turn, and still one copy.
    run.dm(dm, OWNER, "barrier");
    run.next_post(dm, total + 1).await;
    let copies = run
        .posts(dm)
        .iter()
        .filter(|p| p.text == "echo: after the rate limit")
        .count();
    assert_eq!(copies, 1);
    assert_eq!(run.posts(dm).len(), total + 2);
    run.stop().await;
}
