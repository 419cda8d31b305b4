//! `MEDIA:` tags in a reply through the real binary: the tags leave the visible text, an
//! ordinary file arrives as a native upload (`sendPhoto` for an image, `sendDocument` for a
//! PDF), while a tag naming a Hermes secret (`auth.json` in the home) or a credential
//! directory (`~/.ssh`) is refused, logged and never uploaded. A reply that is only a tag
//! sends the file and no empty text.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, User};
use support::fake_model::Step;
use telegram_support::start;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_tags_become_uploads_and_secrets_are_refused() {
    let rig = start("", "", &[]).await;
    let files = tempfile::tempdir().unwrap();
    let chart = files.path().join("chart.png");
    let report = files.path().join("report.pdf");
    std::fs::write(&chart, vec![7u8; 2048]).unwrap();
    std::fs::write(&report, vec![8u8; 1000]).unwrap();
    let secret = rig.home.path().join("auth.json");
    std::fs::write(&secret, r#"{"token": "very-secret"}"#).unwrap();
    let ssh = rig.home.path().join("user/.ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("key.txt"), "private").unwrap();

    rig.model.push(Step::text(format!(
        "Here is your chart\nMEDIA:{}\nMEDIA:{}\nMEDIA:~/.ssh/key.txt\nDone",
        chart.display(),
        secret.display()
    )));
    rig.telegram
        .push_text(Chat::private(7), User::new(7, "Bob"), "draw it");
    let sent = rig.wait_sent_to(7, 1).await;
    assert_eq!(sent[0].text.replace('\\', ""), "Here is your chart\nDone");
    let photo = rig
        .wait_for("the chart uploaded", |rig| {
            rig.telegram.calls_of("sendPhoto").into_iter().next()
        })
        .await;
    assert_eq!(photo.files.len(), 1);
    assert_eq!(photo.files[0].file_name.as_deref(), Some("chart.png"));
    assert_eq!(photo.files[0].bytes, 2048);
    rig.daemon()
        .wait_for_line(
            "MEDIA tag not delivered",
            std::time::Duration::from_secs(30),
        )
        .expect("the refused tags are logged");

    // A reply that is only a tag: the file, and no text message.
    rig.model
        .push(Step::text(format!("MEDIA:{}", report.display())));
    rig.telegram
        .push_text(Chat::private(7), User::new(7, "Bob"), "the report please");
    let document = rig
        .wait_for("the report uploaded", |rig| {
            rig.telegram.calls_of("sendDocument").into_iter().next()
        })
        .await;
    assert_eq!(document.files[0].file_name.as_deref(), Some("report.pdf"));
    assert_eq!(document.files[0].bytes, 1000);

    assert_eq!(
        rig.telegram.calls_of("sendDocument").len(),
        1,
        "only the report"
    );
    assert_eq!(
        rig.telegram.calls_of("sendPhoto").len(),
        1,
        "only the chart"
    );
    assert_eq!(rig.sent_to(7).len(), 1, "no text for a tag-only reply");
    let logs = rig.stop().await;
    let refused: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("MEDIA tag not delivered"))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:#?}");
    assert!(refused.iter().any(|l| l.contains("a Hermes secret")));
    assert!(refused.iter().any(|l| l.contains("a credential directory")));
}
