//! The sessions part of the [`Store`] API: sessions, messages, titles and lineage,
//! statistics and export. Writes go through [`Store::write`] as [`WriteCommand`]s; each read
//! asks the backend the store was opened on.

use serde_json::Value;

use super::commands::{Outcome, WriteCommand};
use super::error::{StoreError, StoreResult};
use super::model::*;
use super::sqlite;
use super::{Store, postgres};

impl Store {
    // ---- sessions -------------------------------------------------------------------------

    pub async fn create_session(&self, session: NewSession) -> StoreResult<()> {
        self.write(WriteCommand::CreateSession(session)).await?;
        Ok(())
    }

    /// Ends a live session; the first reason wins. Returns whether this call ended it.
    pub async fn end_session(&self, id: &str, reason: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::EndSession {
                id: id.to_owned(),
                reason: reason.to_owned(),
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    pub async fn reopen_session(&self, id: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::ReopenSession { id: id.to_owned() })
            .await?;
        Ok(outcome.changed() > 0)
    }

    pub async fn get_session(&self, id: &str) -> StoreResult<Option<Session>> {
        if let Some(pg) = self.postgres() {
            return postgres::get_session(pg.pool(), id).await;
        }
        let id = id.to_owned();
        self.read(move |c, info| sqlite::read::get_session(c, info, &id))
            .await
    }

    /// An exact id or a unique prefix of one.
    pub async fn resolve_session_id(&self, prefix: &str) -> StoreResult<String> {
        if let Some(pg) = self.postgres() {
            return postgres::resolve_session_id(pg.pool(), prefix).await;
        }
        let prefix = prefix.to_owned();
        self.read(move |c, _| sqlite::read::resolve_session_id(c, &prefix))
            .await
    }

    pub async fn recent_sessions(
        &self,
        source: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<SessionSummary>> {
        if let Some(pg) = self.postgres() {
            return postgres::recent_sessions(pg.pool(), source, limit).await;
        }
        let source = source.map(str::to_owned);
        self.read(move |c, info| sqlite::read::recent_sessions(c, info, source.as_deref(), limit))
            .await
    }

    /// Deletes a session and its messages; its children are orphaned, not deleted.
    pub async fn delete_session(&self, id: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::DeleteSessions {
                ids: vec![id.to_owned()],
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    /// Deletes ended sessions older than `older_than_days`, in small transactions so other
    /// writers are never held up for long. Returns how many were deleted.
    pub async fn prune_sessions(
        &self,
        older_than_days: f64,
        source: Option<&str>,
    ) -> StoreResult<usize> {
        const PRUNE_CHUNK: usize = 25;
        let source = source.map(str::to_owned);
        let now = now_epoch();
        let ids = match self.postgres() {
            Some(pg) => {
                postgres::prune_candidates(pg.pool(), older_than_days, source.as_deref(), now)
                    .await?
            }
            None => {
                self.read(move |c, _| {
                    sqlite::read::prune_candidates(c, older_than_days, source.as_deref(), now)
                })
                .await?
            }
        };
        let mut deleted = 0;
        for chunk in ids.chunks(PRUNE_CHUNK) {
            let outcome = self
                .write(WriteCommand::DeleteSessions {
                    ids: chunk.to_vec(),
                })
                .await?;
            deleted += outcome.changed();
        }
        Ok(deleted)
    }

    pub async fn record_usage(&self, usage: UsageDelta) -> StoreResult<()> {
        self.write(WriteCommand::RecordUsage(usage)).await?;
        Ok(())
    }

    // ---- messages -------------------------------------------------------------------------

    /// Appends a message and bumps the session's counters; returns the message id.
    pub async fn append_message(&self, message: NewMessage) -> StoreResult<i64> {
        match self
            .write(WriteCommand::AppendMessage(Box::new(message)))
            .await?
        {
            Outcome::RowId(id) => Ok(id),
            other => Err(StoreError::Invalid(format!(
                "append returned {other:?} instead of a row id"
            ))),
        }
    }

    /// Appends a gateway turn's user message and marks its inbound event `processing`
    /// atomically; returns the message id.
    pub async fn start_turn(
        &self,
        message: NewMessage,
        platform: &str,
        event_id: &str,
    ) -> StoreResult<i64> {
        match self
            .write(WriteCommand::StartTurn {
                message: Box::new(message),
                platform: platform.to_owned(),
                event_id: event_id.to_owned(),
            })
            .await?
        {
            Outcome::RowId(id) => Ok(id),
            other => Err(StoreError::Invalid(format!(
                "start_turn returned {other:?} instead of a row id"
            ))),
        }
    }

    pub async fn get_messages(&self, session_id: &str) -> StoreResult<Vec<Message>> {
        if let Some(pg) = self.postgres() {
            return postgres::get_messages(pg.pool(), session_id).await;
        }
        let id = session_id.to_owned();
        self.read(move |c, info| sqlite::read::get_messages(c, info, &id))
            .await
    }

    /// The session as an OpenAI-format conversation (`role`, `content`, tool fields).
    pub async fn get_messages_as_conversation(&self, session_id: &str) -> StoreResult<Vec<Value>> {
        let messages = self.get_messages(session_id).await?;
        Ok(sqlite::read::as_conversation(&messages))
    }

    /// Deletes a session's messages with ids `from_id` and up; returns how many.
    pub async fn truncate_messages(&self, session_id: &str, from_id: i64) -> StoreResult<usize> {
        let outcome = self
            .write(WriteCommand::TruncateMessages {
                id: session_id.to_owned(),
                from_id,
            })
            .await?;
        Ok(outcome.changed())
    }

    /// Removes a session's messages but keeps the session row.
    pub async fn clear_messages(&self, session_id: &str) -> StoreResult<usize> {
        let outcome = self
            .write(WriteCommand::ClearMessages {
                id: session_id.to_owned(),
            })
            .await?;
        Ok(outcome.changed())
    }

    pub async fn search(&self, query: SearchQuery) -> StoreResult<Vec<SearchHit>> {
        if let Some(pg) = self.postgres() {
            return postgres::search(pg.pool(), &query).await;
        }
        self.read(move |c, info| sqlite::search::search(c, info, &query))
            .await
    }

    // ---- titles and lineage ---------------------------------------------------------------

    /// Sets a title (sanitised, ≤ 100 characters, unique); `None` or blank clears it.
    pub async fn set_session_title(&self, id: &str, title: Option<&str>) -> StoreResult<()> {
        self.write(WriteCommand::SetTitle {
            id: id.to_owned(),
            title: title.map(str::to_owned),
        })
        .await?;
        Ok(())
    }

    /// Sets a generated title only if the session is still untitled; true when it was set.
    /// A title held by another session fails with `TitleInUse` (pick a `#N` variant).
    pub async fn set_auto_title_if_empty(&self, id: &str, title: &str) -> StoreResult<bool> {
        let outcome = self
            .write(WriteCommand::SetTitleIfEmpty {
                id: id.to_owned(),
                title: title.to_owned(),
            })
            .await?;
        Ok(outcome.changed() > 0)
    }

    pub async fn next_title_in_lineage(&self, title: &str) -> StoreResult<String> {
        if let Some(pg) = self.postgres() {
            return postgres::next_title_in_lineage(pg.pool(), title).await;
        }
        let title = title.to_owned();
        self.read(move |c, _| sqlite::titles::next_title_in_lineage(c, &title))
            .await
    }

    pub async fn resolve_session_by_title(&self, title: &str) -> StoreResult<Option<String>> {
        if let Some(pg) = self.postgres() {
            return postgres::resolve_by_title(pg.pool(), title).await;
        }
        let title = title.to_owned();
        self.read(move |c, _| sqlite::titles::resolve_by_title(c, &title))
            .await
    }

    pub async fn ancestors(&self, id: &str) -> StoreResult<Vec<LineageEntry>> {
        if let Some(pg) = self.postgres() {
            return postgres::ancestors(pg.pool(), id).await;
        }
        let id = id.to_owned();
        self.read(move |c, _| sqlite::read::ancestors(c, &id)).await
    }

    pub async fn descendants(&self, id: &str) -> StoreResult<Vec<LineageEntry>> {
        if let Some(pg) = self.postgres() {
            return postgres::descendants(pg.pool(), id).await;
        }
        let id = id.to_owned();
        self.read(move |c, _| sqlite::read::descendants(c, &id))
            .await
    }

    // ---- statistics and export ------------------------------------------------------------

    pub async fn model_stats(&self) -> StoreResult<Vec<ModelStats>> {
        if let Some(pg) = self.postgres() {
            return postgres::model_stats(pg.pool()).await;
        }
        self.read(|c, _| sqlite::read::model_stats(c)).await
    }

    /// Sessions started at or after `since` (epoch seconds), grouped by source and model,
    /// most sessions first; only `source`'s when given.
    pub async fn usage_since(
        &self,
        since: f64,
        source: Option<&str>,
    ) -> StoreResult<Vec<UsageGroup>> {
        if let Some(pg) = self.postgres() {
            return postgres::usage_since(pg.pool(), since, source).await;
        }
        let source = source.map(str::to_owned);
        self.read(move |c, _| sqlite::read::usage_since(c, since, source.as_deref()))
            .await
    }

    pub async fn export_session(&self, id: &str) -> StoreResult<Option<SessionExport>> {
        if let Some(pg) = self.postgres() {
            return postgres::export_session(pg.pool(), id).await;
        }
        let id = id.to_owned();
        self.read(move |c, info| sqlite::read::export_session(c, info, &id))
            .await
    }

    pub async fn export_all(&self, source: Option<&str>) -> StoreResult<Vec<SessionExport>> {
        if let Some(pg) = self.postgres() {
            return postgres::export_all(pg.pool(), source).await;
        }
        let source = source.map(str::to_owned);
        self.read(move |c, info| sqlite::read::export_all(c, info, source.as_deref()))
            .await
    }
}
