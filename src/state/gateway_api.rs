//! The gateway's part of the [`Store`] API: the inbound journal, the delivery-obligation
//! ledger and the routing index. Writes go through the writer as [`WriteCommand`]s and are
//! durable when they return; reads run on the read pool.
//!
//! Call [`Store::ensure_gateway_schema`] once when the gateway starts; until then the tables
//! may not exist and these calls fail with a "no such table" error.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Store;

/// The routing index's scope for `home` on `store`: its `sessions/` directory (canonical) on
/// state.db, where homes share no routing; empty on PostgreSQL, where every instance's home
/// is one deployment and shares the routing entries. The gateway writes under it and the
/// tools read under it, so both ask here.
pub fn routing_scope(home: &crate::home::HermesHome, store: &Store) -> String {
    if store.is_shared() {
        return String::new();
    }
    let scope = home.path().join("sessions");
    std::fs::canonicalize(&scope)
        .unwrap_or(scope)
        .display()
        .to_string()
}
use super::commands::{Outcome, WriteCommand};
use super::cron_runs::{CronRun, CronRunEnd};
use super::dead_letters::DeadLetterRow;
use super::error::StoreResult;
use super::ledger::{
    InboundEvent, InboundRecord, InboundState, NewObligation, Obligation, ObligationInOrder,
};
use super::model::now_epoch;
use super::sqlite::gateway_read;

impl Store {
    /// Creates `gateway_routing`, `delivery_obligations` (Hermes's DDL) and
    /// `hermesd_inbound_events` if missing. Idempotent; never alters an existing table.
    pub async fn ensure_gateway_schema(&self) -> StoreResult<()> {
        self.write(WriteCommand::EnsureGatewaySchema).await?;
        Ok(())
    }

    // ---- inbound journal ------------------------------------------------------------------

    /// Journals an inbound platform event before it is acknowledged. Durable when this
    /// returns; an event already journaled (same platform and id) is a [`InboundRecord::Duplicate`]
    /// and changes nothing.
    pub async fn record_inbound(
        &self,
        platform: &str,
        event_id: &str,
        session_key: &str,
        payload: Value,
    ) -> StoreResult<InboundRecord> {
        let outcome = self
            .write(WriteCommand::RecordInbound {
                platform: platform.to_owned(),
                event_id: event_id.to_owned(),
                session_key: session_key.to_owned(),
                payload_json: payload.to_string(),
            })
            .await?;
        Ok(if outcome.changed() > 0 {
            InboundRecord::Recorded
        } else {
            InboundRecord::Duplicate
        })
    }

    /// Moves an event to `state`; false if no such event is journaled. To answer an event use
    /// [`Store::answer_inbound`], which records the reply in the same transaction.
    pub async fn mark_inbound(
        &self,
        platform: &str,
        event_id: &str,
        state: InboundState,
    ) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::MarkInbound {
                platform: platform.to_owned(),
                event_id: event_id.to_owned(),
                state,
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    /// Joins the received events `absorbed` into the received event `keep`, in one
    /// transaction: `keep`'s payload becomes `payload` (the joined event) and the absorbed
    /// ones are answered, as their turn is now `keep`'s. False, with nothing changed, when
    /// any of them is no longer received (someone took it up) or not journaled.
    pub async fn fold_inbound(
        &self,
        platform: &str,
        keep: &str,
        payload: &serde_json::Value,
        absorbed: &[String],
    ) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::FoldInbound {
                platform: platform.to_owned(),
                keep: keep.to_owned(),
                payload_json: payload.to_string(),
                absorbed: absorbed.to_vec(),
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    /// Received or processing events in the order they were journaled (the journal's own
    /// sequence, never a host's clock, so skew between instances cannot reorder a chat):
    /// the turns to resume after a restart.
    pub async fn unfinished_inbound(&self) -> StoreResult<Vec<InboundEvent>> {
        if let Some(pg) = self.postgres() {
            return pg.unfinished_inbound().await;
        }
        self.read(|c, _| gateway_read::unfinished_inbound(c)).await
    }

    /// [`Store::unfinished_inbound`] of one session only: what its lease holder runs next.
    /// Reads that session's rows through an index, however long the journal is.
    pub async fn unfinished_inbound_of(&self, session_key: &str) -> StoreResult<Vec<InboundEvent>> {
        if let Some(pg) = self.postgres() {
            return pg.unfinished_inbound_of(session_key).await;
        }
        let key = session_key.to_owned();
        self.read(move |c, _| gateway_read::unfinished_inbound_of(c, &key))
            .await
    }

    /// Whether `session_key` has an event received or in progress: work for whoever
    /// holds the session. Reads the partial index of unfinished events, not the journal.
    pub async fn has_unfinished_inbound(&self, session_key: &str) -> StoreResult<bool> {
        if let Some(pg) = self.postgres() {
            return pg.has_unfinished_inbound(session_key).await;
        }
        let key = session_key.to_owned();
        self.read(move |c, _| gateway_read::has_unfinished_inbound(c, &key))
            .await
    }

    pub async fn get_inbound(
        &self,
        platform: &str,
        event_id: &str,
    ) -> StoreResult<Option<InboundEvent>> {
        if let Some(pg) = self.postgres() {
            return pg.get_inbound(platform, event_id).await;
        }
        let (platform, event_id) = (platform.to_owned(), event_id.to_owned());
        self.read(move |c, _| gateway_read::get_inbound(c, &platform, &event_id))
            .await
    }

    /// Deletes answered/ignored events last updated more than `older_than_days` ago.
    pub async fn prune_inbound(&self, older_than_days: f64) -> StoreResult<usize> {
        let before = now_epoch() - older_than_days * 86_400.0;
        let outcome = self.write(WriteCommand::PruneInbound { before }).await?;
        Ok(outcome.changed())
    }

    /// In one transaction: records `replies` as pending obligations owned by this process and
    /// marks the event answered with their ids. A crash leaves both or neither. Fails with
    /// [`StoreError::InboundNotFound`](super::StoreError::InboundNotFound) (recording nothing)
    /// if the event is not journaled. Returns the obligation ids, in order.
    pub async fn answer_inbound(
        &self,
        platform: &str,
        event_id: &str,
        replies: Vec<NewObligation>,
    ) -> StoreResult<Vec<String>> {
        let ids = replies.iter().map(NewObligation::obligation_id).collect();
        self.write(WriteCommand::AnswerInbound {
            platform: platform.to_owned(),
            event_id: event_id.to_owned(),
            replies,
            owner: self.inner.ledger_owner,
        })
        .await?;
        Ok(ids)
    }

    /// As [`Store::answer_inbound`], and journals `spawn` (a `/background` task's event) in
    /// the same transaction: after a crash both exist or neither does. When `spawn` was
    /// journaled already nothing is written and the answer is
    /// [`InboundRecord::Duplicate`]: that task exists and runs (or ran) once.
    pub async fn answer_and_spawn(
        &self,
        platform: &str,
        event_id: &str,
        replies: Vec<NewObligation>,
        spawn: super::NewInbound,
    ) -> StoreResult<(InboundRecord, Vec<String>)> {
        let ids = replies.iter().map(NewObligation::obligation_id).collect();
        let outcome = self
            .write(WriteCommand::AnswerAndSpawn {
                platform: platform.to_owned(),
                event_id: event_id.to_owned(),
                replies,
                owner: self.inner.ledger_owner,
                spawn: Box::new(spawn),
            })
            .await?;
        Ok(match outcome.changed() {
            0 => (InboundRecord::Duplicate, Vec::new()),
            _ => (InboundRecord::Recorded, ids),
        })
    }

    /// As [`Store::answer_inbound`] with one reply that is to be delivered by editing the
    /// chat's message `message_id` (a streamed preview); [`Store::reply_edit_target`] tells
    /// delivery and recovery so. Returns the obligation id.
    pub async fn answer_inbound_by_edit(
        &self,
        platform: &str,
        event_id: &str,
        reply: NewObligation,
        message_id: &str,
    ) -> StoreResult<String> {
        let id = reply.obligation_id();
        self.write(WriteCommand::AnswerInboundByEdit {
            platform: platform.to_owned(),
            event_id: event_id.to_owned(),
            reply: Box::new(reply),
            message_id: message_id.to_owned(),
            owner: self.inner.ledger_owner,
        })
        .await?;
        Ok(id)
    }

    /// The message obligation `id` is delivered by editing, if any.
    pub async fn reply_edit_target(&self, id: &str) -> StoreResult<Option<String>> {
        if let Some(pg) = self.postgres() {
            return pg.reply_edit_target(id).await;
        }
        let id = id.to_owned();
        self.read(move |c, _| gateway_read::reply_edit_target(c, &id))
            .await
    }

    // ---- delivery obligations -------------------------------------------------------------

    /// Records a reply as owed (`pending`, owned by this process) and returns its Hermes id.
    /// Recording the same turn and content again keeps the existing row.
    pub async fn create_obligation(&self, obligation: NewObligation) -> StoreResult<String> {
        let id = obligation.obligation_id();
        self.write(WriteCommand::CreateObligation {
            obligation: Box::new(obligation),
            owner: self.inner.ledger_owner,
        })
        .await?;
        Ok(id)
    }

    /// As [`Store::create_obligation`], also saying whether the row is new (false: the same
    /// id was recorded before and keeps its row), so a caller retried with the same message
    /// hands it to a lane only once.
    pub async fn create_obligation_if_new(
        &self,
        obligation: NewObligation,
    ) -> StoreResult<(String, bool)> {
        let id = obligation.obligation_id();
        let outcome = self
            .write(WriteCommand::CreateObligation {
                obligation: Box::new(obligation),
                owner: self.inner.ledger_owner,
            })
            .await?;
        Ok((id, changed(outcome)))
    }

    /// Call immediately before sending: `attempting`, attempts + 1, owner = this process.
    /// False when the row is missing, delivered or abandoned (do not send).
    pub async fn mark_attempting(&self, id: &str) -> StoreResult<bool> {
        let owner = self.inner.ledger_owner;
        let id = id.to_owned();
        Ok(changed(
            self.write(WriteCommand::MarkAttempting { id, owner })
                .await?,
        ))
    }

    /// Call only once the platform confirmed the send.
    pub async fn mark_delivered(&self, id: &str) -> StoreResult<bool> {
        let id = id.to_owned();
        Ok(changed(
            self.write(WriteCommand::MarkDelivered { id }).await?,
        ))
    }

    /// A definitive rejection (the error is kept, at most 500 characters).
    pub async fn mark_failed(&self, id: &str, error: &str) -> StoreResult<bool> {
        let (id, error) = (id.to_owned(), error.to_owned());
        Ok(changed(
            self.write(WriteCommand::MarkFailed { id, error }).await?,
        ))
    }

    /// Flow control outlasted the deadline and nothing was sent: back to `pending`, the claim
    /// uncounted, so a restart sends the reply as new (see `gateway_commands::mark_deferred`).
    /// False unless this process (instance) holds the send or its holder is gone: a send
    /// another live owner is making is not ours to reset.
    pub async fn mark_deferred(&self, id: &str, error: &str) -> StoreResult<bool> {
        let (id, error) = (id.to_owned(), error.to_owned());
        let owner = self.inner.ledger_owner;
        Ok(changed(
            self.write(WriteCommand::MarkDeferred { id, error, owner })
                .await?,
        ))
    }

    /// Prunes finished ledger rows (past retention, then past the cap); owed rows stay.
    /// Returns how many rows went.
    pub async fn prune_ledger(&self) -> StoreResult<usize> {
        let now = now_epoch();
        Ok(self
            .write(WriteCommand::PruneLedger { now })
            .await?
            .changed())
    }

    /// How many replies are owed (pending or being sent), on every instance.
    pub async fn owed_replies(&self) -> StoreResult<u64> {
        if let Some(pg) = self.postgres() {
            return pg.owed_replies().await;
        }
        self.read(|c, _| gateway_read::owed_replies(c)).await
    }

    /// Abandons undelivered rows of dead owners past the attempt cap or the stale cutoff.
    pub async fn abandon_stale(&self, now: f64) -> StoreResult<usize> {
        Ok(self
            .write(WriteCommand::AbandonStale { now })
            .await?
            .changed())
    }

    /// Replies to send after a restart: undelivered rows whose owner is no live process,
    /// oldest first; `ambiguous` ones must go out with [`RECOVERED_MARKER`](super::RECOVERED_MARKER)
    /// ([`Obligation::text_to_send`]). Claim each with [`Store::mark_attempting`] before sending.
    pub async fn undelivered(&self, now: f64) -> StoreResult<Vec<Obligation>> {
        if let Some(pg) = self.postgres() {
            return pg.undelivered(now).await;
        }
        self.read(move |c, _| gateway_read::undelivered(c, now))
            .await
    }

    pub async fn get_obligation(&self, id: &str) -> StoreResult<Option<Obligation>> {
        if let Some(pg) = self.postgres() {
            return pg.get_obligation(id).await;
        }
        let id = id.to_owned();
        self.read(move |c, _| gateway_read::get_obligation(c, &id))
            .await
    }

    /// Obligation `id` with the replies to its chat recorded before it that are owed by
    /// another instance (or an earlier run of this one), oldest first, in one read. On SQLite
    /// the list is empty: one process sends each chat's replies from one lane, in order.
    pub async fn obligation_in_chat_order(
        &self,
        id: &str,
        now: f64,
    ) -> StoreResult<ObligationInOrder> {
        if let Some(pg) = self.postgres() {
            return pg.obligation_in_chat_order(id, now).await;
        }
        Ok(ObligationInOrder {
            obligation: self.get_obligation(id).await?,
            owed_before: Vec::new(),
        })
    }

    /// Marks a journaled turn's tool call as started, just before it runs (fenced by the
    /// turn's session lease like every write of the turn).
    pub async fn mark_tool_started(&self, session_id: &str, call_id: &str) -> StoreResult<()> {
        self.write(WriteCommand::MarkToolStarted {
            session_id: session_id.to_owned(),
            call_id: call_id.to_owned(),
        })
        .await?;
        Ok(())
    }

    /// Which of `call_ids` (calls of `session_id`) were marked as started.
    pub async fn started_tool_calls(
        &self,
        session_id: &str,
        call_ids: &[String],
    ) -> StoreResult<std::collections::HashSet<String>> {
        if let Some(pg) = self.postgres() {
            return pg.started_tool_calls(session_id, call_ids).await;
        }
        let (session_id, call_ids) = (session_id.to_owned(), call_ids.to_vec());
        self.read(move |c, _| gateway_read::started_tool_calls(c, &session_id, &call_ids))
            .await
    }

    // ---- routing index --------------------------------------------------------------------

    /// Upserts one routing entry (a `SessionEntry` as JSON) in `scope`.
    pub async fn save_routing_entry(
        &self,
        scope: &str,
        session_key: &str,
        entry: &Value,
    ) -> StoreResult<()> {
        self.write(WriteCommand::SaveRouting {
            scope: scope.to_owned(),
            session_key: session_key.to_owned(),
            entry_json: entry.to_string(),
        })
        .await?;
        Ok(())
    }

    pub async fn delete_routing_entry(&self, scope: &str, session_key: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::DeleteRouting {
                scope: scope.to_owned(),
                session_keys: vec![session_key.to_owned()],
            })
            .await?;
        Ok(changed(outcome))
    }

    /// One entry of the routing index of `scope` (`None`: no entry, or one whose JSON does
    /// not parse, as [`Store::load_routing`] skips it).
    pub async fn load_routing_entry(
        &self,
        scope: &str,
        session_key: &str,
    ) -> StoreResult<Option<Value>> {
        if let Some(pg) = self.postgres() {
            return pg.load_routing_entry(scope, session_key).await;
        }
        let (scope, key) = (scope.to_owned(), session_key.to_owned());
        self.read(move |c, _| gateway_read::load_routing_entry(c, &scope, &key))
            .await
    }

    pub async fn load_routing(&self, scope: &str) -> StoreResult<BTreeMap<String, Value>> {
        if let Some(pg) = self.postgres() {
            return pg.load_routing(scope).await;
        }
        let scope = scope.to_owned();
        self.read(move |c, _| gateway_read::load_routing(c, &scope))
            .await
    }

    /// Replaces the whole index of `scope` with `entries` in one transaction; keys absent
    /// from `entries` disappear, other scopes are untouched.
    pub async fn replace_routing(
        &self,
        scope: &str,
        entries: &BTreeMap<String, Value>,
    ) -> StoreResult<()> {
        self.write(WriteCommand::ReplaceRouting {
            scope: scope.to_owned(),
            entries: entries
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        })
        .await?;
        Ok(())
    }
}

fn changed(outcome: Outcome) -> bool {
    outcome.changed() > 0
}

// ---- dead letters (see `dead_letters.rs`) -------------------------------------------------

impl Store {
    /// Keeps an undecodable inbound item. Durable when this returns; true when it is new,
    /// false when the same platform and id were already kept (a redelivery).
    pub async fn record_dead_letter(
        &self,
        platform: &str,
        item_id: &str,
        chat_id: Option<&str>,
        raw: &str,
        error: &str,
    ) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::RecordDeadLetter {
                platform: platform.to_owned(),
                item_id: item_id.to_owned(),
                chat_id: chat_id.map(str::to_owned),
                raw: raw.to_owned(),
                error: error.to_owned(),
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    /// Every kept item, oldest first.
    pub async fn dead_letters(&self) -> StoreResult<Vec<DeadLetterRow>> {
        if let Some(pg) = self.postgres() {
            return pg.dead_letters().await;
        }
        self.read(|c, _| super::dead_letters::list(c)).await
    }
}

// ---- cron run claims (see `cron_runs.rs`) ------------------------------------------------

impl Store {
    /// Claims a scheduled run for this process; false when it was already claimed (by a
    /// process now or before), in which case it must not run.
    pub async fn claim_cron_run(
        &self,
        job_id: &str,
        scheduled_at: i64,
        session_id: &str,
    ) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::ClaimCronRun {
                job_id: job_id.to_owned(),
                scheduled_at,
                session_id: session_id.to_owned(),
                owner: self.inner.ledger_owner,
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    /// Ends a claimed run and records its replies (pending) in one transaction; false when
    /// the claim was no longer `running` (nothing recorded). Returns the obligation ids.
    pub async fn finish_cron_run(&self, end: CronRunEnd) -> StoreResult<Option<Vec<String>>> {
        let ids = end.obligation_ids();
        let outcome = self
            .write(WriteCommand::FinishCronRun {
                end: Box::new(end),
                owner: self.inner.ledger_owner,
            })
            .await?;
        Ok((outcome.changed() > 0).then_some(ids))
    }

    /// Notes that `jobs.json` has the run's outcome.
    pub async fn mark_cron_run_recorded(&self, job_id: &str, scheduled_at: i64) -> StoreResult<()> {
        self.write(WriteCommand::MarkCronRunRecorded {
            job_id: job_id.to_owned(),
            scheduled_at,
        })
        .await?;
        Ok(())
    }

    /// Claims still `running`, and ended runs whose outcome `jobs.json` has not had yet.
    pub async fn open_cron_runs(&self) -> StoreResult<Vec<CronRun>> {
        if let Some(pg) = self.postgres() {
            return pg.open_cron_runs().await;
        }
        self.read(|c, _| {
            let mut stmt = c.prepare(
                "SELECT job_id, scheduled_at, state, session_id, owner_pid, owner_started_at,
                        claimed_at, status, error, obligation_ids, job_recorded
                 FROM hermesd_cron_runs WHERE state = 'running' OR job_recorded = 0
                 ORDER BY claimed_at",
            )?;
            let rows = stmt
                .query_map([], super::sqlite::cron_runs::row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }

    /// Every claim of one job, newest first (for `cron status` and tests).
    pub async fn cron_runs_of(&self, job_id: &str) -> StoreResult<Vec<CronRun>> {
        if let Some(pg) = self.postgres() {
            return pg.cron_runs_of(job_id).await;
        }
        let job_id = job_id.to_owned();
        self.read(move |c, _| {
            let mut stmt = c.prepare(
                "SELECT job_id, scheduled_at, state, session_id, owner_pid, owner_started_at,
                        claimed_at, status, error, obligation_ids, job_recorded
                 FROM hermesd_cron_runs WHERE job_id = ?1 ORDER BY claimed_at DESC",
            )?;
            let rows = stmt
                .query_map([job_id], super::sqlite::cron_runs::row)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
    }
}
