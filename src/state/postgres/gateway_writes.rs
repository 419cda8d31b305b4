//! Gateway writes on PostgreSQL: inbound journal, delivery ledger, routing, cron runs, dead
//! letters (the counterpart of `state/gateway_commands.rs`).

use super::store::{PgTx, not_yet};
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::error::StoreResult;
use crate::state::ledger::OwnerStamp;

pub async fn apply(
    _tx: &mut PgTx,
    command: WriteCommand,
    _owner: OwnerStamp,
) -> StoreResult<Outcome> {
    Err(not_yet(&format!("{command:?}")))
}
