//! One gateway connection, from the WebSocket handshake to its end: HELLO, IDENTIFY or
//! RESUME, heartbeats with zombie detection (a heartbeat sent while the previous one is
//! still unacknowledged ends the connection), dispatches forwarded in order. It reports
//! progress on every HELLO, ACK and dispatch, and returns *why* it ended; the session loop
//! in `gateway::session` decides what comes next.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hermes_adapter::Progress;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_util::sync::CancellationToken;

use crate::settings::Token;

/// GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT.
pub const INTENTS: u64 = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15);

/// What a session needs to RESUME.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeState {
    pub session_id: String,
    pub seq: u64,
    pub resume_url: Option<String>,
}

/// A dispatch (op 0) handed to the adapter's event loop, in sequence order.
#[derive(Debug, Clone)]
pub struct Dispatch {
    pub name: String,
    pub data: Value,
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionEnd {
    Shutdown,
    /// The server closed the socket (with its close code when it sent one).
    Closed {
        code: Option<u16>,
    },
    /// A heartbeat went unacknowledged: the socket is a zombie.
    Zombie,
    /// op 7.
    Reconnect,
    /// op 9.
    InvalidSession {
        resumable: bool,
    },
    /// Handshake, read or write failure.
    Io(String),
    /// The event loop is gone (the adapter is stopping).
    ConsumerGone,
}

/// The outcome of [`run`]: why it ended, whether HELLO arrived (the server answered),
/// whether the session started (READY or RESUMED) and how long the connection lived.
#[derive(Debug)]
pub struct Outcome {
    pub end: ConnectionEnd,
    pub established: bool,
    pub ready: bool,
    pub lasted: Duration,
}

/// Everything a connection needs from its session.
#[derive(Debug)]
pub struct ConnectParams<'a> {
    pub url: &'a str,
    /// Proxies and TLS trust for the socket.
    pub net: &'a hermes_adapter::net::Net,
    pub token: &'a Token,
    pub timeout: Duration,
    pub progress: &'a Progress,
    pub shutdown: &'a CancellationToken,
    pub dispatches: &'a mpsc::Sender<Dispatch>,
    /// `[shard id, shard count]`, sent with IDENTIFY
    /// (https://discord.com/developers/docs/events/gateway#sharding).
    pub shard: [u32; 2],
}

fn with_query(url: &str) -> String {
    if url.contains('?') {
        return url.to_owned();
    }
    // `wss://gateway.discord.gg` has no path; `ws://127.0.0.1:1/gw` has one to keep.
    let has_path = url.splitn(4, '/').nth(3).is_some_and(|p| !p.is_empty());
    if has_path {
        format!("{url}?v=10&encoding=json")
    } else {
        format!("{}/?v=10&encoding=json", url.trim_end_matches('/'))
    }
}

/// A random fraction in [0, 1) for the first-heartbeat jitter Discord asks for.
fn jitter_fraction() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1000) / 1000.0
}

/// Runs one connection. `resume` is read to choose RESUME over IDENTIFY and updated with
/// every sequence number and READY's session.
pub async fn run(params: ConnectParams<'_>, resume: &mut Option<ResumeState>) -> Outcome {
    let not_established = |end| Outcome {
        end,
        established: false,
        ready: false,
        lasted: Duration::ZERO,
    };
    let url = with_query(params.url);
    let connect = params.net.connect_websocket(url.as_str(), None);
    let mut socket = tokio::select! {
        _ = params.shutdown.cancelled() => return not_established(ConnectionEnd::Shutdown),
        result = tokio::time::timeout(params.timeout, connect) => match result {
            Ok(Ok((socket, _))) => socket,
            Ok(Err(e)) => return not_established(ConnectionEnd::Io(format!("gateway handshake failed: {}", hermes_adapter::net::error_chain(&e)))),
            Err(_) => return not_established(ConnectionEnd::Io("gateway handshake timed out".into())),
        },
    };
    // HELLO first.
    let hello = tokio::select! {
        _ = params.shutdown.cancelled() => return not_established(ConnectionEnd::Shutdown),
        frame = tokio::time::timeout(params.timeout, next_json(&mut socket)) => match frame {
            Ok(Ok(frame)) => frame,
            Ok(Err(end)) => return not_established(end),
            Err(_) => return not_established(ConnectionEnd::Io("no HELLO from the gateway".into())),
        },
    };
    if hello["op"].as_u64() != Some(10) {
        return not_established(ConnectionEnd::Io(format!(
            "expected HELLO, got op {}",
            hello["op"]
        )));
    }
    params.progress.report();
    let interval = Duration::from_millis(
        hello["d"]["heartbeat_interval"]
            .as_u64()
            .unwrap_or(41_250)
            .max(1),
    );
    let started = Instant::now();
    let ready = std::sync::atomic::AtomicBool::new(false);
    let outcome = |end| Outcome {
        end,
        established: true,
        ready: ready.load(std::sync::atomic::Ordering::Relaxed),
        lasted: started.elapsed(),
    };

    let opening = match resume {
        Some(state) => json!({"op": 6, "d": {
            "token": params.token.expose(),
            "session_id": state.session_id,
            "seq": state.seq,
        }}),
        None => json!({"op": 2, "d": {
            "token": params.token.expose(),
            "intents": INTENTS,
            "shard": params.shard,
            "properties": {"os": std::env::consts::OS, "browser": "hermesd", "device": "hermesd"},
        }}),
    };
    if let Err(e) = socket
        .send(WsMessage::Text(opening.to_string().into()))
        .await
    {
        return outcome(ConnectionEnd::Io(format!("could not identify: {e}")));
    }

    let first = Instant::now() + interval.mul_f64(jitter_fraction());
    let mut heartbeat = tokio::time::interval_at(first, interval);
    heartbeat.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut awaiting_ack = false;

    loop {
        tokio::select! {
            _ = params.shutdown.cancelled() => {
                let frame = CloseFrame { code: CloseCode::Normal, reason: "shutdown".into() };
                let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(Some(frame))).await;
                return outcome(ConnectionEnd::Shutdown);
            }
            _ = heartbeat.tick() => {
                if awaiting_ack {
                    // Close with a non-1000 code so the session stays resumable.
                    let frame = CloseFrame { code: CloseCode::Library(4000), reason: "zombie".into() };
                    let _ = tokio::time::timeout(Duration::from_secs(1), socket.close(Some(frame))).await;
                    return outcome(ConnectionEnd::Zombie);
                }
                let seq = resume.as_ref().map(|r| json!(r.seq)).unwrap_or(Value::Null);
                if let Err(e) = socket.send(WsMessage::Text(json!({"op": 1, "d": seq}).to_string().into())).await {
                    return outcome(ConnectionEnd::Io(format!("heartbeat failed: {e}")));
                }
                awaiting_ack = true;
            }
            frame = next_json(&mut socket) => {
                let frame = match frame {
                    Ok(frame) => frame,
                    Err(end) => return outcome(end),
                };
                match frame["op"].as_u64() {
                    Some(0) => {
                        params.progress.report();
                        let name = frame["t"].as_str().unwrap_or_default().to_owned();
                        let data = frame["d"].clone();
                        if let (Some(seq), Some(state)) = (frame["s"].as_u64(), resume.as_mut()) {
                            state.seq = state.seq.max(seq);
                        }
                        if name == "READY" || name == "RESUMED" {
                            ready.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        if name == "READY" {
                            *resume = Some(ResumeState {
                                session_id: data["session_id"].as_str().unwrap_or_default().to_owned(),
                                seq: frame["s"].as_u64().unwrap_or(0),
                                resume_url: data["resume_gateway_url"].as_str().map(str::to_owned),
                            });
                        }
                        // While the event loop is behind (the core is slow), keep heartbeating so
                        // Discord keeps the session; ACKs are read once reading resumes, so no
                        // zombie verdict is taken meanwhile.
                        let permit = loop {
                            tokio::select! {
                                permit = params.dispatches.reserve() => break permit,
                                _ = heartbeat.tick() => {
                                    let seq = resume.as_ref().map(|r| json!(r.seq)).unwrap_or(Value::Null);
                                    if let Err(e) = socket.send(WsMessage::Text(json!({"op": 1, "d": seq}).to_string().into())).await {
                                        return outcome(ConnectionEnd::Io(format!("heartbeat failed: {e}")));
                                    }
                                    awaiting_ack = true;
                                }
                                _ = params.shutdown.cancelled() => return outcome(ConnectionEnd::Shutdown),
                            }
                        };
                        match permit {
                            Ok(permit) => permit.send(Dispatch { name, data }),
                            Err(_) => return outcome(ConnectionEnd::ConsumerGone),
                        }
                    }
                    Some(1) => {
                        let seq = resume.as_ref().map(|r| json!(r.seq)).unwrap_or(Value::Null);
                        if let Err(e) = socket.send(WsMessage::Text(json!({"op": 1, "d": seq}).to_string().into())).await {
                            return outcome(ConnectionEnd::Io(format!("heartbeat failed: {e}")));
                        }
                    }
                    Some(7) => {
                        let frame = CloseFrame { code: CloseCode::Library(4000), reason: "reconnect".into() };
                        let _ = tokio::time::timeout(Duration::from_secs(1), socket.close(Some(frame))).await;
                        return outcome(ConnectionEnd::Reconnect);
                    }
                    Some(9) => {
                        let resumable = frame["d"].as_bool().unwrap_or(false);
                        let _ = tokio::time::timeout(Duration::from_secs(1), socket.close(None)).await;
                        return outcome(ConnectionEnd::InvalidSession { resumable });
                    }
                    Some(11) => {
                        awaiting_ack = false;
                        params.progress.report();
                    }
                    _ => {}
                }
            }
        }
    }
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next JSON frame, skipping pings/pongs; a close or error becomes the connection's end.
async fn next_json(socket: &mut Socket) -> Result<Value, ConnectionEnd> {
    loop {
        match socket.next().await {
            Some(Ok(WsMessage::Text(text))) => {
                if let Ok(value) = serde_json::from_str(text.as_str()) {
                    return Ok(value);
                }
            }
            Some(Ok(WsMessage::Binary(bytes))) => {
                if let Ok(value) = serde_json::from_slice(&bytes) {
                    return Ok(value);
                }
            }
            Some(Ok(WsMessage::Close(frame))) => {
                return Err(ConnectionEnd::Closed {
                    code: frame.map(|f| u16::from(f.code)),
                });
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(ConnectionEnd::Io(format!("gateway read failed: {e}"))),
            None => return Err(ConnectionEnd::Closed { code: None }),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_gateway_query_keeps_the_path() {
        assert_eq!(
            super::with_query("wss://gateway.discord.gg"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            super::with_query("ws://127.0.0.1:9/gw"),
            "ws://127.0.0.1:9/gw?v=10&encoding=json"
        );
        assert_eq!(super::with_query("wss://x/?v=10"), "wss://x/?v=10");
    }
}
