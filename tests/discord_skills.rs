//! Skills on Discord through the real `hermesd run` binary and a wire-level fake Discord
//! (which enforces the documented application-command limits): the global commands are the
//! gateway's then the skills enabled for Discord, and the `/skill` slash command runs a turn
//! with the skill loaded.

#[path = "discord_rig/mod.rs"]
mod discord_rig;
mod support;

use std::time::Duration;

use discord_rig::Rig;
use support::fake_model::Step;

const COMMANDS: &str = "PUT /applications/{id}/commands";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_application_commands_and_a_slash_command_runs_the_skill() {
    let skills = tempfile::tempdir().unwrap();
    for (name, description, body) in [
        (
            "tide-tables",
            "Read tide tables",
            "Look up the harbour first.",
        ),
        ("knots", "Tie sailing knots", "Start with a bowline."),
    ] {
        let dir = skills.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n"),
        )
        .unwrap();
    }
    let mut rig = Rig::new(Duration::from_secs(30)).await;
    rig.append_config(&format!(
        "skills:\n  external_dirs: [\"{}\"]\n  platform_disabled:\n    discord: [knots]\n",
        skills.path().display()
    ));
    rig.launch().await;
    let calls = rig.fake.wait_for_calls(COMMANDS, 1).await;
    let names: Vec<&str> = calls[0]
        .body
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "new", "{names:?}");
    assert!(names.contains(&"tide-tables"), "{names:?}");
    assert!(!names.contains(&"knots"), "disabled on Discord: {names:?}");
    assert_eq!(calls[0].status, 200, "the fake accepted the list");

    rig.model.push(Step::text("High tide at 14:02"));
    let dm = rig.dm(&rig.owner.clone());
    rig.fake.push_slash_command(
        &dm,
        &rig.owner.clone(),
        "tide-tables",
        &[("args", "Dover tomorrow")],
    );
    rig.model
        .wait_for_requests(1, Duration::from_secs(60))
        .await;
    let user = rig.model.requests()[0].last_message_text();
    assert!(user.contains("Look up the harbour first."), "{user}");
    assert!(user.contains("Dover tomorrow"), "{user}");
    rig.stop().await;
}
