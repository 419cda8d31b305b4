//! The agent loop against a wire-level fake model, real tools and a real state.db: plain and
//! tool turns, parallel results in call order, interruption, fallback, compression into a
//! child session, approvals (timeout → BLOCKED, "always" persisted), the iteration budget,
//! malformed model output, and delegation.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hermesd::agent::provider::{ApiMode, ModelClient};
use hermesd::agent::{Agent, AgentDeps, AgentEvent, UserPrompts, new_session_id};
use hermesd::home::HermesHome;
use hermesd::state::Store;
use hermesd::tools::approval::{ApprovalDecision, ApprovalPrompt};
use serde_json::{Value, json};
use support::fake_model::{FakeCall, FakeModel, Reply, Step};
use tokio_util::sync::CancellationToken;

const WAIT: Duration = Duration::from_secs(60);

struct Rig {
    dir: tempfile::TempDir,
    fake: FakeModel,
    store: Store,
    deps: Arc<AgentDeps>,
}

async fn rig_with(config_yaml: &str, prompts: UserPrompts, fallback: Option<&FakeModel>) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let home = HermesHome::at(dir.path());
    std::fs::write(home.config_yaml(), config_yaml).unwrap();
    let env: BTreeMap<String, String> =
        [("HOME".to_owned(), dir.path().display().to_string())].into();
    let loaded = hermesd::config::load(&home, &env).expect("config");
    let store = Store::open(&home.state_db()).unwrap();
    let fake = FakeModel::start().await;
    let primary = support::providers::endpoint(&fake, ApiMode::ChatCompletions, "fake-model");
    let fallbacks = fallback
        .map(|f| {
            vec![support::providers::endpoint(
                f,
                ApiMode::ChatCompletions,
                "fallback-model",
            )]
        })
        .unwrap_or_default();
    let client =
        ModelClient::with_endpoints(primary, fallbacks, support::providers::settings()).unwrap();
    let deps = Arc::new(AgentDeps::with_client(
        &home,
        &loaded,
        store.clone(),
        prompts,
        client,
    ));
    Rig {
        dir,
        fake,
        store,
        deps,
    }
}

async fn rig() -> Rig {
    rig_with("", UserPrompts::default(), None).await
}

async fn new_agent(rig: &Rig) -> Agent {
    Agent::create(Arc::clone(&rig.deps), new_session_id(), "cli", None)
        .await
        .unwrap()
}

fn call(id: &str, name: &str, args: Value) -> FakeCall {
    FakeCall {
        id: id.into(),
        name: name.into(),
        arguments: args.to_string(),
    }
}

fn tool_reply(calls: Vec<FakeCall>) -> Step {
    Step::Reply(Reply {
        tool_calls: calls,
        ..Reply::default()
    })
}

async fn turn(agent: &mut Agent, text: &str) -> hermesd::agent::TurnOutcome {
    let (events, _rx) = hermesd::agent::event_channel();
    tokio::time::timeout(
        WAIT,
        agent.run_turn(text, &events, &CancellationToken::new()),
    )
    .await
    .expect("turn timed out")
    .expect("turn failed")
}

/// The content of the first tool-result message in the `index`-th request to the model.
fn tool_result_sent(fake: &FakeModel, index: usize) -> String {
    fake.requests()[index].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool result was sent")["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn roles(store_messages: &[hermesd::state::Message]) -> Vec<String> {
    store_messages.iter().map(|m| m.role.clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_turn_is_persisted_with_usage() {
    let rig = rig().await;
    rig.fake.push(Step::text("Hello there"));
    let mut agent = new_agent(&rig).await;
    let outcome = turn(&mut agent, "hi").await;
    assert_eq!(outcome.reply, "Hello there");
    assert_eq!(outcome.iterations, 1);
    let stored = rig.store.get_messages(agent.session_id()).await.unwrap();
    assert_eq!(roles(&stored), ["user", "assistant"]);
    let session = rig
        .store
        .get_session(agent.session_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            session.api_call_count,
            session.input_tokens,
            session.output_tokens
        ),
        (1, 10, 5)
    );
    assert_eq!(session.source, "cli");
    assert!(session.system_prompt.is_some());
    let request = &rig.fake.requests()[0];
    assert_eq!(request.body["messages"][0]["role"], "system");
    assert!(
        request.body["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "tools offered"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_tool_results_come_back_in_call_order() {
    let rig = rig().await;
    rig.fake.push_all([
        tool_reply(vec![
            call(
                "c_slow",
                "terminal",
                json!({"command": "sleep 0.5; echo first-result"}),
            ),
            call(
                "c_fast",
                "terminal",
                json!({"command": "echo second-result"}),
            ),
            call(
                "c_todo",
                "todo",
                json!({"todos": [{"id": "1", "content": "write tests", "status": "pending"}]}),
            ),
        ]),
        Step::text("done"),
    ]);
    let mut agent = new_agent(&rig).await;
    let (events, mut rx) = hermesd::agent::event_channel();
    let outcome = agent
        .run_turn("run them", &events, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome.reply, "done");
    let second = &rig.fake.requests()[1].body["messages"];
    let tools: Vec<&Value> = second
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    let ids: Vec<&str> = tools
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c_slow", "c_fast", "c_todo"]);
    assert!(
        tools[0]["content"]
            .as_str()
            .unwrap()
            .contains("first-result")
    );
    assert!(
        tools[1]["content"]
            .as_str()
            .unwrap()
            .contains("second-result")
    );
    assert!(
        tools[2]["content"]
            .as_str()
            .unwrap()
            .contains("write tests")
    );
    // The slow first call finished last: the calls really ran concurrently.
    drop(events);
    let mut finished = Vec::new();
    while let Some(event) = rx.recv().await {
        if let AgentEvent::ToolFinished { call_id, .. } = event {
            finished.push(call_id);
        }
    }
    assert_eq!(
        finished.last().map(String::as_str),
        Some("c_slow"),
        "{finished:?}"
    );
    let stored = rig.store.get_messages(agent.session_id()).await.unwrap();
    assert_eq!(
        roles(&stored),
        ["user", "assistant", "tool", "tool", "tool", "assistant"]
    );
    let session = rig
        .store
        .get_session(agent.session_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session.tool_call_count, 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_stream_leaves_no_partial_message() {
    let rig = rig().await;
    rig.fake.push(Step::Slow {
        reply: Reply::text("one two three four five six seven eight nine ten"),
        delay: Duration::from_millis(200),
    });
    let mut agent = new_agent(&rig).await;
    let (events, mut rx) = hermesd::agent::event_channel();
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    let watcher = tokio::spawn(async move {
        while let Some(event) = rx.recv().await {
            if matches!(event, AgentEvent::Delta(_)) {
                stopper.cancel();
            }
        }
    });
    let outcome = tokio::time::timeout(WAIT, agent.run_turn("talk", &events, &cancel))
        .await
        .unwrap()
        .unwrap();
    drop(events);
    watcher.await.unwrap();
    assert!(outcome.interrupted);
    let stored = rig.store.get_messages(agent.session_id()).await.unwrap();
    assert_eq!(
        roles(&stored),
        ["user"],
        "the partial reply never enters the history"
    );
    // The next turn works and sees a well-formed history.
    rig.fake.push(Step::text("recovered"));
    assert_eq!(turn(&mut agent, "again").await.reply, "recovered");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_primary_falls_back_and_total_failure_is_one_line() {
    let dir_fallback = FakeModel::start().await;
    let rig = rig_with("", UserPrompts::default(), Some(&dir_fallback)).await;
    rig.fake.push(Step::error(500));
    dir_fallback.push(Step::text("from the fallback"));
    let mut agent = new_agent(&rig).await;
    assert_eq!(turn(&mut agent, "hello").await.reply, "from the fallback");

    rig.fake.push(Step::error(401));
    dir_fallback.push(Step::Malformed);
    let (events, _rx) = hermesd::agent::event_channel();
    let err = agent
        .run_turn("again", &events, &CancellationToken::new())
        .await
        .unwrap_err();
    let line = err.to_string();
    assert_eq!(line.lines().count(), 1, "{line}");
    assert!(line.contains("failed"), "{line}");
    assert!(!line.contains(support::providers::KEY), "{line}");
    // Nothing half-written: the failed turn left only its user message.
    let stored = rig.store.get_messages(agent.session_id()).await.unwrap();
    assert_eq!(roles(&stored), ["user", "assistant", "user"]);
    rig.fake.push(Step::text("fine now"));
    assert_eq!(turn(&mut agent, "third").await.reply, "fine now");
}

#[tokio::test(flavor = "multi_thread")]
async fn compression_continues_in_a_child_session_with_a_summary() {
    let rig = rig_with(
        "model:\n  context_length: 3000\ncompression:\n  threshold: 0.5\n  protect_last_n: 2\n",
        UserPrompts::default(),
        None,
    )
    .await;
    let mut agent = new_agent(&rig).await;
    let parent = agent.session_id().to_owned();
    rig.store
        .set_session_title(&parent, Some("Long chat"))
        .await
        .unwrap();
    // The fake echoes each request (summaries included), so every reply is as long as the
    // question; the fourth turn crosses half of the 3,000-token window.
    let long = "x".repeat(1200);
    for i in 0..4 {
        turn(&mut agent, &format!("question {i} {long}")).await;
    }
    assert_ne!(
        agent.session_id(),
        parent,
        "compressed into a child session"
    );
    let summary_request = rig
        .fake
        .requests()
        .into_iter()
        .find(|r| {
            r.body["messages"][0]["content"]
                .as_str()
                .is_some_and(|s| s.contains("You compress conversations"))
        })
        .expect("a summary was requested");
    assert!(
        summary_request
            .body
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(|a| a.is_empty()))
    );
    let old = rig.store.get_session(&parent).await.unwrap().unwrap();
    assert_eq!(old.end_reason.as_deref(), Some("compression"));
    let child = rig
        .store
        .get_session(agent.session_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(child.parent_session_id.as_deref(), Some(parent.as_str()));
    assert_eq!(child.title.as_deref(), Some("Long chat #2"));
    let stored = rig.store.get_messages(agent.session_id()).await.unwrap();
    let texts: Vec<String> = stored
        .iter()
        .map(|m| {
            serde_json::to_value(&m.content)
                .unwrap()
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("[EARLIER TURNS, SUMMARISED]")),
        "{texts:?}"
    );
    assert!(stored.len() < 9);
}

fn never_answers() -> ApprovalPrompt {
    Arc::new(|_| Box::pin(std::future::pending::<ApprovalDecision>()))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dangerous_command_waits_for_approval_and_times_out_blocked() {
    let rig = rig_with(
        "approvals:\n  timeout: 1\n",
        UserPrompts {
            approval: Some(never_answers()),
            clarify: None,
        },
        None,
    )
    .await;
    let victim = rig.dir.path().join("victim");
    std::fs::create_dir_all(victim.join("inner")).unwrap();
    rig.fake.push_all([
        tool_reply(vec![call(
            "c1",
            "terminal",
            json!({"command": format!("rm -rf {}", victim.display())}),
        )]),
        Step::text("ok, I will not"),
    ]);
    let mut agent = new_agent(&rig).await;
    turn(&mut agent, "delete it").await;
    assert!(victim.exists(), "the command never ran");
    let result = tool_result_sent(&rig.fake, 1);
    assert!(result.contains("BLOCKED"), "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn always_runs_the_command_and_persists_the_allowlist() {
    let always: ApprovalPrompt = Arc::new(|_| Box::pin(async { ApprovalDecision::Always }));
    let rig = rig_with(
        "# my settings\nmodel:\n  context_length: 100000\n",
        UserPrompts {
            approval: Some(always),
            clarify: None,
        },
        None,
    )
    .await;
    let victim = rig.dir.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    rig.fake.push_all([
        tool_reply(vec![call(
            "c1",
            "terminal",
            json!({"command": format!("rm -rf {}", victim.display())}),
        )]),
        Step::text("deleted"),
    ]);
    let mut agent = new_agent(&rig).await;
    turn(&mut agent, "delete it").await;
    assert!(!victim.exists(), "approved command ran");
    let config = std::fs::read_to_string(rig.dir.path().join("config.yaml")).unwrap();
    assert!(
        config.contains("# my settings") && config.contains("context_length: 100000"),
        "{config}"
    );
    assert!(config.contains("command_allowlist"), "{config}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_iteration_budget_ends_with_a_summary_reply() {
    let rig = rig_with("agent:\n  max_turns: 2\n", UserPrompts::default(), None).await;
    rig.fake.push_all([
        tool_reply(vec![call("a", "todo", json!({}))]),
        tool_reply(vec![call("b", "todo", json!({}))]),
        Step::text("Here is what I did so far."),
    ]);
    let mut agent = new_agent(&rig).await;
    let outcome = turn(&mut agent, "loop forever").await;
    assert_eq!(outcome.reply, "Here is what I did so far.");
    let last = rig.fake.requests().pop().unwrap();
    assert!(
        last.body
            .get("tools")
            .is_none_or(|t| t.as_array().is_none_or(|a| a.is_empty())),
        "no tools offered for the summary"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn delegation_runs_an_isolated_sub_agent_in_a_child_session() {
    let rig = rig().await;
    rig.fake.push_all([
        tool_reply(vec![call(
            "d1",
            "delegate_task",
            json!({"goal": "count the files"}),
        )]),
        Step::text("sub-agent says 3 files"),
        Step::text("There are 3 files."),
    ]);
    let mut agent = new_agent(&rig).await;
    assert_eq!(
        turn(&mut agent, "how many files?").await.reply,
        "There are 3 files."
    );
    let requests = rig.fake.requests();
    let sub = &requests[1].body["messages"];
    let user_texts: Vec<&str> = sub
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(user_texts, ["count the files"], "isolated context");
    let children = rig.store.descendants(agent.session_id()).await.unwrap();
    assert_eq!(children.len(), 2, "the session and its delegate child");
    let child = rig
        .store
        .get_session(&children[1].id)
        .await
        .unwrap()
        .unwrap();
    assert!(child.model_config.unwrap().contains("_delegate_from"));
    let result = tool_result_sent(&rig.fake, 2);
    assert!(result.contains("sub-agent says 3 files"), "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn commands_run_with_the_resolved_hermes_home() {
    let rig = rig().await;
    rig.fake.push_all([
        tool_reply(vec![call(
            "c1",
            "terminal",
            json!({"command": "echo home=$HERMES_HOME"}),
        )]),
        Step::text("ok"),
    ]);
    let mut agent = new_agent(&rig).await;
    turn(&mut agent, "where is home?").await;
    let result = tool_result_sent(&rig.fake, 1);
    assert!(
        result.contains(&format!("home={}", rig.dir.path().display())),
        "{result}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_round_with_clarify_runs_sequentially_and_gets_the_answer() {
    let clarify: hermesd::tools::clarify::ClarifyCallback =
        Arc::new(|request| Box::pin(async move { Ok(format!("answer to: {}", request.question)) }));
    let rig = rig_with(
        "",
        UserPrompts {
            approval: None,
            clarify: Some(clarify),
        },
        None,
    )
    .await;
    rig.fake.push_all([
        tool_reply(vec![
            call("q1", "clarify", json!({"question": "which file?"})),
            call("t1", "terminal", json!({"command": "echo after"})),
        ]),
        Step::text("thanks"),
    ]);
    let mut agent = new_agent(&rig).await;
    let (events, mut rx) = hermesd::agent::event_channel();
    agent
        .run_turn("do it", &events, &CancellationToken::new())
        .await
        .unwrap();
    drop(events);
    let mut order = Vec::new();
    while let Some(event) = rx.recv().await {
        match event {
            AgentEvent::ToolStarted { call_id, .. } => order.push(format!("start {call_id}")),
            AgentEvent::ToolFinished { call_id, .. } => order.push(format!("end {call_id}")),
            _ => {}
        }
    }
    assert_eq!(
        order,
        ["start q1", "end q1", "start t1", "end t1"],
        "sequential round"
    );
    assert!(tool_result_sent(&rig.fake, 1).contains("answer to: which file?"));
}
