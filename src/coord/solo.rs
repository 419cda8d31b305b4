//! Coordination of a process that owns its state alone (state.db): leases are kept in
//! memory with the same rules as the shared ones (one holder until expiry, a new and higher
//! token per acquisition), and an announcement reaches only this process's listeners.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::broadcast;

use super::CoordKind;
use super::backend::{Coordination, WorkListener};
use super::error::{CoordResult, ListenError};
use super::lease::{Lease, LeaseScope};

/// One held lease: with which token, until when.
#[derive(Debug)]
struct Hold {
    token: i64,
    until: Instant,
}

#[derive(Debug, Default)]
struct Table {
    holds: HashMap<(LeaseScope, String), Hold>,
    last_token: i64,
}

/// The single-instance coordination (see the module docs).
#[derive(Debug)]
pub struct SoloCoordination {
    instance_id: String,
    lease_ttl: Duration,
    table: Mutex<Table>,
    announced: broadcast::Sender<String>,
}

impl SoloCoordination {
    pub fn new(instance_id: impl Into<String>, lease_ttl: Duration) -> Self {
        let (announced, _) = broadcast::channel(1024);
        Self {
            instance_id: instance_id.into(),
            lease_ttl,
            table: Mutex::new(Table::default()),
            announced,
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn micros_at(at: Instant) -> i64 {
    let now = Instant::now();
    let wall = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let wall = i64::try_from(wall.as_micros()).unwrap_or(i64::MAX);
    let ahead = i64::try_from(at.saturating_duration_since(now).as_micros()).unwrap_or(0);
    let behind = i64::try_from(now.saturating_duration_since(at).as_micros()).unwrap_or(0);
    wall + ahead - behind
}

impl Coordination for SoloCoordination {
    fn kind(&self) -> CoordKind {
        CoordKind::Solo
    }

    fn instance_id(&self) -> &str {
        &self.instance_id
    }

    fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    fn acquire<'a>(
        &'a self,
        scope: LeaseScope,
        key: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, CoordResult<Option<Lease>>> {
        let now = Instant::now();
        let mut table = self.table();
        let entry = (scope, key.to_owned());
        if table.holds.get(&entry).is_some_and(|hold| hold.until > now) {
            return async { Ok(None) }.boxed();
        }
        table.last_token += 1;
        let token = table.last_token;
        let until = now + ttl;
        table.holds.insert(entry, Hold { token, until });
        let lease = Lease {
            scope,
            key: key.to_owned(),
            holder: holder.to_owned(),
            token,
            expires_at_micros: micros_at(until),
            acquired_at_micros: micros_at(now),
            ttl,
        };
        async move { Ok(Some(lease)) }.boxed()
    }

    fn renew<'a>(&'a self, lease: &'a Lease, ttl: Duration) -> BoxFuture<'a, CoordResult<Lease>> {
        let now = Instant::now();
        let mut table = self.table();
        let result = match table.holds.get_mut(&(lease.scope, lease.key.clone())) {
            Some(hold) if hold.token == lease.token && hold.until > now => {
                hold.until = now + ttl;
                Ok(Lease {
                    expires_at_micros: micros_at(hold.until),
                    ttl,
                    ..lease.clone()
                })
            }
            _ => Err(lease.lost()),
        };
        async move { result }.boxed()
    }

    fn release<'a>(&'a self, lease: &'a Lease) -> BoxFuture<'a, CoordResult<bool>> {
        let now = Instant::now();
        let mut table = self.table();
        // The entry is kept (expired), like the shared table's row, so tokens keep growing.
        let released = match table.holds.get_mut(&(lease.scope, lease.key.clone())) {
            Some(hold) if hold.token == lease.token && hold.until > now => {
                hold.until = now;
                true
            }
            _ => false,
        };
        async move { Ok(released) }.boxed()
    }

    fn count_current<'a>(
        &'a self,
        scope: LeaseScope,
        key_prefix: &'a str,
    ) -> BoxFuture<'a, CoordResult<i64>> {
        let now = Instant::now();
        let count = self
            .table()
            .holds
            .iter()
            .filter(|((s, key), hold)| {
                *s == scope && key.starts_with(key_prefix) && hold.until > now
            })
            .count();
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        async move { Ok(count) }.boxed()
    }

    fn announce_session_work<'a>(&'a self, session_key: &'a str) -> BoxFuture<'a, CoordResult<()>> {
        // Nobody listening is not an error: the announcement is only a hint.
        let _ = self.announced.send(session_key.to_owned());
        async { Ok(()) }.boxed()
    }

    fn listen_session_work(&self) -> BoxFuture<'_, CoordResult<Box<dyn WorkListener>>> {
        let listener: Box<dyn WorkListener> = Box::new(SoloListener(self.announced.subscribe()));
        async move { Ok(listener) }.boxed()
    }
}

struct SoloListener(broadcast::Receiver<String>);

impl WorkListener for SoloListener {
    fn recv(&mut self) -> BoxFuture<'_, Result<String, ListenError>> {
        async move {
            match self.0.recv().await {
                Ok(key) => Ok(key),
                Err(broadcast::error::RecvError::Closed) => Err(ListenError::Closed),
                Err(lagged) => Err(ListenError::Interrupted(Box::new(lagged))),
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coord::{CoordError, Coordinator};

    #[tokio::test]
    async fn one_holder_at_a_time_and_tokens_grow() {
        let coord = Coordinator::solo("me", Duration::from_secs(5));
        let ttl = Duration::from_secs(5);
        let first = coord
            .acquire(LeaseScope::Session, "k", "me", ttl)
            .await
            .unwrap()
            .expect("a free lease is taken");
        assert!(
            coord
                .acquire(LeaseScope::Session, "k", "other", ttl)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            coord.count_current(LeaseScope::Session, "").await.unwrap(),
            1
        );
        assert_eq!(
            coord.count_current(LeaseScope::Session, "j").await.unwrap(),
            0
        );
        let renewed = coord.renew(&first, ttl).await.unwrap();
        assert_eq!(renewed.token, first.token);
        assert!(coord.release(&first).await.unwrap());
        assert!(!coord.release(&first).await.unwrap());
        assert!(matches!(
            coord.renew(&first, ttl).await,
            Err(CoordError::LeaseLost { .. })
        ));
        let second = coord
            .acquire(LeaseScope::Session, "k", "other", ttl)
            .await
            .unwrap()
            .expect("a released lease is free");
        assert!(second.token > first.token);
    }

    #[tokio::test]
    async fn an_expired_lease_is_lost_and_free() {
        let coord = Coordinator::solo("me", Duration::from_millis(1));
        let ttl = Duration::from_millis(1);
        let first = coord
            .acquire(LeaseScope::Ingress, "k", "me", ttl)
            .await
            .unwrap()
            .unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(coord.renew(&first, ttl).await.is_err());
        assert!(
            coord
                .acquire(LeaseScope::Ingress, "k", "b", ttl)
                .await
                .unwrap()
                .is_some()
        );
    }

    #[tokio::test]
    async fn an_announcement_reaches_this_process_listeners() {
        let coord = Coordinator::solo("me", Duration::from_secs(5));
        let mut listener = coord.listen_session_work().await.unwrap();
        coord.announce_session_work("telegram:dm:1").await.unwrap();
        assert_eq!(listener.recv().await.unwrap(), "telegram:dm:1");
    }
}
