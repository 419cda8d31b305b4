//! Opening the shared files (`crate::coord::SharedFiles`) the configuration names: with
//! `state.backend: postgres` the pairing and memory files live in that database, opened
//! once per process and database; otherwise there are none and their owners use the home.

use std::collections::HashMap;
use std::io;
use std::sync::{Mutex, OnceLock};

use crate::config::{Config, StateBackend};
use crate::coord::SharedFiles;

/// The shared files of `config`'s database, or `None` when the state is the local state.db
/// (then pairing and memory are files in the home, as always).
pub fn shared_files(config: &Config) -> io::Result<Option<SharedFiles>> {
    if config.state.backend != StateBackend::Postgres {
        return Ok(None);
    }
    let url = config.state.postgres_url.as_ref().ok_or_else(|| {
        io::Error::other(
            "state.backend is postgres but no state.postgres_url or HERMES_DATABASE_URL is set",
        )
    })?;
    // One connection thread per database per process, however many parts ask.
    static OPEN: OnceLock<Mutex<HashMap<String, SharedFiles>>> = OnceLock::new();
    let mut open = OPEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(shared) = open.get(url.expose()) {
        return Ok(Some(shared.clone()));
    }
    let shared = SharedFiles::from(super::postgres::SharedFiles::open(url.expose())?);
    open.insert(url.expose().to_owned(), shared.clone());
    Ok(Some(shared))
}
