//! Scheduled jobs through the real binary, the fake Bot API and the fake model: a job added
//! with `hermesd cron add` while the daemon runs is picked up at the next tick (on its own
//! model) and delivered once through the ledger; `kill -9` during a run closes it with a notice after the restart
//! and never runs it again; runs missed while the daemon was down run once within their grace
//! window and are skipped (logged, `last_status`) beyond it; bad input is refused and a
//! broken job never stops the others; a corrupt jobs file is left untouched.

#[path = "cron_support/mod.rs"]
mod cron_support;
mod support;
#[path = "telegram_support/mod.rs"]
mod telegram_support;

use serde_json::json;
use support::fake_model::Step;
use telegram_support::start;

use cron_support::{add, cron_cli, in_seconds, jobs};

/// Ticks every second so tests wait seconds, not minutes.
const FAST: &str = "cron:\n  tick_seconds: 1\n";
const CHAT: i64 = 4242;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_added_while_running_is_delivered_once_and_recorded() {
    let rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    let id = add(
        &home,
        &in_seconds(2),
        "report the weather",
        &[
            "--deliver",
            &format!("telegram:{CHAT}"),
            "--name",
            "weather",
            "--model",
            "weather-model",
        ],
    );
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(
        sent[0].text.contains("echo: report the weather"),
        "{sent:?}"
    );
    assert!(
        sent[0].text.contains(&id),
        "the wrapper names the job: {sent:?}"
    );
    // A second job proves later ticks happened; the first was still delivered only once.
    add(
        &home,
        &in_seconds(1),
        "second",
        &["--deliver", &format!("telegram:{CHAT}")],
    );
    let sent = rig.wait_sent_to(CHAT, 2).await;
    let firsts = sent
        .iter()
        .filter(|m| m.text.contains("report the weather"))
        .count();
    assert_eq!(firsts, 1, "{sent:?}");
    // The one-shot used its only run: it left jobs.json; its record stays in cron/output.
    rig.wait_for("the one-shot removed", |_| {
        (!jobs(&home).iter().any(|j| j["id"] == id.as_str())).then_some(())
    })
    .await;
    let outputs: Vec<_> = std::fs::read_dir(home.join("cron/output").join(&id))
        .unwrap()
        .collect();
    assert_eq!(outputs.len(), 1);
    // The run is a fresh cron session in state.db; its request carried no chat history.
    let requests = rig.model.requests();
    let job_request = requests
        .iter()
        .find(|r| {
            r.body["messages"]
                .to_string()
                .contains("report the weather")
        })
        .unwrap();
    let users = job_request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .count();
    assert_eq!(users, 1);
    assert_eq!(
        job_request.model(),
        Some("weather-model"),
        "the job's model override"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_run_closes_it_with_a_notice_and_never_runs_it_again() {
    let mut rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    // The model never answers this run: the process dies while it is in flight.
    rig.model.push(Step::Stall);
    let id = add(
        &home,
        &in_seconds(1),
        "long research",
        &[
            "--deliver",
            &format!("telegram:{CHAT}"),
            "--name",
            "research",
        ],
    );
    rig.model.wait_for_requests(1, telegram_support::WAIT).await;
    rig.crash_and_restart().await;
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(
        sent[0].text.contains("research") && sent[0].text.contains("interrupted"),
        "{sent:?}"
    );
    rig.wait_for("the outcome in jobs.json", |_| {
        (!jobs(&home).iter().any(|j| j["id"] == id.as_str())).then_some(())
    })
    .await;
    // A later job's delivery shows ticks went on; the interrupted one never ran again.
    add(
        &home,
        &in_seconds(1),
        "after",
        &["--deliver", &format!("telegram:{CHAT}")],
    );
    let sent = rig.wait_sent_to(CHAT, 2).await;
    assert_eq!(sent.len(), 2, "{sent:?}");
    let research_calls = rig
        .model_saw()
        .iter()
        .filter(|t| t.contains("long research"))
        .count();
    assert_eq!(
        research_calls, 1,
        "the interrupted run was not started again"
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_missed_while_down_run_once_within_grace_and_are_skipped_beyond_it() {
    let mut rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.stop_daemon().await;
    let now = chrono::Utc::now();
    let iso = |minutes: i64| (now - chrono::Duration::minutes(minutes)).to_rfc3339();
    // Written before the daemon starts, as a home whose daemon was down would have it.
    let file = json!({"jobs": [
        {"id": "aaaaaaaaaaaa", "name": "within", "prompt": "hourly digest",
         "schedule": {"kind": "interval", "minutes": 60, "display": "every 60m"},
         "repeat": {"times": null, "completed": 0}, "enabled": true, "state": "scheduled",
         "next_run_at": iso(5), "deliver": format!("telegram:{CHAT}"), "a_future_field": [1]},
        {"id": "bbbbbbbbbbbb", "name": "beyond", "prompt": "ten-minute check",
         "schedule": {"kind": "interval", "minutes": 10, "display": "every 10m"},
         "repeat": {"times": null, "completed": 0}, "enabled": true, "state": "scheduled",
         "next_run_at": iso(20), "deliver": format!("telegram:{CHAT}")},
        {"id": "cccccccccccc", "name": "broken", "prompt": "never",
         "schedule": {"kind": "cron", "expr": "99 * * * *"}, "enabled": true,
         "next_run_at": iso(1), "deliver": format!("telegram:{CHAT}")}
    ]});
    std::fs::create_dir_all(home.join("cron")).unwrap();
    std::fs::write(
        home.join("cron/jobs.json"),
        serde_json::to_string_pretty(&file).unwrap(),
    )
    .unwrap();
    rig.start_daemon().await;
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(sent[0].text.contains("echo: hourly digest"), "{sent:?}");
    let skipped = rig
        .wait_for("the missed run skipped", |_| {
            jobs(&home)
                .into_iter()
                .find(|j| j["id"] == "bbbbbbbbbbbb" && j["last_status"] == "skipped")
        })
        .await;
    assert!(
        skipped["last_error"].as_str().unwrap().contains("grace"),
        "{skipped}"
    );
    assert!(
        rig.daemon()
            .wait_for_line("beyond its grace window", telegram_support::WAIT)
            .is_some()
    );
    assert!(
        rig.daemon()
            .wait_for_line("cannot be scheduled as stored", telegram_support::WAIT)
            .is_some()
    );
    let within = rig
        .wait_for("the run recorded", |_| {
            jobs(&home)
                .into_iter()
                .find(|j| j["id"] == "aaaaaaaaaaaa" && j["last_status"] == "ok")
        })
        .await;
    assert_eq!(
        within["a_future_field"],
        json!([1]),
        "unknown fields survive"
    );
    assert_eq!(within["repeat"]["completed"], 1);
    assert!(
        !rig.model_saw()
            .iter()
            .any(|t| t.contains("ten-minute check") || t.contains("never"))
    );
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_a_corrupt_file_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let out = cron_cli(home, &["add", "every fortnight-ish", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("accepted forms"),
        "{out:?}"
    );
    let out = cron_cli(home, &["add", "every 5m", "x", "--deliver", "myspace:1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\"myspace\" is not a platform"),
        "{out:?}"
    );
    let out = cron_cli(home, &["add", "2001-01-01T00:00", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already passed"),
        "{out:?}"
    );
    assert!(!home.join("cron/jobs.json").exists(), "nothing was written");
    // A corrupt file: the CLI and the daemon refuse it, and its bytes stay as they were.
    std::fs::create_dir_all(home.join("cron")).unwrap();
    std::fs::write(home.join("cron/jobs.json"), "{\"jobs\": [").unwrap();
    let out = cron_cli(home, &["list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a valid jobs file"),
        "{out:?}"
    );
    let out = cron_cli(home, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["readable"], false, "{status}");
    assert!(
        status["error"]
            .as_str()
            .unwrap()
            .contains("not a valid jobs file")
    );
    let out = cron_cli(home, &["pause", "anything"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(home.join("cron/jobs.json")).unwrap(),
        "{\"jobs\": ["
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_made_from_a_chat_delivers_back_to_it_and_cron_lists_it() {
    use fake_telegram::{Chat, User};
    use support::fake_model::{FakeCall, Reply};
    let quiet = format!("{FAST}display:\n  tool_progress: \"off\"\n");
    let rig = start("", &quiet, &[]).await;
    let chat = 7;
    // The agent calls the tool (a repeating job and a one-shot), then answers.
    let create = |name: &str, schedule: &str, prompt: &str| FakeCall {
        id: name.into(),
        name: "cronjob".into(),
        arguments:
            json!({"action": "create", "schedule": schedule, "prompt": prompt, "name": name})
                .to_string(),
    };
    rig.model.push_all([
        Step::Reply(Reply {
            tool_calls: vec![
                create("daily", "0 8 * * *", "morning digest"),
                create("soon", &in_seconds(2), "tea reminder"),
            ],
            ..Reply::default()
        }),
        Step::text("Both are scheduled."),
    ]);
    rig.telegram
        .push_text(Chat::private(chat), User::new(chat, "Ann"), "remind me");
    let sent = rig.wait_sent_to(chat, 1).await;
    assert!(sent[0].text.starts_with("Both are scheduled"), "{sent:?}");
    // The one-shot runs in a fresh session and comes back to the chat it was made in.
    let sent = rig.wait_sent_to(chat, 2).await;
    assert!(sent[1].text.contains("echo: tea reminder"), "{sent:?}");
    let home = rig.home.path().to_path_buf();
    let daily = jobs(&home)
        .into_iter()
        .find(|j| j["name"] == "daily")
        .expect("daily job");
    assert_eq!(daily["deliver"], "origin");
    assert_eq!(daily["origin"]["platform"], "telegram");
    assert_eq!(daily["origin"]["chat_id"], chat.to_string());
    rig.telegram
        .push_text(Chat::private(chat), User::new(chat, "Ann"), "/cron");
    let sent = rig.wait_sent_to(chat, 3).await;
    let id = daily["id"].as_str().unwrap();
    assert!(sent[2].text.contains(id), "{id} {sent:?}");
    assert!(!sent[2].text.contains("tea reminder"), "{sent:?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_keeps_a_corrupt_jobs_file_aside_and_doctor_reports_it() {
    let mut rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.stop_daemon().await;
    std::fs::create_dir_all(home.join("cron")).unwrap();
    std::fs::write(home.join("cron/jobs.json"), "{\"jobs\": [{\"id\": ").unwrap();
    rig.start_daemon().await;
    let line = rig
        .daemon()
        .wait_for_line("is not valid JSON", telegram_support::WAIT);
    let line = line.expect("logged");
    assert!(line.contains("kept aside"), "{line}");
    let aside: Vec<_> = std::fs::read_dir(home.join("cron"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("jobs.json.corrupt-")
        })
        .collect();
    assert_eq!(aside.len(), 1);
    assert_eq!(
        std::fs::read_to_string(aside[0].path()).unwrap(),
        "{\"jobs\": [{\"id\": "
    );
    let doctor = std::process::Command::new(support::daemon::HERMESD)
        .args(["doctor", "--offline", "--json"])
        .env_clear()
        .envs(support::daemon::base_env(&home))
        .env("TELEGRAM_BOT_TOKEN", fake_telegram::TOKEN)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(report.contains("jobs.json.corrupt-"), "{report}");
    // Scheduling goes on: a new job runs.
    add(
        &home,
        &in_seconds(1),
        "after repair",
        &["--deliver", &format!("telegram:{CHAT}")],
    );
    let sent = rig.wait_sent_to(CHAT, 1).await;
    assert!(sent[0].text.contains("echo: after repair"), "{sent:?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chained_output_and_a_toolset_limit_reach_the_run() {
    let mut rig = start("", FAST, &[]).await;
    let home = rig.home.path().to_path_buf();
    rig.stop_daemon().await;
    // Job A ran before (its record is on disk); job B reads it and may only use `memory`.
    std::fs::create_dir_all(home.join("cron/output/aaaaaaaaaaaa")).unwrap();
    std::fs::write(
        home.join("cron/output/aaaaaaaaaaaa/2026-01-01_08-00-00.md"),
        "# Cron Job: collect\n\n## Response\n\nthree new papers on tides\n",
    )
    .unwrap();
    let file = json!({"jobs": [
        {"id": "bbbbbbbbbbbb", "name": "digest", "prompt": "summarise what was collected",
         "schedule": {"kind": "interval", "minutes": 60, "display": "every 60m"},
         "repeat": {"times": null, "completed": 0}, "enabled": true, "state": "scheduled",
         "next_run_at": chrono::Utc::now().to_rfc3339(), "deliver": "local",
         "context_from": ["aaaaaaaaaaaa"], "enabled_toolsets": ["memory"]}
    ]});
    std::fs::write(home.join("cron/jobs.json"), file.to_string()).unwrap();
    rig.start_daemon().await;
    rig.model.wait_for_requests(1, telegram_support::WAIT).await;
    let request = &rig.model.requests()[0];
    let body = request.body["messages"].to_string();
    assert!(
        body.contains("three new papers on tides") && body.contains("summarise what was collected"),
        "{body}"
    );
    let tools: Vec<String> = request.body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|d| d["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(tools, ["memory"], "only the job's toolset is offered");
    rig.stop().await;
}
