//! The fake gateway WebSocket: HELLO, IDENTIFY → READY + GUILD_CREATE, HEARTBEAT → ACK,
//! RESUME → replay of missed sequence numbers + RESUMED, and the test-driven commands
//! (dispatches, RECONNECT, INVALID_SESSION, close codes, dropped sockets).

use std::sync::Arc;

use axum::extract::State as AxumState;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::Shared;
use crate::state::{ConnCommand, Connection, GatewayFrame, Session};

pub async fn upgrade(ws: WebSocketUpgrade, AxumState(shared): AxumState<Arc<Shared>>) -> Response {
    ws.on_upgrade(move |socket| serve_connection(socket, shared))
}

async fn serve_connection(mut socket: WebSocket, shared: Arc<Shared>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (id, hello) = shared.update(|state| {
        let id = state.next_connection;
        state.next_connection += 1;
        state.connections.push(Connection {
            id,
            session_id: None,
            tx,
            acking: true,
        });
        let hello = json!({"op": 10, "d": {"heartbeat_interval": state.heartbeat_interval_ms}});
        (id, hello)
    });
    if socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        forget(&shared, id);
        return;
    }
    loop {
        tokio::select! {
            command = rx.recv() => match command {
                Some(ConnCommand::Frame(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(ConnCommand::Close(code)) => {
                    let frame = CloseFrame { code, reason: "fake close".into() };
                    let _ = socket.send(Message::Close(Some(frame))).await;
                    break;
                }
                Some(ConnCommand::Drop) | None => break,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => {
                    let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                    if !handle_frame(&shared, id, frame) {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    forget(&shared, id);
}

fn forget(shared: &Shared, id: u64) {
    shared.update(|state| state.connections.retain(|c| c.id != id));
}

/// Handles one client frame; false closes the connection (the close frame is queued).
fn handle_frame(shared: &Shared, connection: u64, frame: Value) -> bool {
    let op = frame["op"].as_u64().unwrap_or(u64::MAX);
    let d = frame["d"].clone();
    shared.update(|state| {
        state.frames.push(GatewayFrame {
            connection,
            op,
            d: d.clone(),
            at: std::time::Instant::now(),
        });
        let Some(conn) = state.connections.iter().find(|c| c.id == connection) else {
            return false;
        };
        let tx = conn.tx.clone();
        let acking = conn.acking;
        let send = |value: Value| {
            let _ = tx.send(ConnCommand::Frame(value.to_string()));
        };
        match op {
            1 => {
                if acking {
                    send(json!({"op": 11}));
                }
                true
            }
            2 => {
                if d["token"].as_str() != Some(state.token.as_str()) {
                    let _ = tx.send(ConnCommand::Close(4004));
                    return true;
                }
                // A socket that dies right after IDENTIFY (the identify was still spent:
                // https://discord.com/developers/docs/events/gateway#session-start-limit-object).
                if state.close_after_identify > 0 {
                    state.close_after_identify -= 1;
                    let _ = tx.send(ConnCommand::Close(4000));
                    return true;
                }
                let session_id = format!("session-{}", state.next_session);
                state.next_session += 1;
                // A new session replaces the old one: its missed events are gone, as on
                // Discord (that is what the adapter's backfill is for).
                if let Some(old) = state.current_session.take() {
                    state.sessions.remove(&old);
                }
                state.sessions.insert(
                    session_id.clone(),
                    Session {
                        events: Vec::new(),
                        valid: true,
                    },
                );
                state.current_session = Some(session_id.clone());
                if let Some(conn) = state.connections.iter_mut().find(|c| c.id == connection) {
                    conn.session_id = Some(session_id.clone());
                }
                let ready = json!({
                    "v": 10,
                    "user": state.bot_user,
                    "guilds": [{"id": state.guild_id, "unavailable": true}],
                    "session_id": session_id,
                    "resume_gateway_url": state.ws_url,
                    "shard": [0, 1],
                    "application": {"id": state.application_id, "flags": 0},
                });
                state.dispatch("READY", ready);
                let guild = state.guild_create();
                state.dispatch("GUILD_CREATE", guild);
                true
            }
            6 => {
                let session_id = d["session_id"].as_str().unwrap_or_default().to_owned();
                let seq = d["seq"].as_u64().unwrap_or(0);
                let token_ok = d["token"].as_str() == Some(state.token.as_str());
                let valid = token_ok
                    && state.current_session.as_deref() == Some(session_id.as_str())
                    && state.sessions.get(&session_id).is_some_and(|s| s.valid);
                if !valid {
                    send(json!({"op": 9, "d": false}));
                    return true;
                }
                if let Some(conn) = state.connections.iter_mut().find(|c| c.id == connection) {
                    conn.session_id = Some(session_id.clone());
                }
                let missed: Vec<Value> = state.sessions[&session_id]
                    .events
                    .iter()
                    .filter(|(s, _)| *s > seq)
                    .map(|(_, frame)| frame.clone())
                    .collect();
                for frame in missed {
                    send(frame);
                }
                state.dispatch("RESUMED", json!({}));
                true
            }
            _ => {
                let _ = tx.send(ConnCommand::Close(4001));
                true
            }
        }
    })
}
