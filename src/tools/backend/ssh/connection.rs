//! One SSH connection shared by every scope: opened on first use, authenticated with the
//! configured key after the host key was checked, reused by each command (a channel per
//! command), opened again once when it was found dropped, and counted so a test can see
//! that two commands used one connection.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use russh::client::{self, Handle, Msg};
use russh::keys::{PrivateKeyWithHashAlg, PublicKeyOrCertificate};
use russh::{Channel, Disconnect};
use tokio::sync::Mutex;

use super::host_key;
use super::target::Target;
use crate::tools::backend::BackendError;

const KIND: &str = "ssh";

/// Connecting, the key exchange and the authentication together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// A keepalive every this often; a link that misses three is treated as dropped.
const KEEPALIVE: Duration = Duration::from_secs(30);

fn unavailable(detail: impl Into<String>) -> BackendError {
    BackendError::Unavailable {
        kind: KIND,
        detail: detail.into(),
    }
}

/// Checks the server's key during the key exchange; why it was refused is kept for the error.
pub struct Client {
    target: Arc<Target>,
    refused: Arc<StdMutex<Option<String>>>,
}

impl client::Handler for Client {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        offered: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let t = &self.target;
        if !t.check_host_key {
            tracing::warn!(
                host = %t.host,
                port = t.port,
                "ssh host key NOT checked (terminal.ssh_host_key_checking is false): a machine in the middle could read every command"
            );
            return Ok(true);
        }
        match host_key::verify(&t.host, t.port, &t.known_hosts, offered) {
            Ok(()) => Ok(true),
            Err(why) => {
                *self.refused.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                Ok(false)
            }
        }
    }
}

pub type Conn = Handle<Client>;

/// Opens and authenticates a new connection.
pub async fn connect(target: &Arc<Target>) -> Result<Conn, BackendError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, connect_inner(target)).await {
        Ok(result) => result,
        Err(_) => Err(unavailable(format!(
            "{} did not complete the connection within {}s",
            target.label(),
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

async fn connect_inner(target: &Arc<Target>) -> Result<Conn, BackendError> {
    let config = Arc::new(client::Config {
        keepalive_interval: Some(KEEPALIVE),
        keepalive_max: 3,
        nodelay: true,
        ..client::Config::default()
    });
    let refused = Arc::new(StdMutex::new(None));
    let handler = Client {
        target: Arc::clone(target),
        refused: Arc::clone(&refused),
    };
    let addr = (target.host.as_str(), target.port);
    let mut conn = match client::connect(config, addr, handler).await {
        Ok(conn) => conn,
        Err(e) => {
            let refused = refused.lock().unwrap_or_else(|e| e.into_inner()).take();
            return Err(unavailable(refused.unwrap_or_else(|| {
                format!("cannot connect to {}:{}: {e}", target.host, target.port)
            })));
        }
    };
    let hash = if target.key.algorithm().is_rsa() {
        conn.best_supported_rsa_hash()
            .await
            .map_err(|e| unavailable(format!("{}: {e}", target.label())))?
            .flatten()
    } else {
        None
    };
    let key = PrivateKeyWithHashAlg::new(Arc::clone(&target.key), hash);
    let auth = conn
        .authenticate_publickey(target.user.clone(), key)
        .await
        .map_err(|e| unavailable(format!("authentication at {} failed: {e}", target.label())))?;
    if !auth.success() {
        return Err(unavailable(format!(
            "{} refused the key {} (public key {}): add its .pub line to that user's ~/.ssh/authorized_keys",
            target.label(),
            target.key_file.display(),
            target.key_fingerprint()
        )));
    }
    Ok(conn)
}

/// The shared connection (or, with `persistent_shell: false`, a fresh one per call).
pub struct Link {
    target: Arc<Target>,
    persistent: bool,
    live: Mutex<Option<Arc<Conn>>>,
    connects: AtomicU64,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("target", &self.target.label())
            .field("persistent", &self.persistent)
            .field("connects", &self.connects.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A channel and the connection it lives on (kept alive while the channel is used).
pub struct Opened {
    pub channel: Channel<Msg>,
    pub conn: Arc<Conn>,
    /// A connection of its own, closed by [`Link::release`] after the call.
    pub own: bool,
}

impl Link {
    pub fn new(target: Arc<Target>, persistent: bool) -> Self {
        Self {
            target,
            persistent,
            live: Mutex::new(None),
            connects: AtomicU64::new(0),
        }
    }

    pub fn target(&self) -> &Arc<Target> {
        &self.target
    }

    /// How many connections were opened so far.
    pub fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    async fn fresh(&self) -> Result<Arc<Conn>, BackendError> {
        let conn = Arc::new(connect(&self.target).await?);
        self.connects.fetch_add(1, Ordering::Relaxed);
        tracing::info!(target = %self.target.label(), "ssh connection opened");
        Ok(conn)
    }

    /// The live connection, opened if there is none or the last one dropped.
    async fn ensure(&self) -> Result<Arc<Conn>, BackendError> {
        let mut live = self.live.lock().await;
        if let Some(conn) = live.as_ref()
            && !conn.is_closed()
        {
            return Ok(Arc::clone(conn));
        }
        let conn = self.fresh().await?;
        *live = Some(Arc::clone(&conn));
        Ok(conn)
    }

    /// Proves the machine reachable: the shared connection is opened (and kept); without a
    /// persistent shell a connection is opened and closed again.
    pub async fn check(&self) -> Result<(), BackendError> {
        if self.persistent {
            self.ensure().await?;
        } else {
            let conn = self.fresh().await?;
            self.release(&conn, true).await;
        }
        Ok(())
    }

    /// Forgets `stale` if it is still the live connection.
    async fn forget(&self, stale: &Arc<Conn>) {
        let mut live = self.live.lock().await;
        if live.as_ref().is_some_and(|c| Arc::ptr_eq(c, stale)) {
            *live = None;
        }
    }

    /// A new session channel. A shared connection that turns out dropped is replaced once;
    /// if that fails too the backend is unavailable.
    pub async fn open(&self) -> Result<Opened, BackendError> {
        if !self.persistent {
            let conn = self.fresh().await?;
            let channel = conn.channel_open_session().await.map_err(|e| {
                unavailable(format!(
                    "{}: cannot open a channel: {e}",
                    self.target.label()
                ))
            })?;
            return Ok(Opened {
                channel,
                conn,
                own: true,
            });
        }
        let conn = self.ensure().await?;
        match conn.channel_open_session().await {
            Ok(channel) => Ok(Opened {
                channel,
                conn,
                own: false,
            }),
            Err(first) => {
                // Dropped, or full (sshd's MaxSessions caps channels per connection, 10 by
                // default): a new connection either way; calls still running on the old one
                // finish there, and it closes with its last channel.
                tracing::warn!(target = %self.target.label(), error = %first, "no channel on the ssh connection; opening a new connection once");
                self.forget(&conn).await;
                let conn = self.ensure().await?;
                let channel = conn.channel_open_session().await.map_err(|e| {
                    unavailable(format!(
                        "{}: cannot open a channel after reconnecting: {e}",
                        self.target.label()
                    ))
                })?;
                Ok(Opened {
                    channel,
                    conn,
                    own: false,
                })
            }
        }
    }

    /// Ends a call: a connection of its own is closed; a dropped shared one is forgotten.
    pub async fn release(&self, conn: &Arc<Conn>, own: bool) {
        if own {
            let _ = conn.disconnect(Disconnect::ByApplication, "", "en").await;
        } else if conn.is_closed() {
            self.forget(conn).await;
        }
    }

    /// Closes the shared connection (the next call opens a new one).
    pub async fn close(&self) {
        let conn = self.live.lock().await.take();
        if let Some(conn) = conn {
            let _ = conn
                .disconnect(Disconnect::ByApplication, "hermesd backend stopped", "en")
                .await;
            tracing::info!(target = %self.target.label(), "ssh connection closed");
        }
    }
}
