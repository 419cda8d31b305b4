//! Script jobs and a job's own endpoint through the real binary, the fake Bot API and the
//! fake model. A `no_agent` job's script output is the message (empty or
//! `{"wakeAgent": false}` sends nothing, a failure or a path outside `scripts/` is an alert,
//! a script past `cron.script_timeout_seconds` is stopped, and the script never sees the
//! daemon's secrets); an agent job's script output reaches the model ahead of the prompt. A
//! job's `base_url` on its provider's host gets the request; one elsewhere is refused.

#[path = "cron_support/mod.rs"]
mod cron_support;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::path::Path;

use serde_json::{Value, json};
use support::fake_model::FakeModel;
use telegram_support::start;

/// Where every job here delivers (as MarkdownV2: assertions drop its escapes).
const CHAT: i64 = 4242;

/// A job due now, in the reference's stored shape, with `extra` fields on top.
fn job(id: &str, prompt: &str, extra: Value) -> Value {
    let now = chrono::Utc::now().to_rfc3339();
    let mut job = json!({
        "id": id, "name": id, "prompt": prompt,
        "schedule": {"kind": "once", "run_at": now, "display": "once"},
        "repeat": {"times": 1, "completed": 0}, "enabled": true, "state": "scheduled",
        "next_run_at": now, "deliver": format!("telegram:{CHAT}"),
    });
    for (key, value) in extra.as_object().unwrap() {
        job[key] = value.clone();
    }
    job
}

fn write_jobs(home: &Path, jobs: &[Value]) {
    std::fs::create_dir_all(home.join("cron")).unwrap();
    let doc = json!({"jobs": jobs});
    std::fs::write(home.join("cron/jobs.json"), doc.to_string()).unwrap();
}

fn script(home: &Path, name: &str, body: &str) {
    std::fs::create_dir_all(home.join("scripts")).unwrap();
    std::fs::write(home.join("scripts").join(name), body).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_agent_scripts_are_the_message_and_fail_loudly_and_safely() {
    let config = "cron:\n  tick_seconds: 1\n  script_timeout_seconds: 3\n";
    let mut rig = start("", config, &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.stop_daemon().await;
    script(&home, "disk.sh", "echo \"disk at 91%\"\n");
    script(
        &home,
        "quiet.sh",
        "echo checked\necho '{\"wakeAgent\": false}'\n",
    );
    script(&home, "empty.sh", "true\n");
    script(&home, "broken.sh", "echo oops >&2\nexit 3\n");
    script(&home, "slow.sh", "sleep 60\n");
    script(
        &home,
        "token.sh",
        "echo \"token=${TELEGRAM_BOT_TOKEN:-none}\"\n",
    );
    std::fs::write(home.join("outside.sh"), "echo escaped\n").unwrap();
    let no_agent = |script: &str| json!({"script": script, "no_agent": true});
    write_jobs(
        &home,
        &[
            job("aaaaaaaaaaa1", "", no_agent("disk.sh")),
            job("aaaaaaaaaaa2", "", no_agent("quiet.sh")),
            job("aaaaaaaaaaa3", "", no_agent("empty.sh")),
            job("aaaaaaaaaaa4", "", no_agent("broken.sh")),
            job("aaaaaaaaaaa5", "", no_agent("slow.sh")),
            job("aaaaaaaaaaa6", "", no_agent("token.sh")),
            job("aaaaaaaaaaa7", "", no_agent("../outside.sh")),
        ],
    );
    rig.start_daemon().await;
    let sent = rig.wait_sent_to(CHAT, 5).await;
    let about = |id: &str| -> Vec<String> {
        sent.iter()
            .filter(|m| m.text.contains(id))
            .map(|m| m.text.replace('\\', ""))
            .collect()
    };
    assert!(about("aaaaaaaaaaa1")[0].contains("disk at 91%"), "{sent:?}");
    let broken = about("aaaaaaaaaaa4");
    assert!(
        broken[0].contains("exited with code 3") && broken[0].contains("oops"),
        "{broken:?}"
    );
    let slow = about("aaaaaaaaaaa5");
    assert!(slow[0].contains("stopped after 3 s"), "{slow:?}");
    let token = about("aaaaaaaaaaa6");
    assert!(
        token[0].contains("token=none"),
        "the script saw the bot token: {token:?}"
    );
    let outside = about("aaaaaaaaaaa7");
    assert!(outside[0].contains("refused"), "{outside:?}");
    assert!(!sent.iter().any(|m| m.text.contains("escaped")), "{sent:?}");
    // The silent ones were recorded and delivered nothing; no job asked the model anything.
    rig.wait_for("every run recorded", |_| {
        let dirs = ["aaaaaaaaaaa2", "aaaaaaaaaaa3"]
            .iter()
            .filter(|id| home.join("cron/output").join(id).is_dir())
            .count();
        (dirs == 2).then_some(())
    })
    .await;
    assert_eq!(rig.sent_to(CHAT).len(), 5, "{:?}", rig.sent_to(CHAT));
    assert!(rig.model.requests().is_empty());
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_jobs_script_output_reaches_the_model_and_a_silent_script_skips_it() {
    let mut rig = start("", "cron:\n  tick_seconds: 1\n", &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.stop_daemon().await;
    script(&home, "feed.py", "print('three new papers on tides')\n");
    script(&home, "nothing.py", "print('{\"wakeAgent\": false}')\n");
    write_jobs(
        &home,
        &[
            job(
                "bbbbbbbbbbb1",
                "summarise the feed",
                json!({"script": "feed.py"}),
            ),
            job(
                "bbbbbbbbbbb2",
                "never asked",
                json!({"script": "nothing.py"}),
            ),
        ],
    );
    rig.start_daemon().await;
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(sent[0].text.contains("bbbbbbbbbbb1"), "{sent:?}");
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 1, "the silent script skipped its agent");
    let body = requests[0].body["messages"].to_string();
    assert!(
        body.contains("three new papers on tides") && body.contains("summarise the feed"),
        "{body}"
    );
    rig.wait_for("the silent run recorded", |_| {
        home.join("cron/output/bbbbbbbbbbb2").is_dir().then_some(())
    })
    .await;
    assert_eq!(rig.sent_to(CHAT).len(), 1);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_base_url_on_its_providers_host_is_used_and_another_host_is_refused() {
    let own = FakeModel::start().await;
    let mut rig = start("", "cron:\n  tick_seconds: 1\n", &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.stop_daemon().await;
    write_jobs(
        &home,
        &[
            job(
                "ccccccccccc1",
                "use my endpoint",
                json!({"provider": "openai", "base_url": own.base_url()}),
            ),
            job(
                "ccccccccccc2",
                "send my key away",
                json!({"provider": "openai", "base_url": "http://198.51.100.7:9/v1"}),
            ),
            job(
                "ccccccccccc3",
                "no provider named",
                json!({"base_url": own.base_url()}),
            ),
        ],
    );
    rig.start_daemon().await;
    let sent = rig.wait_sent_to(CHAT, 3).await;
    let about = |id: &str| {
        sent.iter()
            .find(|m| m.text.contains(id) || m.text.contains(&format!("'{id}'")))
            .map(|m| m.text.replace('\\', ""))
            .unwrap_or_default()
    };
    assert!(
        about("ccccccccccc1").contains("echo: use my endpoint"),
        "{sent:?}"
    );
    assert!(
        about("ccccccccccc2").contains("refused for safety"),
        "{sent:?}"
    );
    assert!(
        about("ccccccccccc3").contains("explicit provider"),
        "{sent:?}"
    );
    let requests = own.requests();
    assert_eq!(
        requests.len(),
        1,
        "only the allowed job reached its endpoint"
    );
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test"));
    assert!(
        rig.model.requests().is_empty(),
        "no job fell back to the default endpoint"
    );
    rig.stop().await;
}
