//! Telegram albums and split pastes in a cluster (issue 28, defect 3), through the real
//! binaries on one PostgreSQL database: the parts of one album, or the two halves of a paste
//! Telegram split, posted to different instances' webhooks (as a balancer spreads them)
//! still reach the model as one turn with one reply, and every journal row is finished.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use std::io::Cursor;

use base64::Engine;
use cluster_support::{ClusterRig, SECRET, USER, WAIT, images_in};
use serde_json::{Value, json};
use support::fake_model::Step;

const LEASE_SECONDS: f64 = 2.0;

/// A model that takes images, and long quiet periods (albums; the rest of a split paste), so
/// every part is seen within them however loaded the machine is.
const TAIL: &str = "model:\n  supports_vision: true\nplatforms:\n  telegram:\n    extra:\n      \
                    media_batch_delay_seconds: 3.0\n      text_batch_split_delay_seconds: 4.0\n";

/// A small PNG whose colour depends on `shade`, so the parts of an album differ.
fn png(shade: u8) -> Vec<u8> {
    let image =
        image::RgbImage::from_fn(8, 6, |x, y| image::Rgb([x as u8 * 30, y as u8 * 40, shade]));
    let mut out = Vec::new();
    image::DynamicImage::ImageRgb8(image)
        .write_to(&mut Cursor::new(&mut out), image::ImageFormat::Png)
        .unwrap();
    out
}

/// Posts `update` to instance `n`'s webhook; the status. A 503 (the adapter is not serving
/// yet) is retried within a bounded wait, as Telegram retries an unsuccessful delivery.
async fn post_to(rig: &ClusterRig, n: usize, update: Value) -> u16 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let status = reqwest::Client::new()
            .post(&rig.instances[n].webhook)
            .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
            .json(&update)
            .send()
            .await
            .expect("POST an update")
            .status()
            .as_u16();
        if status != 503 || tokio::time::Instant::now() >= deadline {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// One photo of album `group`, as update `update_id` (https://core.telegram.org/bots/api#message:
/// the parts of an album share `media_group_id`; the caption rides on one part).
fn album_part(
    update_id: i64,
    group: &str,
    file_id: &str,
    size: usize,
    caption: Option<&str>,
) -> Value {
    let mut message = json!({
        "message_id": 1000 + update_id, "date": 1_700_000_000,
        "chat": {"id": USER, "type": "private", "first_name": "Ada"},
        "from": {"id": USER, "is_bot": false, "first_name": "Ada"},
        "media_group_id": group,
        "photo": [{"file_id": file_id, "file_unique_id": format!("u-{file_id}"),
                   "width": 8, "height": 6, "file_size": size}]});
    if let Some(caption) = caption {
        message["caption"] = json!(caption);
    }
    json!({"update_id": update_id, "message": message})
}

fn text_update(update_id: i64, text: &str) -> Value {
    json!({"update_id": update_id, "message": {
        "message_id": 1000 + update_id, "date": 1_700_000_000,
        "chat": {"id": USER, "type": "private", "first_name": "Ada"},
        "from": {"id": USER, "is_bot": false, "first_name": "Ada"},
        "text": text}})
}

/// The text of a request's last user message (plain, or the text parts of a multi-part one).
fn last_user_text(body: &Value) -> String {
    let Some(message) = body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
    else {
        return String::new();
    };
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Waits (bounded) until every journal row is finished; how many rows there are.
async fn wait_journal_finished(rig: &ClusterRig) -> i64 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let open = rig
            .count("SELECT count(*) FROM hermesd_inbound_events WHERE state IN ('received', 'processing')")
            .await;
        if open == 0 {
            return rig
                .count("SELECT count(*) FROM hermesd_inbound_events")
                .await;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{open} journal rows never finished; logs: {:#?}",
            rig.all_logs()
        );
        let change = rig
            .telegram
            .next_change(std::time::Duration::from_millis(200));
        change.await;
    }
}

/// Three different photos the fake Telegram serves; their bytes and file ids.
fn three_photos(rig: &ClusterRig) -> (Vec<Vec<u8>>, Vec<String>) {
    let photos: Vec<Vec<u8>> = (0..3u8).map(|i| png(40 + i * 70)).collect();
    let files = photos
        .iter()
        .enumerate()
        .map(|(i, p)| {
            rig.telegram
                .add_file(&format!("photos/file_{i}.png"), p.clone())
        })
        .collect();
    (photos, files)
}

/// Posts the album of `photos` as updates `first`.. (captioned on its first part): parts one
/// and three to instance 0, part two to instance 1, at once, as a balancer spreads them.
async fn post_album(rig: &ClusterRig, first: i64, photos: &[Vec<u8>], files: &[String]) {
    let part = |n: usize| {
        let caption = (n == 0).then_some("what are these?");
        album_part(
            first + n as i64,
            "album-7",
            &files[n],
            photos[n].len(),
            caption,
        )
    };
    let statuses = tokio::join!(
        post_to(rig, 0, part(0)),
        post_to(rig, 1, part(1)),
        post_to(rig, 0, part(2)),
    );
    assert_eq!(statuses, (200, 200, 200));
}

fn encoded(photos: &[Vec<u8>]) -> Vec<String> {
    photos
        .iter()
        .map(|p| base64::engine::general_purpose::STANDARD.encode(p))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_album_spread_over_two_instances_is_one_turn_with_every_photo() {
    let rig = ClusterRig::start_with(2, LEASE_SECONDS, TAIL).await;
    rig.model.push(Step::text("three gradients"));
    let (photos, files) = three_photos(&rig);
    post_album(&rig, 1, &photos, &files).await;

    let sent = rig.wait_sent(1).await;
    assert_eq!(sent[0].text, "three gradients", "{sent:#?}");
    let rows = wait_journal_finished(&rig).await;
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 1, "one turn for the album: {requests:#?}");
    assert_eq!(
        images_in(&requests[0].body),
        encoded(&photos),
        "every photo, in the album's order"
    );
    assert!(last_user_text(&requests[0].body).contains("what are these?"));
    assert_eq!(rig.sent().len(), 1, "one reply: {:#?}", rig.sent());
    assert_eq!(rows, 3, "each part journaled on its own, all finished");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_album_sent_while_a_turn_runs_is_one_turn_after_it() {
    // Busy input is queued: the album waits for the running turn.
    let tail = format!("display:\n  busy_input_mode: queue\n{TAIL}");
    let rig = ClusterRig::start_with(2, LEASE_SECONDS, &tail).await;
    let (held, gate) = Step::gated("first answer");
    rig.model.push(held);
    rig.model.push(Step::text("three gradients"));
    assert_eq!(post_to(&rig, 0, text_update(1, "hello")).await, 200);
    rig.model.wait_for_requests(1, WAIT).await;
    let (photos, files) = three_photos(&rig);
    post_album(&rig, 2, &photos, &files).await;
    // The holder queued the album behind its turn (and said so once) before the turn ends.
    let sent = rig.wait_sent(1).await;
    assert!(sent[0].text.contains("Queued"), "{sent:#?}");
    gate.add_permits(1);

    let sent = rig.wait_sent(3).await;
    assert_eq!(sent[1].text, "first answer", "{sent:#?}");
    assert_eq!(sent[2].text, "three gradients", "{sent:#?}");
    let rows = wait_journal_finished(&rig).await;
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 2, "one turn for the album: {requests:#?}");
    assert_eq!(images_in(&requests[1].body), encoded(&photos));
    assert_eq!(rig.sent().len(), 3, "{:#?}", rig.sent());
    assert_eq!(rows, 4, "the text and each part, all finished");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_paste_spread_over_two_instances_is_one_turn_with_both_halves() {
    let rig = ClusterRig::start_with(2, LEASE_SECONDS, TAIL).await;
    rig.model.push(Step::text("read it all"));
    // Telegram cuts a long paste at 4096 characters and sends the rest as the next message.
    let head: String = "lorem ipsum ".repeat(342).chars().take(4096).collect();
    let tail = "and that is the end of the paste";
    // In Telegram's order: the first half is recorded before the second is posted.
    assert_eq!(post_to(&rig, 0, text_update(1, &head)).await, 200);
    assert_eq!(post_to(&rig, 1, text_update(2, tail)).await, 200);

    let sent = rig.wait_sent(1).await;
    assert_eq!(sent[0].text, "read it all", "{sent:#?}");
    let rows = wait_journal_finished(&rig).await;
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 1, "one turn for the paste: {requests:#?}");
    let text = last_user_text(&requests[0].body);
    assert!(
        text.contains(&format!("{head}\n{tail}")),
        "both halves, joined: {text}"
    );
    assert_eq!(rig.sent().len(), 1, "one reply: {:#?}", rig.sent());
    assert_eq!(rows, 2, "a row per half, both finished");
    rig.stop().await;
}
