//! Inbound attachments: recorded as references before any download (the update is
//! acknowledged first), then getFile + download into the cache directory when the core asks
//! (`fetch_pending_media`, just before the turn), the size cap (declared and actual), and the
//! MIME types handed to the core.

mod support;

use fake_telegram::{Attachment, Chat, FakeTelegram, MessageSpec, User};
use hermes_adapter::{Adapter as _, MessageType};
use serde_json::json;
use support::{TestCore, settings, start};

fn alice() -> User {
    User::new(42, "Alice")
}

#[tokio::test]
async fn photos_documents_voice_and_audio_are_downloaded_into_the_cache() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let cache = tempfile::tempdir().unwrap();
    let running = start(settings(&fake, json!({"cache_dir": cache.path()})), &core);
    let cases = [
        (
            Attachment::Photo {
                bytes: vec![7; 500],
            },
            MessageType::Photo,
            "image/jpeg",
            "images",
        ),
        (
            Attachment::Document {
                bytes: vec![8; 300],
                file_name: "notes.txt".into(),
                mime_type: "text/plain".into(),
            },
            MessageType::Document,
            "text/plain",
            "documents",
        ),
        (
            Attachment::Voice {
                bytes: vec![9; 200],
            },
            MessageType::Voice,
            "audio/ogg",
            "audio",
        ),
        (
            Attachment::Audio {
                bytes: vec![10; 100],
                mime_type: "audio/mpeg".into(),
            },
            MessageType::Audio,
            "audio/mpeg",
            "audio",
        ),
    ];
    for (attachment, kind, mime, subdir) in cases {
        let expected = match &attachment {
            Attachment::Photo { bytes } | Attachment::Voice { bytes } => bytes.clone(),
            Attachment::Document { bytes, .. } | Attachment::Audio { bytes, .. } => bytes.clone(),
        };
        fake.push_message(
            MessageSpec::text(Chat::private(42), alice(), "look").with_attachment(attachment),
        );
        let mut event = core.next_event().await;
        assert_eq!(event.message_type, kind);
        assert_eq!(event.text, "look", "the caption is the text");
        assert!(event.media_paths.is_empty(), "recorded before any download");
        assert_eq!(event.pending_media.len(), 1);
        running.adapter.fetch_pending_media(&mut event).await;
        assert!(event.pending_media.is_empty());
        assert_eq!(event.media_types, vec![mime.to_owned()]);
        let path = std::path::Path::new(&event.media_paths[0]);
        assert!(path.starts_with(cache.path().join(subdir)), "{path:?}");
        assert_eq!(std::fs::read(path).unwrap(), expected);
    }
    running.stop().await.unwrap();
}

#[tokio::test]
async fn attachments_over_the_cap_are_refused_and_the_user_is_told() {
    let fake = FakeTelegram::start().await;
    let mut core = TestCore::new();
    let cache = tempfile::tempdir().unwrap();
    let extra = json!({"cache_dir": cache.path(), "max_inbound_media_bytes": 1000});
    let running = start(settings(&fake, extra), &core);
    let document = |bytes: usize| Attachment::Document {
        bytes: vec![1; bytes],
        file_name: "big.bin".into(),
        mime_type: "application/octet-stream".into(),
    };

    // Declared over the cap: refused before any download.
    fake.push_message(
        MessageSpec::text(Chat::private(42), alice(), "big").with_attachment(document(2000)),
    );
    let event = core.next_event().await;
    assert!(event.media_paths.is_empty() && event.pending_media.is_empty());
    assert!(
        event
            .text
            .starts_with("big\n[The attached file was not saved"),
        "{}",
        event.text
    );
    assert!(fake.calls_of("getFile").is_empty());

    // Declared small but actually large: the streaming cap stops it and removes the file.
    let mut lying =
        MessageSpec::text(Chat::private(42), alice(), "").with_attachment(document(5000));
    lying.declared_size = Some(10);
    fake.push_message(lying);
    let mut event = core.next_event().await;
    running.adapter.fetch_pending_media(&mut event).await;
    assert!(event.media_paths.is_empty() && event.pending_media.is_empty());
    assert!(event.text.contains("cap"), "{}", event.text);
    let leftovers: Vec<_> = walk(cache.path());
    assert!(
        leftovers.is_empty(),
        "partial download removed: {leftovers:?}"
    );
    running.stop().await.unwrap();
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
