//! Skills on Telegram through the real `hermesd run` binary and a wire-level fake Bot API
//! (which enforces setMyCommands' documented limits): the menu carries the gateway's
//! commands then the skills enabled for Telegram (here from `skills.external_dirs`), within
//! 100 entries, and `/skill_name args` from the menu runs a turn with the skill loaded
//! (its `${HERMES_SKILL_DIR}` filled in).

mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use fake_telegram::{Chat, User};
use support::fake_model::Step;
use telegram_support::WAIT;

fn skill(root: &std::path::Path, name: &str, description: &str, body: &str) {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_menu_lists_enabled_skills_within_the_limit_and_a_menu_command_runs_the_skill() {
    let skills = tempfile::tempdir().unwrap();
    skill(
        skills.path(),
        "tide-tables",
        "Read tide tables",
        "Look up the harbour first. Tables: ${HERMES_SKILL_DIR}/references/dover.csv",
    );
    skill(
        skills.path(),
        "knots",
        "Tie sailing knots",
        "Start with a bowline.",
    );
    skill(
        skills.path(),
        "status",
        "Clashes with a gateway command",
        "Never in the menu.",
    );
    for i in 0..120 {
        skill(
            skills.path(),
            &format!("z-filler-{i:03}"),
            "Filler",
            "Nothing.",
        );
    }
    let tail = format!(
        "skills:\n  external_dirs: [\"{}\"]\n  platform_disabled:\n    telegram: [knots]\n",
        skills.path().display()
    );
    let rig = telegram_support::start("", &tail, &[]).await;
    let telegram = &rig.telegram;

    // The adapter polls only after setMyCommands was answered.
    telegram
        .wait_for_calls("getUpdates", 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}", rig.daemon().logs()));
    let names: Vec<String> = telegram
        .commands()
        .iter()
        .map(|c| c["command"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 100, "Telegram's limit: {names:?}");
    assert_eq!(names[0], "new", "the gateway's commands come first");
    assert!(names.contains(&"tide_tables".to_owned()), "{names:?}");
    assert!(
        !names.contains(&"knots".to_owned()),
        "disabled on Telegram: {names:?}"
    );
    assert_eq!(names.iter().filter(|n| *n == "status").count(), 1);

    rig.model.push(Step::text("High tide at 14:02."));
    telegram.push_text(
        Chat::private(9001),
        User::new(9001, "Ada"),
        "/tide_tables Dover tomorrow",
    );
    assert!(
        telegram.wait_sent_count(1, WAIT).await,
        "no reply: {:#?}",
        rig.daemon().logs()
    );
    let user = rig.model.requests()[0].last_message_text();
    assert!(user.contains("Look up the harbour first."), "{user}");
    assert!(user.contains("Dover tomorrow"), "{user}");
    // `skills.template_vars` (on by default) fills in the skill's own directory.
    let tables = skills.path().join("tide-tables/references/dover.csv");
    assert!(
        user.contains(&format!("Tables: {}", tables.display())),
        "{user}"
    );
    let sent = telegram.sent_messages();
    assert!(
        sent.iter().any(|m| m.text.contains("High tide at 14:02")),
        "{sent:#?}"
    );
}
