//! Which tables and columns a transfer carries: the tables both backends have, and of each the
//! columns both sides have (read from the databases, never listed here, since migrations on
//! either side add columns), in the PostgreSQL column's kind.

use super::TransferError;
use super::value::Kind;

/// The copied tables in copy order (parents before children), each with its primary key.
pub const TABLES: [(&str, &[&str]); 9] = [
    ("sessions", &["id"]),
    ("messages", &["id"]),
    ("state_meta", &["key"]),
    ("gateway_routing", &["scope", "session_key"]),
    ("delivery_obligations", &["obligation_id"]),
    ("hermesd_inbound_events", &["platform", "event_id"]),
    ("hermesd_reply_edits", &["obligation_id"]),
    ("hermesd_dead_letters", &["platform", "item_id"]),
    ("hermesd_cron_runs", &["job_id", "scheduled_at"]),
];

/// The PostgreSQL table recording what a migration carried in beyond PostgreSQL's own schema,
/// and how SQLite declared it (`carried.rs`).
pub const REGISTRY: &str = "hermesd_carried_schema";

/// Tables only PostgreSQL has, and why they stay behind.
pub const PG_ONLY: [(&str, &str); 3] = [
    ("hermesd_leases", "coordination between running instances"),
    (
        "hermesd_shared_files",
        "files instances share; a single instance keeps them in its home",
    ),
    (REGISTRY, "what the migration added to PostgreSQL's schema"),
];

/// The `state_meta` key recording which source a target is (being) copied from.
pub const MARKER_KEY: &str = "hermesd_migrated_from";

/// `state_meta` rows each side keeps for itself: its own schema version, the marker, and
/// PostgreSQL's compatibility floor (`postgres/migrate.rs`).
pub const STATE_META_OWN: &str =
    "key NOT IN ('schema_version', 'hermesd_migrated_from', 'hermesd_schema_floor')";

/// A session's parent may come later in key order; the link is written once every session is
/// there (both sides enforce the foreign key).
pub const DEFERRED_LINK: (&str, &str) = ("sessions", "parent_session_id");

#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub kind: Kind,
    /// The PostgreSQL type, for casts.
    pub pg_type: String,
}

/// One table's transfer.
#[derive(Debug, Clone)]
pub struct TablePlan {
    pub table: String,
    pub columns: Vec<Column>,
    /// Positions of the primary key's columns in `columns`.
    pub key: Vec<usize>,
    /// A condition leaving out rows that are not copied (`state_meta`'s own keys).
    pub filter: Option<&'static str>,
    /// The position of the column written in the link pass, if any.
    pub deferred: Option<usize>,
}

impl TablePlan {
    /// Builds the plan from the PostgreSQL columns (`name`, `data_type`, generated columns
    /// already left out) and the SQLite column names; notes what is left behind.
    pub fn build(
        table: &str,
        key: &[&str],
        pg: &[(String, String)],
        sqlite: &[String],
        notes: &mut Vec<String>,
    ) -> Result<Self, TransferError> {
        let mut columns = Vec::new();
        for (name, data_type) in pg {
            if !sqlite.contains(name) {
                notes.push(format!(
                    "{table}.{name} exists only in PostgreSQL: not copied"
                ));
                continue;
            }
            let kind = Kind::of_pg_type(data_type).ok_or_else(|| {
                TransferError::Unsupported(format!(
                    "{table}.{name} has the PostgreSQL type {data_type}, which the transfer cannot carry"
                ))
            })?;
            columns.push(Column {
                name: name.clone(),
                kind,
                pg_type: data_type.clone(),
            });
        }
        for name in sqlite.iter().filter(|n| !pg.iter().any(|(p, _)| p == *n)) {
            notes.push(format!("{table}.{name} exists only in SQLite: not copied"));
        }
        let key = key
            .iter()
            .map(|k| {
                columns.iter().position(|c| c.name == *k).ok_or_else(|| {
                    TransferError::Unsupported(format!(
                        "{table} lacks its key column {k} on one side"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let deferred = (table == DEFERRED_LINK.0)
            .then(|| columns.iter().position(|c| c.name == DEFERRED_LINK.1))
            .flatten();
        Ok(Self {
            table: table.to_owned(),
            columns,
            key,
            filter: (table == "state_meta").then_some(STATE_META_OWN),
            deferred,
        })
    }

    /// The key of `row`, as shown in errors.
    pub fn shown_key(&self, row: &[super::value::Value]) -> String {
        self.key
            .iter()
            .map(|&i| format!("{}={}", self.columns[i].name, row[i].shown()))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn key_of(&self, row: &[super::value::Value]) -> Vec<super::value::Value> {
        self.key.iter().map(|&i| row[i].clone()).collect()
    }
}

/// A SQL identifier, quoted (names come from the catalogues, but are quoted anyway).
pub fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn only_columns_both_sides_have_are_copied_and_the_rest_is_noted() {
        let pg = vec![
            ("id".to_owned(), "bigint".to_owned()),
            ("content".to_owned(), "text".to_owned()),
            ("owner_instance".to_owned(), "text".to_owned()),
        ];
        let mut notes = Vec::new();
        let plan = TablePlan::build(
            "messages",
            &["id"],
            &pg,
            &s(&["id", "content", "active"]),
            &mut notes,
        )
        .unwrap();
        let names: Vec<_> = plan.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["id", "content"]);
        assert_eq!(plan.key, [0]);
        assert_eq!(notes.len(), 2, "{notes:?}");
    }

    #[test]
    fn a_type_the_transfer_cannot_carry_is_refused_by_name() {
        let pg = vec![("at".to_owned(), "timestamp with time zone".to_owned())];
        let error = TablePlan::build("t", &["at"], &pg, &s(&["at"]), &mut Vec::new()).unwrap_err();
        assert!(error.to_string().contains("t.at"), "{error}");
    }
}
