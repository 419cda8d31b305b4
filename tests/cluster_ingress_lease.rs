//! Ingress claims on a real PostgreSQL (`gateway::ingress_lease`): of two instances contending
//! for one ingress key exactly one runs the guarded intake at any time; when the holder stops
//! renewing (its database connections gone, as when it is killed) the other takes over once
//! the lease expires; a holder whose lease is taken away stops at once.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hermes_adapter::{Guarded, Ingress};
use hermesd::gateway::ingress_lease::LeaseClaims;
use hermesd::state::postgres;
use sqlx::postgres::PgPool;
use support::conditions::wait_until;
use support::postgres::PgCluster;
use tokio_util::sync::CancellationToken;

/// Generous: the machine running the tests may be loaded.
const PATIENCE: Duration = Duration::from_secs(90);
const TTL: Duration = Duration::from_secs(3);
const KEY: &str = "telegram-poll:42";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Started,
    Stopped,
}

/// What the contenders did, in order, and how many run the guarded work right now.
#[derive(Default)]
struct Record {
    log: Mutex<Vec<(&'static str, Step, Instant)>>,
    running: AtomicUsize,
    most_running: AtomicUsize,
}

impl Record {
    fn steps(&self) -> Vec<(&'static str, Step, Instant)> {
        self.log.lock().unwrap().clone()
    }

    fn started(&self, who: &str) -> Option<Instant> {
        self.steps()
            .iter()
            .find(|(name, step, _)| *name == who && *step == Step::Started)
            .map(|(_, _, at)| *at)
    }
}

struct Contender {
    refusals: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<Guarded<()>>,
}

/// Runs a contender named `name` on its own pool until `shutdown`.
fn contend(
    name: &'static str,
    pool: PgPool,
    record: Arc<Record>,
    shutdown: CancellationToken,
) -> Contender {
    let ingress = Ingress::shared(Arc::new(LeaseClaims::new(pool, name, "telegram", TTL)));
    let refusals = Arc::new(AtomicUsize::new(0));
    let counted = refusals.clone();
    let task = tokio::spawn(async move {
        ingress
            .run_while_holding(
                KEY,
                &shutdown,
                || {
                    counted.fetch_add(1, Ordering::SeqCst);
                },
                |lost| {
                    let record = record.clone();
                    async move {
                        let now = record.running.fetch_add(1, Ordering::SeqCst) + 1;
                        record.most_running.fetch_max(now, Ordering::SeqCst);
                        record
                            .log
                            .lock()
                            .unwrap()
                            .push((name, Step::Started, Instant::now()));
                        lost.cancelled().await;
                        record.running.fetch_sub(1, Ordering::SeqCst);
                        record
                            .log
                            .lock()
                            .unwrap()
                            .push((name, Step::Stopped, Instant::now()));
                        Ok(())
                    }
                },
            )
            .await
    });
    Contender { refusals, task }
}

async fn migrated_pools(cluster: &PgCluster) -> (PgPool, PgPool) {
    postgres::migrate(&cluster.url()).await.expect("migrate");
    let a = postgres::connect(&cluster.url(), 4)
        .await
        .expect("connect a");
    let b = postgres::connect(&cluster.url(), 4)
        .await
        .expect("connect b");
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_contender_runs_and_the_other_takes_over_after_the_first_stops_renewing() {
    let cluster = PgCluster::start();
    let (pool_a, pool_b) = migrated_pools(&cluster).await;
    let record = Arc::new(Record::default());
    let shutdown = CancellationToken::new();
    let a = contend("a", pool_a.clone(), record.clone(), shutdown.clone());
    let b = contend("b", pool_b.clone(), record.clone(), shutdown.clone());

    wait_until("one contender runs", PATIENCE, || {
        !record.steps().is_empty()
    })
    .await;
    let leader = record.steps()[0].0;
    let (leader_pool, follower, follower_name) = match leader {
        "a" => (pool_a, &b, "b"),
        _ => (pool_b, &a, "a"),
    };
    // The follower keeps asking and keeps being refused while the leader renews: three
    // refusals span a whole lease time.
    wait_until("the follower was refused 4 times", PATIENCE, || {
        follower.refusals.load(Ordering::SeqCst) >= 4
    })
    .await;
    assert_eq!(record.started(follower_name), None, "{:?}", record.steps());
    assert_eq!(record.running.load(Ordering::SeqCst), 1);

    // The leader's database connections go away: it can neither renew nor release, as when
    // its process is killed. Its intake stops at once; the follower waits out the lease.
    let stopped_renewing = Instant::now();
    leader_pool.close().await;
    wait_until("the follower takes over", PATIENCE, || {
        record.started(follower_name).is_some()
    })
    .await;
    let takeover = record.started(follower_name).unwrap() - stopped_renewing;
    println!("takeover after the leader stopped renewing: {takeover:?} (lease time {TTL:?})");
    let steps = record.steps();
    let leader_stopped = steps
        .iter()
        .position(|(name, step, _)| *name == leader && *step == Step::Stopped)
        .expect("the leader stopped");
    let follower_started = steps
        .iter()
        .position(|(name, step, _)| *name == follower_name && *step == Step::Started)
        .unwrap();
    assert!(leader_stopped < follower_started, "{steps:?}");
    assert_eq!(record.most_running.load(Ordering::SeqCst), 1, "{steps:?}");
    // Within the lease time plus one retry interval, with room for a loaded machine.
    assert!(
        takeover < TTL + TTL / 3 + Duration::from_secs(10),
        "{takeover:?}"
    );

    shutdown.cancel();
    for contender in [a, b] {
        let outcome = tokio::time::timeout(PATIENCE, contender.task)
            .await
            .expect("contender ends on shutdown")
            .unwrap();
        assert_eq!(outcome, Guarded::Shutdown);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_lease_is_taken_stops_at_once_and_asks_again() {
    let cluster = PgCluster::start();
    let (pool, intruder_pool) = migrated_pools(&cluster).await;
    let record = Arc::new(Record::default());
    let shutdown = CancellationToken::new();
    let holder = contend("holder", pool, record.clone(), shutdown.clone());
    wait_until("the holder runs", PATIENCE, || {
        record.started("holder").is_some()
    })
    .await;

    // Another instance takes the lease over (as after a pause past its expiry).
    sqlx::query("UPDATE hermesd_leases SET expires_at = now() WHERE key = $1")
        .bind(KEY)
        .execute(&intruder_pool)
        .await
        .unwrap();
    let intruder = postgres::acquire(
        &intruder_pool,
        postgres::LeaseScope::Ingress,
        KEY,
        "intruder",
        Duration::from_secs(600),
    )
    .await
    .unwrap()
    .expect("the expired lease can be taken");
    wait_until("the holder stops", PATIENCE, || {
        record.running.load(Ordering::SeqCst) == 0
    })
    .await;
    // It goes back to asking, and is refused while the intruder holds the lease.
    let refused_before = holder.refusals.load(Ordering::SeqCst);
    wait_until("the holder asks again", PATIENCE, || {
        holder.refusals.load(Ordering::SeqCst) >= refused_before + 2
    })
    .await;
    assert_eq!(
        record
            .steps()
            .iter()
            .filter(|s| s.1 == Step::Started)
            .count(),
        1
    );
    // Once the intruder lets go, the holder takes the key again.
    assert!(postgres::release(&intruder_pool, &intruder).await.unwrap());
    wait_until("the holder runs again", PATIENCE, || {
        record.running.load(Ordering::SeqCst) == 1
    })
    .await;
    shutdown.cancel();
    let outcome = tokio::time::timeout(PATIENCE, holder.task)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(outcome, Guarded::Shutdown);
}

/// Fair shares of sharded ingress divide by the instances running the platform's adapter
/// (its members), not by every store open on the database: an open store that runs no
/// adapter (`hermesd chat`) or another platform's adapter is not counted (issue 28, defect 7).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_instances_are_the_members_running_the_platform() {
    use hermesd::state::{Store, StoreOptions};
    let cluster = PgCluster::start();
    let url = cluster.url();
    let open = |id: &str| {
        let options = StoreOptions {
            instance_id: Some(id.to_owned()),
            lease_ttl: TTL,
            ..StoreOptions::default()
        };
        Store::open_postgres(&url, options)
    };
    let stop = CancellationToken::new();
    let first = open("first").await.expect("open first");
    let claims = LeaseClaims::for_store(&first, "discord").expect("shared");
    let ingress = LeaseClaims::ingress(Some(&claims));
    let _first_member = claims.join(&stop).await.unwrap().expect("joined");
    assert_eq!(ingress.live_instances().await, 1);
    // A store that runs no adapter, as `hermesd chat`.
    let chat = open("chat").await.expect("open chat");
    assert_eq!(ingress.live_instances().await, 1);
    // Another daemon running only Telegram.
    let other = open("other").await.expect("open other");
    let telegram = LeaseClaims::for_store(&other, "telegram").unwrap();
    let _telegram_member = telegram.join(&stop).await.unwrap().expect("joined");
    assert_eq!(ingress.live_instances().await, 1);
    // It starts Discord too, then stops it: counted while it runs, not after.
    let discord = LeaseClaims::for_store(&other, "discord").unwrap();
    let guard = discord.stay_member(&stop);
    let start = Instant::now();
    while ingress.live_instances().await != 2 {
        assert!(
            start.elapsed() < PATIENCE,
            "the second member never counted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(guard);
    while ingress.live_instances().await != 1 {
        assert!(
            start.elapsed() < PATIENCE,
            "the member that left still counts"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    chat.close().await;
    other.close().await;
    first.close().await;
}
