//! Scheduled jobs through the real binary, the fake Bot API and the fake model, continued:
//! "run now" from the CLI and from the agent's tool starts the job at once (the tick is an
//! hour here); a job for a platform's home channel reaches it (and its topic); a `[SILENT]`
//! or empty reply delivers nothing though the run is recorded; `cron.max_parallel_jobs`
//! bounds the runs in flight, the others wait and none is skipped or doubled; a job's skill
//! from `$HERMES_HOME/skills/` reaches the model.

#[path = "cron_support/mod.rs"]
mod cron_support;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use std::path::Path;

use serde_json::json;
use support::fake_model::{FakeCall, Reply, Step};
use telegram_support::start;

use cron_support::{add, cron_cli, in_seconds};

/// Ticks every second so tests wait seconds, not minutes.
const FAST: &str = "cron:\n  tick_seconds: 1\n";
/// A tick an hour apart: anything that runs within a test did not wait for it.
const SLOW: &str = "cron:\n  tick_seconds: 3600\ndisplay:\n  tool_progress: \"off\"\n";
const CHAT: i64 = 4242;

/// `(state, status, obligation_ids)` of every claimed run of `job_id`.
fn runs_of(home: &Path, job_id: &str) -> Vec<(String, Option<String>, Option<String>)> {
    let Ok(conn) = rusqlite::Connection::open_with_flags(
        home.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    ) else {
        return Vec::new();
    };
    let Ok(mut stmt) = conn
        .prepare("SELECT state, status, obligation_ids FROM hermesd_cron_runs WHERE job_id = ?1")
    else {
        return Vec::new();
    };
    stmt.query_map([job_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map(|rows| rows.filter_map(Result::ok).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_from_the_cli_and_the_tool_starts_at_once_not_at_the_next_tick() {
    let rig = start("", SLOW, &[]).await;
    let home = rig.home.path().to_path_buf();
    let id = add(
        &home,
        "every 2h",
        "water the plants",
        &["--deliver", &format!("telegram:{CHAT}")],
    );
    // From the shell, while the daemon runs: it notices the file changed.
    let out = cron_cli(&home, &["run", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(sent[0].text.contains("echo: water the plants"), "{sent:?}");
    // From a chat: the agent's tool asks for a run now.
    rig.model.push_all([
        Step::Reply(Reply {
            tool_calls: vec![FakeCall {
                id: "run".into(),
                name: "cronjob".into(),
                arguments: json!({"action": "run", "job_id": id}).to_string(),
            }],
            ..Reply::default()
        }),
        Step::text("Asked for a run."),
    ]);
    use fake_telegram::{Chat, User};
    rig.telegram
        .push_text(Chat::private(7), User::new(7, "Ann"), "run it now please");
    // The run's reply takes whichever step is left, so only the job id is asserted.
    let sent = rig.wait_sent_to(CHAT, 2).await;
    assert!(sent[1].text.contains(&id), "{sent:?}");
    rig.wait_for("both runs recorded", |_| {
        (runs_of(&home, &id)
            .iter()
            .filter(|r| r.0 == "finished")
            .count()
            == 2)
            .then_some(())
    })
    .await;
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_for_the_platform_reaches_its_home_channel_and_topic() {
    let home_chat = "-1009876";
    let rig = start(
        "",
        FAST,
        &[
            ("TELEGRAM_HOME_CHANNEL", home_chat),
            ("TELEGRAM_HOME_CHANNEL_THREAD_ID", "55"),
        ],
    )
    .await;
    let home = rig.home.path().to_path_buf();
    // `deliver: telegram` is the reference's form for "the platform's home channel".
    add(
        &home,
        &in_seconds(1),
        "morning briefing",
        &["--deliver", "telegram"],
    );
    let sent = rig.wait_sent_to(home_chat.parse().unwrap(), 1).await;
    assert!(sent[0].text.contains("echo: morning briefing"), "{sent:?}");
    assert_eq!(sent[0].thread_id, Some(55), "{sent:?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_or_empty_reply_delivers_nothing_but_the_run_is_recorded() {
    let rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.model.push(Step::text("[SILENT]"));
    let to_chat = format!("telegram:{CHAT}");
    let silent = add(
        &home,
        &in_seconds(1),
        "check quietly",
        &["--deliver", &to_chat],
    );
    rig.model.wait_for_requests(1, telegram_support::WAIT).await;
    // The second job starts after the first run took its step.
    rig.model.push(Step::text(""));
    let empty = add(
        &home,
        &in_seconds(1),
        "check emptily",
        &["--deliver", &to_chat],
    );
    for id in [&silent, &empty] {
        let run = rig
            .wait_for("the run recorded", |_| {
                runs_of(&home, id).into_iter().find(|r| r.0 == "finished")
            })
            .await;
        assert!(
            run.2
                .as_deref()
                .is_none_or(|ids| ids == "[]" || ids.is_empty()),
            "no delivery owed: {run:?}"
        );
        let records = std::fs::read_dir(home.join("cron/output").join(id.as_str()))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(records, 1, "the run's record is kept");
    }
    // A later job's delivery shows the chat lanes went on; it is the only message.
    let loud = add(
        &home,
        &in_seconds(1),
        "say something",
        &["--deliver", &to_chat],
    );
    let sent = rig.wait_sent_to(CHAT, 1).await;
    rig.wait_for("the loud run recorded", |_| {
        runs_of(&home, &loud)
            .into_iter()
            .find(|r| r.0 == "finished")
    })
    .await;
    let sent_now = rig.sent_to(CHAT);
    assert_eq!(sent_now.len(), 1, "{sent_now:?}");
    assert!(sent[0].text.contains("echo: say something"), "{sent:?}");
    rig.stop().await;
}

/// The most cron sessions open at one instant, from their start and end in state.db.
fn most_sessions_at_once(home: &Path) -> usize {
    let conn = rusqlite::Connection::open_with_flags(
        home.join("state.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = conn
        .prepare("SELECT started_at, ended_at FROM sessions WHERE source = 'cron'")
        .unwrap();
    let spans: Vec<(f64, f64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, Option<f64>>(1)?)))
        .unwrap()
        .filter_map(Result::ok)
        .map(|(start, end)| (start, end.unwrap_or(f64::MAX)))
        .collect();
    spans
        .iter()
        .map(|(at, _)| spans.iter().filter(|(s, e)| s <= at && at < e).count())
        .max()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_parallel_jobs_bounds_the_runs_in_flight_and_none_is_skipped_or_doubled() {
    let rig = start(
        "",
        "cron:\n  tick_seconds: 1\n  max_parallel_jobs: 2\n",
        &[],
    )
    .await;
    let home = rig.home.path().to_path_buf();
    // Every run's model call is held until the test opens the gate.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    rig.model.push_all((0..5).map(|_| Step::Gated {
        reply: Reply::text("done"),
        gate: gate.clone(),
    }));
    let at = in_seconds(3);
    let to_chat = format!("telegram:{CHAT}");
    let ids: Vec<String> = (0..5)
        .map(|i| add(&home, &at, &format!("task {i}"), &["--deliver", &to_chat]))
        .collect();
    rig.model.wait_for_requests(2, telegram_support::WAIT).await;
    let started: Vec<String> = rig.model_saw();
    let waiting: Vec<&String> = ids
        .iter()
        .enumerate()
        .filter(|(i, _)| !started.iter().any(|t| t.contains(&format!("task {i}"))))
        .map(|(_, id)| id)
        .collect();
    assert_eq!(waiting.len(), 3, "{started:?}");
    // The three others are claimed and wait for a place, without calling the model.
    for id in &waiting {
        let line = rig.daemon().wait_for_line_where(
            |l| l.contains("waiting for a free place") && l.contains(id.as_str()),
            telegram_support::WAIT,
        );
        assert!(
            line.is_some(),
            "job {id} never waited: {:#?}",
            rig.daemon().logs()
        );
    }
    assert_eq!(rig.model.requests().len(), 2, "{:?}", rig.model_saw());
    gate.add_permits(5);
    let sent = rig.wait_sent_to(CHAT, 5).await;
    for (i, id) in ids.iter().enumerate() {
        let deliveries = sent.iter().filter(|m| m.text.contains(id.as_str())).count();
        assert_eq!(deliveries, 1, "job {id}: {sent:?}");
        let calls = rig
            .model_saw()
            .iter()
            .filter(|t| t.contains(&format!("task {i}")))
            .count();
        assert_eq!(calls, 1, "job {id} ran once");
    }
    rig.wait_for("every run finished", |_| {
        ids.iter()
            .all(|id| runs_of(&home, id).iter().any(|r| r.0 == "finished"))
            .then_some(())
    })
    .await;
    assert_eq!(most_sessions_at_once(&home), 2);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_skill_from_the_home_reaches_the_model() {
    let rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    let skill = home.join("skills/tide-tables");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: tide-tables\ndescription: Read tide tables\n---\nGive high and low water in UTC, to the minute.\n",
    )
    .unwrap();
    add(
        &home,
        &in_seconds(1),
        "tides for tomorrow",
        &[
            "--deliver",
            &format!("telegram:{CHAT}"),
            "--skill",
            "tide-tables",
        ],
    );
    rig.model.wait_for_requests(1, telegram_support::WAIT).await;
    let body = rig.model.requests()[0].body["messages"].to_string();
    assert!(
        body.contains("Give high and low water in UTC, to the minute.")
            && body.contains("tides for tomorrow"),
        "{body}"
    );
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(!sent[0].text.contains("were not found"), "{sent:?}");
    rig.stop().await;
}
