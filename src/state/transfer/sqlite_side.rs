//! The state.db end of a transfer (rusqlite): read in key order, written in batches of one
//! transaction each. A target state.db is created by the same schema initialisation as
//! `Store::open`, so Hermes can open it and its full-text tables are filled by the triggers.

use std::path::{Path, PathBuf};

use rusqlite::types::{ToSql, ToSqlOutput};
use rusqlite::{Connection, OptionalExtension, params_from_iter};

use super::TransferError;
use super::plan::{MARKER_KEY, TablePlan, ident};
use super::value::{Cell, Value, coerce};
use crate::state::sqlite::capabilities;
use crate::state::sqlite::connection::{PageCache, open_reader, open_writer};

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::from(rusqlite::types::Null),
            Value::Int(i) => ToSqlOutput::from(*i),
            Value::Float(f) => ToSqlOutput::from(*f),
            Value::Text(t) => ToSqlOutput::from(t.as_str()),
            Value::Bytes(b) => ToSqlOutput::from(b.as_slice()),
        })
    }
}

pub struct SqliteSide {
    conn: Connection,
    path: PathBuf,
    /// The database keeps prompts in `system_prompts` by hash (a newer Hermes's schema): they
    /// are read into `sessions.system_prompt` and written back by hash, so a copy carries
    /// them whichever side keeps them inline.
    prompts_by_hash: bool,
}

impl SqliteSide {
    /// An existing state.db, read only.
    pub fn open_source(path: &Path) -> Result<Self, TransferError> {
        guarded(path)?;
        if !path.is_file() {
            return Err(TransferError::Usage(format!(
                "{}: no state database file here",
                path.display()
            )));
        }
        let conn = open_reader(path, PageCache::default())?;
        Ok(Self {
            prompts_by_hash: capabilities::prompts_by_hash(&conn)?,
            conn,
            path: path.to_owned(),
        })
    }

    /// A state.db to copy into: created (or brought up to date) as `Store::open` does.
    pub fn open_target(path: &Path) -> Result<Self, TransferError> {
        guarded(path)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            crate::home::private::create_dir_all(parent).map_err(crate::state::StoreError::from)?;
        }
        let mut conn = open_writer(path, PageCache::default())?;
        crate::state::sqlite::schema::initialise(&mut conn)?;
        crate::state::sqlite::gateway_schema::ensure(&conn)?;
        Ok(Self {
            prompts_by_hash: capabilities::prompts_by_hash(&conn)?,
            conn,
            path: path.to_owned(),
        })
    }

    /// Who this database is, for the marker of a copy made from it.
    pub fn identity(&self) -> String {
        let path = std::fs::canonicalize(&self.path).unwrap_or_else(|_| self.path.clone());
        format!("sqlite:{}", path.display())
    }

    /// The table's column names, or `None` when it does not exist.
    pub fn columns(&self, table: &str) -> Result<Option<Vec<String>>, TransferError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT name FROM pragma_table_info({})",
            quote(table)
        ))?;
        let names = stmt
            .query_map([], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok((!names.is_empty()).then_some(names))
    }

    pub fn keeps_prompts_by_hash(&self) -> bool {
        self.prompts_by_hash
    }

    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// What to select for `column` of `table`: a prompt kept by hash is read as the prompt.
    fn select_expr(&self, table: &str, column: &str) -> String {
        if self.prompts_by_hash && table == "sessions" && column == "system_prompt" {
            "COALESCE(system_prompt, (SELECT sp.prompt FROM system_prompts sp \
             WHERE sp.hash = sessions.system_prompt_hash))"
                .to_owned()
        } else {
            ident(column)
        }
    }

    /// Up to `limit` rows after `after` in key order, coerced into the columns' kinds.
    pub fn read_batch(
        &self,
        plan: &TablePlan,
        after: Option<&[Value]>,
        limit: usize,
    ) -> Result<Vec<Vec<Value>>, TransferError> {
        let columns: Vec<String> = plan
            .columns
            .iter()
            .map(|c| self.select_expr(&plan.table, &c.name))
            .collect();
        let keys: Vec<String> = plan
            .key
            .iter()
            .map(|&i| ident(&plan.columns[i].name))
            .collect();
        let mut conditions: Vec<String> = plan.filter.iter().map(|f| (*f).to_owned()).collect();
        if after.is_some() {
            let marks: Vec<String> = (1..=keys.len()).map(|n| format!("?{n}")).collect();
            conditions.push(format!("({}) > ({})", keys.join(", "), marks.join(", ")));
        }
        let sql = format!(
            "SELECT {} FROM {}{} ORDER BY {} LIMIT {limit}",
            columns.join(", "),
            ident(&plan.table),
            where_clause(&conditions),
            keys.join(", ")
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let mut rows = stmt.query(params_from_iter(after.unwrap_or(&[]).iter()))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next()? {
            let mut values = Vec::with_capacity(columns.len());
            // Keys are coerced first so an error in another column can name the row.
            let mut key_shown = String::new();
            for &i in &plan.key {
                let at = Cell {
                    table: &plan.table,
                    row: "(its key)",
                    column: &plan.columns[i].name,
                };
                let value = coerce(row.get_ref(i)?, plan.columns[i].kind, &at)?;
                key_shown.push_str(&format!("{}={} ", plan.columns[i].name, value.shown()));
            }
            for (i, column) in plan.columns.iter().enumerate() {
                let at = Cell {
                    table: &plan.table,
                    row: key_shown.trim_end(),
                    column: &column.name,
                };
                values.push(coerce(row.get_ref(i)?, column.kind, &at)?);
            }
            out.push(values);
        }
        Ok(out)
    }

    /// The key of the last row in key order (where a resumed copy continues).
    pub fn last_key(&self, plan: &TablePlan) -> Result<Option<Vec<Value>>, TransferError> {
        let keys: Vec<String> = plan
            .key
            .iter()
            .map(|&i| ident(&plan.columns[i].name))
            .collect();
        let desc: Vec<String> = keys.iter().map(|k| format!("{k} DESC")).collect();
        let conditions: Vec<String> = plan.filter.iter().map(|f| (*f).to_owned()).collect();
        let sql = format!(
            "SELECT {} FROM {}{} ORDER BY {} LIMIT 1",
            keys.join(", "),
            ident(&plan.table),
            where_clause(&conditions),
            desc.join(", ")
        );
        let kinds: Vec<_> = plan.key.iter().map(|&i| plan.columns[i].kind).collect();
        let found = self
            .conn
            .query_row(&sql, [], |row| {
                (0..kinds.len())
                    .map(|i| Ok(raw_value(row.get_ref(i)?)))
                    .collect::<rusqlite::Result<Vec<_>>>()
            })
            .optional()?;
        Ok(found)
    }

    /// Inserts `rows` in one transaction; the deferred link column is left NULL.
    pub fn insert_batch(&self, plan: &TablePlan, rows: &[Vec<Value>]) -> Result<(), TransferError> {
        let columns: Vec<String> = plan.columns.iter().map(|c| ident(&c.name)).collect();
        let marks: Vec<String> = (1..=columns.len()).map(|n| format!("?{n}")).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            ident(&plan.table),
            columns.join(", "),
            marks.join(", ")
        );
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut stmt = tx.prepare(&sql)?;
            for row in rows {
                let values = row.iter().enumerate().map(|(i, v)| {
                    if Some(i) == plan.deferred {
                        &Value::Null
                    } else {
                        v
                    }
                });
                stmt.execute(params_from_iter(values)).map_err(|e| {
                    TransferError::Write(format!("{} row {}: {e}", plan.table, plan.shown_key(row)))
                })?;
            }
            if self.prompts_by_hash && plan.table == "sessions" {
                prompts_by_hash(&tx, plan, rows)?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Writes the deferred link column of `rows` (which carry it) in one transaction.
    pub fn link_batch(&self, plan: &TablePlan, rows: &[Vec<Value>]) -> Result<(), TransferError> {
        let Some(link) = plan.deferred else {
            return Ok(());
        };
        let key = plan.key[0];
        let sql = format!(
            "UPDATE {} SET {} = ?1 WHERE {} = ?2 AND {} IS NOT ?1",
            ident(&plan.table),
            ident(&plan.columns[link].name),
            ident(&plan.columns[key].name),
            ident(&plan.columns[link].name),
        );
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut stmt = tx.prepare(&sql)?;
            for row in rows.iter().filter(|r| r[link] != Value::Null) {
                stmt.execute([&row[link], &row[key]]).map_err(|e| {
                    TransferError::Write(format!(
                        "{} row {}: {} {}: {e}",
                        plan.table,
                        plan.shown_key(row),
                        plan.columns[link].name,
                        row[link].shown()
                    ))
                })?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    pub fn count(&self, plan: &TablePlan) -> Result<u64, TransferError> {
        let conditions: Vec<String> = plan.filter.iter().map(|f| (*f).to_owned()).collect();
        let sql = format!(
            "SELECT COUNT(*) FROM {}{}",
            ident(&plan.table),
            where_clause(&conditions)
        );
        Ok(self.conn.query_row(&sql, [], |r| r.get::<_, i64>(0))? as u64)
    }

    /// Empties the copied tables (children first) in one transaction.
    pub fn empty(&self, plans: &[TablePlan]) -> Result<(), TransferError> {
        let tx = self.conn.unchecked_transaction()?;
        for plan in plans.iter().rev() {
            let conditions: Vec<String> = plan.filter.iter().map(|f| (*f).to_owned()).collect();
            tx.execute(
                &format!(
                    "DELETE FROM {}{}",
                    ident(&plan.table),
                    where_clause(&conditions)
                ),
                [],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn marker(&self) -> Result<Option<String>, TransferError> {
        Ok(self
            .conn
            .query_row(
                "SELECT value FROM state_meta WHERE key = ?1",
                [MARKER_KEY],
                |r| r.get(0),
            )
            .optional()?
            .flatten())
    }

    pub fn set_marker(&self, source: &str) -> Result<(), TransferError> {
        self.conn.execute(
            "INSERT INTO state_meta (key, value) VALUES (?1, ?2) \
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [MARKER_KEY, source],
        )?;
        Ok(())
    }
}

/// Moves the inline prompts of freshly copied `rows` into `system_prompts`, as a database that
/// keeps prompts by hash expects them.
fn prompts_by_hash(
    conn: &Connection,
    plan: &TablePlan,
    rows: &[Vec<Value>],
) -> Result<(), TransferError> {
    let Some(at) = plan.columns.iter().position(|c| c.name == "system_prompt") else {
        return Ok(());
    };
    let key = plan.key[0];
    let mut by_hash = conn.prepare(
        "UPDATE sessions SET system_prompt_hash = ?1, system_prompt = NULL WHERE id = ?2",
    )?;
    for row in rows {
        if let Value::Text(prompt) = &row[at] {
            let (hash, _) = crate::state::sqlite::newer::store_prompt(conn, prompt)?;
            by_hash.execute(rusqlite::params![hash, &row[key]])?;
        }
    }
    Ok(())
}

/// A key value as stored (keys are written by us, so already in their column's kind).
fn raw_value(value: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef as V;
    match value {
        V::Null => Value::Null,
        V::Integer(i) => Value::Int(i),
        V::Real(f) => Value::Float(f),
        V::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        V::Blob(b) => Value::Bytes(b.to_vec()),
    }
}

/// The test-isolation guard `Store::open` applies: a process under test never touches a
/// live state.db.
fn guarded(path: &Path) -> Result<(), TransferError> {
    let env = std::env::vars().collect();
    Ok(crate::state::guard::check(path, &env)?)
}

fn where_clause(conditions: &[String]) -> String {
    if conditions.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conditions.join(" AND "))
    }
}

/// A string literal.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}
