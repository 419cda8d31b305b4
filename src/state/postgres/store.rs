//! The `Store`'s PostgreSQL backend: the same typed write commands and reads as the SQLite
//! writer, run on a connection pool. A write runs in one transaction; a write made under a
//! session lease (a fenced `Store`, see [`crate::state::Store::fenced`]) runs in a fenced
//! transaction, so a holder that lost its lease cannot write anything afterwards.

use std::time::Duration;

use sqlx::postgres::PgPool;

pub use super::budget::DEFAULT_MAX_CONNECTIONS;
use super::budget::RENEWAL_CONNECTIONS;
use super::error::PgError;
use super::extras::Extras;
use super::instance::{InstanceLease, InstanceOwner};
use super::lease::{Lease, begin_fenced};
use super::one_statement::Alone;
pub use super::tx::PgTx;
use crate::state::StoreOptions;
use crate::state::commands::{Outcome, WriteCommand};
use crate::state::error::StoreResult;
use crate::state::ledger::OwnerStamp;

/// How long a lease outlives its holder's last renewal unless `state.lease_seconds` says
/// otherwise.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

/// An open PostgreSQL backend. Shared behind an `Arc` by every clone of the `Store`.
#[derive(Debug)]
pub struct PgStore {
    pool: PgPool,
    /// Only for renewing session and ingress leases (see [`super::connect_for_renewals`]).
    renewals: PgPool,
    /// The URL as it may be shown (no password).
    shown_url: String,
    /// Stamped on the delivery obligations and cron runs this instance claims.
    owner: OwnerStamp,
    /// This instance's name among those sharing the database.
    instance_id: String,
    lease_ttl: Duration,
    /// This instance's own lease: the gateway work it owns is alive while it holds it.
    instance: InstanceLease,
    /// A newer Hermes's columns and tables a migration carried in, which hermesd keeps filling.
    extras: Extras,
}

impl PgStore {
    /// Connects to `url` and brings its schema up to date (under the migrator's advisory
    /// lock, so instances starting together migrate once).
    pub async fn open(url: &str, options: &StoreOptions) -> StoreResult<Self> {
        super::migrate(url).await?;
        let ttl = options.lease_ttl;
        let pool = super::connect_for_store(url, DEFAULT_MAX_CONNECTIONS, ttl).await?;
        let instance_id = options.instance_id.clone().unwrap_or_else(new_instance_id);
        let renewals = super::connect_for_renewals(url, RENEWAL_CONNECTIONS, ttl).await?;
        let own_renewals = super::connect_for_renewals(url, 1, ttl).await?;
        let instance = InstanceLease::start(&pool, own_renewals, &instance_id, ttl).await?;
        let extras = Extras::detect(&pool).await?;
        super::budget::warn_when_short(&pool).await;
        Ok(Self {
            pool,
            renewals,
            shown_url: super::redact_url(url),
            owner: options.ledger_owner,
            instance_id,
            lease_ttl: options.lease_ttl,
            instance,
            extras,
        })
    }

    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The pool lease renewals use, apart from the store's work.
    pub fn renewals(&self) -> &PgPool {
        &self.renewals
    }

    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    pub fn owner(&self) -> OwnerStamp {
        self.owner
    }

    /// The owner stamped on the gateway work this instance claims now (its id and its
    /// instance lease's current token).
    pub fn instance_owner(&self) -> InstanceOwner {
        self.instance.owner()
    }

    /// Until when this instance surely holds its instance lease (see `instance.rs`).
    pub fn instance_trust(&self) -> &crate::coord::Trust {
        self.instance.trust()
    }

    /// Begins a write transaction, fenced by `fence` when there is one. A pooled connection
    /// is not checked before use (see [`super::connect`]), so one that broke while idle fails
    /// here, before anything was written: another is taken, as many times as the pool can
    /// hold broken ones.
    pub async fn begin(&self, fence: Option<&Lease>) -> StoreResult<PgTx> {
        let mut tries = self.pool.options().get_max_connections() + 1;
        loop {
            let begun = match fence {
                Some(lease) => begin_fenced(&self.pool, lease).await,
                None => self.pool.begin().await.map_err(PgError::from),
            };
            match begun {
                Err(e) if tries > 1 && e.is_broken_connection() => {
                    tracing::debug!(error = %e, "a pooled connection broke while idle; taking another");
                    tries -= 1;
                }
                other => return Ok(other?),
            }
        }
    }

    /// A newer Hermes's columns and tables this database has.
    pub(super) fn extras(&self) -> &Extras {
        &self.extras
    }

    /// Applies one write command: as one statement when it is one (see `one_statement.rs`),
    /// else in its own transaction, committed.
    pub async fn apply(
        &self,
        command: WriteCommand,
        fence: Option<&Lease>,
    ) -> StoreResult<Outcome> {
        let command = match super::one_statement::apply(self, command, fence).await? {
            Alone::Done(outcome) => return Ok(outcome),
            Alone::NotAlone(command) => command,
        };
        let mut tx = self.begin(fence).await?;
        let outcome = if is_gateway_command(&command) {
            super::gateway_writes::apply(&mut tx, command, &self.instance_owner()).await?
        } else {
            super::session_writes::apply(&mut tx, command, &self.extras).await?
        };
        tx.commit().await.map_err(PgError::from)?;
        Ok(outcome)
    }

    /// Stops renewing and releases the instance lease (its unfinished work is open to the
    /// other instances at once), then closes the pool.
    pub async fn close(&self) {
        self.instance.release().await;
        self.renewals.close().await;
        self.pool.close().await;
    }
}

/// Whether `command` writes the gateway's tables (journal, ledger, routing, cron runs, dead
/// letters) rather than sessions and messages.
fn is_gateway_command(command: &WriteCommand) -> bool {
    use WriteCommand as W;
    match command {
        W::CreateSession(_)
        | W::EndSession { .. }
        | W::ReopenSession { .. }
        | W::AppendMessage(_)
        | W::SetTitle { .. }
        | W::SetTitleIfEmpty { .. }
        | W::RecordUsage(_)
        | W::ClearMessages { .. }
        | W::TruncateMessages { .. }
        | W::DeleteSessions { .. }
        // Appends the turn's user message and marks its inbound event in one transaction.
        | W::StartTurn { .. } => false,
        W::EnsureGatewaySchema
        | W::MarkToolStarted { .. }
        | W::RecordInbound { .. }
        | W::MarkInbound { .. }
        | W::FoldInbound { .. }
        | W::RecordDeadLetter { .. }
        | W::ClaimCronRun { .. }
        | W::FinishCronRun { .. }
        | W::MarkCronRunRecorded { .. }
        | W::PruneInbound { .. }
        | W::PruneLedger { .. }
        | W::AnswerInbound { .. }
        | W::AnswerAndSpawn { .. }
        | W::CreateObligation { .. }
        | W::AnswerInboundByEdit { .. }
        | W::MarkAttempting { .. }
        | W::MarkDelivered { .. }
        | W::MarkFailed { .. }
        | W::MarkDeferred { .. }
        | W::AbandonStale { .. }
        | W::SaveRouting { .. }
        | W::DeleteRouting { .. }
        | W::ReplaceRouting { .. } => true,
    }
}

/// A name no other instance has: host, pid and a random suffix (a restarted instance is a new
/// instance; what it owned before is recovered through expired leases).
fn new_instance_id() -> String {
    use rand::Rng;
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned());
    let suffix: u32 = rand::rng().random();
    format!("{host}-{}-{suffix:08x}", std::process::id())
}
