//! The rig the router's end-to-end tests share: a real gateway runner on a temporary home
//! and state.db, a fake model, and a test chat platform, with helpers to talk through it.
#![allow(dead_code, unused_imports)]

pub use std::collections::BTreeMap;
pub use std::sync::Arc;
pub use std::time::Duration;

pub use hermes_adapter::{LengthUnit, RecordOutcome};
pub use hermesd::agent::provider::ApiMode;
pub use hermesd::config::LoadedConfig;
pub use hermesd::gateway::delivery::RetryPolicy;
pub use hermesd::gateway::runner::{GatewayRunner, RunnerOptions};
pub use hermesd::home::HermesHome;
pub use hermesd::state::{InboundState, Store};

use crate::support;
pub use crate::support::fake_model::{FakeModel, Reply, Step};
pub use crate::support::test_platform::{TestPlatform, dm, group};

pub const WAIT: Duration = Duration::from_secs(60);

pub struct Rig {
    pub dir: tempfile::TempDir,
    pub home: HermesHome,
    pub model: FakeModel,
    pub store: Store,
    pub platform: Arc<TestPlatform>,
    pub runner: Option<GatewayRunner>,
    pub yaml: String,
    pub env: BTreeMap<String, String>,
}

pub fn loaded(home: &HermesHome, env: &BTreeMap<String, String>) -> LoadedConfig {
    hermesd::config::load(home, env).expect("config")
}

impl Rig {
    pub async fn start(yaml: &str, env: &[(&str, &str)]) -> Rig {
        Self::start_with(
            yaml,
            env,
            TestPlatform::new("telegram", 4096, LengthUnit::Utf16),
        )
        .await
    }

    pub async fn start_with(yaml: &str, env: &[(&str, &str)], platform: TestPlatform) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        let yaml = format!("admin:\n  port: 0\n{yaml}");
        let mut env_map: BTreeMap<String, String> =
            [("HOME".to_owned(), dir.path().display().to_string())].into();
        env_map.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let model = FakeModel::start().await;
        let store = Store::open(&home.state_db()).unwrap();
        let mut rig = Rig {
            dir,
            home,
            model,
            store,
            platform: Arc::new(platform),
            runner: None,
            yaml,
            env: env_map,
        };
        rig.boot().await;
        rig
    }

    pub async fn boot(&mut self) {
        std::fs::write(self.home.config_yaml(), &self.yaml).unwrap();
        let client = support::providers::client(&self.model, ApiMode::ChatCompletions);
        let runner = GatewayRunner::start(
            &self.home,
            loaded(&self.home, &self.env),
            self.store.clone(),
            RunnerOptions {
                adapters: vec![self.platform.clone()],
                client: Some(client),
                retry: RetryPolicy::seeded(7),
                drain_timeout: Duration::from_secs(1),
                ..RunnerOptions::default()
            },
        )
        .await
        .expect("runner starts");
        self.runner = Some(runner);
    }

    /// Shuts the runner down and starts a new one on the same home and store.
    pub async fn restart(&mut self, yaml: Option<&str>) {
        self.runner.take().unwrap().shutdown().await;
        if let Some(yaml) = yaml {
            self.yaml = format!("admin:\n  port: 0\n{yaml}");
        }
        let platform = TestPlatform::new("telegram", 4096, LengthUnit::Utf16);
        self.platform = Arc::new(platform);
        self.boot().await;
    }

    pub async fn say(&self, event_id: &str, user: &str, text: &str) -> Vec<String> {
        let before = self.platform.texts_to(user).len();
        // Refused: an unknown user's message is acknowledged but answered only by pairing.
        let outcome = self.platform.inject(dm(event_id, user, text)).await;
        assert!(
            matches!(outcome, RecordOutcome::Recorded | RecordOutcome::Refused),
            "{outcome:?}"
        );
        self.platform.wait_texts(user, before + 1).await[before..].to_vec()
    }

    pub async fn routing(&self) -> BTreeMap<String, serde_json::Value> {
        let scope = std::fs::canonicalize(self.dir.path().join("sessions"))
            .unwrap_or_else(|_| self.dir.path().join("sessions"));
        self.store
            .load_routing(&scope.display().to_string())
            .await
            .unwrap()
    }

    pub async fn session_of(&self, key: &str) -> String {
        self.routing().await[key]["session_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

pub const ALLOW: &[(&str, &str)] = &[("TELEGRAM_ALLOWED_USERS", "42,43,44,45")];

/// Starts a turn the model holds until the returned gate is released.
pub async fn held_turn(
    rig: &Rig,
    event_id: &str,
    user: &str,
    reply: &str,
) -> Arc<tokio::sync::Semaphore> {
    let (step, gate) = Step::gated(reply);
    rig.model.push(step);
    let before = rig.model.requests().len();
    rig.platform
        .inject(dm(event_id, user, "start a long task"))
        .await;
    rig.model.wait_for_requests(before + 1, WAIT).await;
    gate
}

pub async fn health(url: &str) -> (u16, String) {
    let response = reqwest::get(url).await.expect("GET /health");
    let code = response.status().as_u16();
    (code, response.text().await.expect("body"))
}

/// Seeded text with emoji, CJK and code fences.
pub fn long_reply(seed: u64, chars: usize) -> String {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let words = [
        "hello", "世界", "😀😀", "naïve", "`code`", "data", "🇺🇳", "längere",
    ];
    let mut text = String::new();
    let mut in_fence = false;
    while text.chars().count() < chars {
        if rng.random_ratio(1, 40) {
            text.push_str(if in_fence { "\n```\n" } else { "\n```rust\n" });
            in_fence = !in_fence;
        }
        text.push_str(words[rng.random_range(0..words.len())]);
        text.push(if rng.random_ratio(1, 12) { '\n' } else { ' ' });
    }
    if in_fence {
        text.push_str("\n```\n");
    }
    text
}
