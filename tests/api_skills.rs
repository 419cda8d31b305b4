//! Skills over the HTTP API through the real `hermesd run` binary, as Hermes 0.19's API
//! server offers them: `GET /v1/skills` lists the skills the agent can load (disabled ones
//! left out, sorted by category then name, behind the API key), and a `/skill-name` chat
//! message is not a command there — it reaches the model as written, and the model loads
//! the skill through `skill_view` from the index in its prompt.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::daemon::{API_KEY, Daemon, api_env};
use support::fake_model::FakeModel;

fn skill(home: &std::path::Path, path: &str, name: &str, description: &str) {
    let dir = home.join("skills").join(path);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\nBody of {name}.\n"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_lists_skills_and_passes_slash_text_to_the_model() {
    let model = FakeModel::start().await;
    let home = tempfile::tempdir().unwrap();
    skill(
        home.path(),
        "sea/tide-tables",
        "tide-tables",
        "Read tide tables",
    );
    skill(home.path(), "sea/knots", "knots", "Tie sailing knots");
    skill(home.path(), "almanac", "almanac", "Sunrise and sunset");
    skill(home.path(), "sea/hidden", "hidden", "Disabled for the API");
    std::fs::write(
        home.path().join("config.yaml"),
        "skills:\n  platform_disabled:\n    api_server: [hidden]\n\
         auxiliary:\n  title_generation:\n    enabled: false\n",
    )
    .unwrap();
    let daemon = Daemon::start(home.path(), &api_env(home.path(), &model.base_url()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();

    let anonymous = client
        .get(format!("{}/v1/skills", daemon.api_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    let listed: Value = client
        .get(format!("{}/v1/skills", daemon.api_url()))
        .bearer_auth(API_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["object"], "list");
    assert_eq!(
        listed["data"],
        json!([
            {"name": "almanac", "description": "Sunrise and sunset", "category": null},
            {"name": "knots", "description": "Tie sailing knots", "category": "sea"},
            {"name": "tide-tables", "description": "Read tide tables", "category": "sea"},
        ])
    );

    let reply = client
        .post(format!("{}/v1/chat/completions", daemon.api_url()))
        .bearer_auth(API_KEY)
        .json(&json!({"model": "hermes-agent", "messages": [
            {"role": "user", "content": "/tide-tables Dover"}
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let requests = model.requests();
    assert_eq!(requests.len(), 1, "a model turn, not a command reply");
    let body = &requests[0].body;
    assert_eq!(requests[0].last_message_text(), "/tide-tables Dover");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("- tide-tables: Read tide tables"),
        "the index is in the prompt: {system}"
    );
    assert!(!system.contains("- hidden"), "{system}");
    daemon.terminate();
}
