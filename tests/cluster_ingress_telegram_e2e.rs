//! Telegram polling leadership through the real binary (issue 22): two `hermesd run`
//! instances on one PostgreSQL database poll one bot on the fake Bot API (which ends a
//! waiting `getUpdates` with 409 when another caller polls, as Telegram does). Only one polls
//! at a time; kill -9 of the leader → the other starts polling within the lease time; every
//! message is answered exactly once.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use fake_telegram::{Chat, FakeTelegram, User};
use support::conditions::wait_until;
use support::daemon::Daemon;
use support::fake_model::FakeModel;
use support::postgres::PgCluster;

/// Generous: other builders share this 2-core machine.
const WAIT: Duration = Duration::from_secs(90);
const LEASE_SECONDS: u64 = 3;
const CLAIMED: &str = "holding the ingress claim";

fn start_instance(
    name: &str,
    cluster: &PgCluster,
    telegram: &FakeTelegram,
    model: &FakeModel,
) -> (tempfile::TempDir, Daemon) {
    let home = tempfile::tempdir().expect("temp home");
    let config = format!(
        "telegram:\n  enabled: true\n  extra:\n    base_url: \"{}\"\n    poll_timeout_seconds: 1\n\
         state:\n  backend: postgres\n  postgres_url: \"{}\"\n  lease_seconds: {LEASE_SECONDS}\n  instance_id: {name}\n",
        telegram.url(),
        cluster.url(),
    );
    std::fs::write(home.path().join("config.yaml"), config).expect("write config.yaml");
    let env = telegram_support::daemon_env(home.path(), model);
    // Starting blocks until the daemon says it serves; the fakes keep running meanwhile.
    let daemon = tokio::task::block_in_place(|| Daemon::start(home.path(), &env));
    (home, daemon)
}

/// Replies the bot sent, per chat.
fn replies(telegram: &FakeTelegram) -> BTreeMap<i64, usize> {
    let mut per_chat = BTreeMap::new();
    for sent in telegram.sent_messages() {
        *per_chat.entry(sent.chat_id).or_insert(0) += 1;
    }
    per_chat
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_polls_and_a_killed_leader_is_replaced_with_nothing_lost_or_doubled() {
    let cluster = PgCluster::start();
    let telegram = FakeTelegram::start().await;
    let model = FakeModel::start().await;
    let (_home_a, a) = start_instance("a", &cluster, &telegram, &model);
    let (_home_b, b) = start_instance("b", &cluster, &telegram, &model);
    let user = User::new(7, "ann");

    for chat in 1..=3 {
        telegram.push_text(Chat::private(chat), user.clone(), "hello");
    }
    wait_until("each chat is answered", WAIT, || {
        replies(&telegram).len() == 3
    })
    .await;
    // A few more polls: the follower must stay quiet all along.
    let polls = telegram.calls_of("getUpdates").len();
    telegram
        .wait_for_calls("getUpdates", polls + 4, WAIT)
        .await
        .expect("the leader keeps polling");
    assert_eq!(
        telegram.get_updates_conflicts(),
        0,
        "two instances polled at once"
    );
    let a_leads = a.logs().iter().any(|line| line.contains(CLAIMED));
    let b_leads = b.logs().iter().any(|line| line.contains(CLAIMED));
    assert!(
        a_leads != b_leads,
        "exactly one leader (a: {a_leads}, b: {b_leads})"
    );
    let (leader, follower) = if a_leads { (a, b) } else { (b, a) };

    let killed = Instant::now();
    tokio::task::spawn_blocking(move || leader.kill9())
        .await
        .unwrap();
    telegram.push_text(Chat::private(4), user.clone(), "are you there?");
    assert!(
        tokio::task::block_in_place(|| follower.wait_for_line(CLAIMED, WAIT)).is_some(),
        "the follower never took over: {:#?}",
        follower.logs()
    );
    println!(
        "the follower took the poll over {:?} after kill -9",
        killed.elapsed()
    );
    wait_until("the message sent after the kill is answered", WAIT, || {
        replies(&telegram).contains_key(&4)
    })
    .await;
    telegram.push_text(Chat::private(5), user, "and now?");
    wait_until("a later message is answered", WAIT, || {
        replies(&telegram).contains_key(&5)
    })
    .await;
    let per_chat = replies(&telegram);
    assert_eq!(
        per_chat,
        (1..=5).map(|chat| (chat, 1)).collect::<BTreeMap<_, _>>(),
        "every message answered exactly once"
    );
}
