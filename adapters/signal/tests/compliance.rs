//! The Signal adapter passes the adapter contract's compliance suite against the fake
//! signal-cli daemon. signal-cli has no acknowledgement and never redelivers, so the rig
//! answers `None` for acknowledgements and the suite checks that the adapter offers a failed
//! hand-over again itself.

use std::time::Duration;

use fake_signal::FakeSignal;
use hermes_adapter::testing::ComplianceRig;
use hermes_adapter::{Adapter, AdapterContext, AdapterError};
use hermes_signal::{Settings, SignalAdapter};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const BOT: &str = "+15550000001";
const USER: &str = "+15551112222";

struct Rig {
    fake: FakeSignal,
    adapter: SignalAdapter,
    run: JoinHandle<Result<(), AdapterError>>,
    shutdown: CancellationToken,
    _cache: tempfile::TempDir,
}

fn timestamp_of(message_id: &str) -> Option<i64> {
    message_id.split_once(':')?.0.parse().ok()
}

impl ComplianceRig for Rig {
    type Adapter = SignalAdapter;

    async fn start(ctx: AdapterContext) -> Self {
        let fake = FakeSignal::start(BOT).await;
        let cache = tempfile::tempdir().unwrap();
        let extra = serde_json::json!({"http_url": fake.url(), "account": BOT,
            "cache_dir": cache.path()});
        let settings =
            Settings::from_config(extra.as_object().unwrap(), &Default::default()).unwrap();
        let adapter = SignalAdapter::new(settings);
        let shutdown = ctx.shutdown.clone();
        let runner = adapter.clone();
        let run = tokio::spawn(async move { runner.run(ctx).await });
        fake.wait_listeners(1).await;
        Self {
            fake,
            adapter,
            run,
            shutdown,
            _cache: cache,
        }
    }

    fn adapter(&self) -> &SignalAdapter {
        &self.adapter
    }

    fn target(&self) -> (String, Option<String>) {
        (USER.into(), None)
    }

    async fn push_message(&self, text: &str) -> String {
        self.fake.push_dm(USER, text).to_string()
    }

    async fn push_undecodable(&self) -> String {
        self.fake.push_raw("{\"envelope\": [truncated");
        "undecodable".into()
    }

    fn acknowledged(&self, _delivery: &str) -> Option<bool> {
        // signal-cli pushes each message once and takes no acknowledgement.
        None
    }

    fn rate_limit_next_send(&self, retry_after: Duration) {
        self.fake.rate_limit_next_send(retry_after.as_secs());
    }

    fn shown_text(&self, message_id: &str) -> Option<String> {
        self.fake
            .sent_at(timestamp_of(message_id)?)
            .map(|s| s.message)
    }

    fn shown_buttons(&self, message_id: &str) -> Vec<String> {
        // Signal has no buttons: the choices are the numbered emoji listed at the end of the
        // prompt's text, answered by reacting with one of them.
        let Some(sent) = timestamp_of(message_id).and_then(|ts| self.fake.sent_at(ts)) else {
            return Vec::new();
        };
        let Some((_, choices)) = sent.message.rsplit_once("React to answer: ") else {
            return Vec::new();
        };
        choices
            .split(" · ")
            .filter_map(|c| c.split_once(' ').map(|(_, label)| label.to_owned()))
            .collect()
    }

    fn typing_shown(&self) -> usize {
        self.fake.typing()
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(30), self.run)
            .await
            .expect("the adapter stops on shutdown");
        assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
        assert_eq!(self.fake.unexpected(), Vec::<String>::new());
    }
}

hermes_adapter::compliance_suite!(Rig);
