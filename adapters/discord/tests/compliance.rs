//! Discord passes the adapter contract's compliance suite; this is only the glue between the
//! suite and the fake Discord. Discord has no acknowledgement and never redelivers: the
//! adapter offers a failed hand-over again itself, which the suite checks by event id.

mod support;

use std::time::Duration;

use fake_discord::{FakeDiscord, FakeUser, Fault, Incoming};
use hermes_adapter::testing::{ComplianceRig, WAIT};
use hermes_adapter::{Adapter, AdapterContext, AdapterError};
use hermes_discord::DiscordAdapter;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

struct Rig {
    fake: FakeDiscord,
    adapter: DiscordAdapter,
    task: JoinHandle<Result<(), AdapterError>>,
    shutdown: CancellationToken,
    alice: FakeUser,
    dm: String,
    _cache: tempfile::TempDir,
}

impl Rig {
    /// The bot's message `message_id` as the fake stores it.
    fn stored(&self, message_id: &str) -> Option<Value> {
        self.fake.read(|s| {
            s.history
                .get(&self.dm)?
                .iter()
                .find(|m| m["id"] == message_id)
                .cloned()
        })
    }
}

impl ComplianceRig for Rig {
    type Adapter = DiscordAdapter;

    async fn start(ctx: AdapterContext) -> Self {
        let fake = FakeDiscord::start(support::TOKEN, Duration::from_secs(30)).await;
        let cache = tempfile::tempdir().expect("a cache dir");
        let adapter = DiscordAdapter::new(support::settings(&fake, json!({}), &[], cache.path()));
        let shutdown = ctx.shutdown.clone();
        let runner = adapter.clone();
        let task = tokio::spawn(async move { runner.run(ctx).await });
        fake.wait_for_frames(2, 1).await;
        let alice = fake.new_user("alice", false, &[]);
        let dm = fake.add_dm_channel(&alice);
        Self {
            fake,
            adapter,
            task,
            shutdown,
            alice,
            dm,
            _cache: cache,
        }
    }

    fn adapter(&self) -> &DiscordAdapter {
        &self.adapter
    }

    fn target(&self) -> (String, Option<String>) {
        (self.dm.clone(), None)
    }

    async fn push_message(&self, text: &str) -> String {
        self.fake
            .push_message(Incoming::new(&self.dm, &self.alice, text))
    }

    async fn push_undecodable(&self) -> String {
        // `content` is documented as a string.
        self.fake.dispatch(
            "MESSAGE_CREATE",
            json!({"id": "777", "channel_id": self.dm, "content": 7, "type": 0,
                "author": {"id": self.alice.id, "username": self.alice.name}}),
        );
        "777".into()
    }

    fn acknowledged(&self, _delivery: &str) -> Option<bool> {
        None
    }

    fn rate_limit_next_send(&self, retry_after: Duration) {
        let fault = Fault::RateLimited {
            retry_after: retry_after.as_secs_f64(),
        };
        self.fake
            .fail_next("POST /channels/{id}/messages", fault, 1);
    }

    fn shown_text(&self, message_id: &str) -> Option<String> {
        Some(self.stored(message_id)?["content"].as_str()?.to_owned())
    }

    fn shown_buttons(&self, message_id: &str) -> Vec<String> {
        let rows = self
            .stored(message_id)
            .and_then(|m| m["components"].as_array().cloned())
            .unwrap_or_default();
        rows.iter()
            .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
            .filter_map(|button| button["label"].as_str().map(str::to_owned))
            .collect()
    }

    fn typing_shown(&self) -> usize {
        self.fake.calls_to("POST /channels/{id}/typing").len()
    }

    async fn stop(self) {
        let unrouted = self.fake.read(|s| s.unrouted.clone());
        assert!(
            unrouted.is_empty(),
            "calls the fake does not serve: {unrouted:?}"
        );
        self.shutdown.cancel();
        let result = tokio::time::timeout(WAIT, self.task)
            .await
            .expect("run stops")
            .expect("no panic");
        result.expect("a clean stop");
    }
}

hermes_adapter::compliance_suite!(Rig);
