//! Attachments in a cluster (issue 28, defect 3), through the real binaries on one PostgreSQL
//! database: a photo posted to one instance's webhook, for a session another instance holds,
//! reaches the model on the holder (the journaled event carries Telegram's file reference,
//! not a path in the receiver's home); and a photo turn started on an instance that is then
//! killed is resumed by the survivor with the same image (the turn's images are shared).

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use std::time::Duration;

use base64::Engine;
use cluster_support::{ClusterRig, SECRET, USER, WAIT, images_in};
use serde_json::json;
use support::fake_model::Step;

/// Short leases keep failover quick.
const LEASE_SECONDS: f64 = 2.0;

/// Queued busy input (the photo waits for the running turn instead of interrupting it), and a
/// model that takes images.
const TAIL: &str = "display:\n  busy_input_mode: queue\nmodel:\n  supports_vision: true\n";

/// Posts a photo message (`file_id`, captioned) as update `update_id` to instance `n`'s
/// webhook, as Telegram sends one (https://core.telegram.org/bots/api#message: `photo` is the
/// sizes of one photo, `caption` its text).
async fn post_photo(rig: &ClusterRig, n: usize, update_id: i64, file_id: &str, size: usize) {
    let update = json!({"update_id": update_id, "message": {
        "message_id": 1000 + update_id, "date": 1_700_000_000,
        "chat": {"id": USER, "type": "private", "first_name": "Ada"},
        "from": {"id": USER, "is_bot": false, "first_name": "Ada"},
        "caption": "what is this?",
        "photo": [{"file_id": file_id, "file_unique_id": format!("u-{file_id}"),
                   "width": 8, "height": 6, "file_size": size}]}});
    let status = reqwest::Client::new()
        .post(&rig.instances[n].webhook)
        .header("X-Telegram-Bot-Api-Secret-Token", SECRET)
        .json(&update)
        .send()
        .await
        .expect("POST the photo update")
        .status();
    assert_eq!(status, 200);
}

/// The instance currently holding the session's lease (bounded wait until one does).
async fn holder_index(rig: &ClusterRig) -> usize {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let pool = sqlx::PgPool::connect(&rig.pg.url()).await.unwrap();
        let holder: Option<String> = sqlx::query_scalar(
            "SELECT holder FROM hermesd_leases WHERE scope = 'session' AND expires_at > now()",
        )
        .fetch_optional(&pool)
        .await
        .unwrap();
        pool.close().await;
        if let Some(holder) = holder {
            return rig
                .instances
                .iter()
                .position(|i| i.name == holder)
                .expect("a known instance");
        }
        assert!(tokio::time::Instant::now() < deadline, "no session lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_posted_to_one_instance_reaches_the_model_on_the_sessions_holder() {
    let rig = ClusterRig::start_with(2, LEASE_SECONDS, TAIL).await;
    let (held, gate) = Step::gated("first answer");
    rig.model.push(held);
    rig.model.push(Step::text("a small gradient"));
    assert_eq!(rig.post(0, 1, "hello").await, 200);
    rig.model.wait_for_requests(1, WAIT).await;
    let holder = holder_index(&rig).await;
    let other = 1 - holder;

    let photo = support::images::png();
    let file_id = rig.telegram.add_file("photos/file_1.png", photo.clone());
    post_photo(&rig, other, 2, &file_id, photo.len()).await;
    // The holder queued the photo behind its running turn (it said so) before that turn may
    // end, so the photo's turn is the holder's.
    let sent = rig.wait_sent(1).await;
    assert!(sent[0].text.contains("Queued"), "{sent:#?}");
    gate.add_permits(1);

    let sent = rig.wait_sent(3).await;
    assert_eq!(sent[1].text, "first answer", "{sent:#?}");
    assert_eq!(sent[2].text, "a small gradient", "{sent:#?}");
    let requests = rig.model.requests();
    assert_eq!(
        images_in(&requests[1].body),
        [base64::engine::general_purpose::STANDARD.encode(&photo)],
        "the holder fetched the photo the other instance received"
    );
    assert_eq!(
        rig.telegram.calls_of("getFile").len(),
        1,
        "fetched once, by the holder"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_turn_started_on_a_killed_instance_is_resumed_with_its_image() {
    let mut rig = ClusterRig::start_with(2, LEASE_SECONDS, TAIL).await;
    let (held, _gate) = Step::gated("never sent: its instance dies");
    rig.model.push(held);
    rig.model.push(Step::text("a small gradient, after all"));
    let photo = support::images::png();
    let file_id = rig.telegram.add_file("photos/file_1.png", photo.clone());
    post_photo(&rig, 0, 1, &file_id, photo.len()).await;
    rig.model.wait_for_requests(1, WAIT).await;
    let expected = [base64::engine::general_purpose::STANDARD.encode(&photo)];
    assert_eq!(images_in(&rig.model.requests()[0].body), expected);

    let victim = holder_index(&rig).await;
    rig.kill9(victim);
    let sent = rig.wait_sent(1).await;
    assert_eq!(sent[0].text, "a small gradient, after all");
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        images_in(&requests[1].body),
        expected,
        "the survivor resumed the turn with the photo"
    );
    assert_eq!(
        rig.count("SELECT count(*) FROM hermesd_shared_files WHERE name LIKE 'turn_images/%'")
            .await,
        0,
        "the turn's images are forgotten once it ended"
    );
    rig.stop().await;
}
