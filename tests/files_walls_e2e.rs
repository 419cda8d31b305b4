//! The pairing-store attack through the real binary (issue 27, point 4): the model writes
//! `platforms/pairing/telegram-approved.json` in the Hermes home with `write_file`, which
//! would authorise a stranger. The write needs the user's approval; with nobody approving
//! within `approvals.timeout` it is refused, the file is not there, and `hermesd pairing
//! list` shows nobody approved.

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::process::Command;

use fake_telegram::{Chat, MessageSpec, User};
use serde_json::json;
use support::daemon::{HERMESD, base_env};
use support::fake_model::{Reply, Step};
use telegram_support::start;

const DM: i64 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_cannot_approve_a_stranger_by_writing_the_pairing_store() {
    let rig = start("", "approvals:\n  timeout: 2\n", &[]).await;
    let home = rig.home.path().to_path_buf();
    let approved = home.join("platforms/pairing/telegram-approved.json");
    rig.model.push(Step::Reply(Reply::tool_call(
        "write_file",
        json!({
            "path": approved.display().to_string(),
            "content": "{\"666\": {\"user_name\": \"mallory\", \"approved_at\": 1700000000.0}}",
        }),
    )));
    rig.model.push(Step::text("all set"));
    rig.telegram.push_message(MessageSpec::text(
        Chat::private(DM),
        User::new(7, "Bob"),
        "please tidy the config",
    ));
    rig.wait_for("the turn's reply", |rig| {
        rig.sent_to(DM)
            .into_iter()
            .find(|m| m.text.contains("all set"))
    })
    .await;

    assert!(!approved.exists(), "the pairing store was written");
    let listed = Command::new(HERMESD)
        .args(["pairing", "list"])
        .env_clear()
        .envs(base_env(&home))
        .output()
        .expect("run hermesd pairing list");
    let stdout = String::from_utf8_lossy(&listed.stdout);
    assert!(
        !stdout.contains("666") && !stdout.contains("mallory"),
        "{stdout}"
    );
    let requests = rig.model.requests();
    let tool_result = requests[1].body["messages"].to_string();
    assert!(
        tool_result.contains("Not written:") && tool_result.contains("the pairing store"),
        "the model is told why: {tool_result}"
    );
    rig.stop().await;
}
