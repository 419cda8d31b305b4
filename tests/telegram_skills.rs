//! Skills on Telegram through the real `hermesd run` binary and a wire-level fake Bot API
//! (which enforces setMyCommands' documented limits): the menu carries the gateway's
//! commands then the skills enabled for Telegram, within 100 entries, and `/skill_name args`
//! from the menu runs a turn with the skill loaded.

mod support;

use std::time::Duration;

use fake_telegram::{Chat, FakeTelegram, TOKEN, User};
use support::daemon::{Daemon, base_env};
use support::fake_model::{FakeModel, Step};

const WAIT: Duration = Duration::from_secs(60);

fn skill(home: &std::path::Path, name: &str, description: &str, body: &str) {
    let dir = home.join("skills").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_menu_lists_enabled_skills_within_the_limit_and_a_menu_command_runs_the_skill() {
    let telegram = FakeTelegram::start().await;
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    skill(
        home.path(),
        "tide-tables",
        "Read tide tables",
        "Look up the harbour first.",
    );
    skill(
        home.path(),
        "knots",
        "Tie sailing knots",
        "Start with a bowline.",
    );
    skill(
        home.path(),
        "status",
        "Clashes with a gateway command",
        "Never in the menu.",
    );
    for i in 0..120 {
        skill(
            home.path(),
            &format!("z-filler-{i:03}"),
            "Filler",
            "Nothing.",
        );
    }
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "telegram:\n  enabled: true\n  extra:\n    base_url: {}\n    poll_timeout_seconds: 2\n\
             skills:\n  platform_disabled:\n    telegram: [knots]\n",
            telegram.url()
        ),
    )
    .unwrap();
    let mut env = base_env(home.path());
    env.extend(
        [
            ("TELEGRAM_BOT_TOKEN", TOKEN.to_owned()),
            ("TELEGRAM_ALLOWED_USERS", "9001".to_owned()),
            ("API_SERVER_ENABLED", "false".to_owned()),
            ("OPENAI_BASE_URL", model.base_url()),
            ("OPENAI_API_KEY", "sk-test".to_owned()),
            ("HERMES__MODEL__PROVIDER", "openai".to_owned()),
            ("HERMES__MODEL__DEFAULT", "fake-model".to_owned()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let (h, e) = (home.path().to_path_buf(), env.clone());
    let daemon = tokio::task::spawn_blocking(move || Daemon::start(&h, &e))
        .await
        .unwrap();

    // The adapter polls only after setMyCommands was answered.
    telegram
        .wait_for_calls("getUpdates", 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}", daemon.logs()));
    let names: Vec<String> = telegram
        .commands()
        .iter()
        .map(|c| c["command"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names.len(),
        100,
        "Telegram's limit: {names:?} {:?}",
        telegram
            .calls_of("setMyCommands")
            .iter()
            .map(|c| (c.status, c.params.clone()))
            .collect::<Vec<_>>()
    );
    assert_eq!(names[0], "new", "the gateway's commands come first");
    assert!(names.contains(&"tide_tables".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"knots".to_owned()),
        "disabled on Telegram: {names:?}"
    );
    assert_eq!(names.iter().filter(|n| *n == "status").count(), 1);

    model.push(Step::text("High tide at 14:02."));
    telegram.push_text(
        Chat::private(9001),
        User::new(9001, "Ada"),
        "/tide_tables Dover tomorrow",
    );
    assert!(
        telegram.wait_sent_count(1, WAIT).await,
        "no reply: {:#?}",
        daemon.logs()
    );
    let request = &model.requests()[0].body;
    let user = request["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(user.contains("Look up the harbour first."), "{user}");
    assert!(user.contains("Dover tomorrow"), "{user}");
    let sent = telegram.sent_messages();
    assert!(
        sent.iter().any(|m| m.text.contains("High tide at 14:02")),
        "{sent:#?}"
    );
    daemon.terminate();
}
