//! `/model` on Telegram through the real `hermesd run` binary and the wire-level fake Bot
//! API: `--provider` picks which configured provider serves the chat (kept across a
//! restart, like the model itself), `--once` changes the model for one message only, and
//! `--global` edits config.yaml in place — comments, order and file mode kept.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, User};
use support::fake_model::FakeModel;

const CHAT: i64 = 9001;

/// Sends `text` and returns the bot's next reply to it.
async fn say(rig: &telegram_support::Rig, text: &str) -> String {
    let before = rig.sent_to(CHAT).len();
    rig.telegram
        .push_text(Chat::private(CHAT), User::new(CHAT, "Ada"), text);
    rig.wait_sent_to(CHAT, before + 1).await[before]
        .text
        .clone()
}

/// Sends `text` as a turn and returns which fake served it (`primary`: the rig's, the
/// `openai` provider; `custom`: the second) and the model it was asked for.
async fn turn(rig: &telegram_support::Rig, custom: &FakeModel, text: &str) -> (String, String) {
    let (primary_before, custom_before) = (rig.model.requests().len(), custom.requests().len());
    say(rig, text).await;
    let (primary, custom) = (rig.model.requests(), custom.requests());
    let (which, calls, before) = if custom.len() > custom_before {
        ("custom", custom, custom_before)
    } else {
        ("primary", primary, primary_before)
    };
    assert_eq!(calls.len(), before + 1, "one model call for {text:?}");
    let model = calls[before].body["model"].as_str().unwrap_or_default();
    (which.to_owned(), model.to_owned())
}

fn served(which: &str, model: &str) -> (String, String) {
    (which.to_owned(), model.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_once_and_global_switches() {
    // The primary (openai) is the rig's fake model; a second provider, `custom`, serves the
    // same model name and another one from a second fake.
    let custom = FakeModel::start().await;
    let tail = format!(
        "# the model block, hand written\n\
         model:\n  # our everyday model\n  default: fake-model   # keep it cheap\n  provider: openai\n\
         fallback_providers:\n\
         \x20 - provider: custom\n    model: fake-model\n    base_url: \"{url}\"\n    api_key: sk-custom\n\
         \x20 - provider: custom\n    model: other-model\n    base_url: \"{url}\"\n    api_key: sk-custom\n\
         # after the model\n\
         auxiliary:\n  title_generation:\n    enabled: false   # one model call per message\n",
        url = custom.base_url()
    );
    let mut rig = telegram_support::start("", &tail, &[]).await;
    let config = rig.home.path().join("config.yaml");

    assert_eq!(
        turn(&rig, &custom, "hello").await,
        served("primary", "fake-model")
    );

    let unknown = say(&rig, "/model --provider mistral").await;
    assert!(
        unknown.contains("not a configured provider") && unknown.contains("custom"),
        "{unknown}"
    );
    let switched = say(&rig, "/model --provider custom").await;
    assert!(
        switched.contains("now uses `fake-model`") && switched.contains("custom"),
        "{switched}"
    );
    assert_eq!(
        turn(&rig, &custom, "via custom").await,
        served("custom", "fake-model")
    );

    let once = say(&rig, "/model other-model --once").await;
    assert!(once.contains("next message"), "{once}");
    assert_eq!(
        turn(&rig, &custom, "just this one").await,
        served("custom", "other-model")
    );
    assert_eq!(
        turn(&rig, &custom, "and back").await,
        served("custom", "fake-model"),
        "after one turn the chat's own choice is back"
    );
    assert!(
        say(&rig, "/model --once --global").await.contains("--once"),
        "refused"
    );

    rig.stop_daemon().await;
    rig.start_daemon().await;
    assert_eq!(
        turn(&rig, &custom, "after the restart").await,
        served("custom", "fake-model"),
        "the provider choice survives a restart"
    );

    // --global: only the values change; the comments and everything else stay.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    let before = std::fs::read_to_string(&config).unwrap();
    let global = say(&rig, "/model other-model --global").await;
    assert!(global.contains("Saved as `model.default`"), "{global}");
    let after = std::fs::read_to_string(&config).unwrap();
    let expected = before
        .replace(
            "model:\n  # our everyday model\n  default: fake-model   # keep it cheap\n  provider: openai\n",
            &format!(
                "model:\n  base_url: {}\n  # our everyday model\n  default: other-model   # keep it cheap\n  provider: custom\n",
                custom.base_url()
            ),
        );
    assert_ne!(before, expected, "the fixture holds the model block");
    assert_eq!(after, expected);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "the file mode is kept");
    }
    rig.stop().await;
}
