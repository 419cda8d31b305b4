//! `/model` on Telegram through the real `hermesd run` binary and the wire-level fake Bot
//! API: `--provider` picks which configured provider serves the chat (kept across a
//! restart, like the model itself), `--once` changes the model for one message only, and
//! `--global` edits config.yaml in place — comments, order and file mode kept. A name
//! config.yaml does not configure is looked up in the provider's models listing (the fake's
//! `GET /v1/models`): listed, it switches (or, with `--once`, serves one message) and
//! survives a restart; a typo is corrected; an
//! unlisted name, or any name when a custom server's listing fails, is refused; an
//! Anthropic-protocol server whose listing fails takes the name with a warning; and a
//! group guest's unknown name is refused without a fetch.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, MessageSpec, User};
use support::fake_model::FakeModel;

const CHAT: i64 = 9001;

/// Sends `text` and returns the bot's next reply to it, without MarkdownV2's escapes.
async fn say(rig: &telegram_support::Rig, text: &str) -> String {
    let before = rig.sent_to(CHAT).len();
    rig.telegram
        .push_text(Chat::private(CHAT), User::new(CHAT, "Ada"), text);
    unescape(&rig.wait_sent_to(CHAT, before + 1).await[before].text)
}

/// The text as the user reads it: Telegram's MarkdownV2 escapes (`\(`, `\.`) dropped.
fn unescape(text: &str) -> String {
    text.replace('\\', "")
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_provider_lists_switches_and_others_are_refused() {
    // The primary (openai, chat completions) is the rig's fake; `custom` is an
    // Anthropic-protocol proxy on a second fake without a models listing.
    let proxy = FakeModel::start().await;
    let tail = format!(
        "fallback_providers:\n\
         \x20 - provider: custom\n    model: fake-model\n    base_url: \"{url}\"\n    api_key: sk-proxy-key-4471\n    api_mode: anthropic_messages\n\
         auxiliary:\n  title_generation:\n    enabled: false\n",
        url = proxy.base_url()
    );
    let mut rig = telegram_support::start("", &tail, &[]).await;
    rig.model
        .set_models(Some(&["fake-model", "listed-model", "gpt-4o-mini"]));

    let switched = say(&rig, "/model listed-model").await;
    assert!(
        switched.contains("now uses `listed-model` (openai), was `fake-model`"),
        "{switched}"
    );
    let listings = rig.model.models_requests();
    assert_eq!(listings.len(), 1, "one listing fetch");
    assert_eq!(listings[0].path, "/v1/models");
    assert_eq!(listings[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        turn(&rig, &proxy, "hello").await,
        served("primary", "listed-model"),
        "the next model request carries the listed name"
    );

    // A typo close to a listed name takes that name; an unlisted one is refused with the
    // closest listed names. Both come from the cached listing.
    let corrected = say(&rig, "/model listed-modle").await;
    assert!(
        corrected.contains("`listed-modle` is not in `openai`'s list of models; `listed-model` is"),
        "{corrected}"
    );
    let refused = say(&rig, "/model gpt-4o-maxi").await;
    assert!(
        refused.contains("`gpt-4o-maxi` is neither configured nor in `openai`'s list of models")
            && refused.contains("Similar listed models: `gpt-4o-mini`")
            && refused.contains("Configured models: `fake-model`"),
        "{refused}"
    );
    assert_eq!(
        rig.model.models_requests().len(),
        1,
        "served from the cache"
    );
    assert_eq!(
        turn(&rig, &proxy, "still listed").await,
        served("primary", "listed-model"),
        "a refusal changes nothing"
    );
    // `--once` takes a listed name for one message.
    let once = say(&rig, "/model gpt-4o-mini --once").await;
    assert!(
        once.contains("next message goes to `gpt-4o-mini`"),
        "{once}"
    );
    assert_eq!(
        turn(&rig, &proxy, "just once").await,
        served("primary", "gpt-4o-mini")
    );
    assert_eq!(
        turn(&rig, &proxy, "and back").await,
        served("primary", "listed-model")
    );
    assert_eq!(
        rig.model.models_requests().len(),
        1,
        "still the cached listing"
    );

    // An Anthropic-protocol server without a listing takes the name, saying it is unverified;
    // the listing was asked for with Anthropic's headers.
    let unverified = say(&rig, "/model claude-hidden --provider custom").await;
    assert!(
        unverified.contains("now uses `claude-hidden` (custom)")
            && unverified.contains("could not be fetched (the server answered HTTP 404)")
            && unverified.contains("not verified"),
        "{unverified}"
    );
    let asked = proxy.models_requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].path, "/v1/models?limit=1000");
    assert_eq!(asked[0].header("x-api-key"), Some("sk-proxy-key-4471"));
    assert_eq!(asked[0].header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(asked[0].header("authorization"), None);
    assert_eq!(
        turn(&rig, &proxy, "via the proxy").await,
        served("custom", "claude-hidden")
    );

    let back = say(&rig, "/model listed-model --provider openai").await;
    assert!(back.contains("now uses `listed-model` (openai)"), "{back}");
    rig.stop_daemon().await;
    rig.start_daemon().await;
    assert_eq!(
        turn(&rig, &proxy, "after the restart").await,
        served("primary", "listed-model"),
        "a listed choice survives a restart like a configured one"
    );

    // A custom server whose listing fails cannot vouch for a name: refused, nothing changes.
    rig.model.set_models(None);
    let unreachable = say(&rig, "/model brand-new-model").await;
    assert!(
        unreachable.contains("`brand-new-model` is not a configured model, and `openai`'s list of models could not be fetched")
            && unreachable.contains("HTTP 404")
            && unreachable.contains("must list a model"),
        "{unreachable}"
    );
    assert_eq!(
        rig.model.models_requests().len(),
        2,
        "a new daemon fetches anew"
    );
    assert_eq!(
        turn(&rig, &proxy, "unchanged").await,
        served("primary", "listed-model")
    );
    let logs = rig.stop().await.join("\n");
    assert!(
        !logs.contains("sk-proxy-key-4471"),
        "the key never reaches the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_guest_cannot_make_the_daemon_fetch_a_listing() {
    const GROUP: i64 = -1001;
    let rig = telegram_support::start(
        "",
        "group_sessions_per_user: false\nauxiliary:\n  title_generation:\n    enabled: false\n",
        &[
            ("TELEGRAM_ALLOWED_USERS", "111"),
            ("TELEGRAM_GROUP_ALLOWED_CHATS", "-1001"),
        ],
    )
    .await;
    rig.model.set_models(Some(&["fake-model", "listed-model"]));
    let say_in_group = |user: User, text: &'static str| {
        let rig = &rig;
        async move {
            let before = rig.sent_to(GROUP).len();
            rig.telegram
                .push_message(MessageSpec::text(Chat::group(GROUP), user, text));
            unescape(&rig.wait_sent_to(GROUP, before + 1).await[before].text)
        }
    };
    let guest = say_in_group(User::new(333, "Guest"), "/model listed-model").await;
    assert!(
        guest.contains("Guests of this chat can switch only between the configured ones"),
        "{guest}"
    );
    assert!(
        rig.model.models_requests().is_empty(),
        "no fetch for a guest"
    );
    // The configured models stay open to the guest, as before.
    let configured = say_in_group(User::new(333, "Guest"), "/model fake-model").await;
    assert!(configured.contains("now uses `fake-model`"), "{configured}");
    assert!(rig.model.models_requests().is_empty());
    // The owner's same command does fetch and switch.
    let owner = say_in_group(User::new(111, "Owner"), "/model listed-model").await;
    assert!(owner.contains("now uses `listed-model`"), "{owner}");
    assert_eq!(rig.model.models_requests().len(), 1);
    rig.stop().await;
}
