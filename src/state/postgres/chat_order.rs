//! A reply and the replies owed to its chat before it, in one statement (issue 28: a reply
//! taken over from a stopped instance must reach the chat before the new holder's next one).
//! "Before" is the insertion order (`seq`, drawn by the database), never a host's clock, so a
//! skewed clock cannot put a newer reply first.

use sqlx::AssertSqlSafe;
use sqlx::Row;

use super::gateway_reads::obligation;
use super::ledger_writes::pg_owner_alive;
use super::retry::retried;
use super::store::PgStore;
use super::tx::Db;
use crate::state::error::StoreResult;
use crate::state::ledger::{
    OBLIGATION_MAX_ATTEMPTS, OBLIGATION_STALE_AFTER_SECONDS, ObligationInOrder, OwedBefore,
};
use crate::state::sqlite::gateway_read::OBLIGATION_COLUMNS;

impl PgStore {
    /// Obligation `id` and, oldest first, the replies to the same chat inserted before it
    /// that are still owed (within the attempt cap and the stale cutoff) and are not this
    /// instance's under its current lease (those are already ahead of it in its own lane).
    pub(crate) async fn obligation_in_chat_order(
        &self,
        id: &str,
        now: f64,
    ) -> StoreResult<ObligationInOrder> {
        let columns = OBLIGATION_COLUMNS
            .split(", ")
            .map(|c| format!("o.{}", c.trim()))
            .collect::<Vec<_>>()
            .join(", ");
        let alive = pg_owner_alive!();
        let sql = format!(
            "SELECT {columns}, TRUE AS is_it, {alive} AS alive \
               FROM delivery_obligations o WHERE o.obligation_id = $1 \
             UNION ALL \
             (SELECT {columns}, FALSE, {alive} \
               FROM delivery_obligations o \
               JOIN delivery_obligations it ON it.obligation_id = $1 \
              WHERE o.state IN ('pending', 'attempting', 'failed') \
                AND o.platform = it.platform AND o.chat_id = it.chat_id AND o.seq < it.seq \
                AND o.attempts < $2 AND $3 - o.created_at <= $4 \
                AND NOT (o.owner_instance IS NOT DISTINCT FROM $5 \
                         AND o.owner_token IS NOT DISTINCT FROM $6) \
              ORDER BY o.seq)"
        );
        let me = self.instance_owner();
        let rows = sqlx::query(AssertSqlSafe(sql))
            .bind(id)
            .bind(OBLIGATION_MAX_ATTEMPTS)
            .bind(now)
            .bind(OBLIGATION_STALE_AFTER_SECONDS)
            .bind(&me.instance)
            .bind(me.token)
            .fetch_all(retried(self.pool()))
            .await
            .db()?;
        let mut found = ObligationInOrder::default();
        for row in &rows {
            let row_obligation = obligation(row)?;
            if row.get::<bool, _>("is_it") {
                found.obligation = Some(row_obligation);
            } else {
                found.owed_before.push(OwedBefore {
                    obligation: row_obligation,
                    owner_alive: row.get("alive"),
                });
            }
        }
        Ok(found)
    }
}
