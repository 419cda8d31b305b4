//! A fake of Meta's WhatsApp Cloud API, at the wire: the Graph endpoints hermesd calls and a
//! sender of signed webhook deliveries. Each behaviour follows Meta's documentation:
//!
//! - Every Graph call needs `Authorization: Bearer <token>`; otherwise 401 with Graph error
//!   code 190 (<https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes>,
//!   "Access token has expired").
//! - `POST /{version}/{phone-number-id}/messages`
//!   (<https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages>): needs
//!   `messaging_product: "whatsapp"`; answers `{"messaging_product", "contacts": [{input,
//!   wa_id}], "messages": [{"id": "wamid…"}]}`. Text bodies hold at most 4096 characters;
//!   reply buttons at most 3 with titles of at most 20 characters, lists at most 10 rows
//!   (<https://developers.facebook.com/docs/whatsapp/cloud-api/messages/interactive-reply-buttons-messages>);
//!   otherwise 400 with code 100. A free-form message to a user whose last message is more
//!   than 24 hours old (or who never wrote) is refused with 400, code 131047
//!   (<https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-messages#customer-service-windows>).
//!   A body with `status: "read"` marks an inbound message read, with the typing indicator
//!   when `typing_indicator` is given (<https://developers.facebook.com/docs/whatsapp/cloud-api/typing-indicators>);
//!   an unknown message id is 400, code 131009 ("Parameter value is not valid").
//! - `POST /{version}/{phone-number-id}/media` (multipart: `messaging_product`, `type`, `file`)
//!   answers `{"id"}`; `GET /{version}/{media-id}` answers `{url, mime_type, sha256,
//!   file_size, id}`, and the URL itself needs the same bearer token
//!   (<https://developers.facebook.com/docs/whatsapp/cloud-api/reference/media>).
//! - Rate limits: a test can make the next send answer code 130429 ("Cloud API message
//!   throughput has been reached") or 131056 ("pair rate limit"), as documented on the error
//!   codes page. Meta documents no `Retry-After` for these; a throughput refusal from this
//!   fake may carry one as an HTTP hop would (RFC 9110 §10.2.3), which the adapter honours.
//! - Dropped connections: a test can make the next send be accepted (the user gets the
//!   message) and its connection then break before the answer is complete, as a network hop
//!   between hermesd and Meta may. HTTP gives a client no way to learn what became of a
//!   request whose connection closed before the response (RFC 9112 §9.3.1, RFC 9110 §9.2.2:
//!   only idempotent requests may be retried automatically, and a message send is not).
//! - Webhooks (<https://developers.facebook.com/docs/graph-api/webhooks/getting-started>):
//!   each delivery is a POST of the JSON body with `X-Hub-Signature-256: sha256=<hex
//!   HMAC-SHA256 of the body under the app secret>`; a delivery not answered 200 is sent
//!   again later (here: until it is, with a short pause between tries), and Meta may deliver
//!   the same notification more than once, which [`FakeMeta::redeliver`] does on purpose.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub const TOKEN: &str = "EAAG-fake-whatsapp-access-token-0123456789";
pub const APP_SECRET: &str = "fake-app-secret-4f1d";
pub const VERIFY_TOKEN: &str = "fake-verify-token";
pub const PHONE_NUMBER_ID: &str = "106540352242922";
pub const VERSION: &str = "v20.0";
const DAY: i64 = 24 * 60 * 60;

#[path = "fake_whatsapp/graph.rs"]
mod graph;
use graph::{media_bytes, media_info, messages, upload};

/// What the fake shows for one message the business sent.
#[derive(Debug, Clone)]
pub struct Sent {
    pub id: String,
    pub to: String,
    pub kind: String,
    /// The text body, the interactive body, or the media caption.
    pub text: String,
    pub buttons: Vec<(String, String)>,
    /// The quoted message (`context.message_id`).
    pub quoted: Option<String>,
    /// The uploaded media's bytes, for media messages.
    pub media: Option<Vec<u8>>,
}

/// A scripted refusal of the next send.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// HTTP 429, Graph code 130429, with `Retry-After` when given.
    Throughput(Option<u64>),
    /// HTTP 400, Graph code 131056.
    PairRate,
    /// HTTP 500, Graph code 131000 ("Something went wrong").
    Internal,
    /// The message is accepted and sent, then the connection breaks before the answer.
    Disconnect,
}

#[derive(Debug, Default)]
struct Shared {
    sent: Vec<Sent>,
    sent_watch: Option<tokio::sync::watch::Sender<usize>>,
    /// Unix seconds of each user's last message (the window's start).
    last_user_message: HashMap<String, i64>,
    /// Inbound message ids, with their sender.
    inbound: HashMap<String, String>,
    /// Message ids marked read, and how many typing indicators were shown.
    read: Vec<String>,
    typing: usize,
    media: HashMap<String, (String, Vec<u8>)>,
    faults: VecDeque<Fault>,
    refused: usize,
    next: u64,
    base: String,
}

#[derive(Debug)]
pub struct FakeMeta {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: tokio::task::AbortHandle,
    /// Final statuses of webhook deliveries by our id for them.
    answered: Arc<Mutex<HashMap<String, u16>>>,
    webhook: Arc<Mutex<Option<String>>>,
}

impl Drop for FakeMeta {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// HMAC-SHA256 (RFC 2104) written out, so the fake does not share the adapter's code.
pub fn hub_signature(secret: &str, body: &[u8]) -> String {
    let mut key = secret.as_bytes().to_vec();
    if key.len() > 64 {
        key = Sha256::digest(&key).to_vec();
    }
    key.resize(64, 0);
    let pad = |byte: u8| key.iter().map(|k| k ^ byte).collect::<Vec<u8>>();
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    inner.update(body);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner);
    format!("sha256={}", hex::encode(outer.finalize()))
}

impl FakeMeta {
    pub async fn start() -> FakeMeta {
        let shared = Arc::new(Mutex::new(Shared {
            sent_watch: Some(tokio::sync::watch::channel(0).0),
            ..Shared::default()
        }));
        let app = Router::new()
            .route("/{version}/{phone}/messages", post(messages))
            .route("/{version}/{phone}/media", post(upload))
            .route("/{version}/{media_id}", get(media_info))
            .route("/download/{media_id}", get(media_bytes))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        shared.lock().unwrap().base = format!("http://{addr}");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        })
        .abort_handle();
        FakeMeta {
            addr,
            shared,
            task,
            answered: Arc::default(),
            webhook: Arc::default(),
        }
    }

    /// The Graph API base (`graph_api_url`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Where webhook deliveries go (the adapter's listener URL with its path).
    pub fn set_webhook(&self, url: &str) {
        *self.webhook.lock().unwrap() = Some(url.to_owned());
    }

    pub fn fail_next(&self, fault: Fault) {
        self.shared.lock().unwrap().faults.push_back(fault);
    }

    /// Records that `wa_id` wrote `seconds_ago` (opens or ages their service window) without
    /// a delivery.
    pub fn user_wrote(&self, wa_id: &str, seconds_ago: i64) {
        self.shared
            .lock()
            .unwrap()
            .last_user_message
            .insert(wa_id.to_owned(), now() - seconds_ago);
    }

    /// Registers `wamid` as a message `wa_id` sent (it can be marked read).
    pub fn known_inbound(&self, wa_id: &str, wamid: &str) {
        self.shared
            .lock()
            .unwrap()
            .inbound
            .insert(wamid.to_owned(), wa_id.to_owned());
    }

    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().unwrap().sent.clone()
    }

    pub fn sent_to(&self, wa_id: &str) -> Vec<Sent> {
        self.sent().into_iter().filter(|s| s.to == wa_id).collect()
    }

    pub fn find(&self, id: &str) -> Option<Sent> {
        self.sent().into_iter().find(|s| s.id == id)
    }

    /// How many sends a scripted fault refused.
    pub fn refused(&self) -> usize {
        self.shared.lock().unwrap().refused
    }

    pub fn typing_shown(&self) -> usize {
        self.shared.lock().unwrap().typing
    }

    pub fn read(&self) -> Vec<String> {
        self.shared.lock().unwrap().read.clone()
    }

    /// Waits (bounded) until `n` messages were sent in all.
    pub async fn wait_sent(&self, n: usize) -> Vec<Sent> {
        let mut watch = self
            .shared
            .lock()
            .unwrap()
            .sent_watch
            .as_ref()
            .unwrap()
            .subscribe();
        tokio::time::timeout(Duration::from_secs(60), watch.wait_for(|count| *count >= n))
            .await
            .unwrap_or_else(|_| panic!("{n} messages never sent; sent: {:?}", self.sent()))
            .unwrap();
        self.sent()
    }

    /// Media a user sends: stored for download, its id returned.
    pub fn add_user_media(&self, mime: &str, bytes: &[u8]) -> String {
        let mut shared = self.shared.lock().unwrap();
        shared.next += 1;
        let id = format!("{}", 7_000_000 + shared.next);
        shared
            .media
            .insert(id.clone(), (mime.to_owned(), bytes.to_vec()));
        id
    }

    fn next_wamid(&self) -> String {
        let mut shared = self.shared.lock().unwrap();
        shared.next += 1;
        format!("wamid.in.{}", shared.next)
    }

    /// The notification for `messages` from `wa_id` (Meta's documented shape).
    pub fn notification(wa_id: &str, messages: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"object": "whatsapp_business_account", "entry": [{
            "id": "102290129340398", "changes": [{"field": "messages", "value": {
                "messaging_product": "whatsapp",
                "metadata": {"display_phone_number": "15550783881", "phone_number_id": PHONE_NUMBER_ID},
                "contacts": [{"profile": {"name": "Test User"}, "wa_id": wa_id}],
                "messages": messages}}]}]}))
        .unwrap()
    }

    /// `wa_id` writes `text`: the delivery is posted (and re-posted until answered 200) in the
    /// background; returns the message id, which is also the delivery's handle.
    pub fn push_text(&self, wa_id: &str, text: &str) -> String {
        let wamid = self.next_wamid();
        let message = json!([{"from": wa_id, "id": wamid, "timestamp": now().to_string(),
            "type": "text", "text": {"body": text}}]);
        self.push_message(wa_id, &wamid, message);
        wamid
    }

    /// `wa_id` taps the reply button whose id is `data`.
    pub fn push_tap(&self, wa_id: &str, data: &str, title: &str) -> String {
        let wamid = self.next_wamid();
        let message = json!([{"from": wa_id, "id": wamid, "timestamp": now().to_string(),
            "type": "interactive", "interactive": {"type": "button_reply",
            "button_reply": {"id": data, "title": title}}}]);
        self.push_message(wa_id, &wamid, message);
        wamid
    }

    /// `wa_id` sends an image (stored with [`FakeMeta::add_user_media`]) with a caption.
    pub fn push_image(&self, wa_id: &str, media_id: &str, caption: &str) -> String {
        let wamid = self.next_wamid();
        let message = json!([{"from": wa_id, "id": wamid, "timestamp": now().to_string(),
            "type": "image", "image": {"id": media_id, "mime_type": "image/png",
            "sha256": "x", "caption": caption}}]);
        self.push_message(wa_id, &wamid, message);
        wamid
    }

    fn push_message(&self, wa_id: &str, wamid: &str, messages: Value) {
        self.user_wrote(wa_id, 0);
        self.known_inbound(wa_id, wamid);
        self.post(wamid, Self::notification(wa_id, messages), APP_SECRET);
    }

    /// Posts `body` signed with `secret` under the handle `id`, again after each answer that
    /// is not 200 (until a final 4xx other than 429, recorded too).
    pub fn post(&self, id: &str, body: Vec<u8>, secret: &str) {
        let (answered, id, signature, webhook) = (
            self.answered.clone(),
            id.to_owned(),
            hub_signature(secret, &body),
            self.webhook.clone(),
        );
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            loop {
                // Where the listener is now (a restarted daemon may listen elsewhere).
                let url = webhook.lock().unwrap().clone().expect("set_webhook first");
                let status = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-hub-signature-256", &signature)
                    .body(body.clone())
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(503);
                if status == 200 || (400..500).contains(&status) && status != 429 {
                    answered.lock().unwrap().insert(id, status);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }

    /// Posts `body` once with `signature` as given and returns the status (no retry).
    pub async fn post_once(&self, body: Vec<u8>, signature: Option<&str>) -> u16 {
        let url = self
            .webhook
            .lock()
            .unwrap()
            .clone()
            .expect("set_webhook first");
        let mut request = reqwest::Client::new().post(&url).body(body);
        if let Some(signature) = signature {
            request = request.header("x-hub-signature-256", signature);
        }
        request
            .send()
            .await
            .map(|r| r.status().as_u16())
            .unwrap_or(0)
    }

    /// The final status the delivery `id` got, once it has one.
    pub fn answered(&self, id: &str) -> Option<u16> {
        self.answered.lock().unwrap().get(id).copied()
    }

    /// Waits (bounded) for the final status of delivery `id`.
    pub async fn wait_answered(&self, id: &str) -> u16 {
        let wait = async {
            loop {
                if let Some(status) = self.answered(id) {
                    return status;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .unwrap_or_else(|_| panic!("delivery {id} was never answered"))
    }
}
