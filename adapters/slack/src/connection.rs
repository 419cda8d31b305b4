//! One Socket Mode connection as its own task: `apps.connections.open` → WebSocket (wss, or
//! ws to a loopback host only) → frames forwarded to the socket loop as [`ConnEvent`]s,
//! acks written back, pings sent every interval. A socket that shows no sign of life
//! (no frame, no pong) for the silence window reports itself [`ConnEvent::Silent`] and ends.
//!
//! Liveness is judged here, next to the socket, so a busy socket loop never makes a
//! healthy connection look dead: frames are read before each silence check (`biased`).

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hermes_adapter::Progress;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_util::sync::CancellationToken;

use crate::api::{ApiError, Token, WebApi};
use crate::settings::is_loopback_host;

/// How long a close handshake may take before the socket is simply dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Timings of the socket; tests and benchmarks shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunables {
    /// How often a ping is sent (and silence checked).
    pub ping_interval: Duration,
    /// How long without any frame or pong before the socket is declared dead.
    pub silence_window: Duration,
    /// Bound on `apps.connections.open` plus the WebSocket handshake.
    pub open_timeout: Duration,
    /// First reconnect delay after a failed open; doubles up to `reconnect_max`.
    pub reconnect_base: Duration,
    pub reconnect_max: Duration,
    /// Consecutive failed opens before `run` gives up with a retryable error.
    pub max_open_failures: u32,
    /// Bound on one Web API call.
    pub request_timeout: Duration,
    /// Bound on one file download or upload.
    pub transfer_timeout: Duration,
}

impl Default for Tunables {
    fn default() -> Self {
        Self {
            ping_interval: Duration::from_secs(10),
            silence_window: Duration::from_secs(30),
            open_timeout: Duration::from_secs(30),
            reconnect_base: Duration::from_secs(1),
            reconnect_max: Duration::from_secs(30),
            max_open_failures: 6,
            request_timeout: crate::api::REQUEST_TIMEOUT,
            transfer_timeout: crate::api::TRANSFER_TIMEOUT,
        }
    }
}

/// Why a connection could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// Retrying cannot help (bad app token, a plain-text socket URL to a remote host).
    Fatal(String),
    Retryable(String),
    /// Slack answered 429 with `Retry-After`: not a failure, a time to wait.
    RateLimited {
        message: String,
        retry_after: Duration,
    },
}

/// The earliest time a connection may call `apps.connections.open` again, after Slack
/// asked to wait (shared by every connection and kept across restarts of `run`, so a
/// restart does not ask again too early).
#[derive(Debug, Default)]
pub struct OpenGate(std::sync::Mutex<Option<Instant>>);

impl OpenGate {
    pub fn close_until(&self, at: Instant) {
        let mut gate = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *gate = Some(gate.map_or(at, |old| old.max(at)));
    }

    fn open_at(&self) -> Option<Instant> {
        let gate = *self.0.lock().unwrap_or_else(|e| e.into_inner());
        gate.filter(|at| *at > Instant::now())
    }
}

/// What a connection tells the socket loop.
#[derive(Debug)]
pub enum ConnEvent {
    Hello {
        conn: u64,
    },
    Envelope {
        conn: u64,
        envelope_id: String,
        kind: String,
        payload: Value,
        retry_attempt: u64,
    },
    /// Slack asked us to reconnect (`warning`, `refresh_requested`, …).
    Disconnect {
        conn: u64,
        reason: String,
    },
    Closed {
        conn: u64,
        why: String,
    },
    Silent {
        conn: u64,
    },
    /// A retired connection has forwarded its last frame: everything it delivered is
    /// ahead of this in the loop's queue, so once this arrives it may be closed.
    Retired {
        conn: u64,
    },
    OpenFailed {
        conn: u64,
        error: OpenError,
    },
}

/// The socket loop's handle on a connection task; the jobs handling its envelopes hold
/// clones to ack on it.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    outgoing: mpsc::UnboundedSender<String>,
    stop: CancellationToken,
    retire: CancellationToken,
}

impl ConnHandle {
    /// Queues an ack for the envelope, with a response `payload` where Slack shows one
    /// (slash commands); false when the connection is gone.
    pub fn ack(&self, envelope_id: &str, payload: Option<&Value>) -> bool {
        let mut frame = json!({ "envelope_id": envelope_id });
        if let Some(payload) = payload {
            frame["payload"] = payload.clone();
        }
        self.outgoing.send(frame.to_string()).is_ok()
    }

    /// Closes the connection: acks already queued are written, then a close frame.
    pub fn close(&self) {
        self.stop.cancel();
    }

    /// Stops reading from the connection (a successor took over) and reports
    /// [`ConnEvent::Retired`] behind the frames already forwarded. The connection then
    /// closes itself once every handle on it is dropped: the envelopes it delivered are
    /// handled and acked on it first.
    pub fn retire(&self) {
        self.retire.cancel();
    }
}

/// Everything a connection task needs.
#[derive(Debug, Clone)]
pub struct ConnDeps {
    pub api: WebApi,
    pub tunables: Tunables,
    pub progress: Progress,
    pub events: mpsc::Sender<ConnEvent>,
    pub gate: Arc<OpenGate>,
}

pub fn spawn(id: u64, deps: ConnDeps) -> ConnHandle {
    let (outgoing, outgoing_rx) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let retire = CancellationToken::new();
    tokio::spawn(run(id, deps, outgoing_rx, stop.clone(), retire.clone()));
    ConnHandle {
        outgoing,
        stop,
        retire,
    }
}

/// Refuses a socket URL that would carry events in plain text over a network.
pub fn check_socket_url(url: &str) -> Result<(), OpenError> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| OpenError::Retryable(format!("socket URL is not a URL: {e}")))?;
    match parsed.scheme() {
        "wss" => Ok(()),
        "ws" if parsed.host_str().is_some_and(is_loopback_host) => Ok(()),
        "ws" => Err(OpenError::Fatal(
            "refusing a plain ws:// Socket Mode URL to a non-loopback host".into(),
        )),
        other => Err(OpenError::Fatal(format!(
            "unsupported Socket Mode URL scheme {other:?}"
        ))),
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn open(api: &WebApi) -> Result<Socket, OpenError> {
    let answer = api
        .call("apps.connections.open", Token::App, &json!({}))
        .await
        .map_err(|e| {
            if e.is_auth_failure() {
                OpenError::Fatal(format!(
                    "apps.connections.open: {e} (check SLACK_APP_TOKEN)"
                ))
            } else if let ApiError::RateLimited {
                retry_after: Some(retry_after),
            } = e
            {
                OpenError::RateLimited {
                    message: format!("apps.connections.open: {e}"),
                    retry_after,
                }
            } else {
                OpenError::Retryable(format!("apps.connections.open: {e}"))
            }
        })?;
    let url = answer
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| OpenError::Retryable("apps.connections.open returned no url".into()))?;
    check_socket_url(url)?;
    let (socket, _) = api
        .net()
        .connect_websocket(url, Some(WebSocketConfig::default()))
        .await
        // The URL carries a one-time ticket: keep it out of the message (no error in the
        // chain quotes the URL).
        .map_err(|e| {
            OpenError::Retryable(format!(
                "Socket Mode handshake failed: {}",
                hermes_adapter::net::error_chain(&e)
            ))
        })?;
    Ok(socket)
}

async fn run(
    id: u64,
    deps: ConnDeps,
    mut outgoing: mpsc::UnboundedReceiver<String>,
    stop: CancellationToken,
    retire: CancellationToken,
) {
    if let Some(at) = deps.gate.open_at() {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep_until(at) => {}
        }
    }
    let opened = tokio::select! {
        _ = stop.cancelled() => return,
        opened = tokio::time::timeout(deps.tunables.open_timeout, open(&deps.api)) => opened,
    };
    let mut socket = match opened {
        Ok(Ok(socket)) => socket,
        Ok(Err(error)) => {
            if let OpenError::RateLimited { retry_after, .. } = &error {
                deps.gate.close_until(Instant::now() + *retry_after);
            }
            let _ = deps
                .events
                .send(ConnEvent::OpenFailed { conn: id, error })
                .await;
            return;
        }
        Err(_) => {
            let error = OpenError::Retryable("opening the Socket Mode connection timed out".into());
            let _ = deps
                .events
                .send(ConnEvent::OpenFailed { conn: id, error })
                .await;
            return;
        }
    };
    let mut last_sign_of_life = Instant::now();
    let mut ticks = tokio::time::interval_at(
        Instant::now() + deps.tunables.ping_interval,
        deps.tunables.ping_interval,
    );
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut retiring = false;
    let end = loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => {
                // A peer that stopped reading must not keep this task alive.
                let _ = tokio::time::timeout(CLOSE_TIMEOUT, async {
                    // Acks of envelopes this socket delivered go out on it before it closes.
                    while let Ok(text) = outgoing.try_recv() {
                        if socket.send(Message::Text(text.into())).await.is_err() {
                            return;
                        }
                    }
                    let _ = socket.close(None).await;
                })
                .await;
                return;
            }
            _ = retire.cancelled(), if !retiring => {
                retiring = true;
                if deps.events.send(ConnEvent::Retired { conn: id }).await.is_err() {
                    return;
                }
            }
            // Acks first, so a flood of envelopes never delays them.
            text = outgoing.recv() => {
                let Some(text) = text else {
                    // Every handle is gone: a retired connection's last ack is written.
                    let _ = tokio::time::timeout(CLOSE_TIMEOUT, socket.close(None)).await;
                    return;
                };
                if let Err(e) = socket.send(Message::Text(text.into())).await {
                    break ConnEvent::Closed { conn: id, why: e.to_string() };
                }
            }
            frame = socket.next(), if !retiring => {
                let frame = match frame {
                    Some(Ok(frame)) => frame,
                    Some(Err(e)) => break ConnEvent::Closed { conn: id, why: e.to_string() },
                    None => break ConnEvent::Closed { conn: id, why: "socket ended".into() },
                };
                last_sign_of_life = Instant::now();
                match frame {
                    Message::Text(text) => {
                        if let Some(event) = parse_frame(id, &text) {
                            deps.progress.report();
                            if deps.events.send(event).await.is_err() {
                                return;
                            }
                        }
                    }
                    Message::Pong(_) | Message::Ping(_) => deps.progress.report(),
                    Message::Close(frame) => {
                        let why = frame.map(|f| f.reason.to_string()).unwrap_or_default();
                        break ConnEvent::Closed { conn: id, why: format!("closed by Slack: {why}") };
                    }
                    Message::Binary(_) | Message::Frame(_) => {}
                }
            }
            _ = ticks.tick(), if !retiring => {
                if last_sign_of_life.elapsed() > deps.tunables.silence_window {
                    break ConnEvent::Silent { conn: id };
                }
                if let Err(e) = socket.send(Message::Ping(Vec::new().into())).await {
                    break ConnEvent::Closed { conn: id, why: e.to_string() };
                }
            }
        }
    };
    let _ = deps.events.send(end).await;
}

/// A text frame → an event for the loop; `None` for frames we ignore.
fn parse_frame(conn: u64, text: &str) -> Option<ConnEvent> {
    let frame: Value = serde_json::from_str(text).ok()?;
    let kind = frame.get("type").and_then(Value::as_str).unwrap_or("");
    match kind {
        "hello" => Some(ConnEvent::Hello { conn }),
        "disconnect" => Some(ConnEvent::Disconnect {
            conn,
            reason: frame
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        }),
        _ => {
            let envelope_id = frame.get("envelope_id").and_then(Value::as_str)?;
            Some(ConnEvent::Envelope {
                conn,
                envelope_id: envelope_id.to_owned(),
                kind: kind.to_owned(),
                payload: frame.get("payload").cloned().unwrap_or(Value::Null),
                retry_attempt: frame
                    .get("retry_attempt")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_sockets_only_to_loopback() {
        assert!(check_socket_url("wss://wss-primary.slack.com/link/?ticket=1").is_ok());
        assert!(check_socket_url("ws://127.0.0.1:9/link/").is_ok());
        assert!(check_socket_url("ws://[::1]:9/link/").is_ok());
        assert!(check_socket_url("ws://localhost:9/link/").is_ok());
        assert!(matches!(
            check_socket_url("ws://wss-primary.slack.com/link/"),
            Err(OpenError::Fatal(_))
        ));
        assert!(matches!(
            check_socket_url("http://127.0.0.1/"),
            Err(OpenError::Fatal(_))
        ));
    }
}
