//! A TCP proxy in front of PostgreSQL that reads the wire protocol as it passes, for fault
//! injection and counting (issue 28's fault harness and the cluster benchmark):
//!
//! - **Round trips**: every `ReadyForQuery` the server sends ends one client request batch
//!   (a simple `Query`, or an extended-protocol batch ended by `Sync`), so their count is the
//!   number of round trips the clients waited for
//!   (<https://www.postgresql.org/docs/current/protocol-flow.html>).
//! - **Latency**: a delay added to every round trip (before each `ReadyForQuery` is passed
//!   on, so a client waits that much longer for each answer).
//! - **Stall**: while on, nothing is forwarded either way (a database that stops answering
//!   without closing its sockets); the bytes wait and flow on when it ends.
//! - **Traps**: the first *idle* `ReadyForQuery` (status `I`: the transaction, if any, is
//!   committed) after a statement whose SQL contains a given substring holds that
//!   connection's server→client bytes and tells the test; the client has not yet seen the
//!   answer when the test acts (e.g. SIGSTOPs the process), and the trap's release lets them
//!   through. A statement is known by its SQL in `Query` and `Parse` messages and, for a
//!   prepared statement executed again, by the name `Bind` refers to
//!   (<https://www.postgresql.org/docs/current/protocol-message-formats.html>).
//!
//! The proxy speaks only what a local test cluster needs: no TLS (an `SSLRequest` is refused
//! with `N` by the server and passed through), no GSS encryption.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot, watch};

/// The protocol number of an `SSLRequest` (and, one more, `GSSENCRequest`): the server
/// answers it with one unframed byte.
const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;

/// The proxy's controls, shared with every connection it serves.
#[derive(Debug)]
struct Controls {
    round_trips: AtomicU64,
    statements: AtomicU64,
    latency_micros: AtomicU64,
    stalled: watch::Sender<bool>,
    traps: Mutex<Vec<TrapSpec>>,
    drop_all: Notify,
    /// Every request batch answered so far (see [`PgProxy::batch_log`]).
    batch_log: Mutex<Vec<Batch>>,
}

/// One request batch (one round trip) as the proxy saw it.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The SQL of each statement it ran (`; `-joined), `parse: SQL` for a statement it only
    /// prepared, or `sync` for a bare `Sync` (sqlx's ping: a pool's check of a connection).
    pub sql: String,
    /// The bytes of the server's answer, its `ReadyForQuery` included.
    pub answer_bytes: u64,
}

#[derive(Debug)]
struct TrapSpec {
    needle: String,
    /// Told once, when the trap fires; takes the release.
    fired: Option<oneshot::Sender<oneshot::Sender<()>>>,
}

/// A proxy listening on `127.0.0.1:0` that forwards to one PostgreSQL.
#[derive(Debug)]
pub struct PgProxy {
    addr: SocketAddr,
    controls: Arc<Controls>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for PgProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl PgProxy {
    /// Starts forwarding to PostgreSQL on `127.0.0.1:upstream_port`.
    pub async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let controls = Arc::new(Controls {
            round_trips: AtomicU64::new(0),
            statements: AtomicU64::new(0),
            latency_micros: AtomicU64::new(0),
            stalled: watch::channel(false).0,
            traps: Mutex::new(Vec::new()),
            drop_all: Notify::new(),
            batch_log: Mutex::new(Vec::new()),
        });
        let shared = controls.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                let controls = shared.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)).await {
                        serve(client, server, controls).await;
                    }
                });
            }
        });
        Self {
            addr,
            controls,
            accept,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `url` (a `postgres://…@127.0.0.1:PORT/…` URL of the proxied server) pointed at the
    /// proxy instead.
    pub fn url_for(&self, url: &str, upstream_port: u16) -> String {
        url.replace(
            &format!("127.0.0.1:{upstream_port}"),
            &format!("127.0.0.1:{}", self.port()),
        )
    }

    /// Round trips completed so far, over every connection.
    pub fn round_trips(&self) -> u64 {
        self.controls.round_trips.load(Ordering::SeqCst)
    }

    /// Statements the clients sent so far (each `Query`, each `Execute`).
    pub fn statements(&self) -> u64 {
        self.controls.statements.load(Ordering::SeqCst)
    }

    /// Every request batch (one round trip each) answered so far, over every connection,
    /// in the order their answers ended.
    pub fn batch_log(&self) -> Vec<Batch> {
        self.controls.batch_log.lock().unwrap().clone()
    }

    /// Adds `latency` to every round trip from now on (zero: none).
    pub fn set_latency(&self, latency: Duration) {
        self.controls
            .latency_micros
            .store(latency.as_micros() as u64, Ordering::SeqCst);
    }

    /// Stops (`true`) or resumes (`false`) forwarding on every connection.
    pub fn set_stalled(&self, stalled: bool) {
        self.controls.stalled.send_replace(stalled);
    }

    /// Closes every connection open now (the server sees its clients vanish).
    pub fn drop_connections(&self) {
        self.controls.drop_all.notify_waiters();
    }

    /// Arms a trap on the next committed statement whose SQL contains `needle` (see the
    /// module docs); dropping the [`Trap`] before it springs disarms it.
    pub fn trap(&self, needle: &str) -> Trap {
        let (fired_tx, fired_rx) = oneshot::channel();
        self.controls.traps.lock().unwrap().push(TrapSpec {
            needle: needle.to_owned(),
            fired: Some(fired_tx),
        });
        Trap { fired: fired_rx }
    }
}

/// An armed trap (see [`PgProxy::trap`]).
#[derive(Debug)]
pub struct Trap {
    fired: oneshot::Receiver<oneshot::Sender<()>>,
}

impl Trap {
    /// Waits (at most `within`) until the trap holds a connection; the returned handle lets
    /// the answer through when released or dropped.
    pub async fn sprung(self, within: Duration) -> Caught {
        let release = tokio::time::timeout(within, self.fired)
            .await
            .expect("the trapped statement ran in time")
            .expect("the proxy is running");
        Caught {
            release: Some(release),
        }
    }
}

/// A connection held by a trap: its answer is let through on [`Caught::release`] or drop.
#[derive(Debug)]
pub struct Caught {
    release: Option<oneshot::Sender<()>>,
}

impl Caught {
    pub fn release(mut self) {
        if let Some(tx) = self.release.take() {
            let _ = tx.send(());
        }
    }
}

impl Drop for Caught {
    fn drop(&mut self) {
        if let Some(tx) = self.release.take() {
            let _ = tx.send(());
        }
    }
}

/// What the client side tells the server side about each request batch, in order: whether
/// the batch ran a statement a trap waits for, and what it carried.
type Batches = Arc<Mutex<VecDeque<(Option<oneshot::Sender<oneshot::Sender<()>>>, String)>>>;

async fn serve(client: TcpStream, server: TcpStream, controls: Arc<Controls>) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let batches: Batches = Arc::default();
    let up = client_to_server(client_read, server_write, controls.clone(), batches.clone());
    let down = server_to_client(server_read, client_write, controls.clone(), batches);
    // Registered before anything runs, so a `drop_connections` from now on reaches it.
    let dropped = controls.drop_all.notified();
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = dropped => {}
    }
}

/// Waits while the proxy is stalled.
async fn gate(controls: &Controls) {
    let mut stalled = controls.stalled.subscribe();
    let _ = stalled.wait_for(|stalled| !*stalled).await;
}

/// Waits for the configured per-round-trip latency.
async fn add_latency(controls: &Controls) {
    let micros = controls.latency_micros.load(Ordering::SeqCst);
    if micros > 0 {
        tokio::time::sleep(Duration::from_micros(micros)).await;
    }
}

/// Reads one framed message: its type byte (none for the start-up packets) and body.
async fn read_message(
    read: &mut tokio::net::tcp::OwnedReadHalf,
    typed: bool,
) -> Option<(u8, Vec<u8>)> {
    let kind = if typed { read.read_u8().await.ok()? } else { 0 };
    let len = read.read_u32().await.ok()? as usize;
    let mut body = vec![0; len.checked_sub(4)?];
    read.read_exact(&mut body).await.ok()?;
    Some((kind, body))
}

fn framed(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 5);
    if kind != 0 {
        out.push(kind);
    }
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// The NUL-terminated string at the start of `bytes`, and what follows it.
fn cstr(bytes: &[u8]) -> (String, &[u8]) {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let rest = bytes.get(end + 1..).unwrap_or_default();
    (String::from_utf8_lossy(&bytes[..end]).into_owned(), rest)
}

async fn client_to_server(
    mut read: tokio::net::tcp::OwnedReadHalf,
    mut write: tokio::net::tcp::OwnedWriteHalf,
    controls: Arc<Controls>,
    batches: Batches,
) {
    // Start-up: untyped packets until the StartupMessage itself (TLS/GSS requests come first
    // and get an unframed one-byte answer, handled on the way back).
    loop {
        let Some((_, body)) = read_message(&mut read, false).await else {
            return;
        };
        let code = u32::from_be_bytes(
            body.get(..4)
                .and_then(|b| b.try_into().ok())
                .unwrap_or([0; 4]),
        );
        gate(&controls).await;
        if write.write_all(&framed(0, &body)).await.is_err() {
            return;
        }
        if code != SSL_REQUEST && code != GSSENC_REQUEST {
            break;
        }
    }
    let mut prepared: HashMap<String, String> = HashMap::new();
    let mut batch_sql: Vec<String> = Vec::new();
    let mut described: Vec<String> = Vec::new();
    loop {
        let Some((kind, body)) = read_message(&mut read, true).await else {
            return;
        };
        match kind {
            b'Q' => {
                controls.statements.fetch_add(1, Ordering::SeqCst);
                batch_sql.push(cstr(&body).0);
                described.push(batch_sql[0].clone());
                end_batch(&controls, &batches, &mut batch_sql, &mut described);
            }
            b'P' => {
                let (name, rest) = cstr(&body);
                let (sql, _) = cstr(rest);
                described.push(format!("parse: {sql}"));
                prepared.insert(name, sql);
            }
            b'B' => {
                let (_portal, rest) = cstr(&body);
                let (statement, _) = cstr(rest);
                if let Some(sql) = prepared.get(&statement) {
                    batch_sql.push(sql.clone());
                    // A statement parsed in this batch is now run: shown once, as run.
                    let parsed = format!("parse: {sql}");
                    described.retain(|d| *d != parsed);
                    described.push(sql.clone());
                }
            }
            b'E' => {
                controls.statements.fetch_add(1, Ordering::SeqCst);
            }
            b'C' if body.first() == Some(&b'S') => {
                prepared.remove(&cstr(&body[1..]).0);
            }
            b'S' => end_batch(&controls, &batches, &mut batch_sql, &mut described),
            _ => {}
        }
        gate(&controls).await;
        if write.write_all(&framed(kind, &body)).await.is_err() {
            return;
        }
    }
}

/// Records that a request batch ended, with the trap its statements spring, if any.
fn end_batch(
    controls: &Controls,
    batches: &Batches,
    batch_sql: &mut Vec<String>,
    described: &mut Vec<String>,
) {
    let line = match described.is_empty() {
        true => "sync".to_owned(),
        false => described.join("; "),
    };
    described.clear();
    let mut traps = controls.traps.lock().unwrap();
    // A trap whose `Trap` was dropped unsprung is disarmed: it must not take a statement a
    // trap armed after it waits for.
    traps.retain(|t| t.fired.as_ref().is_some_and(|fired| !fired.is_closed()));
    let hit = traps
        .iter()
        .position(|t| batch_sql.iter().any(|sql| sql.contains(&t.needle)));
    let fired = hit.and_then(|i| traps.remove(i).fired);
    batches.lock().unwrap().push_back((fired, line));
    batch_sql.clear();
}

async fn server_to_client(
    mut read: tokio::net::tcp::OwnedReadHalf,
    mut write: tokio::net::tcp::OwnedWriteHalf,
    controls: Arc<Controls>,
    batches: Batches,
) {
    // A one-byte answer to an SSL or GSS request may come first.
    let mut first = [0u8; 1];
    if read.read_exact(&mut first).await.is_err() {
        return;
    }
    let mut pending_byte = Some(first[0]);
    if first[0] == b'N' || first[0] == b'S' || first[0] == b'G' {
        // 'N' (no TLS) is the answer to SSLRequest; an 'S' here would be TLS, which this
        // proxy cannot read: forward it and let the handshake fail visibly.
        gate(&controls).await;
        if write.write_all(&first).await.is_err() {
            return;
        }
        pending_byte = None;
    }
    // A sprung trap waits for the first idle ReadyForQuery at or after its batch's (a
    // statement inside a transaction is held only once the transaction committed).
    let mut armed: Option<oneshot::Sender<oneshot::Sender<()>>> = None;
    let mut answer_bytes = 0u64;
    loop {
        let kind = match pending_byte.take() {
            Some(kind) => kind,
            None => match read.read_u8().await {
                Ok(kind) => kind,
                Err(_) => return,
            },
        };
        let Ok(len) = read.read_u32().await else {
            return;
        };
        let mut body = vec![0; (len as usize).saturating_sub(4)];
        if read.read_exact(&mut body).await.is_err() {
            return;
        }
        let mut hold = None;
        answer_bytes += body.len() as u64 + 5;
        if kind == b'Z' {
            add_latency(&controls).await;
            controls.round_trips.fetch_add(1, Ordering::SeqCst);
            // The start-up's ReadyForQuery answers no batch the client side recorded.
            if let Some((fired, sql)) = batches.lock().unwrap().pop_front() {
                controls
                    .batch_log
                    .lock()
                    .unwrap()
                    .push(Batch { sql, answer_bytes });
                armed = fired.or(armed);
            }
            answer_bytes = 0;
            if body.first() == Some(&b'I') {
                hold = armed.take();
            }
        }
        gate(&controls).await;
        if let Some(fired) = hold {
            let (release_tx, release_rx) = oneshot::channel();
            if fired.send(release_tx).is_ok() {
                let _ = release_rx.await;
            }
        }
        if write.write_all(&framed(kind, &body)).await.is_err() {
            return;
        }
    }
}
