//! Several Socket Mode connections of one app: the fake hands each envelope to one of them
//! in turn, and retries an envelope whose ack never came (its connection died, or never
//! answered) on another connection, as Slack does
//! (<https://api.slack.com/apis/connections/socket-implement#connections>,
//! <https://api.slack.com/apis/socket-mode#acknowledge>).

use std::time::Duration;

use fake_slack::{FakeSlack, events};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Generous: the retry comes after Slack's 3 s ack deadline on a loaded machine.
const BOUND: Duration = Duration::from_secs(30);

/// Opens a socket as a client would (the ticket URL `apps.connections.open` hands out) and
/// reads its `hello`.
async fn open(fake: &FakeSlack, ticket: u32) -> Socket {
    let url = fake
        .api_base_url()
        .replace("http://", "ws://")
        .replace("/api", &format!("/link/?ticket={ticket}"));
    let (mut socket, _) = tokio_tungstenite::connect_async(url)
        .await
        .expect("connect");
    assert_eq!(next_frame(&mut socket).await["type"], "hello");
    socket
}

/// The next JSON text frame, bounded.
async fn next_frame(socket: &mut Socket) -> Value {
    tokio::time::timeout(BOUND, async {
        loop {
            match socket.next().await {
                Some(Ok(Message::Text(text))) => return serde_json::from_str(&text).unwrap(),
                Some(Ok(_)) => {}
                other => panic!("socket ended: {other:?}"),
            }
        }
    })
    .await
    .expect("a frame within the bound")
}

async fn ack(socket: &mut Socket, frame: &Value) {
    let ack = json!({"envelope_id": frame["envelope_id"]}).to_string();
    socket.send(Message::Text(ack.into())).await.unwrap();
}

fn push(fake: &FakeSlack, text: &str) -> String {
    let ts = fake.next_ts();
    fake.push_event(events::dm("D1", "U1", text, &ts))
        .envelope_id
}

#[tokio::test]
async fn envelopes_are_spread_over_the_open_connections() {
    let fake = FakeSlack::start().await;
    let mut a = open(&fake, 1).await;
    let mut b = open(&fake, 2).await;
    fake.wait_for_hellos(2).await;
    let pushed: Vec<String> = (0..4).map(|i| push(&fake, &format!("m{i}"))).collect();
    let (mut on_a, mut on_b) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        let frame = next_frame(&mut a).await;
        ack(&mut a, &frame).await;
        on_a.push(frame["envelope_id"].as_str().unwrap().to_owned());
        let frame = next_frame(&mut b).await;
        ack(&mut b, &frame).await;
        on_b.push(frame["envelope_id"].as_str().unwrap().to_owned());
    }
    let mut all: Vec<String> = on_a.iter().chain(&on_b).cloned().collect();
    all.sort();
    assert_eq!(all, pushed, "each envelope went to exactly one connection");
    fake.wait_until_all_acked().await;
}

/// Two open connections and one envelope pushed and not acked: (the envelope as
/// received, the socket that took it, the other socket).
async fn one_envelope_over_two_sockets(fake: &FakeSlack, text: &str) -> (Value, Socket, Socket) {
    let mut a = open(fake, 1).await;
    let mut b = open(fake, 2).await;
    fake.wait_for_hellos(2).await;
    let pushed = push(fake, text);
    let (frame, on_a) = tokio::select! {
        frame = next_frame(&mut a) => (frame, true),
        frame = next_frame(&mut b) => (frame, false),
    };
    assert_eq!(frame["envelope_id"], pushed.as_str());
    if on_a { (frame, a, b) } else { (frame, b, a) }
}

#[tokio::test]
async fn an_envelope_whose_connection_dies_before_the_ack_comes_again_on_another() {
    let fake = FakeSlack::start().await;
    let (missed, took, mut survivor) = one_envelope_over_two_sockets(&fake, "lost").await;
    // The connection that took it dies without acking (a killed process).
    drop(took);
    let retry = next_frame(&mut survivor).await;
    assert_eq!(retry["payload"], missed["payload"]);
    assert_eq!(retry["retry_attempt"], 1);
    assert_eq!(retry["retry_reason"], "http_timeout");
    ack(&mut survivor, &retry).await;
    fake.wait_until_all_acked().await;
}

#[tokio::test]
async fn an_envelope_a_live_connection_never_acks_is_retried_on_another() {
    let fake = FakeSlack::start().await;
    // The socket that took it stays open and silent; the retry goes elsewhere.
    let (missed, _silent, mut other) = one_envelope_over_two_sockets(&fake, "stuck").await;
    let retry = next_frame(&mut other).await;
    assert_eq!(retry["payload"], missed["payload"]);
    assert_eq!(retry["retry_attempt"], 1);
    ack(&mut other, &retry).await;
    fake.wait_until_all_acked().await;
}

#[tokio::test]
async fn a_duplicate_after_a_late_ack_goes_to_another_connection() {
    let fake = FakeSlack::start().await;
    let (first, mut took, mut other) = one_envelope_over_two_sockets(&fake, "twice").await;
    ack(&mut took, &first).await;
    // The next envelope goes to the other socket, so the turn is back at the first one's.
    push(&fake, "in between");
    let between = next_frame(&mut other).await;
    ack(&mut other, &between).await;
    let id = first["envelope_id"].as_str().unwrap().to_owned();
    fake.wait_until_all_acked().await;
    fake.redeliver_envelope(&id, "http_timeout")
        .expect("a known envelope");
    let copy = next_frame(&mut other).await;
    assert_eq!(copy["payload"], first["payload"]);
    assert_eq!(copy["retry_attempt"], 1);
    ack(&mut other, &copy).await;
    fake.wait_until_all_acked().await;
}
