//! Waking instances through PostgreSQL's `LISTEN/NOTIFY`: one channel on which an instance
//! announces that a session key has work another instance may take — an event journaled for
//! it, or its lease released. Every instance listens; the one able to take the session's
//! lease runs its unfinished events. A notification is only a hint (none is sent for an
//! instance that died, and none arrives while a listener reconnects), so a polling sweep
//! backs it up.

use sqlx::postgres::{PgListener, PgPool};

use super::error::PgResult;

/// The channel of session-work notifications; the payload is the session key.
pub const SESSION_WORK_CHANNEL: &str = "hermesd_session_work";

/// Announces that `session_key` has work. Delivered to listeners when this statement commits
/// (at once: it runs outside any transaction).
pub async fn notify_session_work(pool: &PgPool, session_key: &str) -> PgResult<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(SESSION_WORK_CHANNEL)
        .bind(session_key)
        .execute(super::retried(pool))
        .await?;
    Ok(())
}

/// A listener on the session-work channel, on a connection of its own made with the pool's
/// options. sqlx reconnects it after a lost connection (notifications sent meanwhile are
/// lost; the sweep finds their work).
pub async fn session_work_listener(pool: &PgPool) -> PgResult<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(SESSION_WORK_CHANNEL).await?;
    Ok(listener)
}
