//! What a Hermes state.db holds beyond PostgreSQL's own schema (a newer Hermes's
//! `session_model_usage`, its provenance columns, a table we have never heard of), carried by
//! `state migrate` both ways.
//!
//! Into PostgreSQL each one is added — a column nullable, typed by its SQLite affinity, with its
//! default when that is a literal; a table with its columns and primary key — and recorded in
//! [`super::plan::REGISTRY`] with its SQLite declaration. Out of PostgreSQL, a state.db that lacks one gets it
//! back from that record (a table by its original `CREATE TABLE`, a column by the declaration
//! `ALTER TABLE ADD COLUMN` takes), which is what Hermes's own start-up reconciliation does for
//! a column its schema names, so a later Hermes finds nothing it would add twice. Both sides
//! only grow: nothing is dropped or narrowed.

use std::collections::BTreeMap;

use rusqlite::Connection;
use sqlx::postgres::PgPool;
use sqlx::{AssertSqlSafe, Row};

use super::TransferError;
use super::plan::{TABLES, ident};
use crate::state::postgres::PgError;

/// `column_name` of a registry row that records a whole table (its `CREATE TABLE`).
const WHOLE_TABLE: &str = "";

/// Tables of a state.db never carried as such: the schema version each side keeps for itself,
/// and the prompts a newer Hermes keeps by hash (carried as `sessions.system_prompt`).
const NOT_CARRIED_TABLES: [&str; 2] = ["schema_version", "system_prompts"];

/// Columns each side derives for itself (the prompt's hash follows the prompt).
const DERIVED_COLUMNS: [(&str, &str); 1] = [("sessions", "system_prompt_hash")];

/// A column as SQLite declares it (`PRAGMA table_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteColumn {
    pub name: String,
    pub declared: String,
    pub notnull: bool,
    pub default: Option<String>,
    /// Position in the primary key (1-based), 0 when not part of it.
    pub pk: i64,
}

impl SqliteColumn {
    /// What SQLite's `ALTER TABLE ADD COLUMN` takes: the type, the default, and NOT NULL only
    /// with a default (SQLite refuses it otherwise).
    pub fn declaration(&self) -> String {
        let mut parts = vec![self.declared.clone()];
        if let Some(default) = &self.default {
            if self.notnull {
                parts.push("NOT NULL".into());
            }
            parts.push(format!("DEFAULT {default}"));
        }
        parts.retain(|p| !p.is_empty());
        parts.join(" ")
    }

    /// The PostgreSQL type for the column's SQLite affinity (the rules of
    /// <https://sqlite.org/datatype3.html#determination_of_column_affinity>, in their order).
    pub fn pg_type(&self) -> &'static str {
        let t = self.declared.to_ascii_uppercase();
        if t.contains("INT") {
            "bigint"
        } else if t.contains("CHAR") || t.contains("CLOB") || t.contains("TEXT") || t.is_empty() {
            "text"
        } else if t.contains("BLOB") {
            "bytea"
        } else {
            // REAL, and NUMERIC affinity (which SQLite keeps as an integer or a real).
            "double precision"
        }
    }

    /// The column as PostgreSQL declares it: nullable, with the default when it is a literal
    /// both databases read alike.
    fn pg_definition(&self) -> String {
        let mut definition = format!("{} {}", ident(&self.name), self.pg_type());
        if let Some(default) = self.default.as_deref().filter(|d| is_literal(d)) {
            definition.push_str(&format!(" DEFAULT {default}"));
        }
        definition
    }
}

/// A number, a single-quoted string or NULL.
fn is_literal(default: &str) -> bool {
    let unsigned = default.strip_prefix('-').unwrap_or(default);
    let number = match unsigned.split_once('.') {
        Some((whole, fraction)) => is_digits(whole) && is_digits(fraction),
        None => is_digits(unsigned),
    };
    let quoted = default
        .strip_prefix('\'')
        .and_then(|rest| rest.strip_suffix('\''))
        .is_some_and(|inside| !inside.replace("''", "").contains('\''));
    number || quoted || default.eq_ignore_ascii_case("NULL")
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// A table's columns as SQLite declares them, in order.
pub fn sqlite_columns(conn: &Connection, table: &str) -> Result<Vec<SqliteColumn>, TransferError> {
    let mut stmt = conn.prepare(
        "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?1) ORDER BY cid",
    )?;
    let columns = stmt
        .query_map([table], |r| {
            Ok(SqliteColumn {
                name: r.get(0)?,
                declared: r.get(1)?,
                notnull: r.get::<_, i64>(2)? != 0,
                default: r.get(3)?,
                pk: r.get(4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(columns)
}

/// The primary key of `columns`, in key order.
pub fn primary_key(columns: &[SqliteColumn]) -> Vec<String> {
    let mut key: Vec<&SqliteColumn> = columns.iter().filter(|c| c.pk > 0).collect();
    key.sort_by_key(|c| c.pk);
    key.into_iter().map(|c| c.name.clone()).collect()
}

/// The state.db's ordinary tables beyond the ones every hermesd database has ([`TABLES`]),
/// with their `CREATE TABLE`, in name order: SQLite's own tables, full-text indexes and their
/// shadow tables, the schema version and prompts by hash are not among them.
pub fn sqlite_extra_tables(conn: &Connection) -> Result<Vec<(String, String)>, TransferError> {
    let mut stmt = conn.prepare(
        "SELECT l.name, m.sql FROM pragma_table_list l JOIN sqlite_master m ON m.name = l.name \
         WHERE l.schema = 'main' AND l.type = 'table' AND l.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
         ORDER BY l.name",
    )?;
    let tables = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(tables
        .into_iter()
        .filter(|(name, _)| {
            !NOT_CARRIED_TABLES.contains(&name.as_str())
                && !TABLES.iter().any(|(fixed, _)| fixed == name)
        })
        .collect())
}

/// One registry row: a table's `CREATE TABLE` (column `""`) or a column's SQLite declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    pub table: String,
    pub column: String,
    pub declaration: String,
}

/// What was carried into PostgreSQL, tables before their columns; empty when nothing was.
pub async fn registry(pool: &PgPool) -> Result<Vec<Carried>, TransferError> {
    let exists: bool =
        sqlx::query_scalar("SELECT to_regclass('hermesd_carried_schema') IS NOT NULL")
            .fetch_one(pool)
            .await
            .map_err(PgError::from)?;
    if !exists {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(
        "SELECT table_name, column_name, declaration FROM hermesd_carried_schema \
         ORDER BY table_name COLLATE \"C\", column_name COLLATE \"C\"",
    )
    .fetch_all(pool)
    .await
    .map_err(PgError::from)?;
    Ok(rows
        .iter()
        .map(|r| Carried {
            table: r.get(0),
            column: r.get(1),
            declaration: r.get(2),
        })
        .collect())
}

/// The carried tables (not columns), in name order.
pub fn carried_tables(registry: &[Carried]) -> Vec<String> {
    registry
        .iter()
        .filter(|c| c.column == WHOLE_TABLE)
        .map(|c| c.table.clone())
        .collect()
}

/// Adds to PostgreSQL every table and column of the state.db it lacks, each with its registry
/// row in the same transaction; returns what was added, for the notes.
pub async fn expand_postgres(
    pool: &PgPool,
    sqlite: &Connection,
    pg_columns: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<String>, TransferError> {
    let mut added = Vec::new();
    let mut tx = pool.begin().await.map_err(PgError::from)?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS hermesd_carried_schema (\
             table_name TEXT NOT NULL, column_name TEXT NOT NULL, declaration TEXT NOT NULL, \
             PRIMARY KEY (table_name, column_name))",
    )
    .execute(&mut *tx)
    .await
    .map_err(PgError::from)?;
    let fixed = TABLES.iter().map(|(name, _)| ((*name).to_owned(), None));
    let extra = sqlite_extra_tables(sqlite)?
        .into_iter()
        .map(|(name, sql)| (name, Some(sql)));
    for (table, create_sql) in fixed.chain(extra).collect::<Vec<_>>() {
        let columns = sqlite_columns(sqlite, &table)?;
        if columns.is_empty() {
            continue;
        }
        let present = pg_columns.get(&table);
        if let (None, Some(create_sql)) = (present, &create_sql) {
            let key = primary_key(&columns);
            if key.is_empty() {
                added.push(format!(
                    "{table} left behind: it has no primary key to copy it by"
                ));
                continue;
            }
            let mut definitions: Vec<String> = columns.iter().map(|c| c.pg_definition()).collect();
            let key: Vec<String> = key.iter().map(|k| ident(k)).collect();
            definitions.push(format!("PRIMARY KEY ({})", key.join(", ")));
            let ddl = format!(
                "CREATE TABLE {} ({})",
                ident(&table),
                definitions.join(", ")
            );
            ddl_and_record(&mut tx, &ddl, &table, WHOLE_TABLE, create_sql).await?;
            added.push(format!("table {table}"));
            continue;
        }
        let Some(present) = present else { continue };
        for column in columns.iter().filter(|c| {
            !present.contains(&c.name)
                && !DERIVED_COLUMNS.contains(&(table.as_str(), c.name.as_str()))
        }) {
            let ddl = format!(
                "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}",
                ident(&table),
                column.pg_definition()
            );
            ddl_and_record(&mut tx, &ddl, &table, &column.name, &column.declaration()).await?;
            added.push(format!("{table}.{}", column.name));
        }
    }
    tx.commit().await.map_err(PgError::from)?;
    Ok(added)
}

async fn ddl_and_record(
    tx: &mut sqlx::PgConnection,
    ddl: &str,
    table: &str,
    column: &str,
    declaration: &str,
) -> Result<(), TransferError> {
    sqlx::query(AssertSqlSafe(ddl.to_owned()))
        .execute(&mut *tx)
        .await
        .map_err(|e| TransferError::Write(format!("{ddl}: {}", PgError::from(e))))?;
    sqlx::query(
        "INSERT INTO hermesd_carried_schema (table_name, column_name, declaration) \
         VALUES ($1, $2, $3) ON CONFLICT (table_name, column_name) DO NOTHING",
    )
    .bind(table)
    .bind(column)
    .bind(declaration)
    .execute(&mut *tx)
    .await
    .map_err(PgError::from)?;
    Ok(())
}

/// Gives the state.db every carried table and column it lacks, in one transaction; returns
/// what was added, for the notes.
pub fn expand_sqlite(
    conn: &Connection,
    registry: &[Carried],
) -> Result<Vec<String>, TransferError> {
    let mut added = Vec::new();
    let tx = conn.unchecked_transaction()?;
    // Tables first (their rows sort first: the column name is empty), then columns.
    for carried in registry {
        let columns = sqlite_columns(&tx, &carried.table)?;
        if carried.column == WHOLE_TABLE {
            if columns.is_empty() {
                tx.execute_batch(&carried.declaration)?;
                added.push(format!("table {}", carried.table));
            }
        } else if !columns.is_empty() && !columns.iter().any(|c| c.name == carried.column) {
            tx.execute_batch(&format!(
                "ALTER TABLE {} ADD COLUMN {} {}",
                ident(&carried.table),
                ident(&carried.column),
                carried.declaration
            ))?;
            added.push(format!("{}.{}", carried.table, carried.column));
        }
    }
    tx.commit()?;
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn column(declared: &str, notnull: bool, default: Option<&str>) -> SqliteColumn {
        SqliteColumn {
            name: "c".into(),
            declared: declared.into(),
            notnull,
            default: default.map(str::to_owned),
            pk: 0,
        }
    }

    #[test]
    fn types_follow_sqlite_affinity_and_only_literal_defaults_reach_postgres() {
        assert_eq!(column("INTEGER", false, None).pg_type(), "bigint");
        assert_eq!(column("VARCHAR(20)", false, None).pg_type(), "text");
        assert_eq!(column("BLOB", false, None).pg_type(), "bytea");
        assert_eq!(column("REAL", false, None).pg_type(), "double precision");
        assert_eq!(column("BOOLEAN", false, None).pg_type(), "double precision");
        assert_eq!(column("", false, None).pg_type(), "text");
        assert_eq!(
            column("INTEGER", true, Some("0")).pg_definition(),
            "\"c\" bigint DEFAULT 0"
        );
        assert_eq!(
            column("TEXT", false, Some("'it''s'")).pg_definition(),
            "\"c\" text DEFAULT 'it''s'"
        );
        assert_eq!(
            column("REAL", false, Some("(strftime('%s','now'))")).pg_definition(),
            "\"c\" double precision"
        );
        assert!(!is_literal("'a' || 'b'"));
    }

    #[test]
    fn the_sqlite_declaration_keeps_not_null_only_beside_a_default() {
        assert_eq!(
            column("INTEGER", true, Some("1")).declaration(),
            "INTEGER NOT NULL DEFAULT 1"
        );
        assert_eq!(column("TEXT", true, None).declaration(), "TEXT");
        assert_eq!(column("", false, None).declaration(), "");
    }
}
