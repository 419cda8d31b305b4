//! Tokens never appear in Debug output, errors or send results.

mod support;

use fake_slack::{FakeSlack, FakeTokens, Fault};
use hermes_adapter::{Adapter, Outbound, OutboundKind};
use hermes_slack::SlackAdapter;
use serde_json::json;
use support::{CHANNEL, context, settings};

const BOT: &str = "xoxb-very-secret-bot-token-4242";
const APP: &str = "xapp-very-secret-app-token-4242";

fn assert_clean(what: &str, text: &str) {
    assert!(
        !text.contains(BOT) && !text.contains(APP) && !text.contains("very-secret"),
        "{what} shows a token: {text}"
    );
}

#[tokio::test]
async fn tokens_never_show_in_debug_errors_or_results() {
    let fake = FakeSlack::start_with(FakeTokens {
        bot: BOT.into(),
        app: APP.into(),
    })
    .await;
    let cache = tempfile::tempdir().unwrap();
    let settings = settings(&fake, json!({}), &[], cache.path());
    assert_clean("Settings Debug", &format!("{settings:?}"));
    let adapter = SlackAdapter::new(settings.clone());
    assert_clean("adapter Debug", &format!("{adapter:?}"));
    assert_clean("fake tokens Debug", &format!("{:?}", fake.tokens()));

    fake.fail_next("chat.postMessage", Fault::Error("invalid_auth".into()));
    let outbound = Outbound {
        chat_id: CHANNEL.into(),
        thread_id: None,
        kind: OutboundKind::Text {
            text: "x".into(),
            reply_to: None,
            plain: false,
        },
    };
    let result = adapter.send(outbound).await;
    assert!(!result.is_ok());
    assert_clean("send result", &format!("{result:?}"));

    // A revoked app token: the fatal error names the variable, not the value.
    let mut revoked = settings;
    revoked.app_token = hermes_slack::Secret::new("xapp-very-secret-revoked");
    let (ctx, _inbound) = context();
    let error = SlackAdapter::new(revoked).run(ctx).await.unwrap_err();
    assert_clean("run error", &format!("{error} {error:?}"));
    assert!(error.to_string().contains("SLACK_APP_TOKEN"), "{error}");

    let errors = hermes_slack::Settings::from_config(
        BOT,
        "xoxb-very-secret-wrong-kind",
        &json!({"api_base_url": "ftp://x"})
            .as_object()
            .cloned()
            .unwrap(),
        &Default::default(),
    )
    .unwrap_err();
    assert_clean("settings errors", &errors.join("\n"));
}
