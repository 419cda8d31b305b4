//! `GET /api/v1/events`: the server-sent event stream. As signal-cli's HttpServerHandler
//! writes it (https://github.com/AsamK/signal-cli/blob/master/src/main/java/org/asamk/signal/http/HttpServerHandler.java):
//! `Content-Type: text/event-stream`, headers flushed at once, each received message as an
//! event named `receive`, and a `:` comment line every 15 seconds to keep it alive. An
//! `account` query naming another account is answered 400 (multi-account mode).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::state::Shared;

const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(crate) async fn events(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    if let Some(account) = query.get("account")
        && *account != shared.account
    {
        return StatusCode::BAD_REQUEST.into_response();
    }
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    shared.open_stream(tx.clone());
    // The keep-alive writer lives as long as the stream is registered.
    let keep = tx.downgrade();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(KEEP_ALIVE).await;
            let Some(tx) = keep.upgrade() else { return };
            if tx.send(Bytes::from_static(b":\n")).is_err() {
                return;
            }
        }
    });
    drop(tx);
    let body = tokio_stream(rx).map(Ok::<_, std::convert::Infallible>);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(body))
        .expect("a valid response")
}

fn tokio_stream(
    mut rx: mpsc::UnboundedReceiver<Bytes>,
) -> impl futures_util::Stream<Item = Bytes> + Send {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
