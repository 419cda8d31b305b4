//! The PostgreSQL backend's foundation (issue 22) against a real PostgreSQL: a private
//! cluster per test (`support::postgres`), the embedded migrations applied concurrently, and
//! leases with fencing tokens.

mod support;

use std::time::{Duration, Instant};

use hermesd::state::postgres::{
    self, Lease, LeaseScope, PgError, acquire, begin_fenced, release, renew,
};
use sqlx::Row;
use sqlx::postgres::PgPool;
use support::postgres::PgCluster;

/// Generous: the machine running the tests may be loaded.
const PATIENCE: Duration = Duration::from_secs(90);

async fn migrated(cluster: &PgCluster) -> PgPool {
    postgres::migrate(&cluster.url()).await.expect("migrate");
    postgres::connect(&cluster.url(), 8).await.expect("connect")
}

/// Retries `acquire` until it succeeds (the current hold has expired), within [`PATIENCE`].
async fn acquire_when_free(pool: &PgPool, key: &str, holder: &str, ttl: Duration) -> Lease {
    let start = Instant::now();
    loop {
        if let Some(lease) = acquire(pool, LeaseScope::Session, key, holder, ttl)
            .await
            .expect("acquire")
        {
            return lease;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{holder} never got the lease on {key}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A fenced write: one `state_meta` row, committed only while `lease` is current.
async fn fenced_put(pool: &PgPool, lease: &Lease, key: &str, value: &str) -> Result<(), PgError> {
    let mut tx = begin_fenced(pool, lease).await?;
    sqlx::query("INSERT INTO state_meta (key, value) VALUES ($1, $2)")
        .bind(key)
        .bind(value)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

async fn meta_keys(pool: &PgPool) -> Vec<String> {
    sqlx::query("SELECT key FROM state_meta ORDER BY key")
        .fetch_all(pool)
        .await
        .expect("read state_meta")
        .iter()
        .map(|row| row.get(0))
        .collect()
}

#[test]
fn the_test_cluster_accepts_connections_and_is_removed_on_drop() {
    let cluster = PgCluster::start();
    let dir = cluster.dir().to_path_buf();
    let port = cluster.port();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok());
    drop(cluster);
    assert!(!dir.exists(), "{} is left behind", dir.display());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the server still listens on {port}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_instances_migrating_at_once_create_the_schema_once() {
    let cluster = PgCluster::start();
    let url = cluster.url();
    let runs: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { postgres::migrate(&url).await })
        })
        .collect();
    for run in runs {
        run.await
            .expect("join")
            .expect("every concurrent migrate succeeds");
    }
    let pool = postgres::connect(&url, 2).await.expect("connect");
    let applied: Vec<(i64, bool)> =
        sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&pool)
            .await
            .expect("read the migration log");
    let expected: Vec<(i64, bool)> = migration_versions()
        .into_iter()
        .map(|v| (v, true))
        .collect();
    assert_eq!(applied, expected, "each migration applied exactly once");
    // Every table state.db has (the gateway's included), plus the shared pairing and leases.
    let state_db_tables = ["sessions", "messages", "state_meta"];
    let shared_only = [
        "hermesd_pairing_pending",
        "hermesd_pairing_approved",
        "hermesd_leases",
    ];
    for table in state_db_tables
        .into_iter()
        .chain(hermesd::state::GATEWAY_TABLES)
        .chain(shared_only)
    {
        let found: Option<String> = sqlx::query_scalar("SELECT to_regclass($1)::text")
            .bind(table)
            .fetch_one(&pool)
            .await
            .expect("look the table up");
        assert_eq!(found.as_deref(), Some(table), "table {table} exists");
    }
    // A later start finds everything applied and changes nothing.
    postgres::migrate(&url).await.expect("migrate again");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .expect("count");
    assert_eq!(count, expected.len() as i64);
}

/// The versions of the migration files (`NNNN_name.sql`), in order: what sqlx applies.
fn migration_versions() -> Vec<i64> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/state/postgres/migrations");
    let mut versions: Vec<i64> = std::fs::read_dir(dir)
        .expect("the migrations directory")
        .map(|entry| entry.expect("a migration file").file_name())
        .filter_map(|name| {
            let name = name.to_string_lossy().into_owned();
            let (number, _) = name.split_once('_')?;
            name.ends_with(".sql").then(|| number.parse().ok())?
        })
        .collect();
    versions.sort_unstable();
    versions
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_many_contenders_exactly_one_holds_the_lease() {
    let cluster = PgCluster::start();
    let pool = migrated(&cluster).await;
    let contenders: Vec<_> = (0..6)
        .map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                acquire(
                    &pool,
                    LeaseScope::Session,
                    "telegram:dm:42",
                    &format!("instance-{i}"),
                    Duration::from_secs(600),
                )
                .await
                .expect("acquire")
            })
        })
        .collect();
    let mut holders = Vec::new();
    for contender in contenders {
        holders.extend(contender.await.expect("join"));
    }
    assert_eq!(holders.len(), 1, "{holders:?}");
    let holder = &holders[0];
    // The holder itself cannot acquire again (it renews), and renewing keeps its token.
    assert!(
        acquire(
            &pool,
            LeaseScope::Session,
            "telegram:dm:42",
            &holder.holder,
            Duration::from_secs(600)
        )
        .await
        .unwrap()
        .is_none()
    );
    let renewed = renew(&pool, holder, Duration::from_secs(900))
        .await
        .expect("renew");
    assert_eq!(renewed.token, holder.token);
    assert!(renewed.expires_at_micros > holder.expires_at_micros);
    // Another key and the other scope are independent leases.
    for (scope, key) in [
        (LeaseScope::Session, "telegram:dm:43"),
        (LeaseScope::Ingress, "telegram:dm:42"),
    ] {
        assert!(
            acquire(&pool, scope, key, "instance-x", Duration::from_secs(60))
                .await
                .unwrap()
                .is_some(),
            "{scope:?} {key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_expiry_another_instance_takes_over_and_the_old_holder_cannot_write() {
    let cluster = PgCluster::start();
    let pool = migrated(&cluster).await;
    let key = "discord:channel:7";
    let ttl = Duration::from_millis(1500);
    let a = acquire(&pool, LeaseScope::Session, key, "a", ttl)
        .await
        .unwrap()
        .expect("the first contender gets the free lease");
    // While current, the holder's guarded writes go through.
    fenced_put(&pool, &a, "written-by-a-while-current", "1")
        .await
        .expect("a current holder writes");

    // `a` stops renewing; `b` gets the lease only once it has expired, with a higher token.
    let b = acquire_when_free(&pool, key, "b", Duration::from_secs(600)).await;
    assert!(
        b.acquired_at_micros >= a.expires_at_micros,
        "taken over before expiry: {b:?} vs {a:?}"
    );
    assert!(b.token > a.token, "{b:?} vs {a:?}");

    // The old holder is fenced off: its write, renewal and release are all refused.
    let refused = fenced_put(&pool, &a, "written-by-a-after-losing", "1").await;
    assert!(
        matches!(refused, Err(PgError::LeaseLost { token, .. }) if token == a.token),
        "{refused:?}"
    );
    assert!(matches!(
        renew(&pool, &a, ttl).await,
        Err(PgError::LeaseLost { .. })
    ));
    assert!(!release(&pool, &a).await.unwrap());
    fenced_put(&pool, &b, "written-by-b", "1")
        .await
        .expect("the new holder writes");
    assert_eq!(
        meta_keys(&pool).await,
        vec!["written-by-a-while-current", "written-by-b"]
    );

    // A release frees the lease at once; the next holder's token is higher still.
    assert!(release(&pool, &b).await.unwrap());
    let c = acquire(&pool, LeaseScope::Session, key, "c", ttl)
        .await
        .unwrap()
        .expect("a released lease is free");
    assert!(c.token > b.token);
    assert!(
        fenced_put(&pool, &b, "written-by-b-after-release", "1")
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_stalled_inside_a_fenced_write_loses_it_and_does_not_block_the_takeover() {
    let cluster = PgCluster::start();
    let pool = migrated(&cluster).await;
    let key = "slack:T1:C1";
    let a = acquire(
        &pool,
        LeaseScope::Session,
        key,
        "a",
        Duration::from_millis(1500),
    )
    .await
    .unwrap()
    .expect("free lease");
    // `a` opens its guarded write, writes, then stalls before committing (as if SIGSTOPped).
    let mut stalled = begin_fenced(&pool, &a).await.expect("current");
    sqlx::query("INSERT INTO state_meta (key, value) VALUES ('stalled-write', '1')")
        .execute(&mut *stalled)
        .await
        .expect("write inside the fenced transaction");

    // The takeover is not blocked forever by the stalled transaction's lock on the lease.
    let b = acquire_when_free(&pool, key, "b", Duration::from_secs(600)).await;
    assert!(b.token > a.token);
    // When `a` resumes, its commit fails and its write is gone.
    assert!(
        stalled.commit().await.is_err(),
        "the stalled commit must fail"
    );
    assert!(meta_keys(&pool).await.is_empty());
}
