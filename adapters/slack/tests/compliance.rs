//! Slack passes the adapter contract's compliance suite; this is only the glue between the
//! suite and the fake Slack (Socket Mode in, Web API out).

mod support;

use std::time::Duration;

use fake_slack::{FakeSlack, Fault, events};
use hermes_adapter::testing::{ComplianceRig, WAIT};
use hermes_adapter::{Adapter, AdapterContext, AdapterError};
use hermes_slack::SlackAdapter;
use serde_json::{Value, json};
use support::{CHANNEL, DM, USER};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The suite sends into a thread: Slack shows typing only there.
const THREAD: &str = "1700000000.000001";

struct Rig {
    fake: FakeSlack,
    adapter: SlackAdapter,
    run: JoinHandle<Result<(), AdapterError>>,
    shutdown: CancellationToken,
    _cache: tempfile::TempDir,
}

/// The labels of every Block Kit button in `blocks`, in order.
fn button_labels(blocks: &Value, labels: &mut Vec<String>) {
    match blocks {
        Value::Array(items) => items.iter().for_each(|item| button_labels(item, labels)),
        Value::Object(object) if object.get("type") == Some(&json!("button")) => {
            labels.extend(object["text"]["text"].as_str().map(str::to_owned));
        }
        Value::Object(object) => object.values().for_each(|v| button_labels(v, labels)),
        _ => {}
    }
}

impl ComplianceRig for Rig {
    type Adapter = SlackAdapter;

    async fn start(ctx: AdapterContext) -> Self {
        let fake = FakeSlack::start().await;
        let cache = tempfile::tempdir().expect("a cache dir");
        let adapter = SlackAdapter::new(support::settings(&fake, json!({}), &[], cache.path()));
        let shutdown = ctx.shutdown.clone();
        let runner = adapter.clone();
        let run = tokio::spawn(async move { runner.run(ctx).await });
        fake.wait_for_hellos(1).await;
        Self {
            fake,
            adapter,
            run,
            shutdown,
            _cache: cache,
        }
    }

    fn adapter(&self) -> &SlackAdapter {
        &self.adapter
    }

    fn target(&self) -> (String, Option<String>) {
        (CHANNEL.into(), Some(THREAD.into()))
    }

    async fn push_message(&self, text: &str) -> String {
        let ts = self.fake.next_ts();
        self.fake
            .push_event(events::dm(DM, USER, text, &ts))
            .envelope_id
    }

    async fn push_undecodable(&self) -> String {
        // An events_api payload whose `event` is not an object.
        self.fake.push_raw_envelope(
            "events_api",
            json!({"type": "event_callback", "event_id": "EvBroken", "event": "garbled",
                "channel_id": DM, "user_id": USER}),
        )
    }

    /// Acked under its own envelope id or under one of the retries Slack made of it.
    fn acknowledged(&self, delivery: &str) -> Option<bool> {
        Some(self.fake.records().delivery_acked(delivery))
    }

    fn rate_limit_next_send(&self, retry_after: Duration) {
        let fault = Fault::RateLimited {
            retry_after_secs: retry_after.as_secs(),
        };
        self.fake.fail_next("chat.postMessage", fault);
    }

    fn shown_text(&self, message_id: &str) -> Option<String> {
        let message = self.fake.message(CHANNEL, message_id)?;
        Some(message["text"].as_str()?.to_owned())
    }

    fn shown_buttons(&self, message_id: &str) -> Vec<String> {
        // The blocks as posted: the fake's stored message keeps only the text.
        let mut labels = Vec::new();
        let posted = self.fake.posted();
        if let Some(blocks) = posted
            .iter()
            .find(|p| p.ts == message_id)
            .and_then(|p| p.blocks.as_ref())
        {
            button_labels(blocks, &mut labels);
        }
        labels
    }

    fn typing_shown(&self) -> usize {
        self.fake.calls("assistant.threads.setStatus").len()
    }

    async fn stop(self) {
        let unexpected = self.fake.records().unexpected;
        assert!(
            unexpected.is_empty(),
            "unexpected calls to the fake: {unexpected:?}"
        );
        self.shutdown.cancel();
        let result = tokio::time::timeout(WAIT, self.run)
            .await
            .expect("run stops on shutdown")
            .expect("no panic");
        result.expect("a clean stop");
    }
}

hermes_adapter::compliance_suite!(Rig);
