//! Session leases between instances on one PostgreSQL database (issue 22): one holder at a
//! time, kept by renewal while working, released with a notification to the others, and
//! every write a turn makes fenced by the lease, so a holder that lost it writes nothing.

mod support;

use std::sync::Arc;
use std::time::Duration;

use hermesd::gateway::cluster::Cluster;
use hermesd::state::postgres::{notify, with_fence};
use hermesd::state::{NewSession, Store, StoreOptions};
use support::postgres::PgCluster;

/// Generous bound for conditions on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);

async fn instance(cluster: &PgCluster, name: &str, ttl: Duration) -> (Store, Arc<Cluster>) {
    let options = StoreOptions {
        instance_id: Some(name.to_owned()),
        lease_ttl: ttl,
        ..StoreOptions::default()
    };
    let store = Store::open_postgres(&cluster.url(), options)
        .await
        .expect("open the PostgreSQL store");
    let coordination = Cluster::new(&store).expect("a PostgreSQL store has a cluster side");
    (store, coordination)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_inside_a_lost_lease_writes_nothing() {
    let pg = PgCluster::start();
    let ttl = Duration::from_millis(400);
    let (store_a, a) = instance(&pg, "a", ttl).await;
    let (_store_b, b) = instance(&pg, "b", ttl).await;
    let held = a
        .try_hold("telegram:dm:1")
        .await
        .unwrap()
        .expect("free lease");
    assert!(b.try_hold("telegram:dm:1").await.unwrap().is_none());
    let lease = held.lease().clone();
    // A stalls: its renewals stop (as under SIGSTOP) and B takes the session over.
    drop(held);
    let deadline = tokio::time::Instant::now() + WAIT;
    let _taken = loop {
        if let Some(taken) = b.try_hold("telegram:dm:1").await.unwrap() {
            break taken;
        }
        assert!(tokio::time::Instant::now() < deadline, "B never took over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Every write A's turn makes, through any handle, is refused.
    let fenced = with_fence(
        lease,
        hermesd::coord::Trust::unbounded(),
        store_a.create_session(NewSession::new("s-late", "telegram")),
    )
    .await
    .expect_err("a write under a lost lease must fail");
    assert!(fenced.is_lease_lost(), "{fenced}");
    // Outside a turn the same handle is not fenced.
    if let Err(e) = store_a
        .create_session(NewSession::new("s-free", "telegram"))
        .await
    {
        assert!(!e.is_lease_lost(), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_holder_keeps_its_lease_and_its_release_wakes_the_others() {
    let pg = PgCluster::start();
    let ttl = Duration::from_millis(300);
    let (store_a, a) = instance(&pg, "a", ttl).await;
    let (_store_b, b) = instance(&pg, "b", ttl).await;
    let pool = store_a.postgres().unwrap().pool().clone();
    let mut listener = notify::session_work_listener(&pool).await.unwrap();
    let held = a.try_hold("slack:C1").await.unwrap().expect("free lease");
    // Renewed every third of the lease time: still A's after several lease times.
    let until = tokio::time::Instant::now() + ttl * 4;
    while tokio::time::Instant::now() < until {
        assert!(
            b.try_hold("slack:C1").await.unwrap().is_none(),
            "B took a lease A was renewing"
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert!(!held.is_lost());
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move { b.hold_waiting("slack:C1", || false).await })
    };
    a.release(held).await;
    let note = tokio::time::timeout(WAIT, listener.recv())
        .await
        .expect("a release is announced")
        .unwrap();
    assert_eq!(note.channel(), notify::SESSION_WORK_CHANNEL);
    assert_eq!(note.payload(), "slack:C1");
    let taken = tokio::time::timeout(WAIT, waiting)
        .await
        .expect("B takes the released lease")
        .unwrap()
        .expect("B never gave up");
    assert_eq!(taken.lease().holder, "b");
}
