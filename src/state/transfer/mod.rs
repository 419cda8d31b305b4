//! `hermesd state migrate`: copies the state between state.db and PostgreSQL, either way, in
//! key order and in batches of one transaction each, so an interrupted run is continued by
//! running it again; then verifies every table by row count and checksum.
//!
//! The target records its source in `state_meta` ([`plan::MARKER_KEY`]): a non-empty target
//! is only continued when it is a partial copy of the same source, and otherwise refused
//! unless `force` empties it first.

mod carried;
pub mod dsn;
mod pg_side;
mod plan;
mod side;
mod sqlite_side;
mod value;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use pg_side::PgSide;
use plan::{PG_ONLY, TABLES, TablePlan};
use side::Side;
use sqlite_side::SqliteSide;

use super::StoreError;
use super::postgres::{PgError, redact_url};

/// Rows per batch unless told otherwise.
pub const DEFAULT_BATCH_SIZE: usize = 1000;

/// One end of a transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Sqlite(PathBuf),
    /// A PostgreSQL URL (a secret: shown only through [`redact_url`]).
    Postgres(String),
}

impl Endpoint {
    /// A `postgres://` or `postgresql://` URL, a libpq `key=value` connection string
    /// (turned into the URL it stands for), or else a state.db path.
    pub fn parse(arg: &str) -> Result<Self, dsn::DsnError> {
        if arg.starts_with("postgres://") || arg.starts_with("postgresql://") {
            Ok(Self::Postgres(arg.to_owned()))
        } else if dsn::is_key_value(arg) {
            dsn::key_value_to_url(arg).map(Self::Postgres)
        } else {
            Ok(Self::Sqlite(PathBuf::from(arg)))
        }
    }

    /// As it may be printed.
    pub fn shown(&self) -> String {
        match self {
            Self::Sqlite(path) => path.display().to_string(),
            Self::Postgres(url) => redact_url(url),
        }
    }
}

#[derive(Debug, Clone)]
pub struct MigrateOptions {
    /// Empty a non-empty target first.
    pub force: bool,
    pub batch_size: usize,
    /// Stop after this many batches (an operator's throttle; run again to continue).
    pub max_batches: Option<u64>,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        Self {
            force: false,
            batch_size: DEFAULT_BATCH_SIZE,
            max_batches: None,
        }
    }
}

/// One table's verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableReport {
    pub table: String,
    pub source_rows: u64,
    pub target_rows: u64,
    pub source_checksum: String,
    pub target_checksum: String,
}

impl TableReport {
    pub fn matches(&self) -> bool {
        self.source_rows == self.target_rows && self.source_checksum == self.target_checksum
    }
}

#[derive(Debug)]
pub enum MigrateOutcome {
    /// Everything copied; the verification of each table.
    Complete(Vec<TableReport>),
    /// Stopped after `max_batches` batches; running the command again continues.
    Paused { batches: u64 },
}

#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Unsupported(String),
    #[error("table {table}, row {row}, column {column}: {reason}")]
    Data {
        table: String,
        row: String,
        column: String,
        reason: String,
    },
    #[error("writing {0}")]
    Write(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Postgres(#[from] PgError),
    #[error("state.db: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

/// The two open ends; one is state.db, the other PostgreSQL.
struct Ends {
    sqlite: SqliteSide,
    pg: PgSide,
    sqlite_is_source: bool,
    plans: Vec<TablePlan>,
}

impl Ends {
    async fn open(
        from: &Endpoint,
        to: &Endpoint,
        create_target: bool,
        notes: &mut Vec<String>,
    ) -> Result<Self, TransferError> {
        let (sqlite, pg, sqlite_is_source) = match (from, to) {
            (Endpoint::Sqlite(path), Endpoint::Postgres(url)) => {
                let sqlite = SqliteSide::open_source(path)?;
                (sqlite, PgSide::open(url, create_target).await?, true)
            }
            (Endpoint::Postgres(url), Endpoint::Sqlite(path)) => {
                let pg = PgSide::open(url, false).await?;
                // Checked before a target file is created, so a wrong URL leaves nothing.
                for (table, _) in TABLES {
                    pg_columns(&pg, table).await?;
                }
                let sqlite = if create_target {
                    SqliteSide::open_target(path)?
                } else {
                    SqliteSide::open_source(path)?
                };
                (sqlite, pg, false)
            }
            _ => {
                return Err(TransferError::Usage(
                    "exactly one of --from and --to must be a PostgreSQL URL \
                     (postgres://...) and the other a state.db path"
                        .into(),
                ));
            }
        };
        if create_target {
            if sqlite_is_source {
                // Before the schema grows: never under a running instance.
                refuse_if_in_use(&pg).await?;
            }
            let added = if sqlite_is_source {
                let mut present = BTreeMap::new();
                let extra = carried::sqlite_extra_tables(sqlite.conn())?;
                let names = TABLES.iter().map(|(t, _)| (*t).to_owned());
                for table in names.chain(extra.into_iter().map(|(name, _)| name)) {
                    if let Some(columns) = pg.columns(&table).await? {
                        present.insert(table, columns.into_iter().map(|(name, _)| name).collect());
                    }
                }
                carried::expand_postgres(pg.pool(), sqlite.conn(), &present).await?
            } else {
                carried::expand_sqlite(sqlite.conn(), &carried::registry(pg.pool()).await?)?
            };
            if !added.is_empty() {
                notes.push(format!(
                    "the target gains what the source holds beyond its schema: {}",
                    added.join(", ")
                ));
            }
        }
        let mut plans = Vec::new();
        for (table, key) in TABLES {
            let pg_columns = pg_columns(&pg, table).await?;
            let Some(sqlite_columns) = sqlite.columns(table)? else {
                notes.push(format!("{table} is not in the state.db: nothing to copy"));
                continue;
            };
            plans.push(TablePlan::build(
                table,
                key,
                &pg_columns,
                &sqlite_columns,
                notes,
            )?);
        }
        plans.extend(carried_plans(&sqlite, &pg, notes).await?);
        for (table, why) in PG_ONLY {
            notes.push(format!(
                "{table} exists only in PostgreSQL ({why}): not copied"
            ));
        }
        if sqlite.keeps_prompts_by_hash() {
            notes.push(
                "the state.db keeps prompts by hash (system_prompts): they are carried as \
                 sessions.system_prompt and stored by hash again in a state.db that does"
                    .into(),
            );
        }
        Ok(Self {
            sqlite,
            pg,
            sqlite_is_source,
            plans,
        })
    }

    fn source(&self) -> Side<'_> {
        if self.sqlite_is_source {
            Side::Sqlite(&self.sqlite)
        } else {
            Side::Postgres(&self.pg)
        }
    }

    fn target(&self) -> Side<'_> {
        if self.sqlite_is_source {
            Side::Postgres(&self.pg)
        } else {
            Side::Sqlite(&self.sqlite)
        }
    }

    /// Refuses a target holding anything but a partial copy of this source, unless `force`;
    /// then records the source in it.
    async fn prepare_target(
        &self,
        force: bool,
        say: &mut dyn FnMut(String),
    ) -> Result<(), TransferError> {
        let (source, target) = (self.source(), self.target());
        let mut held = Vec::new();
        for plan in &self.plans {
            let rows = target.count(plan).await?;
            if rows > 0 {
                held.push(format!("{} ({rows} rows)", plan.table));
            }
        }
        let identity = source.identity();
        if !held.is_empty() {
            if force {
                target.empty(&self.plans).await?;
                say(format!("--force: emptied the target's {}", held.join(", ")));
            } else if target.marker().await?.as_deref() == Some(identity.as_str()) {
                say(
                    "the target holds an earlier partial copy of this source: continuing it".into(),
                );
            } else {
                return Err(TransferError::Refused(format!(
                    "the target is not empty ({}) and is not a partial copy of this source; \
                     pass --force to empty it first",
                    held.join(", ")
                )));
            }
        }
        target.set_marker(&identity).await
    }

    /// Copies what the target lacks; `Some(batches)` when `max_batches` stopped it.
    async fn copy(
        &self,
        options: &MigrateOptions,
        say: &mut dyn FnMut(String),
    ) -> Result<Option<u64>, TransferError> {
        let (source, target) = (self.source(), self.target());
        let batch = options.batch_size.max(1);
        let mut batches = 0u64;
        for plan in &self.plans {
            let mut after = target.last_key(plan).await?;
            let mut copied = 0usize;
            loop {
                if options.max_batches.is_some_and(|max| batches >= max) {
                    target.settle().await?;
                    return Ok(Some(batches));
                }
                let rows = source.read_batch(plan, after.as_deref(), batch).await?;
                let Some(last) = rows.last() else { break };
                target.insert_batch(plan, &rows).await?;
                after = Some(plan.key_of(last));
                copied += rows.len();
                batches += 1;
            }
            if plan.deferred.is_some() {
                // Idempotent, so a resumed run simply writes the links again.
                let mut after: Option<Vec<value::Value>> = None;
                loop {
                    let rows = source.read_batch(plan, after.as_deref(), batch).await?;
                    let Some(last) = rows.last() else { break };
                    target.link_batch(plan, &rows).await?;
                    after = Some(plan.key_of(last));
                }
            }
            say(format!("{}: copied {copied} rows", plan.table));
        }
        target.settle().await?;
        Ok(None)
    }

    async fn verify(&self, batch: usize) -> Result<Vec<TableReport>, TransferError> {
        let mut reports = Vec::new();
        for plan in &self.plans {
            let (source_rows, source_checksum) = self.source().checksum(plan, batch).await?;
            let (target_rows, target_checksum) = self.target().checksum(plan, batch).await?;
            reports.push(TableReport {
                table: plan.table.clone(),
                source_rows,
                target_rows,
                source_checksum,
                target_checksum,
            });
        }
        Ok(reports)
    }

    async fn close(self) {
        self.pg.close().await;
    }
}

/// The plans of the tables beyond hermesd's own (a newer Hermes's, carried through
/// [`carried`]) that both sides have; the others are named in the notes.
async fn carried_plans(
    sqlite: &SqliteSide,
    pg: &PgSide,
    notes: &mut Vec<String>,
) -> Result<Vec<TablePlan>, TransferError> {
    let mut names: BTreeSet<String> = carried::sqlite_extra_tables(sqlite.conn())?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    names.extend(carried::carried_tables(
        &carried::registry(pg.pool()).await?,
    ));
    let mut plans = Vec::new();
    for table in names {
        let (Some(pg_columns), Some(declared)) = (
            pg.columns(&table).await?,
            Some(carried::sqlite_columns(sqlite.conn(), &table)?).filter(|c| !c.is_empty()),
        ) else {
            notes.push(format!("{table} is on one side only: not copied"));
            continue;
        };
        let key = carried::primary_key(&declared);
        if key.is_empty() {
            notes.push(format!(
                "{table} has no primary key to copy it by: not copied"
            ));
            continue;
        }
        let key: Vec<&str> = key.iter().map(String::as_str).collect();
        let names: Vec<String> = declared.into_iter().map(|c| c.name).collect();
        plans.push(TablePlan::build(&table, &key, &pg_columns, &names, notes)?);
    }
    Ok(plans)
}

/// The stored columns of a table the PostgreSQL side must have.
async fn pg_columns(pg: &PgSide, table: &str) -> Result<Vec<(String, String)>, TransferError> {
    pg.columns(table).await?.ok_or_else(|| {
        TransferError::Unsupported(format!(
            "the PostgreSQL database has no table {table}: it does not hold hermesd's schema \
             (a database hermesd has used, or one migrated into, does)"
        ))
    })
}

/// Copies `from` into `to` (one of them PostgreSQL), continuing an earlier partial copy, and
/// verifies the result. Progress and notes go to `say`.
pub async fn migrate(
    from: &Endpoint,
    to: &Endpoint,
    options: &MigrateOptions,
    say: &mut dyn FnMut(String),
) -> Result<MigrateOutcome, TransferError> {
    let mut notes = Vec::new();
    let ends = Ends::open(from, to, true, &mut notes).await?;
    notes.into_iter().for_each(&mut *say);
    let outcome = async {
        ends.prepare_target(options.force, say).await?;
        Ok(match ends.copy(options, say).await? {
            Some(batches) => MigrateOutcome::Paused { batches },
            None => MigrateOutcome::Complete(ends.verify(options.batch_size.max(1)).await?),
        })
    }
    .await;
    ends.close().await;
    outcome
}

/// A PostgreSQL target that a running hermesd uses (a live `instance` lease) is not
/// written: emptying or filling it under the instance would corrupt what it serves.
async fn refuse_if_in_use(pg: &PgSide) -> Result<(), TransferError> {
    let live = pg.live_instances().await?;
    if live.is_empty() {
        return Ok(());
    }
    let shown: Vec<String> = live
        .iter()
        .map(|(holder, since, until)| {
            format!("instance {holder} (running since {since}, lease current until {until})")
        })
        .collect();
    Err(TransferError::Refused(format!(
        "the target database is in use by a running hermesd: {} (an instance id hermesd \
         makes up reads host-pid-random). Stop every instance that uses it and wait until \
         its lease expires (state.lease_seconds), then run the migration again",
        shown.join("; ")
    )))
}

/// Compares `from` and `to` table by table (row counts and checksums) without writing.
pub async fn verify(
    from: &Endpoint,
    to: &Endpoint,
    say: &mut dyn FnMut(String),
) -> Result<Vec<TableReport>, TransferError> {
    let mut notes = Vec::new();
    let ends = Ends::open(from, to, false, &mut notes).await?;
    notes.into_iter().for_each(&mut *say);
    let reports = ends.verify(DEFAULT_BATCH_SIZE).await;
    ends.close().await;
    reports
}
