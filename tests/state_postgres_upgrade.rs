//! Releases of different ages on one PostgreSQL database (a rolling upgrade): a database a
//! newer release has expanded — an unknown migration applied, a table and a column added —
//! still runs this release's store, reads and writes; one whose compatibility floor a newer
//! release raised above this release refuses to open with a message naming both versions.

mod support;

use hermesd::state::postgres::{SCHEMA_FLOOR_KEY, known_version};
use hermesd::state::{NewMessage, NewSession, Store, StoreOptions};
use support::postgres::PgCluster;

/// What the next release's migration would do to the database, as sqlx records it.
async fn apply_next_release_expansion(url: &str, version: i64) {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    for sql in [
        "ALTER TABLE sessions ADD COLUMN next_release_note TEXT",
        "ALTER TABLE messages ADD COLUMN next_release_rank BIGINT NOT NULL DEFAULT 0",
        "CREATE TABLE next_release_things (id BIGINT PRIMARY KEY, body TEXT)",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ($1, 'next release expansion', TRUE, '\\x00'::bytea, 1)",
    )
    .bind(version)
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
}

async fn set_floor(url: &str, floor: i64) {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    sqlx::query("INSERT INTO state_meta (key, value) VALUES ($1, $2)")
        .bind(SCHEMA_FLOOR_KEY)
        .bind(floor.to_string())
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_a_newer_release_expanded_still_runs_this_release() {
    let cluster = PgCluster::start();
    let url = cluster.url();
    let store = Store::open_postgres(&url, StoreOptions::default())
        .await
        .unwrap();
    store
        .create_session(NewSession::new("before", "cli"))
        .await
        .unwrap();
    store.close().await;

    apply_next_release_expansion(&url, known_version() + 1).await;

    // This release, restarted during the rolling upgrade, opens the expanded database...
    let store = Store::open_postgres(&url, StoreOptions::default())
        .await
        .expect("a database a newer release only expanded opens");
    // ...and its writes and reads work beside the newer columns and table.
    store
        .create_session(NewSession::new("after", "cli"))
        .await
        .unwrap();
    store
        .append_message(NewMessage::text("after", "user", "still here"))
        .await
        .unwrap();
    let messages = store.get_messages("after").await.unwrap();
    assert_eq!(messages.len(), 1);
    assert!(store.get_session("before").await.unwrap().is_some());
    store.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_database_whose_floor_is_above_this_release_is_refused_by_name() {
    let cluster = PgCluster::start();
    let url = cluster.url();
    Store::open_postgres(&url, StoreOptions::default())
        .await
        .unwrap()
        .close()
        .await;
    let (known, next) = (known_version(), known_version() + 1);
    apply_next_release_expansion(&url, next).await;
    set_floor(&url, next).await;

    let error = Store::open_postgres(&url, StoreOptions::default())
        .await
        .expect_err("a release below the floor must not open the database")
        .to_string();
    assert!(
        error.contains(&format!("up to {known}"))
            && error.contains(&format!("before migration {next}"))
            && error.contains(&format!("includes migration {next}")),
        "{error}"
    );
}
