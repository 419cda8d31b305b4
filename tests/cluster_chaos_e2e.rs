//! The cluster evidence through the real binary: three instances on one PostgreSQL,
//! fake Telegram in webhook mode behind a round-robin balancer (this test: update `i` goes
//! to instance `i % 3`, or the next live one, as a balancer skips a dead backend) plus HTTP
//! API requests, a seeded load of DMs from four users, and kill -9 of an instance (most often
//! the one that just took a message, so mid-turn) three times, each restarted a few messages
//! later. Every message is answered exactly
//! once: a reply whose send a kill may have cut short may come again only with the recovered
//! marker, never plain (counted, as the soak counts them). Set `HERMESD_TEST_SEED` to replay.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use cluster_support::{ClusterRig, USERS, WAIT};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const LEASE_SECONDS: f64 = 2.0;
const MESSAGES: usize = 36;
/// Right after these messages an instance is killed (most often the one that just took the
/// message); it comes back 4 messages later.
const KILL_AFTER: [usize; 3] = [8, 18, 28];
const RESTART_AFTER: usize = 4;

/// Posts update `i` to instance `first` or, if that backend is down or refuses, the next
/// live one (a balancer with health checks; Telegram itself retries a failed delivery:
/// https://core.telegram.org/bots/api#setwebhook).
async fn balance(rig: &ClusterRig, first: usize, i: usize, user: i64, text: &str) -> usize {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut n = first;
    loop {
        if rig.is_running(n)
            && let Ok(200) = rig.post_as(n, i as i64 + 1, user, text).await
        {
            return n;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no instance took update {i}"
        );
        n = (n + 1) % rig.instances.len();
        if n == first {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_load_over_three_instances_with_three_kills_is_answered_exactly_once() {
    let seed: u64 = std::env::var("HERMESD_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (HERMESD_TEST_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    // Queue mode: a message reaching a busy session waits for its turn instead of
    // interrupting it, so every message gets its own reply.
    let mut rig =
        ClusterRig::start_with(3, LEASE_SECONDS, "display:\n  busy_input_mode: queue\n").await;
    let mut tokens: Vec<String> = Vec::new();
    let mut down: Option<(usize, usize)> = None;
    let mut api_answers = 0;
    for i in 0..MESSAGES {
        let user = USERS[rng.random_range(0..USERS.len())];
        // Letters and digits only: MarkdownV2 escapes punctuation in the reply.
        let token = format!("m{i}q{seed}");
        let receiver = balance(&rig, i % 3, i, user, &format!("note {token}")).await;
        tokens.push(token);
        if i % 6 == 5 {
            // An HTTP API request to a live instance, answered on its own connection.
            let n = (0..3).find(|n| rig.is_running((n + i) % 3)).unwrap();
            let text = format!("api {i}-{seed}");
            let answer = rig.api_chat((n + i) % 3, &format!("api-{i}"), &text).await;
            assert_eq!(
                answer["choices"][0]["message"]["content"],
                format!("echo: {text}"),
                "{answer}"
            );
            api_answers += 1;
        }
        if KILL_AFTER.contains(&i) {
            // Most often the instance that just took the message, so the kill lands while
            // its turn (or the reply's send) is under way; else another live one.
            let live: Vec<usize> = (0..3).filter(|n| rig.is_running(*n)).collect();
            let victim = if rng.random_bool(0.7) {
                receiver
            } else {
                live[rng.random_range(0..live.len())]
            };
            eprintln!("kill -9 of instance {victim} after message {i}");
            rig.kill9(victim);
            down = Some((victim, i + RESTART_AFTER));
        }
        if let Some((victim, at)) = down
            && at == i
        {
            eprintln!("restarting instance {victim}");
            rig.restart(victim).await;
            down = None;
        }
    }
    if let Some((victim, _)) = down {
        rig.restart(victim).await;
    }

    // Wait (bounded) until every message has a reply.
    // Replies go out as MarkdownV2: compare with its escapes removed.
    let unescape = |text: &str| text.replace('\\', "");
    let marker = unescape(hermesd::state::RECOVERED_MARKER);
    let counts = |rig: &ClusterRig| -> BTreeMap<&String, (u32, u32)> {
        let sent = rig.sent_to_anyone();
        tokens
            .iter()
            .map(|token| {
                let mut plain_marked = (0, 0);
                for text in sent.iter().map(|m| unescape(&m.text)) {
                    if !text.contains(&format!("{token} ")) && !text.ends_with(token.as_str()) {
                        continue;
                    }
                    if text.starts_with(&marker) {
                        plain_marked.1 += 1;
                    } else {
                        plain_marked.0 += 1;
                    }
                }
                (token, plain_marked)
            })
            .collect()
    };
    let deadline = tokio::time::Instant::now() + WAIT * 2;
    loop {
        // Armed before looking: a reply answered meanwhile then ends the wait below at once.
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let change = rig.telegram.next_change(remaining.min(WAIT));
        let unanswered: Vec<&String> = counts(&rig)
            .into_iter()
            .filter(|(_, (plain, marked))| plain + marked == 0)
            .map(|(t, _)| t)
            .collect();
        if unanswered.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed}: never answered: {unanswered:?}\nsent: {:#?}\nlogs: {:#?}",
            rig.sent_to_anyone(),
            rig.all_logs()
        );
        change.await;
    }
    let counts = counts(&rig);
    let doubled: Vec<_> = counts.iter().filter(|(_, (plain, _))| *plain > 1).collect();
    assert!(
        doubled.is_empty(),
        "seed {seed}: answered twice: {doubled:?}"
    );
    let marked: u32 = counts.values().map(|(_, m)| m).sum();
    eprintln!(
        "seed {seed}: {} messages answered once each ({marked} recovered-marked resends), {api_answers} API answers",
        tokens.len()
    );
    // The journal agrees: every event answered, none left running.
    assert_eq!(
        rig.count("SELECT count(*) FROM hermesd_inbound_events WHERE state <> 'answered'")
            .await,
        0
    );
    rig.stop().await;
}
