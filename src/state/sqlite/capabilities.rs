//! What a state.db can hold beyond the v11 base, read from the file itself at open: the tables,
//! columns and triggers present decide what hermesd writes, never the version number alone (a
//! newer Hermes may add a column before it bumps `schema_version`, and a home can be opened
//! by several Hermes versions in turn).
//!
//! Facts per Hermes version (Hermes's own DDL, as 0.19 and the v31 packaging write it):
//! v22 (0.19) adds `session_model_usage` keyed by `(session, model, billing route, task)`;
//! v25+ keeps prompts in `system_prompts(hash, prompt)` with `sessions.system_prompt_hash`
//! (SHA-256 of the UTF-8 prompt, lowercase hex) and `sessions.system_prompt` NULL; later
//! versions add `title_source`, `created_source`, `last_activity_at` and `messages.message_uid`.
//! The optional `messages_fts_cjk` index needs the loadable `cjk_unicode61` tokenizer.

use rusqlite::{Connection, OptionalExtension};

use crate::state::error::StoreResult;

/// The `state_meta` key Hermes reads to know the CJK index missed rows and must be rebuilt.
pub const FTS_CJK_STALE_KEY: &str = "fts_cjk_stale";
/// The optional CJK word index and the triggers that feed it.
pub const FTS_CJK_TABLE: &str = "messages_fts_cjk";
pub const FTS_CJK_TRIGGERS: [&str; 3] = [
    "messages_fts_cjk_insert",
    "messages_fts_cjk_delete",
    "messages_fts_cjk_update",
];

/// The state of an optional full-text index that needs a tokenizer SQLite may not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OptionalIndex {
    /// The database has no such index.
    #[default]
    Absent,
    /// Present and usable by this process.
    Live,
    /// Present, but this process cannot load its tokenizer: its triggers are gone (so writes
    /// never touch it) and it is marked stale for Hermes to rebuild.
    Stale,
}

impl OptionalIndex {
    pub fn as_str(self) -> &'static str {
        match self {
            OptionalIndex::Absent => "absent",
            OptionalIndex::Live => "live",
            OptionalIndex::Stale => "stale (tokenizer not loadable here; writes skip it)",
        }
    }
}

/// What the open state.db holds beyond hermesd's own v11 base.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// `system_prompts` and `sessions.system_prompt_hash`: prompts are stored by hash.
    pub prompts_by_hash: bool,
    /// `session_model_usage` with its `task` column: per-model usage rows.
    pub model_usage: bool,
    /// `sessions.title_source`: who gave a title (`user`, `llm`, `derived`).
    pub title_source: bool,
    /// `sessions.created_source`: the surface that created the session.
    pub created_source: bool,
    /// `sessions.last_activity_at`.
    pub last_activity: bool,
    /// `messages.message_uid`: every row carries a durable id.
    pub message_uid: bool,
    /// The optional CJK index.
    pub cjk_index: OptionalIndex,
}

impl Capabilities {
    /// Whether anything beyond the v11 base is written.
    pub fn any(&self) -> bool {
        self.prompts_by_hash
            || self.model_usage
            || self.title_source
            || self.created_source
            || self.last_activity
            || self.message_uid
    }

    /// The extras written, for the start-up note and `doctor`.
    pub fn written(&self) -> Vec<&'static str> {
        [
            (self.prompts_by_hash, "prompts by hash"),
            (self.model_usage, "per-model usage"),
            (self.title_source, "title provenance"),
            (self.created_source, "creation provenance"),
            (self.last_activity, "last activity"),
            (self.message_uid, "message uids"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

/// Reads the capabilities inside the open transaction; quarantines an unusable CJK index.
pub fn detect(conn: &Connection) -> StoreResult<Capabilities> {
    let sessions = column_names(conn, "sessions")?;
    let messages = column_names(conn, "messages")?;
    let has = |cols: &[String], name: &str| cols.iter().any(|c| c == name);
    let usage = column_names(conn, "session_model_usage")?;
    Ok(Capabilities {
        prompts_by_hash: prompts_by_hash(conn)?,
        model_usage: has(&usage, "task"),
        title_source: has(&sessions, "title_source"),
        created_source: has(&sessions, "created_source"),
        last_activity: has(&sessions, "last_activity_at"),
        message_uid: has(&messages, "message_uid"),
        cjk_index: cjk_index(conn)?,
    })
}

/// Whether prompts live in `system_prompts`, keyed from `sessions.system_prompt_hash` (a
/// read: usable on a read-only connection).
pub fn prompts_by_hash(conn: &Connection) -> StoreResult<bool> {
    let sessions = column_names(conn, "sessions")?;
    Ok(table_exists(conn, "system_prompts")? && sessions.iter().any(|c| c == "system_prompt_hash"))
}

fn table_exists(conn: &Connection, name: &str) -> StoreResult<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// Whether this connection can use the index. SQLite loads an FTS5 tokenizer only when text
/// must be tokenized, so the probe runs a query (which fails when the tokenizer is not
/// registered here) rather than merely naming the table.
pub fn index_usable(conn: &Connection, table: &str) -> bool {
    conn.query_row(
        &format!("SELECT count(*) FROM {table} WHERE {table} MATCH 'probe'"),
        [],
        |r| r.get::<_, i64>(0),
    )
    .is_ok()
}

/// Hermes's rule for a process without the CJK tokenizer: record that the index is stale
/// (first, so a crash in between errs on the safe side), then drop the triggers that would
/// make every message insert, update and delete fail. The index itself stays for a process
/// that can load the tokenizer to rebuild.
fn cjk_index(conn: &Connection) -> StoreResult<OptionalIndex> {
    if !table_exists(conn, FTS_CJK_TABLE)? {
        return Ok(OptionalIndex::Absent);
    }
    if index_usable(conn, FTS_CJK_TABLE) {
        return Ok(OptionalIndex::Live);
    }
    let mut live = Vec::new();
    for trigger in FTS_CJK_TRIGGERS {
        let found = conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?1",
                [trigger],
                |_| Ok(()),
            )
            .optional()?;
        if found.is_some() {
            live.push(trigger);
        }
    }
    if !live.is_empty() {
        tracing::warn!(
            index = FTS_CJK_TABLE,
            triggers = ?live,
            "state.db has a CJK search index whose tokenizer (cjk_unicode61) this process cannot \
             load; dropping its triggers and marking it stale so message writes keep working \
             (Hermes rebuilds it with `hermes sessions optimize-storage` where the tokenizer is installed)"
        );
        conn.execute(
            "INSERT INTO state_meta (key, value) VALUES (?1, '1') \
             ON CONFLICT(key) DO UPDATE SET value = '1'",
            [FTS_CJK_STALE_KEY],
        )?;
        for trigger in live {
            conn.execute_batch(&format!("DROP TRIGGER IF EXISTS {trigger}"))?;
        }
    }
    Ok(OptionalIndex::Stale)
}

/// The column names of `table`, in order (empty when there is no such table).
pub fn column_names(conn: &Connection, table: &str) -> StoreResult<Vec<String>> {
    let mut stmt = conn.prepare(&format!("PRAGMA table_info({table})"))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(1))?
        .collect::<Result<_, _>>()?;
    Ok(names)
}
