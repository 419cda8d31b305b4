//! `stream: true`: the turn's text deltas as `chat.completion.chunk` SSE events, a final
//! chunk with `finish_reason`, then `data: [DONE]`; keep-alive comments every 30 s.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use hermes_adapter::MessageEvent;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::ApiState;
use super::ids::{completion_id, with_session};
use crate::agent::AgentEvent;
use crate::gateway::router::ApiTurnError;
use crate::state::now_epoch;

const KEEPALIVE: Duration = Duration::from_secs(30);

pub async fn stream(
    state: ApiState,
    event: MessageEvent,
    session_id: String,
    model: String,
    system: Option<String>,
) -> Response {
    let (deltas_tx, mut deltas) = crate::agent::event_channel();
    let (out, body) = mpsc::channel::<Event>(64);
    let id = completion_id();
    let created = now_epoch() as i64;
    let chunk = move |delta: Value, finish: Option<&str>| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        })
    };
    let router = state.router.clone();
    tokio::spawn(async move {
        let send = |value: Value| {
            let out = out.clone();
            async move {
                out.send(Event::default().data(value.to_string()))
                    .await
                    .is_ok()
            }
        };
        if !send(chunk(json!({"role": "assistant"}), None)).await {
            return;
        }
        let turn =
            tokio::spawn(async move { router.submit_api(event, Some(deltas_tx), system).await });
        let mut streamed = false;
        while let Some(agent_event) = deltas.recv().await {
            if let AgentEvent::Delta(text) = agent_event {
                streamed = true;
                if !send(chunk(json!({"content": text}), None)).await {
                    // The client went away; the turn still completes and is persisted.
                    return;
                }
            }
        }
        let result = turn
            .await
            .unwrap_or_else(|e| Err(ApiTurnError::Aborted(e.to_string())));
        match result {
            Ok(reply) => {
                if !streamed && !reply.text.is_empty() {
                    send(chunk(json!({"content": reply.text}), None)).await;
                }
                send(chunk(json!({}), Some("stop"))).await;
            }
            Err(message) => {
                send(json!({"error": {"message": message.to_string(), "type": "server_error", "code": "agent_incomplete"}}))
                    .await;
            }
        }
        let _ = out.send(Event::default().data("[DONE]")).await;
    });
    let events = futures_util::stream::unfold(body, |mut body| async move {
        body.recv().await.map(|e| (Ok::<_, Infallible>(e), body))
    });
    let sse = Sse::new(events).keep_alive(KeepAlive::new().interval(KEEPALIVE));
    with_session(sse.into_response(), &session_id)
}
