//! The soak's one-line JSON report and its verdict: which targets were met, and which were
//! not judged because the run was too short to say.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::incarnations::{Supervisor, WARM_UP};
use crate::ledger::Ledger;
use crate::load::ApiCounts;
use crate::options::Options;

/// RSS growth after warm-up allowed in the longest incarnation.
const MAX_RSS_GROWTH_PCT: f64 = 5.0;
/// RSS growth is judged only on an incarnation observed this long after its warm-up.
const MIN_JUDGED_SPAN: Duration = Duration::from_secs(120);
/// Descriptors an incarnation may end with above its post-warm-up count (a socket being
/// replaced, an SQLite WAL/shm pair, a request in flight).
const FD_SLACK: usize = 8;

pub struct Inputs<'a> {
    pub options: &'a Options,
    pub ledger: &'a Ledger,
    pub api: &'a ApiCounts,
    pub supervisor: &'a Supervisor,
    pub faults: &'a BTreeMap<&'static str, u64>,
    pub kills: u64,
    pub slack_redelivered: u64,
    pub quiescent: bool,
    pub quiescence_s: u64,
    pub exit_code: Option<i32>,
    pub state_db: &'a Path,
    pub log_dir: &'a Path,
    /// What `--seed-db-mb` wrote before the first start (null without it).
    pub seeded: &'a Value,
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// `PRAGMA integrity_check` on a read-only connection ("ok" when intact).
fn integrity(path: &Path) -> String {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let check = || -> rusqlite::Result<String> {
        let db = rusqlite::Connection::open_with_flags(path, flags)?;
        let rows: Vec<String> = db
            .prepare("PRAGMA integrity_check")?
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows.join("; "))
    };
    check().unwrap_or_else(|e| format!("cannot check: {e}"))
}

/// Delivery-ledger rows the gateway gave up on (`abandoned`).
fn abandoned_rows(path: &Path) -> u64 {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    rusqlite::Connection::open_with_flags(path, flags)
        .and_then(|db| {
            db.query_row(
                "SELECT COUNT(*) FROM delivery_obligations WHERE state = 'abandoned'",
                [],
                |row| row.get::<_, i64>(0),
            )
        })
        .map_or(0, |n| n as u64)
}

/// The report and whether every judged target was met.
pub fn build(inputs: &Inputs<'_>) -> (Value, bool) {
    let mut failures: Vec<String> = Vec::new();
    let mut not_judged: Vec<String> = Vec::new();
    let (platforms, lost, duplicated, notices) = inputs.ledger.summary();
    // Given up on: a failure notice sent, or a ledger row the gateway abandoned.
    let abandoned = notices + abandoned_rows(inputs.state_db);
    if abandoned > 0 {
        failures.push(format!(
            "{abandoned} repl(ies) abandoned (failure notice or abandoned ledger row)"
        ));
    }
    if lost > 0 {
        failures.push(format!("{lost} message(s) lost"));
    }
    if duplicated > 0 {
        failures.push(format!(
            "{duplicated} message(s) answered more than once without the recovered marker"
        ));
    }
    let api = inputs.api.to_json();
    if api["bad"].as_u64().unwrap_or(0) > 0 {
        failures.push("HTTP API gave error statuses or wrong answers".into());
    }
    if !inputs.quiescent {
        failures.push(format!(
            "not quiescent after {} s (replies still missing)",
            inputs.quiescence_s
        ));
    }
    if inputs.exit_code != Some(0) {
        failures.push(format!("SIGTERM exit was {:?}, not 0", inputs.exit_code));
    }
    let integrity = integrity(inputs.state_db);
    if integrity != "ok" {
        failures.push(format!("state.db integrity: {integrity}"));
    }

    let history = inputs.supervisor.history.lock().unwrap();
    for (i, incarnation) in history.iter().enumerate() {
        if let Some((start, end)) = incarnation.fds_start_end()
            && end > start + FD_SLACK
        {
            failures.push(format!(
                "incarnation {i}: descriptors grew from {start} to {end}"
            ));
        }
    }
    let secret_lines: usize = history.iter().map(|i| i.secret_lines).sum();
    if secret_lines > 0 {
        failures.push(format!("{secret_lines} log line(s) show a token or key"));
    }
    let longest = history
        .iter()
        .enumerate()
        .max_by_key(|(_, i)| i.judged_span());
    let rss_growth = match longest {
        Some((i, incarnation)) if incarnation.judged_span() >= MIN_JUDGED_SPAN => {
            let growth = incarnation.growth_pct().unwrap_or(0.0);
            if growth > MAX_RSS_GROWTH_PCT {
                failures.push(format!(
                    "incarnation {i}: RSS grew {growth:.1} % after warm-up"
                ));
            }
            json!({"incarnation": i, "growth_pct": (growth * 100.0).round() / 100.0,
                   "judged_span_s": incarnation.judged_span().as_secs()})
        }
        other => {
            let span = other.map_or(0, |(_, i)| i.judged_span().as_secs());
            not_judged.push(format!(
                "RSS growth: the longest incarnation ran {span} s after its {} s warm-up, \
                 fewer than the {} s needed to judge it",
                WARM_UP.as_secs(),
                MIN_JUDGED_SPAN.as_secs()
            ));
            json!({"judged": false, "judged_span_s": span})
        }
    };
    let db_size = file_size(inputs.state_db);
    let wal = inputs.state_db.with_extension("db-wal");
    let report = json!({
        "bench": "soak",
        "verdict": format!("{lost} lost, {duplicated} duplicated, {abandoned} abandoned"),
        "seed": inputs.options.seed,
        "load_s": inputs.options.duration.as_secs(),
        "users_per_platform": inputs.options.users,
        "seeded_state_db": inputs.seeded,
        "platforms": platforms,
        "api": api,
        "kills": inputs.kills,
        "faults": inputs.faults,
        "faults_total": inputs.faults.values().sum::<u64>(),
        "slack_overdue_envelopes_redelivered": inputs.slack_redelivered,
        "quiescence_s": inputs.quiescence_s,
        "incarnations": history.iter().map(|i| i.to_json()).collect::<Vec<_>>(),
        "rss_growth_after_warm_up": rss_growth,
        "state_db_bytes": db_size,
        "state_db_wal_bytes": file_size(&wal),
        "state_db_integrity": integrity,
        "exit_code": inputs.exit_code,
        "logs": inputs.log_dir.display().to_string(),
        "targets": {"lost": 0, "duplicated": 0, "abandoned": 0, "rss_growth_pct_max": MAX_RSS_GROWTH_PCT,
                    "fd_growth_max": FD_SLACK, "integrity": "ok"},
        "not_judged": not_judged,
        "failures": failures,
    });
    let ok = failures.is_empty();
    (report, ok)
}
