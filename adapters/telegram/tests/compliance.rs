//! Telegram passes the adapter contract's compliance suite; this is only the glue between
//! the suite and the fake Bot API.

mod support;

use std::time::Duration;

use fake_telegram::{Chat, FakeTelegram, Fault, User};
use hermes_adapter::AdapterContext;
use hermes_adapter::testing::ComplianceRig;
use hermes_telegram::TelegramAdapter;
use serde_json::{Value, json};

const CHAT: i64 = 42;

struct Rig {
    fake: FakeTelegram,
    running: support::Running,
}

impl ComplianceRig for Rig {
    type Adapter = TelegramAdapter;

    async fn start(ctx: AdapterContext) -> Self {
        let fake = FakeTelegram::start().await;
        let running = support::start_with_ctx(support::settings(&fake, json!({})), ctx);
        support::wait_backlog_taken(&fake).await;
        Self { fake, running }
    }

    fn adapter(&self) -> &TelegramAdapter {
        &self.running.adapter
    }

    fn target(&self) -> (String, Option<String>) {
        (CHAT.to_string(), None)
    }

    async fn push_message(&self, text: &str) -> String {
        let alice = User::new(CHAT, "Alice");
        self.fake
            .push_text(Chat::private(CHAT), alice, text)
            .to_string()
    }

    async fn push_undecodable(&self) -> String {
        // The Bot API documents message_id as an integer.
        let update = json!({"message": {"message_id": "not-a-number", "date": 0,
            "chat": {"id": CHAT, "type": "private"}, "from": {"id": CHAT, "is_bot": false,
            "first_name": "Alice"}, "text": "hello"}});
        self.fake.push_update(update).to_string()
    }

    /// An update is acknowledged by a poll whose offset passes it.
    fn acknowledged(&self, delivery: &str) -> Option<bool> {
        Some(self.fake.confirmed_offset() > delivery.parse::<i64>().expect("an update id"))
    }

    /// One more poll is where an early offset would show; an adapter still waiting for the
    /// core (a dead letter) may not poll at all, which is as good.
    async fn settle(&self) {
        let polls = self.fake.calls_of("getUpdates").len();
        let one_poll = Duration::from_millis(1500);
        let _ = self
            .fake
            .wait_for_calls("getUpdates", polls + 1, one_poll)
            .await;
    }

    fn rate_limit_next_send(&self, retry_after: Duration) {
        let fault = Fault::TooManyRequests {
            retry_after: retry_after.as_secs(),
        };
        self.fake.fail_next("sendMessage", fault, 1);
    }

    fn shown_text(&self, message_id: &str) -> Option<String> {
        let message = self.fake.message(CHAT, message_id.parse().ok()?)?;
        Some(message.text)
    }

    fn shown_buttons(&self, message_id: &str) -> Vec<String> {
        let markup = message_id
            .parse()
            .ok()
            .and_then(|id| self.fake.message(CHAT, id))
            .and_then(|m| m.reply_markup)
            .unwrap_or(Value::Null);
        let rows = markup["inline_keyboard"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        rows.iter()
            .flat_map(|row| row.as_array().cloned().unwrap_or_default())
            .filter_map(|button| button["text"].as_str().map(str::to_owned))
            .collect()
    }

    fn typing_shown(&self) -> usize {
        self.fake.calls_of("sendChatAction").len()
    }

    async fn stop(self) {
        self.running.stop().await.expect("a clean stop");
    }
}

hermes_adapter::compliance_suite!(Rig);
