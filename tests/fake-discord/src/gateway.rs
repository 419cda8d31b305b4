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
                // `shard: [id, count]` is optional ([0, 1] when absent); an id outside
                // 0..count closes with 4010 Invalid shard
                // (https://discord.com/developers/docs/events/gateway#sharding,
                // https://discord.com/developers/docs/topics/opcodes-and-status-codes#gateway-gateway-close-event-codes).
                let Some((shard, count)) = shard_pair(&d["shard"]) else {
                    let _ = tx.send(ConnCommand::Close(4010));
                    return true;
                };
                state.num_shards = count;
                let session_id = format!("session-{}", state.next_session);
                state.next_session += 1;
                // A new session replaces the shard's old one: its missed events are gone, as
                // on Discord (that is what the adapter's backfill is for).
                if let Some(old) = state.shard_sessions.remove(&shard) {
                    state.sessions.remove(&old);
                }
                state.sessions.insert(
                    session_id.clone(),
                    Session {
                        events: Vec::new(),
                        valid: true,
                    },
                );
                state.shard_sessions.insert(shard, session_id.clone());
                if let Some(conn) = state.connections.iter_mut().find(|c| c.id == connection) {
                    conn.session_id = Some(session_id.clone());
                }
                // READY and GUILD_CREATE name only the guilds of this shard.
                let guilds: Vec<String> = state
                    .guild_ids()
                    .into_iter()
                    .filter(|id| state.shard_of(Some(id)) == shard)
                    .collect();
                let ready = json!({
                    "v": 10,
                    "user": state.bot_user,
                    "guilds": guilds.iter().map(|id| json!({"id": id, "unavailable": true})).collect::<Vec<_>>(),
                    "session_id": session_id,
                    "resume_gateway_url": state.ws_url,
                    "shard": [shard, count],
                    "application": {"id": state.application_id, "flags": 0},
                });
                state.dispatch_on(shard, "READY", ready);
                for guild in guilds {
                    let guild = state.guild_create_of(&guild);
                    state.dispatch_on(shard, "GUILD_CREATE", guild);
                }
                true
            }
            6 => {
                let session_id = d["session_id"].as_str().unwrap_or_default().to_owned();
                let seq = d["seq"].as_u64().unwrap_or(0);
                let token_ok = d["token"].as_str() == Some(state.token.as_str());
                let valid = token_ok
                    && state.shard_sessions.values().any(|current| *current == session_id)
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
                if let Some(shard) = state
                    .shard_sessions
                    .iter()
                    .find(|(_, current)| **current == session_id)
                    .map(|(shard, _)| *shard)
                {
                    state.dispatch_on(shard, "RESUMED", json!({}));
                }
                true
            }
            _ => {
                let _ = tx.send(ConnCommand::Close(4001));
                true
            }
        }
    })
}

/// IDENTIFY's `shard` field as (id, count): absent is `[0, 1]`; anything but two whole
/// numbers with `id < count` is invalid.
fn shard_pair(value: &Value) -> Option<(u64, u64)> {
    if value.is_null() {
        return Some((0, 1));
    }
    let pair = value.as_array().filter(|pair| pair.len() == 2)?;
    let (id, count) = (pair[0].as_u64()?, pair[1].as_u64()?);
    (id < count).then_some((id, count))
}
