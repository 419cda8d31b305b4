//! The agent a Hermes home describes, through the agent loop and a wire-level fake model:
//! SOUL.md as the identity, the project's context file, the skills index, all built once per
//! session so every turn sends the same system prompt bytes.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hermesd::agent::provider::{ApiMode, ModelClient};
use hermesd::agent::{Agent, AgentDeps, UserPrompts, new_session_id};
use hermesd::home::HermesHome;
use hermesd::state::Store;
use serde_json::Value;
use support::fake_model::{FakeModel, Step};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

struct Rig {
    _dir: tempfile::TempDir,
    home: HermesHome,
    project: std::path::PathBuf,
    fake: FakeModel,
    deps: Arc<AgentDeps>,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A home with SOUL.md and three skills (one disabled on Telegram), a project directory
/// with AGENTS.md as the working directory.
async fn rig(mode: ApiMode) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let home = HermesHome::at(dir.path().join("home"));
    home.ensure_exists().unwrap();
    write(
        &home.path().join("SOUL.md"),
        "You are Ada, a terse lighthouse keeper.",
    );
    write(
        &home.config_yaml(),
        "skills:\n  platform_disabled:\n    telegram: [tide-tables]\n",
    );
    for (rel, text) in [
        (
            "skills/sea/tide-tables/SKILL.md",
            "---\nname: tide-tables\ndescription: Read tide tables for a harbour\n---\n# Tides\nLook up the harbour first.\n",
        ),
        (
            "skills/sea/knots/SKILL.md",
            "---\nname: knots\ndescription: Tie and name sailing knots\n---\n# Knots\nBowline first.\n",
        ),
        (
            "skills/lamp-care/SKILL.md",
            "---\nname: lamp-care\ndescription: Keep the lamp lit\n---\n# Lamp\nTrim the wick.\n",
        ),
    ] {
        write(&home.path().join(rel), text);
    }
    let project = dir.path().join("project");
    write(&project.join("AGENTS.md"), "Log every ship that passes.");
    let env: BTreeMap<String, String> =
        [("HOME".to_owned(), dir.path().display().to_string())].into();
    let loaded = hermesd::config::load(&home, &env).expect("config");
    let store = Store::open(&home.state_db()).unwrap();
    let fake = FakeModel::start().await;
    let primary = support::providers::endpoint(&fake, mode, "fake-model");
    let client =
        ModelClient::with_endpoints(primary, Vec::new(), support::providers::settings()).unwrap();
    let mut deps = AgentDeps::with_client(&home, &loaded, store, UserPrompts::default(), client);
    deps.settings.cwd = project.clone();
    Rig {
        _dir: dir,
        home,
        project,
        fake,
        deps: Arc::new(deps),
    }
}

async fn turn(agent: &mut Agent, text: &str) -> String {
    let (events, _rx) = hermesd::agent::event_channel();
    tokio::time::timeout(
        WAIT,
        agent.run_turn(text, &events, &CancellationToken::new()),
    )
    .await
    .expect("turn timed out")
    .expect("turn failed")
    .reply
}

/// The system prompt a recorded request carried, in any of the three wire formats.
fn system_sent(body: &Value) -> String {
    if let Some(system) = body.get("system") {
        return match system {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        };
    }
    if let Some(instructions) = body.get("instructions").and_then(Value::as_str) {
        return instructions.to_owned();
    }
    body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_turns_send_the_same_system_prompt_built_from_the_home() {
    for mode in [ApiMode::ChatCompletions, ApiMode::AnthropicMessages] {
        let rig = rig(mode).await;
        rig.fake.push_all([Step::text("one"), Step::text("two")]);
        let mut agent = Agent::create(Arc::clone(&rig.deps), new_session_id(), "cli", None)
            .await
            .unwrap();
        turn(&mut agent, "first").await;
        // Files changing mid-session must not change this session's prompt.
        write(&rig.home.path().join("SOUL.md"), "You are someone else.");
        write(&rig.project.join("AGENTS.md"), "Different rules.");
        turn(&mut agent, "second").await;
        let requests = rig.fake.requests();
        assert_eq!(requests.len(), 2, "{mode:?}");
        let first = system_sent(&requests[0].body);
        let second = system_sent(&requests[1].body);
        assert_eq!(first, second, "{mode:?}: the prompt changed between turns");
        if mode == ApiMode::AnthropicMessages {
            assert_eq!(
                requests[0].body["system"], requests[1].body["system"],
                "cache markers on the system block stay in place"
            );
        }
        assert!(
            first.starts_with("You are Ada, a terse lighthouse keeper."),
            "{first}"
        );
        assert!(!first.contains("You are Hermes"), "{first}");
        assert!(first.contains("Log every ship that passes."), "{first}");
        for name in ["tide-tables", "knots", "lamp-care"] {
            assert!(
                first.contains(&format!("- {name}: ")),
                "{name} in the index: {first}"
            );
        }
        assert!(
            !first.contains("Look up the harbour first."),
            "bodies load on demand"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_session_keeps_its_stored_prompt() {
    let rig = rig(ApiMode::ChatCompletions).await;
    rig.fake.push_all([Step::text("one"), Step::text("two")]);
    let id = new_session_id();
    let mut agent = Agent::create(Arc::clone(&rig.deps), id.clone(), "cli", None)
        .await
        .unwrap();
    turn(&mut agent, "first").await;
    write(&rig.home.path().join("SOUL.md"), "You are someone else.");
    let mut resumed = Agent::resume(Arc::clone(&rig.deps), id).await.unwrap();
    turn(&mut resumed, "second").await;
    let requests = rig.fake.requests();
    assert_eq!(
        system_sent(&requests[0].body),
        system_sent(&requests[1].body)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_skill_disabled_for_telegram_is_absent_from_its_index() {
    let rig = rig(ApiMode::ChatCompletions).await;
    let telegram = rig.deps.system_prompt("telegram");
    assert!(!telegram.contains("tide-tables"), "{telegram}");
    assert!(telegram.contains("- knots: "), "{telegram}");
    assert!(
        rig.deps
            .system_prompt("discord")
            .contains("- tide-tables: ")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_request_system_text_is_layered_on_for_that_request_only() {
    let rig = rig(ApiMode::ChatCompletions).await;
    rig.fake.push_all([Step::text("one"), Step::text("two")]);
    let mut agent = Agent::create(Arc::clone(&rig.deps), new_session_id(), "api_server", None)
        .await
        .unwrap();
    agent.set_request_system(Some("Answer in French.".to_owned()));
    turn(&mut agent, "first").await;
    agent.set_request_system(None);
    turn(&mut agent, "second").await;
    let requests = rig.fake.requests();
    let with = system_sent(&requests[0].body);
    let without = system_sent(&requests[1].body);
    assert_eq!(with, format!("{without}\n\nAnswer in French."));
    let stored = rig
        .deps
        .store
        .get_session(agent.session_id())
        .await
        .unwrap()
        .unwrap()
        .system_prompt
        .unwrap();
    assert_eq!(stored, without, "the request's text is never stored");
}
