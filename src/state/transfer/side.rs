//! Either end of a transfer behind one set of calls, so the copy and the checksums are
//! written once for both directions.

use super::TransferError;
use super::pg_side::PgSide;
use super::plan::TablePlan;
use super::sqlite_side::SqliteSide;
use super::value::{Checksum, Value};

#[derive(Clone, Copy)]
pub enum Side<'a> {
    Sqlite(&'a SqliteSide),
    Postgres(&'a PgSide),
}

impl Side<'_> {
    pub fn identity(&self) -> String {
        match self {
            Self::Sqlite(s) => s.identity(),
            Self::Postgres(p) => p.identity(),
        }
    }

    pub async fn read_batch(
        &self,
        plan: &TablePlan,
        after: Option<&[Value]>,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>, TransferError> {
        match self {
            Self::Sqlite(s) => s.read_batch(plan, after, limit),
            Self::Postgres(p) => p.read_batch(plan, after, limit).await,
        }
    }

    pub async fn last_key(&self, plan: &TablePlan) -> Result<Option<Vec<Value>>, TransferError> {
        match self {
            Self::Sqlite(s) => s.last_key(plan),
            Self::Postgres(p) => p.last_key(plan).await,
        }
    }

    pub async fn insert_batch(
        &self,
        plan: &TablePlan,
        rows: &[Vec<Value>],
    ) -> Result<(), TransferError> {
        match self {
            Self::Sqlite(s) => s.insert_batch(plan, rows),
            Self::Postgres(p) => p.insert_batch(plan, rows).await,
        }
    }

    pub async fn link_batch(
        &self,
        plan: &TablePlan,
        rows: &[Vec<Value>],
    ) -> Result<(), TransferError> {
        match self {
            Self::Sqlite(s) => s.link_batch(plan, rows),
            Self::Postgres(p) => p.link_batch(plan, rows).await,
        }
    }

    pub async fn count(&self, plan: &TablePlan) -> Result<u64, TransferError> {
        match self {
            Self::Sqlite(s) => s.count(plan),
            Self::Postgres(p) => p.count(plan).await,
        }
    }

    pub async fn empty(&self, plans: &[TablePlan]) -> Result<(), TransferError> {
        match self {
            Self::Sqlite(s) => s.empty(plans),
            Self::Postgres(p) => p.empty(plans).await,
        }
    }

    pub async fn marker(&self) -> Result<Option<String>, TransferError> {
        match self {
            Self::Sqlite(s) => s.marker(),
            Self::Postgres(p) => p.marker().await,
        }
    }

    pub async fn set_marker(&self, source: &str) -> Result<(), TransferError> {
        match self {
            Self::Sqlite(s) => s.set_marker(source),
            Self::Postgres(p) => p.set_marker(source).await,
        }
    }

    /// What a target needs after rows arrived with their ids (PostgreSQL's id sequence).
    pub async fn settle(&self) -> Result<(), TransferError> {
        match self {
            Self::Sqlite(_) => Ok(()),
            Self::Postgres(p) => p.advance_sequences().await,
        }
    }

    /// The row count and checksum of the copied columns, walking the table in key order.
    pub async fn checksum(
        &self,
        plan: &TablePlan,
        batch: usize,
    ) -> Result<(u64, String), TransferError> {
        let mut sum = Checksum::default();
        let mut after: Option<Vec<Value>> = None;
        loop {
            let rows = self.read_batch(plan, after.as_deref(), batch).await?;
            let Some(last) = rows.last() else { break };
            after = Some(plan.key_of(last));
            rows.iter().for_each(|row| sum.add_row(row));
        }
        Ok(sum.finish())
    }
}
