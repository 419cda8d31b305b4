//! `/stop` from a chat interrupts a turn waiting on an MCP tool, through the real
//! `hermesd run` binary: Telegram (the wire-level fake Bot API) and the Python SDK test
//! server over stdio. The server hears `notifications/cancelled` for the call, the chat gets
//! the stop acknowledgement, and the next message is answered normally.

#[path = "mcp_support/mod.rs"]
mod mcp_support;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, User};
use mcp_support::{wait_connected, wait_for_file};
use serde_json::json;
use support::fake_model::{Reply, Step};
use support::mcp_servers;
use telegram_support::start;

const CHAT: i64 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_cancels_a_running_mcp_call_and_the_chat_goes_on() {
    let tail = format!(
        "display:\n  tool_progress: \"off\"\nmcp_servers:\n  local:\n    command: {}\n    args: [{}, stdio]\n",
        mcp_servers::python(),
        mcp_servers::script().display()
    );
    let rig = start("", &tail, &[]).await;
    wait_connected(&rig.daemon().admin_url(), "local").await;

    let marker = rig.home.path().join("stop.pid");
    // Only the tool call is scripted: a model call after the stop would be answered by
    // the fake's echo and show up in the chat.
    rig.model.push(Step::Reply(Reply::tool_call(
        "mcp__local__hang",
        json!({"marker": marker.display().to_string()}),
    )));
    let user = || User::new(CHAT, "Ann");
    rig.telegram
        .push_text(Chat::private(CHAT), user(), "start the slow tool");
    wait_for_file(&marker).await;
    rig.telegram.push_text(Chat::private(CHAT), user(), "/stop");

    assert_eq!(
        wait_for_file(&marker.with_extension("pid.cancelled")).await,
        "cancelled",
        "the server heard notifications/cancelled"
    );
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(sent[0].text.contains("Stopped"), "{sent:?}");

    // The next message is a normal turn; the stopped one left nothing behind.
    rig.telegram
        .push_text(Chat::private(CHAT), user(), "are you there?");
    let sent = rig.wait_sent_to(CHAT, 2).await;
    assert!(sent[1].text.contains("echo: are you there?"), "{sent:?}");
    assert!(
        !sent.iter().any(|m| m.text.contains("start the slow tool")),
        "the stopped turn made no further model call: {sent:?}"
    );
    // The model was asked twice: the stopped turn's first call and the new turn.
    assert_eq!(rig.model.requests().len(), 2);
}
