//! Discord shards claimed by instances (issue 22): two instances on one PostgreSQL database
//! run a bot with 2 shards against the fake Discord, which routes each guild's events to the
//! connection of its shard. Each instance claims its fair share (one shard each); every
//! message is taken in by exactly one instance; when one instance dies its shard's lease
//! expires and the other takes the shard over, and later messages in that guild arrive.
//!
//! The "cores" are stand-ins that record what their adapter handed over; the adapters, the
//! leases, the stores (instance leases) and the gateway are the real ones.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fake_discord::{FakeDiscord, Incoming};
use hermes_adapter::{
    Adapter, AdapterContext, AdapterError, Inbound, IngressHold, Progress, RecordOutcome,
};
use hermes_discord::{DiscordAdapter, Settings};
use hermesd::gateway::ingress_lease::LeaseClaims;
use hermesd::state::{Store, StoreOptions};
use serde_json::json;
use support::conditions::wait_until;
use support::postgres::PgCluster;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(90);
const TTL: Duration = Duration::from_secs(3);
const TOKEN: &str = "test-bot-token-shards";

/// Message text → the instances that took it in.
type Taken = Arc<Mutex<BTreeMap<String, Vec<&'static str>>>>;

struct Instance {
    store: Store,
    /// Counted among the instances running Discord (the supervisor's part in the daemon).
    _membership: IngressHold,
    task: tokio::task::JoinHandle<Result<(), AdapterError>>,
    core: tokio::task::JoinHandle<()>,
    _cache: tempfile::TempDir,
}

fn settings(fake: &FakeDiscord, cache: &std::path::Path) -> Settings {
    let extra = json!({
        "api_base_url": fake.api_base_url(),
        "cache_dir": cache.to_string_lossy(),
        "shard_count": 2,
        "require_mention": false,
        "auto_thread": false,
    });
    let mut settings = Settings::from_config(TOKEN, extra.as_object().unwrap(), &BTreeMap::new())
        .expect("valid settings");
    settings.reconnect_min = Duration::from_millis(20);
    settings.reconnect_max = Duration::from_millis(200);
    settings.identify_window = Duration::from_millis(50);
    settings
}

async fn open_store(cluster: &PgCluster, name: &str) -> Store {
    let options = StoreOptions {
        instance_id: Some(name.to_owned()),
        lease_ttl: TTL,
        ..StoreOptions::default()
    };
    Store::open_postgres(&cluster.url(), options)
        .await
        .expect("open the store")
}

/// Makes `store`'s instance a member of the Discord intake, as the daemon's supervisor does
/// while the adapter runs.
async fn join(store: &Store) -> IngressHold {
    let claims = LeaseClaims::for_store(store, "discord").expect("shared");
    claims
        .join(&CancellationToken::new())
        .await
        .expect("ask")
        .expect("joined")
}

fn start(
    name: &'static str,
    (store, membership): (Store, IngressHold),
    fake: &FakeDiscord,
    taken: Taken,
) -> Instance {
    let (inbound_tx, mut inbound_rx) = mpsc::channel::<Inbound>(64);
    let core = tokio::spawn(async move {
        while let Some(inbound) = inbound_rx.recv().await {
            taken
                .lock()
                .unwrap()
                .entry(inbound.event.text.clone())
                .or_default()
                .push(name);
            let _ = inbound.recorded.send(RecordOutcome::Recorded);
        }
    });
    let ctx = AdapterContext {
        inbound: inbound_tx,
        dead_letters: mpsc::channel(1).0,
        progress: Progress::new(),
        shutdown: CancellationToken::new(),
        ingress: LeaseClaims::ingress_for(&store, "discord"),
    };
    let cache = tempfile::tempdir().unwrap();
    let adapter = DiscordAdapter::new(settings(fake, cache.path()));
    let task = tokio::spawn(async move { adapter.run(ctx).await });
    Instance {
        store,
        _membership: membership,
        task,
        core,
        _cache: cache,
    }
}

fn identified(fake: &FakeDiscord, shard: u64) -> usize {
    fake.frames_with_op(2)
        .iter()
        .filter(|frame| frame.d["shard"] == json!([shard, 2]))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_share_two_shards_and_a_dead_ones_shard_is_taken_over() {
    let cluster = PgCluster::start();
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    let guilds = [
        fake.add_guild_in_shard("first", 0, 2),
        fake.add_guild_in_shard("second", 1, 2),
    ];
    let channels = [
        fake.add_text_channel_in(&guilds[0], "general"),
        fake.add_text_channel_in(&guilds[1], "general"),
    ];
    let taken: Taken = Arc::default();
    // Both instances are members (run Discord) before either adapter claims a shard.
    let (store_a, store_b) = (
        open_store(&cluster, "a").await,
        open_store(&cluster, "b").await,
    );
    let (member_a, member_b) = (join(&store_a).await, join(&store_b).await);
    let a = start("a", (store_a, member_a), &fake, taken.clone());
    let b = start("b", (store_b, member_b), &fake, taken.clone());
    wait_until("both shards are identified", PATIENCE, || {
        identified(&fake, 0) >= 1 && identified(&fake, 1) >= 1
    })
    .await;

    let alice = fake.new_user("alice", false, &[]);
    for (n, channel) in channels.iter().enumerate() {
        fake.push_message(Incoming::new(channel, &alice, &format!("hello {n}")));
    }
    wait_until("both messages are taken in", PATIENCE, || {
        taken.lock().unwrap().len() == 2
    })
    .await;
    let owners: Vec<&'static str> = (0..2)
        .map(|n| {
            let by = taken.lock().unwrap()[&format!("hello {n}")].clone();
            assert_eq!(by.len(), 1, "hello {n} taken in by {by:?}");
            by[0]
        })
        .collect();
    assert_ne!(
        owners[0], owners[1],
        "each instance runs one shard: {owners:?}"
    );

    // The instance running shard 1 dies: its database connections go first (so it cannot
    // give its shard lease back: the lease must run out), then its gateway connections.
    let (dead, survivor) = if owners[1] == "a" { (a, b) } else { (b, a) };
    let survivor_name = owners[0];
    let before = identified(&fake, 1);
    dead.store.close().await;
    dead.task.abort();
    dead.core.abort();
    let killed = Instant::now();
    wait_until("the survivor identifies shard 1", PATIENCE, || {
        identified(&fake, 1) > before
    })
    .await;
    println!(
        "shard 1 taken over {:?} after its instance died (lease time {TTL:?})",
        killed.elapsed()
    );
    fake.push_message(Incoming::new(&channels[1], &alice, "after the takeover"));
    wait_until("the later message is taken in", PATIENCE, || {
        taken.lock().unwrap().contains_key("after the takeover")
    })
    .await;
    assert_eq!(
        taken.lock().unwrap()["after the takeover"],
        vec![survivor_name]
    );
    survivor.task.abort();
    survivor.store.close().await;
}

/// Issue 28, defect 7: a store open on the database that runs no adapter (`hermesd chat`)
/// held an instance lease and halved the share, so one of the two shards had no owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_next_to_a_chat_process_runs_every_shard() {
    let cluster = PgCluster::start();
    let fake = FakeDiscord::start(TOKEN, Duration::from_secs(30)).await;
    let guilds = [
        fake.add_guild_in_shard("first", 0, 2),
        fake.add_guild_in_shard("second", 1, 2),
    ];
    let channels = [
        fake.add_text_channel_in(&guilds[0], "general"),
        fake.add_text_channel_in(&guilds[1], "general"),
    ];
    let taken: Taken = Arc::default();
    let chat = open_store(&cluster, "chat").await;
    let store = open_store(&cluster, "a").await;
    let member = join(&store).await;
    let a = start("a", (store, member), &fake, taken.clone());
    wait_until("both shards are identified", PATIENCE, || {
        identified(&fake, 0) >= 1 && identified(&fake, 1) >= 1
    })
    .await;
    let alice = fake.new_user("alice", false, &[]);
    for (n, channel) in channels.iter().enumerate() {
        fake.push_message(Incoming::new(channel, &alice, &format!("hello {n}")));
    }
    wait_until("both messages are taken in", PATIENCE, || {
        taken.lock().unwrap().len() == 2
    })
    .await;
    a.task.abort();
    a.store.close().await;
    chat.close().await;
}
