//! `hermesd state migrate|verify`: moves the state between state.db and PostgreSQL (either
//! way) and checks a copy, table by table.
//!
//! Exit codes: 0 done and verified; 1 an error or a table that differs (named on stderr);
//! 75 (`EX_TEMPFAIL`) stopped by `--max-batches` before the end: run the same command again.
//! A connection string usually holds a password, so it is only ever printed redacted:
//! URLs, libpq `key=value` strings and `PGPASSWORD` alike (every line printed goes through
//! one mask). A migration never writes into a database a running hermesd uses: a state.db
//! whose home a gateway holds, or a PostgreSQL database with a live instance lease.

use std::collections::BTreeMap;
use std::path::Path;

use clap::Subcommand;

use super::format::table;
use super::{EXIT_FAILURE, small_runtime};
use crate::gateway::instance_lock;
use crate::home::HermesHome;
use crate::state::transfer::dsn::PasswordMask;
use crate::state::transfer::{
    self, DEFAULT_BATCH_SIZE, Endpoint, MigrateOptions, MigrateOutcome, TableReport,
};

/// `migrate` stopped by `--max-batches`: nothing is wrong, it is not finished.
pub const EXIT_PAUSED: i32 = 75;

/// The word standing for the configured database (`HERMES_DATABASE_URL`, else
/// `state.postgres_url`).
const CONFIGURED: &str = "postgres";

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Copy the state from a state.db into PostgreSQL or back. Resumable: run the same
    /// command again after an interruption. Verifies every table at the end.
    Migrate {
        /// A state.db path, a postgres:// URL, or `postgres` for the configured database.
        #[arg(long, value_name = "DB")]
        from: String,
        /// A state.db path, a postgres:// URL, or `postgres` for the configured database.
        #[arg(long, value_name = "DB")]
        to: String,
        /// Empty a target that holds other data first (its copied tables are cleared).
        #[arg(long)]
        force: bool,
        /// Rows per batch; each batch is one transaction.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_BATCH_SIZE as u64,
              value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        batch_size: u64,
        /// Stop after N batches (a throttle); exits 75 and the next run continues.
        #[arg(long, value_name = "N")]
        max_batches: Option<u64>,
    },
    /// Compare two copies table by table (row counts and checksums) without writing.
    Verify {
        #[arg(long, value_name = "DB")]
        from: String,
        #[arg(long, value_name = "DB")]
        to: String,
    },
}

pub fn run(home: &HermesHome, env: &BTreeMap<String, String>, command: StateCommand) -> i32 {
    let (from, to) = match &command {
        StateCommand::Migrate { from, to, .. } | StateCommand::Verify { from, to } => (from, to),
    };
    let configured = configured_url(home, env);
    let mask = PasswordMask::new(
        [from.as_str(), to.as_str()]
            .into_iter()
            .chain(configured.as_deref().ok()),
        env.get("PGPASSWORD").map(String::as_str),
    );
    let (from, to) = match (
        endpoint(configured.as_deref(), from),
        endpoint(configured.as_deref(), to),
    ) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    if matches!(command, StateCommand::Migrate { .. })
        && let Endpoint::Sqlite(path) = &to
        && let Some(refusal) = held_home(path)
    {
        eprintln!("error: {}", mask.mask(&refusal));
        return EXIT_FAILURE;
    }
    let runtime = match small_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return EXIT_FAILURE;
        }
    };
    let mut say = |line: String| println!("{}", mask.mask(&line));
    runtime.block_on(async {
        match command {
            StateCommand::Migrate {
                force,
                batch_size,
                max_batches,
                ..
            } => {
                say(format!("migrating {} -> {}", from.shown(), to.shown()));
                let options = MigrateOptions {
                    force,
                    batch_size: usize::try_from(batch_size).unwrap_or(DEFAULT_BATCH_SIZE),
                    max_batches,
                };
                match transfer::migrate(&from, &to, &options, &mut say).await {
                    Ok(MigrateOutcome::Complete(reports)) => report(&reports),
                    Ok(MigrateOutcome::Paused { batches }) => {
                        println!(
                            "stopped after {batches} batches (--max-batches); run the same \
                             command again to continue"
                        );
                        EXIT_PAUSED
                    }
                    Err(e) => fail(&e, &mask),
                }
            }
            StateCommand::Verify { .. } => {
                say(format!("verifying {} against {}", to.shown(), from.shown()));
                match transfer::verify(&from, &to, &mut say).await {
                    Ok(reports) => report(&reports),
                    Err(e) => fail(&e, &mask),
                }
            }
        }
    })
}

fn fail(error: &transfer::TransferError, mask: &PasswordMask) -> i32 {
    eprintln!("error: {}", mask.mask(&error.to_string()));
    EXIT_FAILURE
}

/// Why `path` may not be a migration's target: a gateway holds the home it lies in (the
/// daemon would keep writing its own rows, and `--force` would empty them under it).
fn held_home(path: &Path) -> Option<String> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let holder = instance_lock::current_holder(dir)?;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "this host".to_owned());
    let pid = holder
        .pid
        .map_or_else(|| "unknown pid".to_owned(), |pid| format!("pid {pid}"));
    let since = holder
        .since
        .map(|since| format!(", running since {since}"))
        .unwrap_or_default();
    Some(format!(
        "{} belongs to a running hermesd ({pid} on {host}{since}, holding {}); a migration \
         into it would change the database under the daemon. Stop the daemon first (e.g. \
         `systemctl stop hermesd` or `kill {}`), then run the migration again",
        path.display(),
        dir.join(instance_lock::LOCK_FILE).display(),
        holder
            .pid
            .map_or_else(|| "<pid>".to_owned(), |pid| pid.to_string()),
    ))
}

/// Prints the per-table verification; fails naming every table that differs.
fn report(reports: &[TableReport]) -> i32 {
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            vec![
                r.table.clone(),
                r.source_rows.to_string(),
                r.target_rows.to_string(),
                r.source_checksum[..16].to_owned(),
                r.target_checksum[..16].to_owned(),
                if r.matches() { "ok" } else { "DIFFERS" }.to_owned(),
            ]
        })
        .collect();
    print!(
        "{}",
        table(
            &[
                "TABLE",
                "SOURCE ROWS",
                "TARGET ROWS",
                "SOURCE SHA-256",
                "TARGET SHA-256",
                ""
            ],
            &rows
        )
    );
    let differing: Vec<&str> = reports
        .iter()
        .filter(|r| !r.matches())
        .map(|r| r.table.as_str())
        .collect();
    if differing.is_empty() {
        println!("verified: every table has the same rows and checksum on both sides");
        0
    } else {
        eprintln!("error: the copies differ in: {}", differing.join(", "));
        EXIT_FAILURE
    }
}

/// The configured database (`HERMES_DATABASE_URL`, else `state.postgres_url`), or the
/// exit code of a configuration that cannot say.
fn configured_url(home: &HermesHome, env: &BTreeMap<String, String>) -> Result<String, i32> {
    if let Some(url) = env
        .get(crate::config::DATABASE_URL_ENV)
        .filter(|u| !u.is_empty())
    {
        return Ok(url.clone());
    }
    match crate::config::load(home, env) {
        Ok(loaded) => match &loaded.config.state.postgres_url {
            Some(url) => Ok(url.expose().to_owned()),
            None => Err(0),
        },
        Err(_) => Err(crate::config::EXIT_CONFIG),
    }
}

/// A `--from`/`--to` argument; `postgres` is the configured database.
fn endpoint(configured: Result<&str, &i32>, arg: &str) -> Result<Endpoint, i32> {
    let text = if arg != CONFIGURED {
        arg
    } else {
        match configured {
            Ok(url) => url,
            Err(code) => {
                if *code == crate::config::EXIT_CONFIG {
                    eprintln!(
                        "error: `{CONFIGURED}` needs state.postgres_url from the configuration, \
                         which does not load (run `hermesd config check`)"
                    );
                } else {
                    eprintln!(
                        "error: `{CONFIGURED}` names the configured database, but neither {} \
                         nor state.postgres_url is set",
                        crate::config::DATABASE_URL_ENV
                    );
                }
                return Err(crate::config::EXIT_CONFIG);
            }
        }
    };
    Endpoint::parse(text).map_err(|e| {
        eprintln!("error: {e}");
        EXIT_FAILURE
    })
}
