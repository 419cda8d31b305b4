//! The delivery ledger's writes on PostgreSQL (the counterpart of the obligation half of
//! `state/gateway_commands.rs`: the same states, counters and outcomes), with ownership by
//! instance: a row belongs to the instance (and lease token) that created or last claimed
//! it, and is another instance's to claim or abandon only once that lease has expired.

use sqlx::{Executor, Postgres};

use super::instance::InstanceOwner;
use super::tx::{Db, PgTx, changed};
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::error::{StoreError, StoreResult};
use crate::state::ledger::{
    MAX_ERROR_CHARS, NewObligation, OBLIGATION_MAX_ATTEMPTS, OBLIGATION_MAX_ROWS,
    OBLIGATION_RETENTION_SECONDS, OBLIGATION_STALE_AFTER_SECONDS, OwnerStamp,
};
use crate::state::model::now_epoch;

/// SQL true when the row aliased `o` belongs to an instance whose lease, with the token
/// stamped on the row, is current by the database's clock. A row without an instance (copied
/// from a state.db, or written by Python Hermes) has no live owner here.
macro_rules! pg_owner_alive {
    () => {
        "EXISTS (SELECT 1 FROM hermesd_leases l WHERE l.scope = 'instance' \
         AND l.key = o.owner_instance AND l.token = o.owner_token AND l.expires_at > now())"
    };
}
pub(super) use pg_owner_alive;

/// Who is stamped on a row: the process (Hermes's columns, for operators) and the instance.
#[derive(Debug, Clone, Copy)]
pub(super) struct Owner<'a> {
    stamp: OwnerStamp,
    instance: &'a InstanceOwner,
}

impl<'a> Owner<'a> {
    pub(super) fn new(stamp: OwnerStamp, instance: &'a InstanceOwner) -> Self {
        Self { stamp, instance }
    }
}

pub(super) async fn apply(
    tx: &mut PgTx,
    command: WriteCommand,
    instance: &InstanceOwner,
) -> StoreResult<Outcome> {
    use WriteCommand as W;
    match command {
        W::AnswerInbound {
            platform,
            event_id,
            replies,
            owner,
        } => {
            answer_inbound(
                tx,
                (&platform, &event_id),
                &replies,
                Owner::new(owner, instance),
            )
            .await
        }
        W::AnswerInboundByEdit {
            platform,
            event_id,
            reply,
            message_id,
            owner,
        } => {
            let replies = std::slice::from_ref(&*reply);
            let owner = Owner::new(owner, instance);
            let outcome = answer_inbound(tx, (&platform, &event_id), replies, owner).await?;
            sqlx::query(
                "INSERT INTO hermesd_reply_edits (obligation_id, message_id, created_at) \
                 VALUES ($1, $2, $3) ON CONFLICT (obligation_id) DO NOTHING",
            )
            .bind(reply.obligation_id())
            .bind(message_id)
            .bind(now_epoch())
            .execute(&mut **tx)
            .await
            .db()?;
            Ok(outcome)
        }
        W::CreateObligation { obligation, owner } => {
            let inserted = insert_obligation(tx, &obligation, Owner::new(owner, instance)).await?;
            Ok(Outcome::Changed(inserted))
        }
        W::MarkAttempting { id, owner } => {
            mark_attempting(&mut **tx, &id, Owner::new(owner, instance)).await
        }
        W::PruneLedger { now } => prune_ledger(tx, now).await,
        W::MarkDelivered { id } => mark_delivered(&mut **tx, &id).await,
        W::MarkFailed { id, error } => mark_failed(&mut **tx, &id, &error).await,
        // Flow control outlasted the deadline: back to `pending`, the claim uncounted (see
        // `gateway_commands::mark_deferred`). Only this instance's send (same lease token), or
        // one whose instance is gone: another live instance may be sending it right now.
        W::MarkDeferred { id, error, .. } => {
            let done = sqlx::query(concat!(
                "UPDATE delivery_obligations o \
                 SET state = 'pending', attempts = GREATEST(attempts - 1, 0), updated_at = $1, \
                     last_error = $2 \
                 WHERE obligation_id = $3 AND state = 'attempting' \
                   AND ((owner_instance = $4 AND owner_token = $5) OR NOT ",
                pg_owner_alive!(),
                ")"
            ))
            .bind(now_epoch())
            .bind(clip_error(&error))
            .bind(id)
            .bind(&instance.instance)
            .bind(instance.token)
            .execute(&mut **tx)
            .await
            .db()?;
            Ok(Outcome::Changed(changed(done)))
        }
        W::AbandonStale { now } => {
            // Only rows whose owner instance is gone; racing instances each abandon a row at
            // most once (the second re-checks the row after the first's update).
            let done = sqlx::query(concat!(
                "UPDATE delivery_obligations o SET state = 'abandoned', updated_at = $1 \
                 WHERE state IN ('pending', 'attempting', 'failed') \
                   AND (attempts >= $2 OR $1 - created_at > $3) AND NOT ",
                pg_owner_alive!()
            ))
            .bind(now)
            .bind(OBLIGATION_MAX_ATTEMPTS)
            .bind(OBLIGATION_STALE_AFTER_SECONDS)
            .execute(&mut **tx)
            .await
            .db()?;
            Ok(Outcome::Changed(changed(done)))
        }
        other => Err(StoreError::Invalid(format!(
            "{other:?} is not a gateway write"
        ))),
    }
}

/// The error kept on a row: at most [`MAX_ERROR_CHARS`] characters, none when empty.
fn clip_error(error: &str) -> Option<String> {
    let error: String = error.chars().take(MAX_ERROR_CHARS).collect();
    (!error.is_empty()).then_some(error)
}

/// Marks the event answered with its replies' ids and records them, in the command's
/// transaction; an unknown event is an error (the transaction is rolled back).
pub(super) async fn answer_inbound(
    tx: &mut PgTx,
    (platform, event_id): (&str, &str),
    replies: &[NewObligation],
    owner: Owner<'_>,
) -> StoreResult<Outcome> {
    let ids: Vec<String> = replies.iter().map(NewObligation::obligation_id).collect();
    let joined = (!ids.is_empty()).then(|| ids.join(","));
    let done = sqlx::query(
        "UPDATE hermesd_inbound_events \
         SET state = 'answered', updated_at = $1, reply_obligation_id = $2 \
         WHERE platform = $3 AND event_id = $4",
    )
    .bind(now_epoch())
    .bind(joined)
    .bind(platform)
    .bind(event_id)
    .execute(&mut **tx)
    .await
    .db()?;
    if changed(done) == 0 {
        return Err(StoreError::InboundNotFound {
            platform: platform.to_owned(),
            event_id: event_id.to_owned(),
        });
    }
    for reply in replies {
        insert_obligation(tx, reply, owner).await?;
    }
    Ok(Outcome::Changed(replies.len()))
}

/// Records one obligation as `pending`, owned by `owner`; an existing id keeps its row.
pub(super) async fn insert_obligation(
    tx: &mut PgTx,
    o: &NewObligation,
    owner: Owner<'_>,
) -> StoreResult<usize> {
    let sql = format!(
        "{OBLIGATION_INSERT} \
         VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, $7, $8, $9, $10, $11) \
         ON CONFLICT (obligation_id) DO NOTHING"
    );
    let done = bind_obligation(sqlx::query(sqlx::AssertSqlSafe(sql)), o, owner)
        .execute(&mut **tx)
        .await
        .db()?;
    Ok(changed(done))
}

/// A new obligation row's `INSERT` up to its values: `$1` to `$6` (id, session key,
/// platform, chat, thread, content), `'pending'`, `0` attempts, `$7` twice (created and
/// updated), then `$8` to `$11` (the owner), as [`bind_obligation`] binds them.
pub(super) const OBLIGATION_INSERT: &str = "INSERT INTO delivery_obligations (obligation_id, \
     session_key, platform, chat_id, thread_id, content, state, attempts, created_at, \
     updated_at, owner_pid, owner_started_at, owner_instance, owner_token)";

/// Binds [`OBLIGATION_INSERT`]'s values.
pub(super) fn bind_obligation<'q>(
    query: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    o: &'q NewObligation,
    owner: Owner<'q>,
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    let thread_id = o.thread_id.as_deref().filter(|t| !t.is_empty());
    query
        .bind(o.obligation_id())
        .bind(&o.session_key)
        .bind(&o.platform)
        .bind(&o.chat_id)
        .bind(thread_id)
        .bind(&o.content)
        .bind(now_epoch())
        .bind(owner.stamp.pid)
        .bind(owner.stamp.started_at)
        .bind(&owner.instance.instance)
        .bind(owner.instance.token)
}

/// Claims an undelivered row for a send: `attempting`, one more attempt, owned by `owner`.
/// Unlike one process on a state.db, several live instances share these rows, so the claim
/// succeeds only on a row this instance owns already (same lease token) or whose owner's
/// lease has expired: `Changed(0)` for a live instance's row, as for a delivered or
/// abandoned one. Of instances racing for a dead instance's row, the first claims it and
/// the others find it owned by a live instance.
///
/// One statement: the update locks the row, and a racing claim that updated it first makes
/// PostgreSQL check the condition again on the winner's version (found owned by a live
/// instance: no change). Not to be run twice (it counts an attempt).
pub(super) async fn mark_attempting<'e>(
    on: impl Executor<'e, Database = Postgres>,
    id: &str,
    owner: Owner<'_>,
) -> StoreResult<Outcome> {
    let done = sqlx::query(concat!(
        "UPDATE delivery_obligations o \
         SET state = 'attempting', attempts = attempts + 1, updated_at = $1, \
             owner_pid = $2, owner_started_at = $3, owner_instance = $4, owner_token = $5, \
             last_error = NULL \
         WHERE obligation_id = $6 AND state IN ('pending', 'attempting', 'failed') \
           AND ((o.owner_instance = $4 AND o.owner_token = $5) OR NOT ",
        pg_owner_alive!(),
        ")"
    ))
    .bind(now_epoch())
    .bind(owner.stamp.pid)
    .bind(owner.stamp.started_at)
    .bind(&owner.instance.instance)
    .bind(owner.instance.token)
    .bind(id)
    .execute(on)
    .await
    .db()?;
    Ok(Outcome::Changed(changed(done)))
}

/// Marks a reply delivered. Running it twice leaves the same row.
pub(super) async fn mark_delivered<'e>(
    on: impl Executor<'e, Database = Postgres>,
    id: &str,
) -> StoreResult<Outcome> {
    let done = sqlx::query(
        "UPDATE delivery_obligations \
         SET state = 'delivered', updated_at = $1, last_error = NULL \
         WHERE obligation_id = $2",
    )
    .bind(now_epoch())
    .bind(id)
    .execute(on)
    .await
    .db()?;
    Ok(Outcome::Changed(changed(done)))
}

/// A definitive rejection; never overrides `delivered`. Running it twice leaves the same row.
pub(super) async fn mark_failed<'e>(
    on: impl Executor<'e, Database = Postgres>,
    id: &str,
    error: &str,
) -> StoreResult<Outcome> {
    let done = sqlx::query(
        "UPDATE delivery_obligations \
         SET state = 'failed', updated_at = $1, last_error = $2 \
         WHERE obligation_id = $3 AND state != 'delivered'",
    )
    .bind(now_epoch())
    .bind(clip_error(error))
    .bind(id)
    .execute(on)
    .await
    .db()?;
    Ok(Outcome::Changed(changed(done)))
}

/// As on SQLite (`gateway_commands::prune_ledger`): finished rows past retention go, then at
/// most [`OBLIGATION_MAX_ROWS`] finished rows are kept; owed rows are never deleted.
pub(super) async fn prune_ledger(tx: &mut PgTx, now: f64) -> StoreResult<Outcome> {
    let mut removed = sqlx::query(
        "DELETE FROM delivery_obligations \
         WHERE state IN ('delivered', 'abandoned') AND updated_at < $1",
    )
    .bind(now - OBLIGATION_RETENTION_SECONDS)
    .execute(&mut **tx)
    .await
    .db()?
    .rows_affected();
    let (finished,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM delivery_obligations WHERE state IN ('delivered', 'abandoned')",
    )
    .fetch_one(&mut **tx)
    .await
    .db()?;
    let excess = (finished - OBLIGATION_MAX_ROWS).max(0);
    if excess > 0 {
        removed += sqlx::query(
            "DELETE FROM delivery_obligations WHERE obligation_id IN ( \
                 SELECT obligation_id FROM delivery_obligations \
                 WHERE state IN ('delivered', 'abandoned') \
                 ORDER BY updated_at ASC \
                 LIMIT $1)",
        )
        .bind(excess)
        .execute(&mut **tx)
        .await
        .db()?
        .rows_affected();
    }
    sqlx::query(
        "DELETE FROM hermesd_reply_edits WHERE obligation_id NOT IN \
             (SELECT obligation_id FROM delivery_obligations)",
    )
    .execute(&mut **tx)
    .await
    .db()?;
    Ok(Outcome::Changed(
        usize::try_from(removed).unwrap_or(usize::MAX),
    ))
}
