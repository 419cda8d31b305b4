//! Session and message writes on PostgreSQL (the counterpart of `state/commands.rs`).

use super::store::{PgTx, not_yet};
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::error::StoreResult;

pub async fn apply(_tx: &mut PgTx, command: WriteCommand) -> StoreResult<Outcome> {
    Err(not_yet(&format!("{command:?}")))
}
