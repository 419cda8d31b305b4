//! Telegram polling leadership across instances (issue 22): two Telegram adapters sharing one
//! PostgreSQL database poll one bot on the fake Bot API, which answers a second concurrent
//! `getUpdates` caller with 409 as Telegram does. Only the holder of the
//! `telegram-poll:<bot id>` ingress lease polls; when it dies with an update taken but not yet
//! journaled, the other instance takes over once the lease expires, fetches that update again
//! (its offset was never confirmed) and nothing is lost or recorded twice.
//!
//! The two "cores" here share one journal that dedupes by event id, as the shared inbound
//! journal does; the adapters, the leases, the database and the Bot API are the real ones.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_telegram::{Chat, FakeTelegram, User};
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Inbound, Ingress, Progress, RecordOutcome,
};
use hermes_telegram::{Settings, TelegramAdapter};
use hermesd::gateway::ingress_lease::LeaseClaims;
use hermesd::state::postgres;
use serde_json::json;
use sqlx::postgres::PgPool;
use support::conditions::wait_until;
use support::postgres::PgCluster;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(90);
const TTL: Duration = Duration::from_secs(3);

/// Event id → how many times it was handed over (the first one recorded, the others refused
/// as duplicates).
type Journal = Arc<Mutex<BTreeMap<String, usize>>>;

struct Instance {
    /// Event ids this instance's adapter handed over, in order.
    received: Arc<Mutex<Vec<String>>>,
    /// While set, this instance's core takes events but never answers (not journaled yet).
    stall: Arc<AtomicBool>,
    pool: PgPool,
    task: tokio::task::JoinHandle<Result<(), AdapterError>>,
    core: tokio::task::JoinHandle<()>,
}

fn settings(fake: &FakeTelegram) -> Settings {
    let extra = json!({
        "base_url": fake.url(),
        "poll_timeout_seconds": 1,
        "poll_margin_seconds": 5,
    });
    Settings::from_config(fake.token(), extra.as_object().unwrap(), &BTreeMap::new())
        .expect("valid settings")
}

async fn start_instance(
    name: &str,
    cluster: &PgCluster,
    fake: &FakeTelegram,
    journal: Journal,
) -> Instance {
    let pool = postgres::connect(&cluster.url(), 4).await.expect("connect");
    let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound>(64);
    let received: Arc<Mutex<Vec<String>>> = Arc::default();
    let stall = Arc::new(AtomicBool::new(false));
    let (seen, stalled) = (received.clone(), stall.clone());
    let core = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Some(inbound) = inbound_rx.recv().await {
            let id = inbound.event.event_id.clone();
            seen.lock().unwrap().push(id.clone());
            if stalled.load(Ordering::SeqCst) {
                held.push(inbound.recorded);
                continue;
            }
            let outcome = {
                let mut journal = journal.lock().unwrap();
                let times = journal.entry(id).or_insert(0);
                *times += 1;
                if *times == 1 {
                    RecordOutcome::Recorded
                } else {
                    RecordOutcome::Duplicate
                }
            };
            let _ = inbound.recorded.send(outcome);
        }
    });
    let ctx = AdapterContext {
        inbound: inbound_tx,
        dead_letters: mpsc::channel(1).0,
        progress: Progress::new(),
        shutdown: CancellationToken::new(),
        ingress: Ingress::shared(Arc::new(LeaseClaims::new(
            pool.clone(),
            name,
            "telegram",
            TTL,
        ))),
    };
    let adapter = TelegramAdapter::new(settings(fake));
    let task = tokio::spawn(async move { adapter.run(ctx).await });
    Instance {
        received,
        stall,
        pool,
        task,
        core,
    }
}

fn journaled(journal: &Journal, id: i64) -> bool {
    journal.lock().unwrap().contains_key(&id.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_polls_and_a_dead_leader_is_replaced_without_losing_an_update() {
    let cluster = PgCluster::start();
    postgres::migrate(&cluster.url()).await.expect("migrate");
    let fake = FakeTelegram::start().await;
    let journal: Journal = Arc::default();
    let a = start_instance("a", &cluster, &fake, journal.clone()).await;
    let b = start_instance("b", &cluster, &fake, journal.clone()).await;
    let user = User::new(7, "ann");

    let mut pushed = Vec::new();
    for chat in 1..=3 {
        pushed.push(fake.push_text(Chat::private(chat), user.clone(), "hello"));
    }
    for id in &pushed {
        wait_until("the first updates are journaled", PATIENCE, || {
            journaled(&journal, *id)
        })
        .await;
    }
    // Long polls keep going for a few lease renewals: the follower must stay quiet all along.
    let polls = fake.calls_of("getUpdates").len();
    fake.wait_for_calls("getUpdates", polls + 4, PATIENCE)
        .await
        .expect("the leader keeps polling");
    assert_eq!(
        fake.get_updates_conflicts(),
        0,
        "two instances polled at once"
    );
    let (leader, follower) = if a.received.lock().unwrap().is_empty() {
        (b, a)
    } else {
        (a, b)
    };
    assert!(follower.received.lock().unwrap().is_empty());

    // The leader takes the next update but dies before it is journaled.
    leader.stall.store(true, Ordering::SeqCst);
    let taken = fake.push_text(Chat::private(4), user.clone(), "are you there");
    wait_until("the leader takes the update", PATIENCE, || {
        leader.received.lock().unwrap().contains(&taken.to_string())
    })
    .await;
    leader.pool.close().await;
    leader.task.abort();
    leader.core.abort();
    let killed = Instant::now();

    wait_until(
        "the new leader journals the dead leader's update",
        PATIENCE,
        || journaled(&journal, taken),
    )
    .await;
    let takeover = killed.elapsed();
    println!("the follower took over {takeover:?} after the leader died (lease time {TTL:?})");
    assert!(
        takeover < TTL + TTL / 3 + Duration::from_secs(10),
        "{takeover:?}"
    );
    let later = fake.push_text(Chat::private(5), user, "still there?");
    wait_until("a later update is journaled", PATIENCE, || {
        journaled(&journal, later)
    })
    .await;
    assert!(
        follower
            .received
            .lock()
            .unwrap()
            .contains(&later.to_string()),
        "the follower polls now"
    );

    // Nothing lost: every update reached the journal (which recorded each once and refused
    // the re-reads as duplicates).
    pushed.extend([taken, later]);
    let journal = journal.lock().unwrap().clone();
    for id in &pushed {
        assert!(
            journal.contains_key(&id.to_string()),
            "update {id} lost: {journal:?}"
        );
    }
    follower.task.abort();
}
