//! The combined cluster evidence through the real binary: three instances on one
//! PostgreSQL; fake Telegram in webhook mode behind a round-robin balancer
//! (`support::round_robin`, which also fronts the HTTP API); fake Discord with two shards
//! (guild messages in a guild of each shard, free response); fake Slack with a Socket Mode
//! connection per instance (the fake spreads envelopes over them and retries one whose ack
//! never came on another). A seeded load, and kill -9 of a random instance three times,
//! each restarted two rounds later. Every Telegram, Discord and Slack message and every API
//! request is answered exactly once: a reply whose send a kill may have cut short may come
//! again only with the recovered marker, never plain. Set `HERMESD_TEST_SEED` to replay.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use cluster_support::{ClusterRig, SLACK_USERS, USERS, WAIT, post_update};
use fake_slack::events;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use support::round_robin::RoundRobin;

const LEASE_SECONDS: f64 = 2.0;
/// Rounds of load: each sends one Telegram update, one Discord and one Slack message.
const ROUNDS: usize = 12;
/// Every fourth round's Slack message is delivered a second time, as Slack does when an ack
/// reached it late.
const LATE_ACK_EVERY: usize = 4;
/// Every third round also makes an HTTP API request.
const API_EVERY: usize = 3;
/// Right after these rounds a random live instance is killed; it comes back
/// [`RESTART_AFTER`] rounds later.
const KILL_AFTER: [usize; 3] = [2, 5, 8];
const RESTART_AFTER: usize = 2;
const CREATE_MESSAGE: &str = "POST /channels/{id}/messages";

/// Delivers a Telegram update through the balancer as Telegram does: a delivery that fails
/// or is not answered 2xx is tried again (https://core.telegram.org/bots/api#setwebhook),
/// here after a short pause, within a bounded wait.
async fn deliver_update(http: &reqwest::Client, url: &str, update_id: i64, user: i64, text: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = post_update(http, url, update_id, user, text).await;
        if matches!(status, Ok(s) if (200..300).contains(&s)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "update {update_id} never delivered: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A chat completion through the balancer, as a client behind a load balancer makes it: a
/// 502 (the balancer's when the instance holding the request died, or the daemon's "the
/// session moved to another instance; please retry" when stalls cost the turn its session
/// lease three times) is tried again, counted in `retries`, within a bounded wait. Returns
/// the answer.
async fn api_request(
    rig: &ClusterRig,
    api: &RoundRobin,
    conversation: &str,
    text: &str,
    retries: &mut u32,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, answer) = rig.api_chat_at(&api.url(), conversation, text).await;
        if status == 200 {
            return answer;
        }
        assert!(
            status == 502 && tokio::time::Instant::now() < deadline,
            "API request {conversation} answered {status}: {answer}"
        );
        eprintln!("API request {conversation} answered 502 ({answer}); trying again");
        *retries += 1;
    }
}

/// How many IDENTIFYs for `shard` the fake Discord received.
fn identifies_of(state: &fake_discord::State, shard: u64) -> usize {
    let pair = serde_json::json!([shard, cluster_support::SHARDS]);
    state
        .frames
        .iter()
        .filter(|frame| frame.op == 2 && frame.d["shard"] == pair)
        .count()
}

/// Whether `text` carries `token` as a whole word.
fn mentions(text: &str, token: &str) -> bool {
    text.match_indices(token).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + token.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// (plain, recovered-marked) replies per token among `texts`. Replies are compared with
/// Telegram's MarkdownV2 escapes removed.
fn counts(tokens: &[String], texts: &[String]) -> BTreeMap<String, (u32, u32)> {
    let unescape = |text: &str| text.replace('\\', "");
    let marker = unescape(hermesd::state::RECOVERED_MARKER);
    let marker = marker.lines().next().unwrap_or_default().to_owned();
    tokens
        .iter()
        .map(|token| {
            let mut plain_marked = (0, 0);
            for text in texts.iter().map(|t| unescape(t)) {
                if !mentions(&text, token) {
                    continue;
                }
                if text.contains(&marker) {
                    plain_marked.1 += 1;
                } else {
                    plain_marked.0 += 1;
                }
            }
            (token.clone(), plain_marked)
        })
        .collect()
}

fn unanswered(tokens: &[String], texts: &[String]) -> Vec<String> {
    counts(tokens, texts)
        .into_iter()
        .filter(|(_, (plain, marked))| plain + marked == 0)
        .map(|(token, _)| token)
        .collect()
}

/// The bot's successful messages in `channels` on the fake Discord.
fn discord_texts(state: &fake_discord::State, channels: &[String]) -> Vec<String> {
    let paths: Vec<String> = channels
        .iter()
        .map(|c| format!("/api/v10/channels/{c}/messages"))
        .collect();
    state
        .calls
        .iter()
        .filter(|c| c.route == CREATE_MESSAGE && c.status < 300 && paths.contains(&c.path))
        .map(|c| c.body["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn slack_texts(posted: &[fake_slack::Posted]) -> Vec<String> {
    posted
        .iter()
        .filter(|p| SLACK_USERS.iter().any(|(_, dm)| p.channel == *dm))
        .map(|p| p.text.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_load_on_every_platform_over_three_instances_with_three_kills_is_answered_once() {
    let started = std::time::Instant::now();
    let seed: u64 = std::env::var("HERMESD_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (HERMESD_TEST_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);
    // Queue mode: a message reaching a busy session waits for its turn instead of
    // interrupting it, so every message gets its own reply.
    let mut rig =
        ClusterRig::start_all_platforms(3, LEASE_SECONDS, "display:\n  busy_input_mode: queue\n")
            .await;
    let webhooks = RoundRobin::start((0..3).map(|n| rig.webhook_base(n)).collect()).await;
    let api = RoundRobin::start(
        (0..3)
            .map(|n| rig.instances[n].daemon().api_url())
            .collect(),
    )
    .await;
    let hook = format!("{}{}", webhooks.url(), cluster_support::WEBHOOK_PATH);
    eprintln!("three instances up after {:?}", started.elapsed());

    let http = reqwest::Client::new();
    let (mut telegram, mut discord, mut slack) = (Vec::new(), Vec::new(), Vec::new());
    let mut down: Option<(usize, usize)> = None;
    let mut api_answers = 0;
    let mut api_retries = 0;
    let mut late_acks = 0;
    for i in 0..ROUNDS {
        // Letters and digits only: MarkdownV2 escapes punctuation in the reply.
        let token = format!("t{i}q{seed}");
        let user = USERS[rng.random_range(0..USERS.len())];
        deliver_update(&http, &hook, i as i64 + 1, user, &format!("note {token}")).await;
        telegram.push(token);

        let more = rig.more.as_ref().expect("all platforms");
        let token = format!("d{i}q{seed}");
        let channel = &more.channels[rng.random_range(0..more.channels.len())];
        more.discord.push_message(fake_discord::Incoming::new(
            channel,
            &more.owner,
            &format!("note {token}"),
        ));
        discord.push(token);

        let token = format!("s{i}q{seed}");
        let (user, dm) = SLACK_USERS[rng.random_range(0..SLACK_USERS.len())];
        let ts = more.slack.next_ts();
        let pushed = more
            .slack
            .push_event(events::dm(dm, user, &format!("note {token}"), &ts));
        slack.push(token);
        if i % LATE_ACK_EVERY == 0 {
            // Slack saw this ack too late and delivers the event again, to another
            // instance's socket: that instance must find it in the journal and not answer.
            let id = pushed.envelope_id.clone();
            more.slack
                .wait_within(WAIT, &format!("ack of {id}"), |r| {
                    r.acks.iter().any(|a| a.envelope_id == id).then_some(())
                })
                .await;
            more.slack
                .redeliver_envelope(&id, "http_timeout")
                .expect("a known envelope");
            late_acks += 1;
        }

        if i % API_EVERY == API_EVERY - 1 {
            let text = format!("api {i}q{seed}");
            let answer =
                api_request(&rig, &api, &format!("api-{i}"), &text, &mut api_retries).await;
            assert_eq!(
                answer["choices"][0]["message"]["content"],
                format!("echo: {text}"),
                "{answer}"
            );
            api_answers += 1;
        }
        if KILL_AFTER.contains(&i) {
            // Right after the round's messages went out, so the kill most likely lands
            // while turns (or their replies' sends) are under way.
            let live: Vec<usize> = (0..3).filter(|n| rig.is_running(*n)).collect();
            let victim = live[rng.random_range(0..live.len())];
            // One more Slack message, handed to the victim's socket just before the kill:
            // it dies before its ack, and Slack retries it on another instance's socket.
            let more = rig.more.as_ref().expect("all platforms");
            let socket = rig.instances[victim].slack_socket.expect("a Slack socket");
            let token = format!("k{i}q{seed}");
            let (user, dm) = SLACK_USERS[rng.random_range(0..SLACK_USERS.len())];
            let ts = more.slack.next_ts();
            more.slack.send_next_on(socket);
            more.slack
                .push_event(events::dm(dm, user, &format!("note {token}"), &ts));
            slack.push(token);
            // And one more Telegram update on its way through the balancer as the kill
            // lands: if the victim takes it and dies, Telegram's retry reaches another.
            let token = format!("u{i}q{seed}");
            let user = USERS[rng.random_range(0..USERS.len())];
            let update_id = (ROUNDS + i) as i64 + 1;
            let in_flight = {
                let (http, hook, text) = (http.clone(), hook.clone(), format!("note {token}"));
                tokio::spawn(async move {
                    deliver_update(&http, &hook, update_id, user, &text).await;
                })
            };
            telegram.push(token);
            eprintln!(
                "kill -9 of instance {victim} after round {i} ({:?})",
                started.elapsed()
            );
            let held = rig.instances[victim].daemon().discord_shards();
            let identifies_before: Vec<usize> = held
                .iter()
                .map(|shard| more.discord.read(|s| identifies_of(s, *shard)))
                .collect();
            rig.kill9(victim);
            in_flight.await.expect("the update is delivered");
            // The victim's Discord shards: a message in each arrives while no one runs the
            // shard (Discord keeps it in the channel's history only), then a survivor takes
            // the shard over once its lease expires and its backfill finds the message.
            let more = rig.more.as_ref().expect("all platforms");
            for (shard, before) in held.iter().zip(identifies_before) {
                let token = format!("x{i}s{shard}q{seed}");
                more.discord.push_message(fake_discord::Incoming::new(
                    &more.channels[*shard as usize],
                    &more.owner,
                    &format!("note {token}"),
                ));
                discord.push(token);
                more.discord
                    .wait_within(WAIT, &format!("shard {shard} taken over"), |s| {
                        (identifies_of(s, *shard) > before).then_some(())
                    })
                    .await;
                eprintln!(
                    "shard {shard} of instance {victim} taken over ({:?})",
                    started.elapsed()
                );
            }
            down = Some((victim, i + RESTART_AFTER));
        }
        if let Some((victim, at)) = down
            && at == i
        {
            restart(&mut rig, &webhooks, &api, victim).await;
            down = None;
        }
    }
    if let Some((victim, _)) = down {
        restart(&mut rig, &webhooks, &api, victim).await;
    }

    // Wait (bounded) until every message has a reply, platform by platform (they are
    // answered in parallel; each wait is armed before it looks).
    let deadline = tokio::time::Instant::now() + WAIT * 2;
    loop {
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let change = rig.telegram.next_change(remaining.min(WAIT));
        let texts: Vec<String> = rig.sent_to_anyone().into_iter().map(|m| m.text).collect();
        let missing = unanswered(&telegram, &texts);
        if missing.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "seed {seed}: Telegram never answered {missing:?}\nsent: {texts:#?}\nlogs: {:#?}",
            rig.all_logs()
        );
        change.await;
    }
    let more = rig.more.as_ref().expect("all platforms");
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    let discord_sent = more
        .discord
        .try_wait_within(remaining, |s| {
            let texts = discord_texts(s, &more.channels);
            unanswered(&discord, &texts).is_empty().then_some(texts)
        })
        .await;
    let Some(discord_sent) = discord_sent else {
        let texts = more
            .discord
            .try_wait_within(Duration::ZERO, |s| Some(discord_texts(s, &more.channels)))
            .await
            .unwrap_or_default();
        panic!(
            "seed {seed}: Discord never answered {:?}\nsent: {texts:#?}\nlogs: {:#?}",
            unanswered(&discord, &texts),
            rig.all_logs()
        );
    };
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    let slack_sent = more
        .slack
        .wait_within(remaining, "every Slack message answered", |r| {
            let texts = slack_texts(&r.posted);
            unanswered(&slack, &texts).is_empty().then_some(texts)
        })
        .await;
    // Every envelope Slack sent is acked in the end (by its instance, or a retry's).
    more.slack.wait_until_all_acked().await;

    let telegram_sent: Vec<String> = rig.sent_to_anyone().into_iter().map(|m| m.text).collect();
    let mut marked = 0;
    for (platform, tokens, texts) in [
        ("Telegram", &telegram, &telegram_sent),
        ("Discord", &discord, &discord_sent),
        ("Slack", &slack, &slack_sent),
    ] {
        let counts = counts(tokens, texts);
        let doubled: Vec<_> = counts.iter().filter(|(_, (plain, _))| *plain > 1).collect();
        assert!(
            doubled.is_empty(),
            "seed {seed}: {platform} answered twice: {doubled:?}\n{texts:#?}"
        );
        marked += counts.values().map(|(_, m)| m).sum::<u32>();
    }
    assert_eq!(api_answers, ROUNDS / API_EVERY);
    // The load really crossed instances: Slack's envelopes were acked on several sockets.
    let records = more.slack.records();
    let sockets: std::collections::BTreeSet<u64> =
        records.acks.iter().map(|a| a.connection).collect();
    assert!(sockets.len() >= 2, "acks on {sockets:?} only");
    // Each envelope handed to a socket about to die was retried on another.
    assert!(
        records.auto_retries.len() >= KILL_AFTER.len(),
        "{:?}",
        records.auto_retries
    );
    let identifies = more.discord.frames_with_op(2).len();
    // The journal agrees: every event answered, none left running.
    assert_eq!(
        rig.count("SELECT count(*) FROM hermesd_inbound_events WHERE state <> 'answered'")
            .await,
        0
    );
    eprintln!(
        "seed {seed}: {} Telegram, {} Discord and {} Slack messages answered once each \
         ({marked} recovered-marked resends), {api_answers} API answers ({api_retries} retried \
         502s), Slack acks on {} sockets, {} envelopes retried after a missed ack and \
         {late_acks} delivered twice after a late ack, \
         {identifies} Discord IDENTIFYs for {} shards, in {:?}",
        telegram.len(),
        discord.len(),
        slack.len(),
        sockets.len(),
        records.auto_retries.len(),
        cluster_support::SHARDS,
        started.elapsed()
    );
    rig.stop().await;
}

/// Starts instance `n` again and points both balancers at its new ports.
async fn restart(rig: &mut ClusterRig, webhooks: &RoundRobin, api: &RoundRobin, n: usize) {
    eprintln!("restarting instance {n}");
    rig.restart(n).await;
    webhooks.set_backend(n, rig.webhook_base(n));
    api.set_backend(n, rig.instances[n].daemon().api_url());
}

/// The balancer itself: turns over the backends, skips one that refuses the connection,
/// follows a backend to its new address, and answers 502 when every backend is down.
#[tokio::test]
async fn the_balancer_takes_turns_and_skips_a_refused_backend_and_answers_502_when_all_are_down() {
    async fn backend(name: &'static str) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(move || async move { name });
        (
            url,
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() }),
        )
    }
    /// An address nothing listens on (a backend that is down).
    async fn refused() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    }
    let (a, _a) = backend("a").await;
    let (b, _b) = backend("b").await;
    let balancer = RoundRobin::start(vec![a.clone(), refused().await, b.clone()]).await;
    let http = reqwest::Client::new();
    let get = |path: &'static str| {
        let (http, url) = (http.clone(), balancer.url());
        async move {
            let response = http.get(format!("{url}{path}")).send().await.unwrap();
            (
                response.status().as_u16(),
                response.text().await.unwrap_or_default(),
            )
        }
    };
    let mut seen = Vec::new();
    for _ in 0..4 {
        seen.push(get("/x").await.1);
    }
    // In turn a, (down → b), b, a.
    assert_eq!(seen, ["a", "b", "b", "a"]);
    // Backend 1 comes back on b's address: it takes its turn again.
    balancer.set_backend(1, b.clone());
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(get("/y").await.1);
    }
    assert_eq!(seen, ["b", "b", "a"]);
    let all_down = RoundRobin::start(vec![refused().await, refused().await]).await;
    let response = http.get(all_down.url()).send().await.unwrap();
    assert_eq!(response.status().as_u16(), 502);
}
