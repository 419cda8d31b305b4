//! Secrets stay out, through the real binary (issue 27, point 5): the model runs `env` and
//! `cat` of a file holding secret values in the terminal; neither the tool result the model
//! receives, nor the reply in the chat, nor any byte of state.db carries a secret the daemon
//! knows (the database URL's password, the webhook secret) or a credential in a known shape.
//! A provider error that echoes secrets reaches the chat masked.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, MessageSpec, User};
use serde_json::json;
use support::fake_model::{Reply, Step};
use telegram_support::{Rig, start};

const DM: i64 = 7;
const DB_PASSWORD: &str = "pg-Pa55word-e2e";
const WEBHOOK_SECRET: &str = "whsec-e2e-0123456789";
const SHAPED_KEY: &str = "sk-proj-e2eABCDEFGHIJKLMNOP";

async fn start_with_secrets() -> Rig {
    let database_url = format!("postgres://hermes:{DB_PASSWORD}@127.0.0.1:9/hermes");
    start(
        "",
        "",
        &[
            ("HERMES_DATABASE_URL", database_url.as_str()),
            ("TELEGRAM_WEBHOOK_SECRET", WEBHOOK_SECRET),
        ],
    )
    .await
}

fn say(rig: &Rig, text: &str) {
    rig.telegram.push_message(MessageSpec::text(
        Chat::private(DM),
        User::new(7, "Bob"),
        text,
    ));
}

/// Waits for the bot's message to the chat that contains `marker` (tool-progress lines come
/// first); returns its text with the MarkdownV2 escapes taken out, so a secret's `-` or `.`
/// cannot hide it from the check.
async fn wait_reply(rig: &Rig, marker: &str) -> String {
    rig.wait_for(&format!("a reply containing {marker:?}"), |rig| {
        rig.sent_to(DM)
            .into_iter()
            .map(|m| m.text.replace('\\', ""))
            .find(|t| t.contains(marker))
    })
    .await
}

fn leaked(text: &str) -> Vec<&'static str> {
    [DB_PASSWORD, WEBHOOK_SECRET, SHAPED_KEY]
        .into_iter()
        .filter(|secret| text.contains(secret))
        .collect()
}

/// Every file of the home's state database (main file, WAL, journal) as lossy text.
fn state_db_bytes(home: &std::path::Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(home).expect("home readable").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("state.db") && entry.path().is_file() {
            let bytes = std::fs::read(entry.path()).expect("state.db readable");
            all.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_and_cat_of_secrets_reach_neither_the_model_nor_the_chat_nor_state_db() {
    let mut rig = start_with_secrets().await;
    let notes = rig.home.path().join("deploy-notes.txt");
    std::fs::write(
        &notes,
        format!("db {DB_PASSWORD}\nhook {WEBHOOK_SECRET}\nopenai {SHAPED_KEY}\n"),
    )
    .unwrap();
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        json!({"command": format!("env; cat {}", notes.display())}),
    )));
    rig.model.push(Step::text(format!(
        "the webhook secret is {WEBHOOK_SECRET}"
    )));
    say(&rig, "what secrets does this machine have?");

    let reply = wait_reply(&rig, "the webhook secret is").await;
    assert!(leaked(&reply).is_empty(), "the chat got a secret: {reply}");

    let requests = rig.model.requests();
    assert_eq!(requests.len(), 2, "one tool round, then the reply");
    let tool_result = requests[1].body["messages"].to_string();
    assert!(
        leaked(&tool_result).is_empty(),
        "the model got {:?}: {tool_result}",
        leaked(&tool_result)
    );
    assert!(
        tool_result.contains("HERMES_HOME=") && tool_result.contains("openai ***"),
        "env and cat ran and their output reached the model: {tool_result}"
    );

    rig.stop_daemon().await;
    let stored = state_db_bytes(rig.home.path());
    assert!(
        stored.contains("HERMES_HOME="),
        "the tool result was stored"
    );
    assert!(
        leaked(&stored).is_empty(),
        "state.db holds {:?}",
        leaked(&stored)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_error_echoing_secrets_reaches_the_chat_masked() {
    let rig = start_with_secrets().await;
    rig.model.push(Step::Error {
        status: 400,
        headers: Vec::new(),
        message: format!("bad request: key {SHAPED_KEY} and hook {WEBHOOK_SECRET} refused"),
    });
    say(&rig, "hello");
    let reply = wait_reply(&rig, "Sorry, that failed").await;
    assert!(reply.contains("bad request: key "), "{reply}");
    assert!(leaked(&reply).is_empty(), "the chat got a secret: {reply}");
    rig.stop().await;
}
