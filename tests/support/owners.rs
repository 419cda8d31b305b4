//! Gateway work owned by someone else, on either backend: a store standing in for another
//! gateway process (state.db: stamped with a dead pid) or another instance (PostgreSQL: its
//! own instance lease, with a short hold time), and a way to make it die as a crash would.

use std::time::{Duration, Instant};

use hermesd::state::{Store, StoreOptions};
use sqlx::postgres::PgPool;

use super::store_backends::{Backend, TestStore};

/// Generous: the machine running the tests may be loaded.
pub const PATIENCE: Duration = Duration::from_secs(90);

/// How long a doomed instance's lease outlives it.
pub const SHORT_TTL: Duration = Duration::from_secs(2);

/// A second store on `t`'s database whose work will be left behind by [`crash`].
pub async fn doomed_owner(t: &TestStore, name: &str) -> Store {
    t.another(StoreOptions {
        ledger_owner: super::dead_owner(),
        instance_id: Some(name.to_owned()),
        lease_ttl: SHORT_TTL,
        ..StoreOptions::default()
    })
    .await
}

/// Ends `store` as a crash would. On state.db its pid stamp is already a dead process's, so
/// it is just closed; on PostgreSQL it is dropped without releasing its instance lease (its
/// renewal stops) and this waits until the lease has run out by the database's clock.
pub async fn crash(t: &TestStore, store: Store) {
    match t.backend {
        Backend::Sqlite => store.close().await,
        Backend::Postgres => {
            let id = store.postgres().expect("postgres").instance_id().to_owned();
            drop(store);
            let pool = t.store.postgres().expect("postgres").pool().clone();
            wait_until_lease_expired(&pool, &id).await;
        }
    }
}

/// Whether instance `id` holds a current lease (by the database's clock), and its token.
pub async fn instance_lease(pool: &PgPool, id: &str) -> Option<(i64, bool)> {
    sqlx::query_as(
        "SELECT token, expires_at > now() FROM hermesd_leases \
         WHERE scope = 'instance' AND key = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await
    .expect("read the instance lease")
}

pub async fn wait_until_lease_expired(pool: &PgPool, id: &str) {
    let start = Instant::now();
    while instance_lease(pool, id).await.is_some_and(|(_, live)| live) {
        assert!(
            start.elapsed() < PATIENCE,
            "instance {id}'s lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
