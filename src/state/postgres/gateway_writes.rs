//! Gateway writes on PostgreSQL: inbound journal, routing, cron runs, dead letters (the
//! counterpart of `state/gateway_commands.rs`, `cron_runs.rs` and `dead_letters.rs`, with
//! the same states and outcomes); the delivery ledger's writes are in [`super::ledger_writes`].
//!
//! Every `INSERT OR IGNORE` of SQLite is `ON CONFLICT DO NOTHING` here: two instances
//! recording the same key at once serialise on the key, and the second learns (from a
//! zero row count, as on SQLite) that it was a duplicate.

use sqlx::{Executor, Postgres};

use super::instance::InstanceOwner;
use super::ledger_writes::{self, Owner};
use super::tx::{Db, PgTx, changed};
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::cron_runs::{CRON_RUN_RETENTION_SECONDS, CronRunEnd};
use crate::state::error::StoreResult;
use crate::state::ledger::InboundState;
use crate::state::model::now_epoch;

pub async fn apply(
    tx: &mut PgTx,
    command: WriteCommand,
    instance: &InstanceOwner,
) -> StoreResult<Outcome> {
    use WriteCommand as W;
    match command {
        // The migrations created the tables.
        W::EnsureGatewaySchema => Ok(Outcome::Done),
        W::MarkToolStarted {
            session_id,
            call_id,
        } => mark_tool_started(tx, &session_id, &call_id).await,
        W::RecordInbound {
            platform,
            event_id,
            session_key,
            payload_json,
        } => {
            let recorded = (&*platform, &*event_id, &*session_key, &*payload_json);
            record_inbound(&mut **tx, recorded).await
        }
        // The spawned event first: one journaled already stops everything (see
        // `gateway_commands::answer_and_spawn`); an unknown answered event rolls it back.
        W::AnswerAndSpawn {
            platform,
            event_id,
            replies,
            owner,
            spawn,
        } => {
            let spawned = (
                &*spawn.platform,
                &*spawn.event_id,
                &*spawn.session_key,
                &*spawn.payload_json,
            );
            let recorded = record_inbound(&mut **tx, spawned).await?;
            if recorded.changed() == 0 {
                return Ok(Outcome::Changed(0));
            }
            let owner = Owner::new(owner, instance);
            ledger_writes::answer_inbound(tx, (&platform, &event_id), &replies, owner).await?;
            Ok(Outcome::Changed(1))
        }
        W::MarkInbound {
            platform,
            event_id,
            state,
        } => mark_inbound(tx, &platform, &event_id, state).await,
        W::FoldInbound {
            platform,
            keep,
            payload_json,
            absorbed,
        } => fold_inbound(tx, &platform, &keep, &payload_json, &absorbed).await,
        W::PruneInbound { before } => {
            let done = sqlx::query(
                "DELETE FROM hermesd_inbound_events \
                 WHERE state NOT IN ('received', 'processing') AND updated_at < $1",
            )
            .bind(before)
            .execute(&mut **tx)
            .await
            .db()?;
            Ok(Outcome::Changed(changed(done)))
        }
        W::RecordDeadLetter {
            platform,
            item_id,
            chat_id,
            raw,
            error,
        } => {
            let done = sqlx::query(
                "INSERT INTO hermesd_dead_letters \
                     (platform, item_id, chat_id, raw, error, received_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (platform, item_id) DO NOTHING",
            )
            .bind(platform)
            .bind(item_id)
            .bind(chat_id)
            .bind(raw)
            .bind(error)
            .bind(now_epoch())
            .execute(&mut **tx)
            .await
            .db()?;
            Ok(Outcome::Changed(changed(done)))
        }
        W::ClaimCronRun {
            job_id,
            scheduled_at,
            session_id,
            owner,
        } => {
            let done = sqlx::query(
                "INSERT INTO hermesd_cron_runs \
                     (job_id, scheduled_at, state, session_id, owner_pid, owner_started_at, \
                      owner_instance, owner_token, claimed_at) \
                 VALUES ($1, $2, 'running', $3, $4, $5, $6, $7, $8) \
                 ON CONFLICT (job_id, scheduled_at) DO NOTHING",
            )
            .bind(job_id)
            .bind(scheduled_at)
            .bind(session_id)
            .bind(owner.pid)
            .bind(owner.started_at)
            .bind(&instance.instance)
            .bind(instance.token)
            .bind(now_epoch())
            .execute(&mut **tx)
            .await
            .db()?;
            Ok(Outcome::Changed(changed(done)))
        }
        W::FinishCronRun { end, owner } => {
            finish_cron_run(tx, &end, Owner::new(owner, instance)).await
        }
        W::MarkCronRunRecorded {
            job_id,
            scheduled_at,
        } => {
            let done = sqlx::query(
                "UPDATE hermesd_cron_runs SET job_recorded = 1 \
                 WHERE job_id = $1 AND scheduled_at = $2 AND state != 'running'",
            )
            .bind(job_id)
            .bind(scheduled_at)
            .execute(&mut **tx)
            .await
            .db()?;
            Ok(Outcome::Changed(changed(done)))
        }
        W::SaveRouting {
            scope,
            session_key,
            entry_json,
        } => save_routing(&mut **tx, &scope, &session_key, &entry_json).await,
        W::DeleteRouting {
            scope,
            session_keys,
        } => {
            let done = sqlx::query(
                "DELETE FROM gateway_routing WHERE scope = $1 AND session_key = ANY($2)",
            )
            .bind(scope)
            .bind(session_keys)
            .execute(&mut **tx)
            .await
            .db()?;
            Ok(Outcome::Changed(changed(done)))
        }
        W::ReplaceRouting { scope, entries } => replace_routing(tx, &scope, &entries).await,
        other => ledger_writes::apply(tx, other, instance).await,
    }
}

/// Moves an event to `state`: `Changed(0)` when no such event is journaled. (The session
/// side's `StartTurn` marks its event `processing` with this, in the turn's transaction.)
/// Journals an inbound event as `received`; `Changed(0)` when it was journaled already.
/// Running it twice changes nothing the first run did not.
pub(super) async fn record_inbound<'e>(
    on: impl Executor<'e, Database = Postgres>,
    (platform, event_id, session_key, payload_json): (&str, &str, &str, &str),
) -> StoreResult<Outcome> {
    let done = sqlx::query(
        "INSERT INTO hermesd_inbound_events \
             (platform, event_id, session_key, state, payload_json, received_at, updated_at) \
         VALUES ($1, $2, $3, 'received', $4, $5, $5) \
         ON CONFLICT (platform, event_id) DO NOTHING",
    )
    .bind(platform)
    .bind(event_id)
    .bind(session_key)
    .bind(payload_json)
    .bind(now_epoch())
    .execute(on)
    .await
    .db()?;
    Ok(Outcome::Changed(changed(done)))
}

/// The upsert of one routing entry (nothing for an empty key or entry). Running it twice
/// leaves the same row.
pub(super) async fn save_routing<'e>(
    on: impl Executor<'e, Database = Postgres>,
    scope: &str,
    session_key: &str,
    entry_json: &str,
) -> StoreResult<Outcome> {
    if session_key.is_empty() || entry_json.is_empty() {
        return Ok(Outcome::Changed(0));
    }
    let done = sqlx::query(SAVE_ROUTING)
        .bind(scope)
        .bind(session_key)
        .bind(entry_json)
        .bind(now_epoch())
        .execute(on)
        .await
        .db()?;
    Ok(Outcome::Changed(changed(done)))
}

/// The routing upsert, its values `$1` to `$4`.
pub(super) const SAVE_ROUTING: &str = "INSERT INTO gateway_routing (scope, session_key, entry_json, updated_at) \
     VALUES ($1, $2, $3, $4) \
     ON CONFLICT (scope, session_key) DO UPDATE SET \
         entry_json = EXCLUDED.entry_json, updated_at = EXCLUDED.updated_at";

pub(crate) async fn mark_inbound(
    tx: &mut PgTx,
    platform: &str,
    event_id: &str,
    state: InboundState,
) -> StoreResult<Outcome> {
    let done = sqlx::query(
        "UPDATE hermesd_inbound_events SET state = $1, updated_at = $2 \
         WHERE platform = $3 AND event_id = $4",
    )
    .bind(state.as_str())
    .bind(now_epoch())
    .bind(platform)
    .bind(event_id)
    .execute(&mut **tx)
    .await
    .db()?;
    Ok(Outcome::Changed(changed(done)))
}

/// See [`crate::state::Store::fold_inbound`]. The rows are locked first, so a concurrent
/// change of state cannot slip between the check and the writes.
async fn fold_inbound(
    tx: &mut PgTx,
    platform: &str,
    keep: &str,
    payload_json: &str,
    absorbed: &[String],
) -> StoreResult<Outcome> {
    let all: Vec<&str> = std::iter::once(keep)
        .chain(absorbed.iter().map(String::as_str))
        .collect();
    let received: Vec<String> = sqlx::query_scalar(
        "SELECT event_id FROM hermesd_inbound_events \
         WHERE platform = $1 AND event_id = ANY($2) AND state = 'received' FOR UPDATE",
    )
    .bind(platform)
    .bind(&all)
    .fetch_all(&mut **tx)
    .await
    .db()?;
    if all.iter().any(|id| !received.iter().any(|r| r == id)) {
        return Ok(Outcome::Changed(0));
    }
    let now = now_epoch();
    sqlx::query(
        "UPDATE hermesd_inbound_events SET payload_json = $1, updated_at = $2 \
         WHERE platform = $3 AND event_id = $4",
    )
    .bind(payload_json)
    .bind(now)
    .bind(platform)
    .bind(keep)
    .execute(&mut **tx)
    .await
    .db()?;
    sqlx::query(
        "UPDATE hermesd_inbound_events SET state = $1, updated_at = $2 \
         WHERE platform = $3 AND event_id = ANY($4)",
    )
    .bind(InboundState::Answered.as_str())
    .bind(now)
    .bind(platform)
    .bind(absorbed)
    .execute(&mut **tx)
    .await
    .db()?;
    Ok(Outcome::Changed(all.len()))
}

/// The whole index of `scope` replaced in the command's transaction; other scopes untouched.
async fn replace_routing(
    tx: &mut PgTx,
    scope: &str,
    entries: &[(String, String)],
) -> StoreResult<Outcome> {
    sqlx::query("DELETE FROM gateway_routing WHERE scope = $1")
        .bind(scope)
        .execute(&mut **tx)
        .await
        .db()?;
    let now = now_epoch();
    let mut inserted = 0;
    for (key, entry) in entries
        .iter()
        .filter(|(k, e)| !k.is_empty() && !e.is_empty())
    {
        let done = sqlx::query(
            "INSERT INTO gateway_routing (scope, session_key, entry_json, updated_at) \
             VALUES ($1, $2, $3, $4)",
        )
        .bind(scope)
        .bind(key)
        .bind(entry)
        .bind(now)
        .execute(&mut **tx)
        .await
        .db()?;
        inserted += changed(done);
    }
    Ok(Outcome::Changed(inserted))
}

/// Ends a `running` claim and records its replies; `Changed(0)` (nothing recorded) when the
/// claim had already ended. Two instances concluding one dead instance's run at once: the
/// second waits on the row and then finds it no longer `running`.
async fn finish_cron_run(
    tx: &mut PgTx,
    end: &CronRunEnd,
    owner: Owner<'_>,
) -> StoreResult<Outcome> {
    let now = now_epoch();
    let (ids, error) = (end.obligation_ids(), end.stored_error());
    let done = sqlx::query(
        "UPDATE hermesd_cron_runs \
         SET state = $1, status = $2, error = $3, obligation_ids = $4, finished_at = $5 \
         WHERE job_id = $6 AND scheduled_at = $7 AND state = 'running'",
    )
    .bind(end.state)
    .bind(&end.status)
    .bind(error)
    .bind(ids.join(","))
    .bind(now)
    .bind(&end.job_id)
    .bind(end.scheduled_at)
    .execute(&mut **tx)
    .await
    .db()?;
    let finished = changed(done);
    if finished == 0 {
        return Ok(Outcome::Changed(0));
    }
    for reply in &end.replies {
        ledger_writes::insert_obligation(tx, reply, owner).await?;
    }
    sqlx::query("DELETE FROM hermesd_cron_runs WHERE job_recorded = 1 AND finished_at < $1")
        .bind(now - CRON_RUN_RETENTION_SECONDS)
        .execute(&mut **tx)
        .await
        .db()?;
    Ok(Outcome::Changed(finished))
}

/// See [`WriteCommand::MarkToolStarted`].
async fn mark_tool_started(tx: &mut PgTx, session_id: &str, call_id: &str) -> StoreResult<Outcome> {
    let now = crate::state::now_epoch();
    sqlx::query("DELETE FROM hermesd_tool_starts WHERE session_id = $1 AND started_at < $2")
        .bind(session_id)
        .bind(now - crate::state::sqlite::gateway_schema::TOOL_START_KEPT_SECONDS)
        .execute(&mut **tx)
        .await
        .db()?;
    let done = sqlx::query(
        "INSERT INTO hermesd_tool_starts (session_id, call_id, started_at) VALUES ($1, $2, $3) \
         ON CONFLICT (session_id, call_id) DO NOTHING",
    )
    .bind(session_id)
    .bind(call_id)
    .bind(now)
    .execute(&mut **tx)
    .await
    .db()?;
    Ok(Outcome::Changed(changed(done)))
}
