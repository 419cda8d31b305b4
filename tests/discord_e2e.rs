//! Discord end to end through the real `hermesd run` binary, a wire-level fake Discord and
//! the fake model: DM conversations keep their history; strangers get a pairing code (with
//! `dm_policy: pairing`) or silence (an allowlist alone), never the model; guild mention gating, free-response and ignored channels; the
//! auto-thread flow with the session title renaming the thread; a 5,000-character reply in
//! chunks within Discord's 2,000; button approval of a dangerous command, where only the
//! allowed user's click counts.

#[path = "discord_rig/mod.rs"]
mod rig;
mod support;

use std::time::Duration;

use rig::{
    EDIT_ORIGINAL, INTERACTION_CALLBACK, MODIFY_CHANNEL, Rig, START_THREAD, content, conversation,
};
use support::fake_model::{Reply, Step};

const HEARTBEAT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dm_conversation_keeps_history_and_strangers_pair_before_reaching_the_model() {
    let mut rig = Rig::new(HEARTBEAT).await;
    rig.add_extra("dm_policy", "pairing");
    rig.launch().await;
    let dm = rig.dm(&rig.owner);

    rig.say(&dm, &rig.owner, "my name is Ada");
    assert_eq!(rig.wait_texts(&dm, 1).await, ["echo: my name is Ada"]);
    rig.say(&dm, &rig.owner, "what is my name?");
    let texts = rig.wait_texts(&dm, 2).await;
    assert_eq!(texts, ["echo: my name is Ada", "echo: what is my name?"]);
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        conversation(&requests[1].body),
        [
            ("user".to_owned(), "my name is Ada".to_owned()),
            ("assistant".to_owned(), "echo: my name is Ada".to_owned()),
            ("user".to_owned(), "what is my name?".to_owned()),
        ],
        "the second turn carries the first exchange"
    );

    // A stranger's DM (`dm_policy: pairing`): a pairing code, nothing for the model. In a
    // guild: silence.
    let stranger = rig.fake.new_user("mallory", false, &[]);
    let stranger_dm = rig.dm(&stranger);
    rig.say(&stranger_dm, &stranger, "let me in");
    let reply = rig.wait_texts(&stranger_dm, 1).await;
    assert!(reply[0].contains("pairing code"), "{reply:?}");
    let code = reply[0]
        .split('`')
        .nth(1)
        .expect("code in backticks")
        .to_owned();
    let general = rig.fake.add_text_channel("general");
    let ignored_mention = rig.mention(&general, &stranger, "answer me");
    // Handled in order: once the owner's later message is answered, the stranger's was seen.
    rig.say(&dm, &rig.owner, "still there?");
    rig.wait_texts(&dm, 3).await;
    assert!(rig.texts_in(&general).is_empty());
    // The core refused the sender, so the auto-thread was never opened.
    assert!(rig.texts_in(&ignored_mention).is_empty());
    assert!(
        rig.fake.calls_to(START_THREAD).is_empty(),
        "a stranger's mention opens no thread"
    );
    assert_eq!(
        rig.model_saw(),
        ["my name is Ada", "what is my name?", "still there?"]
    );
    assert_eq!(rig.texts_in(&stranger_dm).len(), 1, "one pairing reply");

    // The owner approves the code: the stranger's next DM is answered.
    let approve = std::process::Command::new(support::daemon::HERMESD)
        .args(["pairing", "approve", "discord", &code])
        .env("HERMES_HOME", rig.home.path())
        .env("HERMES_TEST_ISOLATION", "1")
        .output()
        .unwrap();
    assert!(approve.status.success(), "{approve:?}");
    rig.say(&stranger_dm, &stranger, "now?");
    let texts = rig.wait_texts(&stranger_dm, 2).await;
    assert_eq!(texts[1], "echo: now?");
    assert!(rig.fake.read(|s| s.unrouted.is_empty()));
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guild_messages_need_a_mention_except_in_free_channels_and_never_in_ignored_ones() {
    let mut rig = Rig::new(HEARTBEAT).await;
    let general = rig.fake.add_text_channel("general");
    let free = rig.fake.add_text_channel("free-chat");
    let ignored = rig.fake.add_text_channel("off-limits");
    rig.set_env("DISCORD_FREE_RESPONSE_CHANNELS", &free);
    rig.set_env("DISCORD_IGNORED_CHANNELS", &ignored);
    rig.set_env("DISCORD_AUTO_THREAD", "false");
    rig.set_env("HERMES__AUXILIARY__TITLE_GENERATION__ENABLED", "false");
    rig.launch().await;

    rig.say(&general, &rig.owner, "just chatting with friends");
    rig.mention(&ignored, &rig.owner, "are you here?");
    rig.mention(&general, &rig.owner, "what is 2+2");
    assert_eq!(rig.wait_texts(&general, 1).await, ["echo: what is 2+2"]);
    // With an allowlist and no pairing policy, a stranger's DM is dropped silently (as the
    // reference does), and so is their message in a free channel.
    let stranger = rig.fake.new_user("mallory", false, &[]);
    let stranger_dm = rig.dm(&stranger);
    rig.say(&stranger_dm, &stranger, "let me in");
    rig.say(&free, &stranger, "me too");
    rig.say(&free, &rig.owner, "free talk");
    assert_eq!(rig.wait_texts(&free, 1).await, ["echo: free talk"]);
    assert!(rig.texts_in(&stranger_dm).is_empty());

    assert!(rig.texts_in(&ignored).is_empty());
    assert_eq!(rig.texts_in(&general).len(), 1);
    // The mention is stripped from what the model sees; the plain and ignored ones never
    // reached it.
    assert_eq!(rig.model_saw(), ["what is 2+2", "free talk"]);
    rig.stop().await;
    assert!(
        rig.model.title_requests().is_empty(),
        "auxiliary.title_generation.enabled=false: no title call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mention_opens_a_thread_that_is_renamed_from_the_session_title() {
    let mut rig = Rig::new(HEARTBEAT).await;
    let general = rig.fake.add_text_channel("general");
    rig.launch().await;
    rig.model
        .set_title_reply(Some("\"Title: Planning a Garden Party\""));

    let asked = rig.mention(&general, &rig.owner, "help me plan a garden party");
    let created = rig.fake.wait_for_calls(START_THREAD, 1).await;
    assert_eq!(
        created[0].path,
        format!("/api/v10/channels/{general}/messages/{asked}/threads")
    );
    // Discord gives a thread started from a message that message's id.
    let thread = asked.clone();
    assert_eq!(
        rig.wait_texts(&thread, 1).await,
        ["echo: help me plan a garden party"]
    );
    assert!(
        rig.texts_in(&general).is_empty(),
        "the reply went into the thread"
    );

    // The generated title (cleaned of quotes and the "Title:" prefix) renames the thread.
    let renames = rig.fake.wait_for_calls(MODIFY_CHANNEL, 1).await;
    assert_eq!(renames[0].path, format!("/api/v10/channels/{thread}"));
    assert_eq!(renames[0].body["name"], "Planning a Garden Party");
    let title_requests = rig.model.title_requests();
    assert_eq!(title_requests.len(), 1);
    assert!(
        title_requests[0].to_string().contains(
            "User: help me plan a garden party\\n\\nAssistant: echo: help me plan a garden party"
        ),
        "{title_requests:?}"
    );

    // A follow-up in the bot's thread needs no mention and continues the session.
    rig.say(&thread, &rig.owner, "and the food?");
    let texts = rig.wait_texts(&thread, 2).await;
    assert_eq!(texts[1], "echo: and the food?");
    let requests = rig.model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        conversation(&requests[1].body)[..2],
        [
            ("user".to_owned(), "help me plan a garden party".to_owned()),
            (
                "assistant".to_owned(),
                "echo: help me plan a garden party".to_owned()
            ),
        ]
    );

    // `/title` in the thread renames it too; the titled session asks for no new title.
    rig.say(&thread, &rig.owner, "/title Garden Party Logistics");
    let texts = rig.wait_texts(&thread, 3).await;
    assert_eq!(texts[2], "✏️ Session title set: **Garden Party Logistics**");
    let renames = rig.fake.calls_to(MODIFY_CHANNEL);
    assert_eq!(renames.len(), 2, "{renames:?}");
    assert_eq!(renames[1].body["name"], "Garden Party Logistics");
    let name = rig.fake.read(|s| s.channels[&thread].name.clone());
    assert_eq!(name.as_deref(), Some("Garden Party Logistics"));
    assert_eq!(rig.model.title_requests().len(), 1);
    assert_eq!(rig.fake.calls_to(START_THREAD).len(), 1, "one thread");
    rig.stop().await;
}

fn seeded_words(seed: u64, chars: usize) -> String {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let words = [
        "garden", "thé", "über", "川", "🌷", "party", "lantern", "naïve",
    ];
    let mut text = String::new();
    while text.chars().count() < chars {
        text.push_str(words[rng.random_range(0..words.len())]);
        text.push(if rng.random_ratio(1, 12) { '\n' } else { ' ' });
    }
    text.chars()
        .take(chars)
        .collect::<String>()
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5000_character_reply_arrives_in_chunks_of_at_most_2000() {
    let seed: u64 = rand::random();
    println!("seed = {seed}");
    let mut rig = Rig::new(HEARTBEAT).await;
    rig.launch().await;
    let dm = rig.dm(&rig.owner);
    let long = seeded_words(seed, 5_000);
    rig.model.push(Step::text(long.clone()));
    rig.say(&dm, &rig.owner, "write a lot");

    let texts = rig
        .fake
        .wait_for("the last chunk", |s| {
            let path = format!("/api/v10/channels/{dm}/messages");
            let texts: Vec<String> = s
                .calls
                .iter()
                .filter(|c| c.path == path && c.method == "POST" && c.status < 300)
                .map(content)
                .collect();
            let total = texts
                .first()?
                .rsplit_once('/')?
                .1
                .strip_suffix(')')?
                .to_owned();
            texts
                .last()?
                .ends_with(&format!("({total}/{total})"))
                .then_some(texts)
        })
        .await;
    assert!(texts.len() >= 3, "seed {seed}: {} chunks", texts.len());
    let total = texts.len();
    let mut rebuilt = String::new();
    for (i, chunk) in texts.iter().enumerate() {
        assert!(
            chunk.chars().count() <= 2000,
            "seed {seed}: chunk {i} has {} chars",
            chunk.chars().count()
        );
        let body = chunk
            .strip_suffix(&format!(" ({}/{total})", i + 1))
            .unwrap_or_else(|| panic!("seed {seed}: chunk {i} lacks its indicator"));
        rebuilt.push_str(body);
        rebuilt.push(' ');
    }
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(squash(&rebuilt), squash(&long), "seed {seed}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dangerous_command_runs_only_after_the_allowed_user_clicks_approve() {
    let mut rig = Rig::new(HEARTBEAT).await;
    let ops = rig.fake.add_text_channel("ops");
    rig.set_env("DISCORD_FREE_RESPONSE_CHANNELS", &ops);
    rig.launch().await;
    let target = rig.home.path().join("junk");
    std::fs::create_dir_all(target.join("inner")).unwrap();
    rig.model.push(Step::Reply(Reply::tool_call(
        "terminal",
        serde_json::json!({"command": format!("rm -rf {}", target.display())}),
    )));
    rig.model.push(Step::text("deleted it"));
    rig.say(&ops, &rig.owner, "clean up the junk");

    let prompt = rig
        .fake
        .wait_for("an approval prompt with buttons", |s| {
            s.history.get(&ops)?.iter().find_map(|m| {
                let buttons = m["components"][0]["components"].as_array()?;
                (m["content"].as_str()?.contains("Command Approval Required")).then(|| {
                    (
                        m["id"].as_str().unwrap_or_default().to_owned(),
                        buttons.clone(),
                    )
                })
            })
        })
        .await;
    let (prompt_id, buttons) = prompt;
    let ids: Vec<&str> = buttons
        .iter()
        .filter_map(|b| b["custom_id"].as_str())
        .collect();
    assert!(
        ids.contains(&"/approve") && ids.contains(&"/deny"),
        "{ids:?}"
    );

    // A stranger's click is not an approval; the owner's is.
    let stranger = rig.fake.new_user("mallory", false, &[]);
    let stranger_click = rig
        .fake
        .push_button_click(&ops, &prompt_id, &stranger, "/approve");
    let click = rig
        .fake
        .push_button_click(&ops, &prompt_id, &rig.owner, "/approve");
    rig.fake
        .wait_for("the reply after approval", |s| {
            let texts: Vec<String> = s
                .history
                .get(&ops)?
                .iter()
                .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
                .collect();
            // The approval's acknowledgement and the turn's reply are separate sends that
            // may arrive in either order.
            let acked = texts.iter().any(|t| t.starts_with("✅ Command approved."));
            (acked && texts.iter().any(|t| t == "deleted it")).then_some(())
        })
        .await;
    assert!(!target.exists(), "the approved command ran");
    let texts = rig.texts_in(&ops);
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.starts_with("✅ Command approved."))
            .count(),
        1,
        "{texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("No pending command")),
        "the stranger's click approved nothing: {texts:?}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("pairing code")),
        "no pairing code in a guild channel: {texts:?}"
    );
    assert_eq!(
        texts.iter().filter(|t| t.as_str() == "deleted it").count(),
        1
    );
    // Both clicks were acknowledged at once (DEFERRED_UPDATE, within Discord's 3 s); the
    // owner's accepted click then removed the buttons through `@original`.
    let answered = rig.fake.wait_for_calls(INTERACTION_CALLBACK, 2).await;
    for interaction in [&click, &stranger_click] {
        let answer = answered
            .iter()
            .find(|c| c.path.contains(&format!("/interactions/{interaction}/")))
            .expect("the click was acknowledged");
        assert_eq!(answer.body["type"], 6, "{:?}", answer.body);
        assert_eq!(answer.status, 204);
    }
    let edits = rig.fake.wait_for_calls(EDIT_ORIGINAL, 1).await;
    assert_eq!(edits.len(), 1, "only the accepted click edits the prompt");
    assert!(edits[0].path.contains(&format!("itoken-{click}")));
    assert_eq!(edits[0].body["components"], serde_json::json!([]));
    let buttons = rig.fake.read(|s| {
        s.history[&ops]
            .iter()
            .find(|m| m["id"] == prompt_id.as_str())
            .map(|m| m["components"].clone())
    });
    assert_eq!(buttons, Some(serde_json::json!([])));
    // The model got the command's result and nothing from the stranger.
    assert_eq!(rig.model.requests().len(), 2);
    assert_eq!(rig.model_saw(), ["clean up the junk", "clean up the junk"]);
    rig.stop().await;
}
