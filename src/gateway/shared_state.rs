//! The shared copies of the pairing files and the agent's memory files when several
//! instances share PostgreSQL (`state.backend: postgres`), opened once per process.

use std::collections::HashMap;
use std::io;
use std::sync::{Mutex, OnceLock};

use crate::config::{Config, StateBackend};
use crate::state::postgres::SharedFiles;

/// The shared files of `config`'s database, or `None` when the state is the local
/// state.db (then pairing and memory are files in the home, as always).
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
    let shared = SharedFiles::open(url.expose())?;
    open.insert(url.expose().to_owned(), shared.clone());
    Ok(Some(shared))
}

/// The pairing store for `config`: the home's files, or their shared copies.
pub fn pairing_store(
    home: &crate::home::HermesHome,
    config: &Config,
) -> io::Result<crate::gateway::pairing::PairingStore> {
    match shared_files(config)? {
        Some(shared) => crate::gateway::pairing::PairingStore::open_shared(home, shared),
        None => crate::gateway::pairing::PairingStore::open(home),
    }
}
