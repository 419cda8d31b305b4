//! The pairing store the configuration calls for: the home's files, or (several instances
//! sharing PostgreSQL) their shared copies, which `state::shared_files` opens.

use std::io;

use crate::config::Config;

/// The pairing store for `config`: the home's files, or their shared copies.
pub fn pairing_store(
    home: &crate::home::HermesHome,
    config: &Config,
) -> io::Result<crate::gateway::pairing::PairingStore> {
    match crate::state::shared_files(config)? {
        Some(shared) => crate::gateway::pairing::PairingStore::open_shared(home, shared),
        None => crate::gateway::pairing::PairingStore::open(home),
    }
}
