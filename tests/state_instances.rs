//! Ownership across instances on PostgreSQL (issue 22): gateway work (delivery obligations,
//! cron runs) belongs to the instance that claimed it, alive while that instance holds its
//! `instance` lease. A live instance's work is never taken over; a dead one's is picked up
//! exactly once, however many instances race for it. Several stores on one private cluster
//! stand in for instances on different machines.

mod support;

use std::time::{Duration, Instant};

use hermesd::state::{CronRunEnd, InboundRecord, NewObligation, Store, StoreOptions, now_epoch};
use serde_json::json;
use sqlx::postgres::PgPool;
use support::owners::{PATIENCE, instance_lease, wait_until_lease_expired};
use support::store_backends::{Backend, TestStore};

fn reply(event: &str) -> NewObligation {
    NewObligation {
        session_key: "agent:main:telegram:dm:42".into(),
        message_ref: event.into(),
        platform: "telegram".into(),
        chat_id: "42".into(),
        thread_id: None,
        content: format!("answer to {event}"),
    }
}

async fn cluster() -> TestStore {
    let t = TestStore::open(Backend::Postgres).await;
    t.store.ensure_gateway_schema().await.unwrap();
    t
}

async fn instance(t: &TestStore, id: &str, ttl: Duration) -> Store {
    t.another(StoreOptions {
        instance_id: Some(id.to_owned()),
        lease_ttl: ttl,
        ..StoreOptions::default()
    })
    .await
}

fn pool(t: &TestStore) -> PgPool {
    t.store.postgres().expect("postgres").pool().clone()
}

/// Waits until the database's clock has passed `micros` (epoch microseconds).
async fn wait_past(pool: &PgPool, micros: i64) {
    let start = Instant::now();
    loop {
        let (past,): (bool,) =
            sqlx::query_as("SELECT (extract(epoch FROM now()) * 1000000)::bigint > $1")
                .bind(micros)
                .fetch_one(pool)
                .await
                .unwrap();
        if past {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the clock never passed {micros}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn lease_expiry_micros(pool: &PgPool, id: &str) -> i64 {
    let (micros,): (i64,) = sqlx::query_as(
        "SELECT (extract(epoch FROM expires_at) * 1000000)::bigint FROM hermesd_leases \
         WHERE scope = 'instance' AND key = $1",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap();
    micros
}

fn ids(found: &[hermesd::state::Obligation]) -> Vec<String> {
    found.iter().map(|o| o.obligation_id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_holds_its_lease_while_open_renews_it_and_releases_it_on_close() {
    let t = cluster().await;
    let pool = pool(&t);
    // Renewed every third of it: slack for a loaded machine.
    let ttl = Duration::from_secs(6);
    let a = instance(&t, "a", ttl).await;
    let (token, live) = instance_lease(&pool, "a").await.expect("taken at open");
    assert!(live);
    // Past the first hold time, the lease is still current with the same token: renewed.
    wait_past(&pool, lease_expiry_micros(&pool, "a").await).await;
    assert_eq!(instance_lease(&pool, "a").await, Some((token, true)));
    let owed = a.create_obligation(reply("e1")).await.unwrap();
    assert!(t.store.undelivered(now_epoch()).await.unwrap().is_empty());
    a.close().await;
    assert_eq!(
        instance_lease(&pool, "a").await,
        Some((token, false)),
        "released at once"
    );
    // Its unfinished work is open to the others at once, with no wait for an expiry.
    assert_eq!(
        ids(&t.store.undelivered(now_epoch()).await.unwrap()),
        vec![owed]
    );
    t.store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_work_of_a_live_instance_is_never_taken_over() {
    let t = cluster().await;
    let pool = pool(&t);
    // Long enough that renewal (every third of it) keeps up on a loaded machine.
    let a = instance(&t, "a", Duration::from_secs(6)).await;
    let (token, _) = instance_lease(&pool, "a").await.unwrap();
    let pending = a.create_obligation(reply("e1")).await.unwrap();
    let sending = a.create_obligation(reply("e2")).await.unwrap();
    let exhausted = a.create_obligation(reply("e3")).await.unwrap();
    assert!(a.mark_attempting(&sending).await.unwrap());
    for _ in 0..3 {
        assert!(a.mark_attempting(&exhausted).await.unwrap());
    }
    assert!(a.claim_cron_run("job", 1, "s").await.unwrap());
    wait_past(&pool, lease_expiry_micros(&pool, "a").await).await;

    let b = instance(&t, "b", Duration::from_secs(6)).await;
    let far_future = now_epoch() + 10.0 * 86_400.0;
    assert!(b.undelivered(now_epoch()).await.unwrap().is_empty());
    assert!(b.undelivered(far_future).await.unwrap().is_empty());
    assert_eq!(b.abandon_stale(far_future).await.unwrap(), 0);
    for id in [&pending, &sending] {
        assert!(!b.mark_attempting(id).await.unwrap(), "{id} is A's");
    }
    let runs = b.open_cron_runs().await.unwrap();
    assert!(runs[0].owner_alive);
    // A held its lease without a break the whole time (a lapse would have changed the token).
    assert_eq!(instance_lease(&pool, "a").await, Some((token, true)));
    let row = b.get_obligation(&sending).await.unwrap().unwrap();
    assert_eq!(row.attempts, 1, "untouched");
    assert!(
        a.mark_attempting(&pending).await.unwrap(),
        "A's own to send"
    );
    a.close().await;
    b.close().await;
    t.store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_instances_work_is_picked_up_exactly_once_by_racing_instances() {
    let t = cluster().await;
    let pool = pool(&t);
    let a = instance(&t, "a", Duration::from_secs(2)).await;
    let mut owed = Vec::new();
    for n in 0..8 {
        let id = a.create_obligation(reply(&format!("e{n}"))).await.unwrap();
        if n % 2 == 1 {
            assert!(a.mark_attempting(&id).await.unwrap());
        }
        owed.push(id);
    }
    let exhausted = a.create_obligation(reply("poison")).await.unwrap();
    for _ in 0..3 {
        assert!(a.mark_attempting(&exhausted).await.unwrap());
    }
    assert!(a.claim_cron_run("job", 1, "s").await.unwrap());
    // A dies: dropped without releasing; its renewal stops and its lease runs out.
    drop(a);
    wait_until_lease_expired(&pool, "a").await;

    let b = instance(&t, "b", Duration::from_secs(30)).await;
    let c = instance(&t, "c", Duration::from_secs(30)).await;
    let now = now_epoch();
    let (seen_b, seen_c) = tokio::join!(b.undelivered(now), c.undelivered(now));
    assert_eq!(ids(&seen_b.unwrap()), owed);
    assert_eq!(ids(&seen_c.unwrap()), owed);
    let (abandoned_b, abandoned_c) = tokio::join!(b.abandon_stale(now), c.abandon_stale(now));
    assert_eq!(
        abandoned_b.unwrap() + abandoned_c.unwrap(),
        1,
        "the exhausted row, once"
    );

    let mut winners = Vec::new();
    for (n, id) in owed.iter().enumerate() {
        let (by_b, by_c) = tokio::join!(b.mark_attempting(id), c.mark_attempting(id));
        let (by_b, by_c) = (by_b.unwrap(), by_c.unwrap());
        assert!(
            by_b ^ by_c,
            "{id}: exactly one claims it (b {by_b}, c {by_c})"
        );
        winners.push(if by_b { "b" } else { "c" });
        let row = t.store.get_obligation(id).await.unwrap().unwrap();
        let by_a = i64::from(n % 2 == 1);
        assert_eq!(row.attempts, by_a + 1, "one claim after A's: {row:?}");
    }
    // Claimed rows belong to live instances now: nobody else's to take.
    assert!(b.undelivered(now).await.unwrap().is_empty());
    assert!(c.undelivered(now).await.unwrap().is_empty());
    println!("claims: {winners:?}");

    let end = || CronRunEnd {
        job_id: "job".into(),
        scheduled_at: 1,
        state: "interrupted",
        status: "interrupted".into(),
        error: Some("its instance died".into()),
        replies: vec![],
    };
    let runs = b.open_cron_runs().await.unwrap();
    assert!(!runs[0].owner_alive, "A's run was cut short");
    let (by_b, by_c) = tokio::join!(b.finish_cron_run(end()), c.finish_cron_run(end()));
    assert!(by_b.unwrap().is_some() ^ by_c.unwrap().is_some());
    b.close().await;
    c.close().await;
    t.store.close().await;
}

/// Waits until instance `id` holds a current lease again, and returns its token.
async fn wait_until_renewed(pool: &PgPool, id: &str) -> i64 {
    let start = Instant::now();
    loop {
        if let Some((token, true)) = instance_lease(pool, id).await {
            return token;
        }
        assert!(start.elapsed() < PATIENCE, "{id} never renewed its lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Issue 28, defect 4: an instance whose lease ran out (paused, or its renewals starved) and
/// that then renewed it keeps what it owns. Before the fix it took a new token, its rows kept
/// the old one and looked dead for good: a survivor resent its replies and closed its running
/// cron run as interrupted while it was still working on both.
#[tokio::test(flavor = "multi_thread")]
async fn an_instance_whose_lease_lapsed_keeps_its_work_once_it_renews() {
    let t = cluster().await;
    let pool = pool(&t);
    let a = instance(&t, "a", Duration::from_secs(6)).await;
    let (token, _) = instance_lease(&pool, "a").await.unwrap();
    let pending = a.create_obligation(reply("e1")).await.unwrap();
    let sending = a.create_obligation(reply("e2")).await.unwrap();
    assert!(a.mark_attempting(&sending).await.unwrap());
    assert!(a.claim_cron_run("job", 1, "s").await.unwrap());
    // As if A had been paused past its hold time; its next renewal finds the lease run out.
    sqlx::query("UPDATE hermesd_leases SET expires_at = now() WHERE key = 'a'")
        .execute(&pool)
        .await
        .unwrap();
    let renewed = wait_until_renewed(&pool, "a").await;

    let b = instance(&t, "b", Duration::from_secs(30)).await;
    let far_future = now_epoch() + 10.0 * 86_400.0;
    assert!(
        b.undelivered(now_epoch()).await.unwrap().is_empty(),
        "A's replies are still A's to send"
    );
    assert_eq!(b.abandon_stale(far_future).await.unwrap(), 0);
    for id in [&pending, &sending] {
        assert!(!b.mark_attempting(id).await.unwrap(), "{id} is A's");
    }
    let runs = b.open_cron_runs().await.unwrap();
    assert!(runs[0].owner_alive, "A's cron run is still running on A");
    assert_eq!(renewed, token, "nobody took the id: the token stays");
    assert!(
        a.mark_attempting(&pending).await.unwrap(),
        "A's own to send"
    );
    let after = a.create_obligation(reply("e3")).await.unwrap();
    assert!(!b.mark_attempting(&after).await.unwrap());
    a.close().await;
    b.close().await;
    t.store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_whose_id_was_taken_meanwhile_takes_a_new_lease_and_its_earlier_work_is_recoverable()
 {
    let t = cluster().await;
    let pool = pool(&t);
    let a = instance(&t, "a", Duration::from_secs(6)).await;
    let (old_token, _) = instance_lease(&pool, "a").await.unwrap();
    let before = a.create_obligation(reply("e1")).await.unwrap();
    // Another holder took A's id while A was paused, and let it go again (two processes
    // with one id): what A stamped before is nobody's now.
    sqlx::query(
        "UPDATE hermesd_leases SET token = nextval('hermesd_lease_tokens'), expires_at = now() \
         WHERE key = 'a'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let start = Instant::now();
    let new_token = loop {
        match instance_lease(&pool, "a").await {
            Some((token, true)) if token != old_token => break token,
            _ => {}
        }
        assert!(start.elapsed() < PATIENCE, "A never took a new lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(new_token > old_token);
    let after = a.create_obligation(reply("e2")).await.unwrap();
    let b = instance(&t, "b", Duration::from_secs(30)).await;
    let now = now_epoch();
    assert_eq!(
        ids(&b.undelivered(now).await.unwrap()),
        vec![before.clone()]
    );
    assert!(
        !b.mark_attempting(&after).await.unwrap(),
        "A's new work is live"
    );
    assert!(b.mark_attempting(&before).await.unwrap());
    a.close().await;
    b.close().await;
    t.store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_instance_waits_out_its_old_lease_and_recovers_its_own_work() {
    let t = cluster().await;
    let pool = pool(&t);
    let a = instance(&t, "a", Duration::from_secs(2)).await;
    let (old_token, _) = instance_lease(&pool, "a").await.unwrap();
    let left = a.create_obligation(reply("e1")).await.unwrap();
    drop(a);
    // Same id, opened at once: it waits until the crashed run's lease has expired.
    let again = instance(&t, "a", Duration::from_secs(30)).await;
    let (token, live) = instance_lease(&pool, "a").await.unwrap();
    assert!(live && token > old_token);
    assert_eq!(
        ids(&again.undelivered(now_epoch()).await.unwrap()),
        vec![left.clone()]
    );
    assert!(again.mark_attempting(&left).await.unwrap());
    again.close().await;
    t.store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_event_received_by_two_instances_at_once_is_recorded_once() {
    let t = cluster().await;
    let b = instance(&t, "b", Duration::from_secs(30)).await;
    let c = instance(&t, "c", Duration::from_secs(30)).await;
    for n in 0..20 {
        let id = format!("u-{n}");
        let (by_b, by_c) = tokio::join!(
            b.record_inbound("telegram", &id, "k", json!({"from": "b"})),
            c.record_inbound("telegram", &id, "k", json!({"from": "c"})),
        );
        let outcomes = [by_b.unwrap(), by_c.unwrap()];
        let recorded = outcomes
            .iter()
            .filter(|o| **o == InboundRecord::Recorded)
            .count();
        assert_eq!(recorded, 1, "{id}: {outcomes:?}");
    }
    assert_eq!(t.store.unfinished_inbound().await.unwrap().len(), 20);
    b.close().await;
    c.close().await;
    t.store.close().await;
}
