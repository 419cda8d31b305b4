//! A fake of signal-cli's HTTP daemon (`signal-cli -a ACCOUNT daemon --http`), faithful at
//! the wire: the three endpoints of signal-cli-jsonrpc(5)
//! (https://github.com/AsamK/signal-cli/blob/master/man/signal-cli-jsonrpc.5.adoc), the
//! JSON-RPC methods hermesd calls with the parameters of signal-cli(1)
//! (https://github.com/AsamK/signal-cli/blob/master/man/signal-cli.1.adoc), and the event
//! stream as signal-cli's HttpServerHandler and ServerSentEventSender write it. Tests push
//! envelopes in, read what was sent, and arm faults (a rate limit, a dropped stream).

mod rpc;
mod state;
mod stream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};

pub use state::Sent;
use state::Shared;

/// How long the test-side waits below give up after (generous: slow shared machines).
const WAIT: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
pub struct FakeSignal {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl FakeSignal {
    /// A daemon for the bot account `account` on 127.0.0.1, an OS-chosen port.
    pub async fn start(account: &str) -> FakeSignal {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake signal-cli");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared::new(account));
        let app = Router::new()
            .route("/api/v1/rpc", post(rpc::handle))
            .route("/api/v1/events", get(stream::events))
            // GET /api/v1/check: "Responds with 200 OK if daemon is running" (jsonrpc(5)).
            .route(
                "/api/v1/check",
                get(|| async { axum::http::StatusCode::OK }),
            )
            .layer(axum::extract::DefaultBodyLimit::disable())
            .with_state(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeSignal { shared, addr }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn account(&self) -> String {
        self.shared.account.clone()
    }

    /// Waits until at least `n` event streams are open.
    pub async fn wait_listeners(&self, n: usize) {
        let mut watch = self.shared.listeners.subscribe();
        tokio::time::timeout(WAIT, watch.wait_for(|count| *count >= n))
            .await
            .expect("the adapter opens the event stream")
            .expect("the fake is alive");
    }

    /// Waits until every event stream open now has been closed by its client.
    pub async fn wait_streams_closed(&self) {
        let streams = self.shared.streams.lock().unwrap().clone();
        let closed = futures_util::future::join_all(streams.iter().map(|s| s.closed()));
        tokio::time::timeout(WAIT, closed)
            .await
            .expect("the adapter's event streams close");
    }

    /// How many event streams are open now.
    pub fn listeners(&self) -> usize {
        *self.shared.listeners.borrow()
    }

    /// Pushes a raw `receive` event's data to every open stream. signal-cli hands each
    /// message to the handlers registered when it arrives
    /// (HttpServerHandler.subscribeReceiveHandlers), so with no stream open it is gone —
    /// unless the daemon runs `--receive-mode=on-connection` ([`Self::receive_on_connection`]).
    pub fn push_raw(&self, data: &str) {
        self.shared.push(data);
    }

    /// Acts as `signal-cli daemon --receive-mode=on-connection`: the daemon fetches messages
    /// from Signal's servers only while an event stream is open (its default handler is
    /// registered as weak, DaemonCommand.addDefaultReceiveHandler; ManagerImpl starts the
    /// receive thread with the first non-weak handler and stops it with the last,
    /// addReceiveHandler/removeReceiveHandler). A message sent meanwhile waits on the
    /// server and arrives when a stream opens again.
    pub fn receive_on_connection(&self) {
        self.shared
            .on_connection
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// A direct message from `from` (a phone number); returns its timestamp.
    pub fn push_dm(&self, from: &str, text: &str) -> i64 {
        let ts = self.shared.clock();
        self.push_envelope(from, ts, json!({"timestamp": ts, "message": text}));
        ts
    }

    /// A group message from `from`, with `mentions` (`start`, `length` in UTF-16 units and
    /// the mentioned `number`) as signal-cli's JsonMention writes them.
    pub fn push_group(&self, from: &str, group_id: &str, text: &str, mentions: Value) -> i64 {
        let ts = self.shared.clock();
        self.push_envelope(
            from,
            ts,
            json!({"timestamp": ts, "message": text, "mentions": mentions,
                "groupInfo": {"groupId": group_id, "groupName": "Fake group", "revision": 1,
                    "type": "DELIVER"}}),
        );
        ts
    }

    /// `from` reacts with `emoji` to the bot's message sent at `target_ts` in `chat`
    /// (a number, or `group:<id>`); signal-cli's JsonReaction fields.
    pub fn push_reaction(&self, from: &str, chat: &str, emoji: &str, target_ts: i64) -> i64 {
        let ts = self.shared.clock();
        let account = self.account();
        let mut data = json!({"timestamp": ts, "reaction": {"emoji": emoji,
            "targetAuthor": account, "targetAuthorNumber": account,
            "targetAuthorUuid": format!("uuid-{account}"),
            "targetSentTimestamp": target_ts, "isRemove": false}});
        if let Some(group) = chat.strip_prefix("group:") {
            data["groupInfo"] = json!({"groupId": group, "revision": 1, "type": "DELIVER"});
        }
        self.push_envelope(from, ts, data);
        ts
    }

    /// A direct message from `from` carrying a stored attachment `id`.
    pub fn push_attachment(&self, from: &str, text: &str, id: &str, content_type: &str) -> i64 {
        let size = self.shared.attachment_size(id);
        let ts = self.shared.clock();
        self.push_envelope(
            from,
            ts,
            json!({"timestamp": ts, "message": text, "attachments": [{"contentType": content_type,
                "filename": format!("{id}.bin"), "id": id, "size": size}]}),
        );
        ts
    }

    /// An envelope from `from` at `ts` with `data_message`, as JsonReceiveMessageHandler
    /// wraps it (`{"envelope": {...}, "account": ...}`).
    pub fn push_envelope(&self, from: &str, ts: i64, data_message: Value) {
        let data = json!({"envelope": {"source": from, "sourceNumber": from,
            "sourceUuid": format!("uuid-{from}"), "sourceName": format!("User {from}"),
            "sourceDevice": 1, "timestamp": ts, "serverReceivedTimestamp": ts + 1,
            "serverDeliveredTimestamp": ts + 2, "dataMessage": data_message},
            "account": self.shared.account});
        self.push_raw(&data.to_string());
    }

    /// Stores an attachment the daemon already downloaded (for `getAttachment`).
    pub fn add_attachment(&self, id: &str, bytes: Vec<u8>) {
        self.shared
            .attachments
            .lock()
            .unwrap()
            .insert(id.to_owned(), bytes);
    }

    /// Every message sent through `send`, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.sent.lock().unwrap().clone()
    }

    /// Waits until `n` messages were sent; returns them all.
    pub async fn wait_sent(&self, n: usize) -> Vec<Sent> {
        let mut watch = self.shared.sent_count.subscribe();
        tokio::time::timeout(WAIT, watch.wait_for(|count| *count >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} messages sent; got {:?}", self.sent()))
            .expect("the fake is alive");
        self.sent()
    }

    /// The message the bot sent at `timestamp`.
    pub fn sent_at(&self, timestamp: i64) -> Option<Sent> {
        self.sent().into_iter().find(|s| s.timestamp == timestamp)
    }

    /// Typing indications shown so far (`sendTyping` without `stop`).
    pub fn typing(&self) -> usize {
        *self.shared.typing.lock().unwrap()
    }

    /// The next `send` is refused as rate limited, asking to wait `retry_after_secs`.
    pub fn rate_limit_next_send(&self, retry_after_secs: u64) {
        *self.shared.rate_limit.lock().unwrap() = Some(retry_after_secs);
    }

    /// Ends every open event stream (the daemon restarting).
    pub fn drop_streams(&self) {
        self.shared.drop_streams();
    }

    /// Calls the fake does not serve (methods hermesd should not use), for a final check.
    pub fn unexpected(&self) -> Vec<String> {
        self.shared.unexpected.lock().unwrap().clone()
    }
}
