//! Discord's platform rules through the real binary, with a fake that enforces them: an
//! interaction is acknowledged within 3 seconds even while the message loop is busy (a late
//! callback gets "Unknown interaction"); a long streamed reply plus typing in one channel
//! stays within the per-bucket rate limits (zero 429s, zero invalid requests); and typing
//! stops once Discord forbids it in a channel (each 403 counts toward the invalid-request
//! limit).

#[path = "discord_rig/mod.rs"]
mod rig;
mod support;

use std::time::Duration;

use fake_discord::{Fault, Incoming};
use rig::{INTERACTION_CALLBACK, Rig, TYPING};
use support::fake_model::{Reply, Step};

const HEARTBEAT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interaction_is_acknowledged_in_time_while_a_download_holds_the_message_loop() {
    let mut rig = Rig::new(HEARTBEAT).await;
    rig.launch().await;
    let dm = rig.dm(&rig.owner);
    // A slow CDN: the message's attachment takes longer than Discord's 3-second deadline.
    rig.fake.delay_attachments(Duration::from_secs(5));
    rig.fake.push_message(
        Incoming::new(&dm, &rig.owner, "see the file").with_attachment(
            "notes.txt",
            "text/plain",
            b"hello",
        ),
    );
    let command = rig.fake.push_slash_command(&dm, &rig.owner, "help", &[]);

    let acks = rig.fake.wait_for_calls(INTERACTION_CALLBACK, 1).await;
    assert_eq!(acks[0].body["type"], 5, "a deferred answer");
    assert_eq!(
        acks[0].status, 204,
        "acknowledged within 3 s: {:?}",
        acks[0]
    );
    let late = rig.fake.read(|s| s.interactions[&command].late_callbacks);
    assert_eq!(late, 0);
    // Both are answered in the end.
    let texts = rig.wait_texts(&dm, 2).await;
    assert!(
        texts.iter().any(|t| t.starts_with("echo: see the file")),
        "{texts:?}"
    );
    rig.stop().await;
}

/// `words` seeded words (the seed is printed).
fn long_reply(seed: u64, words: usize) -> String {
    println!("seed {seed}");
    let mut state = seed | 1;
    (0..words)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            [
                "river", "stone", "lamp", "cloud", "ember", "field", "harbor",
            ][(state % 7) as usize]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_streamed_reply_with_typing_stays_within_the_rate_limits() {
    let mut rig = Rig::new(HEARTBEAT).await;
    // Edits every 0.1 s: far above Discord's per-channel message buckets.
    rig.append_config("streaming:\n  enabled: true\n  edit_interval: 0.1\n  buffer_threshold: 5\n");
    rig.set_env("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false");
    rig.launch().await;
    let dm = rig.dm(&rig.owner);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(7);
    let text = long_reply(seed, 150);
    rig.model.push(Step::Slow {
        reply: Reply::text(text.clone()),
        delay: Duration::from_millis(40),
    });
    rig.say(&dm, &rig.owner, "tell me a long story");
    rig.fake
        .wait_for("the whole streamed reply in the channel", |s| {
            s.history
                .get(&dm)?
                .iter()
                .any(|m| m["content"].as_str() == Some(text.as_str()))
                .then_some(())
        })
        .await;
    let (calls, invalid) = rig
        .fake
        .read(|s| (s.calls.clone(), s.limits.invalid_requests));
    let edits = calls
        .iter()
        .filter(|c| c.route == "PATCH /channels/{id}/messages/{id}")
        .count();
    let typing = calls.iter().filter(|c| c.route == TYPING).count();
    assert!(edits >= 5, "a streamed reply ({edits} edits), seed {seed}");
    assert!(typing >= 1, "typing was shown");
    let limited: Vec<String> = calls
        .iter()
        .filter(|c| c.status == 429)
        .map(|c| format!("{} {}", c.method, c.path))
        .collect();
    assert!(limited.is_empty(), "429s: {limited:?}, seed {seed}");
    assert_eq!(invalid, 0, "no invalid requests");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_stops_once_discord_forbids_it() {
    let mut rig = Rig::new(HEARTBEAT).await;
    rig.set_env("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false");
    rig.launch().await;
    let dm = rig.dm(&rig.owner);
    rig.fake.fail_next(TYPING, Fault::Status(403), 100);
    // A turn of about five seconds: the typing loop would send every two.
    rig.model.push(Step::Slow {
        reply: Reply::text("done"),
        delay: Duration::from_secs(5),
    });
    rig.say(&dm, &rig.owner, "think hard");
    assert_eq!(rig.wait_texts(&dm, 1).await, ["done"]);
    let typing = rig.fake.calls_to(TYPING);
    assert_eq!(
        typing.len(),
        1,
        "one refused typing call, then none: {typing:?}"
    );
    assert_eq!(rig.fake.read(|s| s.limits.invalid_requests), 1);
    rig.stop().await;
}
