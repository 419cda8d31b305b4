use super::*;
use crate::cron::job::{NewJob, create};

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

const ZONE: Zone = Zone::Named(chrono_tz::UTC);

fn job(schedule: &str, created: &str) -> JobRecord {
    create(
        NewJob {
            prompt: "p".into(),
            schedule: schedule.into(),
            ..Default::default()
        },
        utc(created),
        ZONE,
    )
    .unwrap()
}

#[test]
fn a_due_recurring_job_runs_once_and_moves_on() {
    let mut jobs = vec![job("every 60m", "2026-03-01T09:00:00Z")];
    let not_yet = scan(&mut jobs, utc("2026-03-01T09:59:00Z"), ZONE, &|_| false);
    assert!(not_yet.due.is_empty());
    let first = scan(&mut jobs, utc("2026-03-01T10:00:30Z"), ZONE, &|_| false);
    assert_eq!(first.due.len(), 1);
    assert_eq!(
        first.due[0].scheduled_at,
        utc("2026-03-01T10:00:00Z").timestamp()
    );
    assert!(first.changed);
    let again = scan(&mut jobs, utc("2026-03-01T10:00:40Z"), ZONE, &|_| false);
    assert!(again.due.is_empty(), "one scheduled time gives one run");
}

#[test]
fn missed_runs_run_once_within_grace_and_are_skipped_beyond_it() {
    // Daily at 09:00: the grace is 2 h.
    let mut jobs = vec![job("0 9 * * *", "2026-03-01T08:00:00Z")];
    let within = scan(&mut jobs, utc("2026-03-03T10:30:00Z"), ZONE, &|_| false);
    // next_run_at was 2026-03-01T09:00 — two days late, beyond grace: skipped.
    assert!(within.due.is_empty());
    assert_eq!(jobs[0].last_status(), Some("skipped"));
    assert_eq!(
        jobs[0].next_run_at().unwrap().to_utc(),
        utc("2026-03-04T09:00:00Z")
    );
    let late = scan(&mut jobs, utc("2026-03-04T10:59:00Z"), ZONE, &|_| false);
    assert_eq!(late.due.len(), 1, "1 h 59 late is inside the 2 h grace");
}

#[test]
fn a_running_job_is_not_started_again_and_broken_jobs_do_not_stop_others() {
    let mut jobs = vec![
        job("every 5m", "2026-03-01T09:00:00Z"),
        job("every 5m", "2026-03-01T09:00:00Z"),
    ];
    jobs[1].set(
        "schedule",
        serde_json::json!({"kind": "cron", "expr": "99 * * * *"}),
    );
    let id = jobs[0].id().to_owned();
    let busy = scan(&mut jobs, utc("2026-03-01T09:05:10Z"), ZONE, &|j| j == id);
    assert!(busy.due.is_empty());
    assert_eq!(busy.broken.len(), 1);
    assert!(
        busy.broken[0].reason.contains("invalid cron expression"),
        "{:?}",
        busy.broken
    );
    let free = scan(&mut jobs, utc("2026-03-01T09:05:20Z"), ZONE, &|_| false);
    assert_eq!(free.due.len(), 1);
}

#[test]
fn a_one_shot_missed_beyond_grace_is_skipped_and_closed() {
    let mut jobs = vec![job("10m", "2026-03-01T09:00:00Z")];
    let found = scan(&mut jobs, utc("2026-03-01T09:13:00Z"), ZONE, &|_| false);
    assert!(found.due.is_empty());
    assert!(!jobs[0].enabled());
    assert_eq!(jobs[0].state(), "completed");
    let mut jobs = vec![job("10m", "2026-03-01T09:00:00Z")];
    let found = scan(&mut jobs, utc("2026-03-01T09:11:00Z"), ZONE, &|_| false);
    assert_eq!(found.due.len(), 1);
}
