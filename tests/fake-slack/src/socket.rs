//! One Socket Mode connection: `hello`, envelopes out, acks in, `disconnect` frames, and the
//! silent/dropped faults.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::records::SocketEvent;
use crate::state::{ConnCommand, LiveConnection, Shared};

pub(crate) async fn serve(shared: Arc<Shared>, socket: WebSocket) {
    let (commands, mut command_rx) = mpsc::unbounded_channel();
    let connection = {
        let mut inner = shared.lock();
        let id = inner.next_id();
        inner.live.push(LiveConnection {
            id,
            commands,
            hello_sent: false,
        });
        inner
            .records
            .timeline
            .push(SocketEvent::Opened { connection: id });
        id
    };
    let (mut sink, mut stream) = socket.split();
    let hello = json!({
        "type": "hello", "num_connections": 1,
        "debug_info": {"host": "fake-slack", "approximate_connection_time": 18060},
        "connection_info": {"app_id": "A0001"},
    });
    if sink
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        forget(
            &shared,
            connection,
            SocketEvent::ClosedByClient { connection },
        );
        return;
    }
    let close_now = {
        let mut inner = shared.lock();
        inner
            .records
            .timeline
            .push(SocketEvent::Hello { connection });
        if inner.close_after_hello > 0 {
            inner.close_after_hello -= 1;
            true
        } else {
            if let Some(live) = inner.live.iter_mut().find(|c| c.id == connection) {
                live.hello_sent = true;
            }
            inner.flush_queue();
            false
        }
    };
    if close_now {
        // Slack may end a connection at any moment, even one just opened
        // (<https://api.slack.com/apis/socket-mode#disconnect>); clients reconnect.
        let _ = sink.send(Message::Close(None)).await;
        forget(&shared, connection, SocketEvent::Dropped { connection });
        return;
    }
    loop {
        tokio::select! {
            _ = shared.stop.cancelled() => return,
            frame = stream.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    if let Ok(frame) = serde_json::from_str::<Value>(&text) {
                        shared.lock().record_ack(connection, frame);
                    }
                }
                Some(Ok(Message::Ping(_))) => {
                    // axum answers pings itself; record that one arrived.
                    shared.lock().records.timeline.push(SocketEvent::Ping { connection });
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    forget(&shared, connection, SocketEvent::ClosedByClient { connection });
                    return;
                }
                Some(Ok(_)) => {}
            },
            command = command_rx.recv() => match command {
                Some(ConnCommand::Send(frame)) => {
                    if sink.send(Message::Text(frame.into())).await.is_err() {
                        forget(&shared, connection, SocketEvent::ClosedByClient { connection });
                        return;
                    }
                }
                Some(ConnCommand::GoSilent) => {
                    forget(&shared, connection, SocketEvent::Silenced { connection });
                    // Hold the socket open, reading nothing and answering nothing, until
                    // the fake stops.
                    let _held = (sink, stream);
                    shared.stop.cancelled().await;
                    return;
                }
                Some(ConnCommand::Drop) | None => {
                    forget(&shared, connection, SocketEvent::Dropped { connection });
                    return;
                }
            },
        }
    }
}

/// Removes the connection from the live set and records why.
fn forget(shared: &Shared, connection: u64, event: SocketEvent) {
    let mut inner = shared.lock();
    inner.live.retain(|c| c.id != connection);
    inner.records.timeline.push(event);
}
