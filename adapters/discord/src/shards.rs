//! Running the bot's gateway shards (https://discord.com/developers/docs/events/gateway#sharding):
//! `shard_count` sessions, each its own connection identified as `[id, count]`, all feeding
//! one dispatch channel. When several instances share the state, each shard is an ingress
//! claim `discord-shard:<application id>:<n>`: an instance runs a shard only while it holds
//! that claim, and claims no more than its fair share (the shard count divided by the
//! instances running the Discord adapter, rounded up), so shards spread over the instances and a dead instance's shards
//! are taken over once their leases expire; an instance over its share (another one joined)
//! gives shards back until it is within it. A solo instance runs every shard.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use hermes_adapter::{AdapterContext, AdapterError};
use tokio::sync::mpsc;

use crate::gateway::budget::SharedBudget;
use crate::gateway::{Dispatch, session};
use crate::settings::Settings;

/// What every shard of one adapter run shares.
pub struct Shards<'a> {
    pub settings: &'a Settings,
    pub gateway_url: &'a str,
    pub ctx: &'a AdapterContext,
    pub dispatches: &'a mpsc::Sender<Dispatch>,
    pub budget: Option<SharedBudget>,
    /// The application's id (a bot's user id is its application's id).
    pub application_id: &'a str,
    /// Shards this instance runs right now (or is claiming).
    pub held: Arc<AtomicU32>,
}

/// The most shards one of `instances` live instances should run.
pub fn fair_share(count: u32, instances: usize) -> u32 {
    let instances = u32::try_from(instances.max(1)).unwrap_or(u32::MAX);
    count.div_ceil(instances)
}

impl Shards<'_> {
    /// Runs all shards until shutdown (`Ok`) or until one fails for good (`Err`).
    pub async fn run(&self) -> Result<(), AdapterError> {
        let count = self.settings.shard_count;
        let shards = (0..count).map(|id| self.run_shard([id, count]));
        futures_util::future::try_join_all(shards).await.map(|_| ())
    }

    async fn run_shard(&self, shard: [u32; 2]) -> Result<(), AdapterError> {
        let ctx = self.ctx;
        if !ctx.ingress.is_shared() {
            return self.session(shard, &ctx.shutdown).await;
        }
        let key = format!("discord-shard:{}:{}", self.application_id, shard[0]);
        loop {
            let hold = match self.reserve_slot(shard[1]).await {
                true => {
                    let hold = ctx.ingress.try_claim(&key, &ctx.shutdown).await;
                    if hold.is_none() {
                        self.held.fetch_sub(1, Ordering::SeqCst);
                    }
                    hold
                }
                false => None,
            };
            let Some(hold) = hold else {
                // Waiting for a shard is healthy: the supervisor must not restart us.
                ctx.progress.report();
                tokio::select! {
                    _ = tokio::time::sleep(ctx.ingress.retry_every()) => continue,
                    _ = ctx.shutdown.cancelled() => return Ok(()),
                }
            };
            tracing::info!(
                platform = "discord",
                shard = shard[0],
                count = shard[1],
                "running the shard (its ingress lease is ours)"
            );
            let (result, given_back) = self.run_held(shard, hold.lost()).await;
            if !given_back {
                self.held.fetch_sub(1, Ordering::SeqCst);
            }
            drop(hold);
            if given_back && !ctx.shutdown.is_cancelled() {
                tracing::info!(
                    platform = "discord",
                    shard = shard[0],
                    "gave the shard back: more instances share the bot now"
                );
                continue;
            }
            if ctx.shutdown.is_cancelled() {
                return Ok(());
            }
            result?;
            tracing::warn!(
                platform = "discord",
                shard = shard[0],
                "lost the shard's ingress lease; its connection is closed until it is ours again"
            );
        }
    }

    /// Runs a held shard until its session ends or the hold is lost, or until this instance
    /// runs more than its fair share (an instance joined): then it gives this shard back
    /// (`true`) so the newcomer can take it.
    async fn run_held(
        &self,
        shard: [u32; 2],
        lost: &tokio_util::sync::CancellationToken,
    ) -> (Result<(), AdapterError>, bool) {
        let stop = lost.child_token();
        let session = self.session(shard, &stop);
        tokio::pin!(session);
        let mut given_back = false;
        loop {
            tokio::select! {
                result = &mut session => return (result, given_back),
                _ = tokio::time::sleep(self.ctx.ingress.retry_every()), if !given_back => {
                    if self.give_back_if_over_share(shard[1]).await {
                        given_back = true;
                        stop.cancel();
                    }
                }
            }
        }
    }

    /// Frees one slot when this instance holds more than its fair share; only one of its
    /// shards gives itself back per slot over the share.
    async fn give_back_if_over_share(&self, count: u32) -> bool {
        let share = fair_share(count, self.ctx.ingress.live_instances().await);
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                (held > share).then(|| held - 1)
            })
            .is_ok()
    }

    /// Takes one of this instance's fair share of slots, if one is left: counted before the
    /// claim, so shards asking at the same moment cannot together exceed the share.
    async fn reserve_slot(&self, count: u32) -> bool {
        let share = fair_share(count, self.ctx.ingress.live_instances().await);
        self.held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                (held < share).then_some(held + 1)
            })
            .is_ok()
    }

    async fn session(
        &self,
        shard: [u32; 2],
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<(), AdapterError> {
        session::run(
            self.settings,
            self.gateway_url,
            &self.ctx.progress,
            stop,
            self.dispatches,
            self.budget.clone(),
            shard,
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fair_shares_round_up() {
        assert_eq!(fair_share(2, 1), 2);
        assert_eq!(fair_share(2, 2), 1);
        assert_eq!(fair_share(3, 2), 2);
        assert_eq!(fair_share(1, 3), 1);
        assert_eq!(fair_share(4, 0), 4);
    }
}
