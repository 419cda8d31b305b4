//! The PostgreSQL end of a transfer (sqlx). Text keys are ordered and compared with
//! `COLLATE "C"` (byte order, which for UTF-8 is code-point order) so both sides walk a table
//! in the same order whatever the database's collation.

use sqlx::postgres::{PgPool, PgRow, Postgres};
use sqlx::{AssertSqlSafe, QueryBuilder, Row};

use super::TransferError;
use super::plan::{MARKER_KEY, TablePlan, ident};
use super::value::{Kind, Value};
use crate::state::postgres::pg_text::{from_pg, to_pg};
use crate::state::postgres::{self, PgError};

/// PostgreSQL accepts at most 65535 bind parameters per statement.
const MAX_PARAMETERS: usize = 65_535;

pub struct PgSide {
    pool: PgPool,
    url: String,
}

impl PgSide {
    /// Connects; a target is first brought to our schema by the embedded migrations.
    pub async fn open(url: &str, target: bool) -> Result<Self, TransferError> {
        if target {
            postgres::migrate(url).await?;
        }
        Ok(Self {
            pool: postgres::connect(url, 2).await?,
            url: url.to_owned(),
        })
    }

    /// The instances holding a live `instance` lease (a running hermesd on this database):
    /// `(holder, acquired_at, expires_at)` by the database's clock, oldest first.
    pub async fn live_instances(&self) -> Result<Vec<(String, String, String)>, TransferError> {
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('hermesd_leases') IS NOT NULL")
            .fetch_one(&self.pool)
            .await
            .map_err(PgError::from)?;
        if !exists {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT holder, to_char(acquired_at AT TIME ZONE 'UTC',              'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS since,              to_char(expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') AS until              FROM hermesd_leases WHERE scope = 'instance' AND expires_at > now()              ORDER BY acquired_at",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(PgError::from)?;
        Ok(rows
            .iter()
            .map(|row| (row.get("holder"), row.get("since"), row.get("until")))
            .collect())
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub fn identity(&self) -> String {
        format!("postgres:{}", postgres::redact_url(&self.url))
    }

    /// The table's stored (not generated) columns and their types, or `None` when it does
    /// not exist.
    pub async fn columns(
        &self,
        table: &str,
    ) -> Result<Option<Vec<(String, String)>>, TransferError> {
        let rows = sqlx::query(
            "SELECT column_name::text, data_type::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = $1 \
             AND is_generated = 'NEVER' ORDER BY ordinal_position",
        )
        .bind(table)
        .fetch_all(&self.pool)
        .await
        .map_err(PgError::from)?;
        let columns: Vec<(String, String)> = rows
            .iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(PgError::from)?;
        Ok((!columns.is_empty()).then_some(columns))
    }

    /// Up to `limit` rows after `after` in key order.
    pub async fn read_batch(
        &self,
        plan: &TablePlan,
        after: Option<&[Value]>,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>, TransferError> {
        let select = select_list(plan);
        let keys = ordered_keys(plan);
        let mut query = QueryBuilder::<Postgres>::new(format!(
            "SELECT {} FROM {} WHERE TRUE",
            select.join(", "),
            ident(&plan.table)
        ));
        if let Some(filter) = plan.filter {
            query.push(format!(" AND {filter}"));
        }
        if let Some(after) = after {
            query.push(format!(" AND ({}) > (", keys.join(", ")));
            let mut list = query.separated(", ");
            for value in after {
                push_value(&mut list, value);
            }
            query.push(")");
        }
        query.push(format!(" ORDER BY {} LIMIT {limit}", keys.join(", ")));
        let rows = query
            .build()
            .fetch_all(&self.pool)
            .await
            .map_err(PgError::from)?;
        rows.iter()
            .map(|row| decode_row(plan, row))
            .collect::<Result<_, sqlx::Error>>()
            .map_err(|e| PgError::from(e).into())
    }

    pub async fn last_key(&self, plan: &TablePlan) -> Result<Option<Vec<Value>>, TransferError> {
        let keys = ordered_keys(plan);
        let desc: Vec<String> = keys.iter().map(|k| format!("{k} DESC")).collect();
        let key_plan = TablePlan {
            columns: plan.key.iter().map(|&i| plan.columns[i].clone()).collect(),
            key: (0..plan.key.len()).collect(),
            deferred: None,
            ..plan.clone()
        };
        let select = select_list(&key_plan);
        let sql = format!(
            "SELECT {} FROM {} WHERE {} ORDER BY {} LIMIT 1",
            select.join(", "),
            ident(&plan.table),
            plan.filter.unwrap_or("TRUE"),
            desc.join(", ")
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .fetch_optional(&self.pool)
            .await
            .map_err(PgError::from)?;
        Ok(row
            .map(|row| decode_row(&key_plan, &row))
            .transpose()
            .map_err(PgError::from)?)
    }

    /// Inserts `rows` in one transaction; the deferred link column is left NULL.
    pub async fn insert_batch(
        &self,
        plan: &TablePlan,
        rows: &[Vec<Value>],
    ) -> Result<(), TransferError> {
        let names: Vec<String> = plan.columns.iter().map(|c| ident(&c.name)).collect();
        let per_statement = (MAX_PARAMETERS / plan.columns.len().max(1)).max(1);
        let mut tx = self.pool.begin().await.map_err(PgError::from)?;
        for chunk in rows.chunks(per_statement) {
            let mut query = QueryBuilder::<Postgres>::new(format!(
                "INSERT INTO {} ({}) ",
                ident(&plan.table),
                names.join(", ")
            ));
            query.push_values(chunk, |mut list, row| {
                for (i, value) in row.iter().enumerate() {
                    let value = if Some(i) == plan.deferred {
                        &Value::Null
                    } else {
                        value
                    };
                    push_cast(&mut list, value, &plan.columns[i].pg_type);
                }
            });
            query.build().execute(&mut *tx).await.map_err(|e| {
                TransferError::Write(format!(
                    "{} rows from {}: {}",
                    plan.table,
                    plan.shown_key(&chunk[0]),
                    PgError::from(e)
                ))
            })?;
        }
        tx.commit().await.map_err(PgError::from)?;
        Ok(())
    }

    /// Writes the deferred link column of `rows` in one transaction.
    pub async fn link_batch(
        &self,
        plan: &TablePlan,
        rows: &[Vec<Value>],
    ) -> Result<(), TransferError> {
        let Some(link) = plan.deferred else {
            return Ok(());
        };
        let key = plan.key[0];
        let sql = format!(
            "UPDATE {table} SET {col} = $1 WHERE {key} = $2 AND {col} IS DISTINCT FROM $1",
            table = ident(&plan.table),
            col = ident(&plan.columns[link].name),
            key = ident(&plan.columns[key].name),
        );
        let mut tx = self.pool.begin().await.map_err(PgError::from)?;
        for row in rows.iter().filter(|r| r[link] != Value::Null) {
            let (Value::Text(parent), Value::Text(id)) = (&row[link], &row[key]) else {
                return Err(TransferError::Unsupported(format!(
                    "{}: the link pass expects text keys",
                    plan.table
                )));
            };
            sqlx::query(AssertSqlSafe(sql.clone()))
                .bind(to_pg(parent).into_owned())
                .bind(to_pg(id).into_owned())
                .execute(&mut *tx)
                .await
                .map_err(|e| {
                    TransferError::Write(format!(
                        "{} row {}: {} {}: {}",
                        plan.table,
                        plan.shown_key(row),
                        plan.columns[link].name,
                        row[link].shown(),
                        PgError::from(e)
                    ))
                })?;
        }
        tx.commit().await.map_err(PgError::from)?;
        Ok(())
    }

    pub async fn count(&self, plan: &TablePlan) -> Result<u64, TransferError> {
        let sql = format!(
            "SELECT COUNT(*) FROM {} WHERE {}",
            ident(&plan.table),
            plan.filter.unwrap_or("TRUE")
        );
        let count: i64 = sqlx::query_scalar(AssertSqlSafe(sql))
            .fetch_one(&self.pool)
            .await
            .map_err(PgError::from)?;
        Ok(count as u64)
    }

    /// Empties the copied tables in one transaction (children first).
    pub async fn empty(&self, plans: &[TablePlan]) -> Result<(), TransferError> {
        let mut tx = self.pool.begin().await.map_err(PgError::from)?;
        for plan in plans.iter().rev() {
            let sql = format!(
                "DELETE FROM {} WHERE {}",
                ident(&plan.table),
                plan.filter.unwrap_or("TRUE")
            );
            sqlx::query(AssertSqlSafe(sql))
                .execute(&mut *tx)
                .await
                .map_err(PgError::from)?;
        }
        tx.commit().await.map_err(PgError::from)?;
        Ok(())
    }

    /// Moves the messages id sequence past the copied ids, so new messages do not collide.
    pub async fn advance_sequences(&self) -> Result<(), TransferError> {
        sqlx::query(
            "SELECT setval(pg_get_serial_sequence('messages', 'id'), \
             (SELECT COALESCE(MAX(id), 0) + 1 FROM messages), false)",
        )
        .execute(&self.pool)
        .await
        .map_err(PgError::from)?;
        Ok(())
    }

    pub async fn marker(&self) -> Result<Option<String>, TransferError> {
        let value: Option<Option<String>> =
            sqlx::query_scalar("SELECT value FROM state_meta WHERE key = $1")
                .bind(MARKER_KEY)
                .fetch_optional(&self.pool)
                .await
                .map_err(PgError::from)?;
        Ok(value.flatten())
    }

    pub async fn set_marker(&self, source: &str) -> Result<(), TransferError> {
        sqlx::query(
            "INSERT INTO state_meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        )
        .bind(MARKER_KEY)
        .bind(source)
        .execute(&self.pool)
        .await
        .map_err(PgError::from)?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The columns, each cast to the type its kind is decoded from.
fn select_list(plan: &TablePlan) -> Vec<String> {
    plan.columns
        .iter()
        .map(|c| {
            let cast = match c.kind {
                Kind::Int => "bigint",
                Kind::Float => "double precision",
                Kind::Text => "text",
                Kind::Bytes => "bytea",
            };
            format!("{}::{cast}", ident(&c.name))
        })
        .collect()
}

/// The key columns as ordered: text in byte order.
fn ordered_keys(plan: &TablePlan) -> Vec<String> {
    plan.key
        .iter()
        .map(|&i| {
            let column = &plan.columns[i];
            match column.kind {
                Kind::Text => format!("{} COLLATE \"C\"", ident(&column.name)),
                _ => ident(&column.name),
            }
        })
        .collect()
}

fn push_value(
    list: &mut sqlx::query_builder::Separated<'_, Postgres, &'static str>,
    value: &Value,
) {
    match value {
        Value::Null => list.push("NULL"),
        Value::Int(i) => list.push_bind(*i),
        Value::Float(f) => list.push_bind(*f),
        Value::Text(t) => list.push_bind(to_pg(t).into_owned()),
        Value::Bytes(b) => list.push_bind(b.clone()),
    };
}

/// A bound value cast to the column's type (a text bound into a `jsonb` column needs it).
fn push_cast(
    list: &mut sqlx::query_builder::Separated<'_, Postgres, &'static str>,
    value: &Value,
    pg_type: &str,
) {
    match value {
        Value::Null => list.push(format!("NULL::{pg_type}")),
        Value::Int(i) => list.push_bind(*i),
        Value::Float(f) => list.push_bind(*f),
        Value::Text(t) => list.push_bind(to_pg(t).into_owned()),
        Value::Bytes(b) => list.push_bind(b.clone()),
    };
    if !matches!(value, Value::Null) {
        list.push_unseparated(format!("::{pg_type}"));
    }
}

fn decode_row(plan: &TablePlan, row: &PgRow) -> Result<Vec<Value>, sqlx::Error> {
    plan.columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            Ok(match column.kind {
                Kind::Int => row
                    .try_get::<Option<i64>, _>(i)?
                    .map_or(Value::Null, Value::Int),
                Kind::Float => row
                    .try_get::<Option<f64>, _>(i)?
                    .map_or(Value::Null, Value::Float),
                Kind::Text => row
                    .try_get::<Option<String>, _>(i)?
                    .map_or(Value::Null, |t| Value::Text(from_pg(t))),
                Kind::Bytes => row
                    .try_get::<Option<Vec<u8>>, _>(i)?
                    .map_or(Value::Null, Value::Bytes),
            })
        })
        .collect()
}
