//! The Hermes chat commands added with issue 32, in process through the real runner,
//! router, state.db and agent with a wire-level fake model: `/yolo` (an allowed user's
//! toggle; a guest is refused; the hardline floor holds), `/personality` (listed, chosen,
//! saved to config.yaml and layered onto the next request, cleared), `/compress here N` (a
//! summary now, the chat continuing in a child session), `/insights`, `/reload-mcp` (asks
//! first) and `/reasoning` (named as not available). The rig is `router_support/`.

mod router_support;
mod support;

use router_support::*;
use support::fake_model::{Reply, Step};

const KEY: &str = "agent:main:telegram:dm:42";

/// The system text of the model request whose last user message is `text`.
fn system_of(rig: &Rig, text: &str) -> String {
    let request = rig
        .model
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.last_message_text() == text)
        .unwrap_or_else(|| panic!("no model request for {text:?}"));
    request.body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yolo_runs_the_sessions_dangerous_commands_unasked_but_not_for_a_guest() {
    let rig = Rig::start(
        "",
        &[
            ("TELEGRAM_ALLOWED_USERS", "42"),
            ("TELEGRAM_GROUP_ALLOWED_CHATS", "-100"),
        ],
    )
    .await;
    // A guest in the allowed group may not turn it on.
    rig.platform
        .inject(group("g1", "-100", "77", "/yolo"))
        .await;
    let refused = rig.platform.wait_texts("-100", 1).await;
    assert!(refused[0].contains("`/yolo` is refused"), "{refused:?}");

    assert_eq!(rig.say("y0", "42", "hello").await, ["echo: hello"]);
    let on = rig.say("y1", "42", "/yolo").await;
    assert!(on[0].contains("YOLO on"), "{on:?}");
    let target = rig.dir.path().join("junk");
    std::fs::create_dir_all(target.join("inner")).unwrap();
    rig.model.push_all([
        Step::Reply(Reply::tool_call(
            "terminal",
            serde_json::json!({"command": format!("rm -rf {}", target.display())}),
        )),
        Step::text("deleted it"),
    ]);
    rig.platform.inject(dm("y2", "42", "clean up")).await;
    let texts = rig
        .platform
        .wait_until("42", |texts| texts.iter().any(|t| t == "deleted it"))
        .await;
    assert!(
        !texts
            .iter()
            .any(|t| t.contains("Command Approval Required")),
        "{texts:?}"
    );
    assert!(!target.exists(), "the command ran without a prompt");
    // The hardline floor still refuses under /yolo.
    rig.model.push_all([
        Step::Reply(Reply::tool_call(
            "terminal",
            serde_json::json!({"command": "rm -rf /"}),
        )),
        Step::text("could not"),
    ]);
    rig.platform.inject(dm("y3", "42", "wipe the disk")).await;
    rig.platform
        .wait_until("42", |texts| texts.iter().any(|t| t == "could not"))
        .await;
    let tool_result = rig.model.requests().last().unwrap().last_message_text();
    assert!(
        tool_result.to_lowercase().contains("block"),
        "{tool_result}"
    );
    let off = rig.say("y4", "42", "/yolo").await;
    assert!(off[0].contains("YOLO off"), "{off:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_personality_is_listed_chosen_saved_and_layered_onto_the_next_request() {
    let yaml = "agent:\n  personalities:\n    pirate:\n      system_prompt: Talk like a pirate.\n      \
                tone: salty\n      description: Arr\n    teacher: Explain step by step.\n";
    let rig = Rig::start(yaml, ALLOW).await;
    let listing = rig.say("p1", "42", "/personality").await;
    assert!(listing[0].contains("`pirate`: Arr"), "{listing:?}");
    assert!(
        listing[0].contains("`teacher`: Explain step by step."),
        "{listing:?}"
    );
    let unknown = rig.say("p2", "42", "/personality clown").await;
    assert!(
        unknown[0].contains("`clown`") && unknown[0].contains("`none`"),
        "{unknown:?}"
    );

    let set = rig.say("p3", "42", "/personality pirate").await;
    assert!(set[0].contains("**pirate**"), "{set:?}");
    let saved = std::fs::read_to_string(rig.home.config_yaml()).unwrap();
    assert!(
        saved.contains("system_prompt: \"Talk like a pirate.\\nTone: salty\""),
        "{saved}"
    );
    rig.say("p4", "42", "ahoy").await;
    assert!(
        system_of(&rig, "ahoy").ends_with("Talk like a pirate.\nTone: salty"),
        "{}",
        system_of(&rig, "ahoy")
    );
    // Stored prompts stay as they were: the text is per request.
    let session = rig.session_of(KEY).await;
    let stored = rig.store.get_session(&session).await.unwrap().unwrap();
    assert!(!stored.system_prompt.unwrap_or_default().contains("pirate"));

    let cleared = rig.say("p5", "42", "/personality none").await;
    assert!(cleared[0].contains("cleared"), "{cleared:?}");
    rig.say("p6", "42", "hello again").await;
    assert!(!system_of(&rig, "hello again").contains("pirate"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compress_here_summarises_now_and_the_chat_goes_on_in_a_child_session() {
    let rig = Rig::start("", ALLOW).await;
    let early = rig.say("c0", "42", "/compress").await;
    assert!(early[0].contains("Not enough conversation"), "{early:?}");
    for n in 1..=5 {
        rig.say(&format!("c{n}"), "42", &format!("message {n}"))
            .await;
    }
    let before = rig.session_of(KEY).await;
    rig.model
        .push(Step::text("SUMMARY: five messages about numbers"));
    let done = rig.say("c6", "42", "/compress here 1").await;
    assert!(done[0].starts_with("🗜️ Compressed:"), "{done:?}");
    let summariser = rig.model.requests().last().unwrap().clone();
    assert!(
        summariser.last_message_text().contains("message 3"),
        "the middle went to the summariser"
    );
    let after = rig.session_of(KEY).await;
    assert_ne!(before, after, "the chat continues in a child session");
    let child = rig.store.get_session(&after).await.unwrap().unwrap();
    assert_eq!(child.parent_session_id.as_deref(), Some(before.as_str()));
    rig.say("c7", "42", "and now?").await;
    let next = rig.model.requests().last().unwrap().body["messages"].to_string();
    assert!(
        next.contains("SUMMARY: five messages about numbers"),
        "{next}"
    );
    assert!(
        next.contains("message 5"),
        "the last exchange is kept: {next}"
    );
    assert!(
        !next.contains("message 3"),
        "the middle is summarised: {next}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insights_reload_mcp_and_the_commands_not_available() {
    let rig = Rig::start("", ALLOW).await;
    rig.say("i1", "42", "hello").await;
    let insights = rig.say("i2", "42", "/insights 7").await;
    assert!(insights[0].contains("last 7 days"), "{insights:?}");
    assert!(
        insights[0].contains("Sessions: 1 · Messages: 2"),
        "{insights:?}"
    );
    assert!(
        insights[0].contains("**By platform:** telegram 1"),
        "{insights:?}"
    );
    let none = rig.say("i3", "42", "/insights --source discord").await;
    assert!(none[0].contains("No sessions"), "{none:?}");
    let bad = rig.say("i4", "42", "/insights --days x").await;
    assert!(bad[0].contains("Usage: `/insights"), "{bad:?}");

    let ask = rig.say("r1", "42", "/reload-mcp").await;
    assert!(ask[0].contains("/reload-mcp now"), "{ask:?}");
    let go = rig.say("r2", "42", "/reload_mcp now").await;
    assert!(go[0].contains("No MCP servers are configured"), "{go:?}");

    let reasoning = rig.say("n1", "42", "/reasoning high").await;
    assert!(
        reasoning[0].contains("not available in hermesd yet"),
        "{reasoning:?}"
    );
    let help = rig.say("n2", "42", "/help").await;
    for name in [
        "/compress",
        "/personality",
        "/yolo",
        "/insights",
        "/reload-mcp",
        "/reasoning",
    ] {
        assert!(
            help[0].contains(name),
            "{name} missing from /help: {help:?}"
        );
    }
    // Only the model's turn ran: no command reached the model.
    assert_eq!(rig.model.requests().len(), 1);
}
