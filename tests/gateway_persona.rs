//! The agent a home describes, through the real gateway core in process (runner, router,
//! state.db, agent) with a wire-level fake model and a chat platform on the adapter
//! contract: `/model` switching kept across a restart, `/model --global` in config.yaml,
//! and skills as chat commands (`/skill args`, `/commands`, per-platform disabling).

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hermes_adapter::LengthUnit;
use hermesd::agent::provider::{ApiMode, ModelClient};
use hermesd::gateway::delivery::RetryPolicy;
use hermesd::gateway::runner::{GatewayRunner, RunnerOptions};
use hermesd::home::HermesHome;
use hermesd::state::Store;
use support::fake_model::{FakeModel, Reply, Step};
use support::test_platform::{TestPlatform, dm};

const ALLOW: (&str, &str) = ("TELEGRAM_ALLOWED_USERS", "42");

struct Rig {
    _dir: tempfile::TempDir,
    home: HermesHome,
    model: FakeModel,
    store: Store,
    platform: Arc<TestPlatform>,
    runner: Option<GatewayRunner>,
    env: BTreeMap<String, String>,
    events: usize,
}

impl Rig {
    async fn start(yaml: &str) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let home = HermesHome::at(dir.path());
        std::fs::write(home.config_yaml(), format!("admin:\n  port: 0\n{yaml}")).unwrap();
        for (name, description, body) in [
            (
                "tide-tables",
                "Read tide tables for a harbour",
                "Look up the harbour first.",
            ),
            (
                "knots",
                "Tie and name sailing knots",
                "Start with a bowline.",
            ),
        ] {
            let dir = home.path().join("skills/sea").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
            )
            .unwrap();
        }
        let env: BTreeMap<String, String> = [
            ("HOME".to_owned(), dir.path().display().to_string()),
            (ALLOW.0.to_owned(), ALLOW.1.to_owned()),
        ]
        .into();
        let store = Store::open(&home.state_db()).unwrap();
        let mut rig = Rig {
            _dir: dir,
            home,
            model: FakeModel::start().await,
            store,
            platform: Arc::new(TestPlatform::new("telegram", 4096, LengthUnit::Utf16)),
            runner: None,
            env,
            events: 0,
        };
        rig.boot().await;
        rig
    }

    /// Two configured models on the fake server: the primary and a fallback.
    fn client(&self) -> ModelClient {
        let endpoint = |model: &str| {
            support::providers::endpoint(&self.model, ApiMode::ChatCompletions, model)
        };
        ModelClient::with_endpoints(
            endpoint("fake-model"),
            vec![endpoint("other-model")],
            support::providers::settings(),
        )
        .unwrap()
    }

    async fn boot(&mut self) {
        let loaded = hermesd::config::load(&self.home, &self.env).expect("config");
        let runner = GatewayRunner::start(
            &self.home,
            loaded,
            self.store.clone(),
            RunnerOptions {
                adapters: vec![self.platform.clone()],
                client: Some(self.client()),
                retry: RetryPolicy::seeded(7),
                drain_timeout: Duration::from_secs(1),
                ..RunnerOptions::default()
            },
        )
        .await
        .expect("runner starts");
        self.runner = Some(runner);
    }

    async fn restart(&mut self) {
        self.runner.take().unwrap().shutdown().await;
        self.platform = Arc::new(TestPlatform::new("telegram", 4096, LengthUnit::Utf16));
        self.boot().await;
    }

    /// Sends `text` from user 42 and returns the one reply.
    async fn say(&mut self, text: &str) -> String {
        self.events += 1;
        let before = self.platform.texts_to("42").len();
        self.platform
            .inject(dm(&format!("e{}", self.events), "42", text))
            .await;
        self.platform.wait_texts("42", before + 1).await[before].clone()
    }

    fn last_request(&self) -> serde_json::Value {
        self.model
            .requests()
            .last()
            .expect("a model call")
            .body
            .clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_switches_per_chat_survive_a_restart_and_unknown_models_are_refused() {
    let mut rig = Rig::start("").await;
    let shown = rig.say("/model").await;
    assert!(
        shown.contains("`fake-model`") && shown.contains("`other-model`"),
        "{shown}"
    );

    let refused = rig.say("/model gpt-imaginary").await;
    assert!(refused.contains("not a configured model"), "{refused}");
    assert!(
        refused.contains("`fake-model` (fake), `other-model` (fake)"),
        "{refused}"
    );
    rig.say("hello").await;
    assert_eq!(rig.last_request()["model"], "fake-model");

    let switched = rig.say("/model other-model").await;
    assert!(switched.contains("now uses `other-model`"), "{switched}");
    rig.say("again").await;
    assert_eq!(rig.last_request()["model"], "other-model");
    assert!(
        rig.say("/status")
            .await
            .contains("**Model:** `other-model`")
    );

    rig.restart().await;
    rig.say("after the restart").await;
    assert_eq!(
        rig.last_request()["model"],
        "other-model",
        "the choice survives a restart"
    );
    let text = std::fs::read_to_string(rig.home.config_yaml()).unwrap();
    assert!(
        !text.contains("other-model"),
        "a session switch leaves config.yaml alone"
    );

    let global = rig.say("/model fake-model --global").await;
    assert!(global.contains("Saved as `model.default`"), "{global}");
    let text = std::fs::read_to_string(rig.home.config_yaml()).unwrap();
    let yaml: serde_json::Value = serde_norway::from_str(&text).unwrap();
    assert_eq!(yaml["model"]["default"], "fake-model", "{text}");
    assert_eq!(yaml["admin"]["port"], 0, "other settings are kept: {text}");
    rig.say("last").await;
    assert_eq!(rig.last_request()["model"], "fake-model");

    // A new conversation starts on the configured model again (Hermes drops the override).
    rig.say("/model other-model").await;
    rig.say("/new").await;
    rig.say("fresh start").await;
    assert_eq!(rig.last_request()["model"], "fake-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skill_runs_as_a_command_and_is_listed_unless_disabled_on_the_platform() {
    let mut rig = Rig::start("skills:\n  platform_disabled:\n    telegram: [knots]\n").await;
    let listed = rig.say("/commands 2").await;
    assert!(
        listed.contains("/tide-tables — Skill: Read tide tables"),
        "{listed}"
    );
    assert!(!listed.contains("/knots"), "{listed}");

    rig.model
        .push(support::fake_model::Step::text("High tide at 14:02."));
    let reply = rig.say("/tide_tables Dover tomorrow").await;
    assert_eq!(reply, "High tide at 14:02.");
    let body = rig.last_request();
    let messages = body["messages"].as_array().unwrap();
    let user = messages.last().unwrap()["content"].as_str().unwrap();
    assert!(
        user.contains("Look up the harbour first."),
        "the skill is loaded: {user}"
    );
    assert!(user.contains("Dover tomorrow"), "{user}");
    let system = messages[0]["content"].as_str().unwrap();
    assert!(
        system.contains("- tide-tables: ") && !system.contains("- knots"),
        "{system}"
    );

    // The skills tools hide it on this platform too.
    rig.model.push(Step::Reply(Reply::tool_call(
        "skill_view",
        serde_json::json!({"name": "knots"}),
    )));
    rig.model.push(Step::text("No knots skill here."));
    rig.say("load the knots skill").await;
    rig.platform
        .wait_until("42", |texts| {
            texts.iter().any(|t| t == "No knots skill here.")
        })
        .await;
    let body = rig.last_request();
    let result = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(result.contains("No skill named 'knots'"), "{result}");

    let calls = rig.model.requests().len();
    let unknown = rig.say("/knots bowline").await;
    assert!(unknown.contains("I don't know `/knots`"), "{unknown}");
    assert_eq!(
        rig.model.requests().len(),
        calls,
        "a disabled skill runs no turn"
    );
}

/// A session that starts after `/model` chose a model is built for that model: here
/// `agent.tool_use_enforcement` names it, so its prompt carries the enforcement block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_session_gets_the_guidance_of_the_chosen_model() {
    let mut rig = Rig::start("agent:\n  tool_use_enforcement: [other]\n").await;
    let switched = rig.say("/model other-model").await;
    assert!(switched.contains("now uses `other-model`"), "{switched}");
    rig.say("hello").await;
    let body = rig.last_request();
    assert_eq!(body["model"], "other-model");
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("# Act rather than announce"), "{system}");
}
