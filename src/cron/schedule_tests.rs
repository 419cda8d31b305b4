use super::*;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

fn paris() -> Zone {
    Zone::parse("Europe/Paris").unwrap()
}

#[test]
fn durations_and_intervals_are_stored_as_the_reference_stores_them() {
    let now = utc("2026-03-01T10:00:00Z");
    let (stored, _) = parse_schedule("every 2h", now, Zone::Named(chrono_tz::UTC)).unwrap();
    assert_eq!(
        stored,
        json!({"kind": "interval", "minutes": 120, "display": "every 120m"})
    );
    let (stored, schedule) = parse_schedule("30m", now, Zone::Named(chrono_tz::UTC)).unwrap();
    assert_eq!(stored["kind"], "once");
    assert_eq!(stored["run_at"], "2026-03-01T10:30:00+00:00");
    assert_eq!(stored["display"], "once in 30m");
    assert!(schedule.is_once());
    assert_eq!(parse_duration("1 day").unwrap(), 1440);
}

#[test]
fn cron_expressions_are_validated_by_the_crate() {
    let now = utc("2026-03-01T10:00:00Z");
    let (stored, _) = parse_schedule("0 9 * * *", now, paris()).unwrap();
    assert_eq!(
        stored,
        json!({"kind": "cron", "expr": "0 9 * * *", "display": "0 9 * * *"})
    );
    let err = parse_schedule("61 9 * * *", now, paris()).unwrap_err();
    assert!(err.0.contains("invalid cron expression"), "{err}");
    let err = parse_schedule("0 9 * * * 5", now, paris()).unwrap_err();
    assert!(err.0.contains("five fields"), "{err}");
    let err = parse_schedule("tomorrow-ish", now, paris()).unwrap_err();
    assert!(err.0.contains("accepted forms"), "{err}");
}

#[test]
fn naive_timestamps_are_read_in_the_configured_zone() {
    let now = utc("2026-03-01T10:00:00Z");
    let (stored, _) = parse_schedule("2026-07-01T20:07", now, paris()).unwrap();
    assert_eq!(stored["run_at"], "2026-07-01T20:07:00+02:00");
    assert_eq!(stored["display"], "once at 2026-07-01 20:07");
    let (stored, _) = parse_schedule("2026-07-01T20:07:00Z", now, paris()).unwrap();
    assert_eq!(stored["run_at"], "2026-07-01T20:07:00+00:00");
}

#[test]
fn cron_runs_on_the_zone_wall_clock_across_daylight_saving() {
    // Paris moves to summer time on 2026-03-29: 09:00 local is 08:00Z before, 07:00Z after.
    let schedule = from_stored(&json!({"kind": "cron", "expr": "0 9 * * *"})).unwrap();
    let before = schedule
        .next_run(utc("2026-03-28T12:00:00Z"), None, paris())
        .unwrap();
    assert_eq!(before.to_utc(), utc("2026-03-29T07:00:00Z"));
    let first = schedule
        .next_run(utc("2026-03-27T12:00:00Z"), None, paris())
        .unwrap();
    assert_eq!(first.to_utc(), utc("2026-03-28T08:00:00Z"));
    // A time inside the spring-forward gap runs at the first real instant after it.
    let gap = from_stored(&json!({"kind": "cron", "expr": "30 2 * * *"})).unwrap();
    let next = gap
        .next_run(utc("2026-03-28T12:00:00Z"), None, paris())
        .unwrap();
    assert_eq!(next.to_utc(), utc("2026-03-29T01:00:00Z"));
}

#[test]
fn next_runs_anchor_on_the_last_run() {
    let zone = Zone::Named(chrono_tz::UTC);
    let now = utc("2026-03-01T10:00:00Z");
    let every = from_stored(&json!({"kind": "interval", "minutes": 30})).unwrap();
    let last = DateTime::parse_from_rfc3339("2026-03-01T09:50:00+00:00").unwrap();
    assert_eq!(
        every.next_run(now, Some(last), zone).unwrap().to_utc(),
        utc("2026-03-01T10:20:00Z")
    );
    let once =
        from_stored(&json!({"kind": "once", "run_at": "2026-03-01T09:59:00+00:00"})).unwrap();
    assert!(
        once.next_run(now, None, zone).is_some(),
        "inside the 120 s grace"
    );
    assert!(
        once.next_run(now, Some(last), zone).is_none(),
        "a one-shot runs once"
    );
    let late =
        from_stored(&json!({"kind": "once", "run_at": "2026-03-01T09:57:00+00:00"})).unwrap();
    assert!(
        late.next_run(now, None, zone).is_none(),
        "past the grace window"
    );
}

#[test]
fn grace_is_half_the_period_within_bounds() {
    let zone = Zone::Named(chrono_tz::UTC);
    let now = utc("2026-03-01T10:00:00Z");
    let grace = |v: Value| from_stored(&v).unwrap().grace_seconds(now, zone);
    assert_eq!(grace(json!({"kind": "interval", "minutes": 3})), 120);
    assert_eq!(grace(json!({"kind": "interval", "minutes": 5})), 150);
    assert_eq!(grace(json!({"kind": "interval", "minutes": 60})), 1800);
    assert_eq!(grace(json!({"kind": "cron", "expr": "0 9 * * *"})), 7200);
    assert_eq!(
        grace(json!({"kind": "once", "run_at": "2026-03-01T09:00:00+00:00"})),
        120
    );
}

#[test]
fn stored_timestamps_round_trip_in_python_isoformat_shape() {
    let t = parse_timestamp("2026-03-01T10:00:00.250000+05:30", Zone::Host).unwrap();
    assert_eq!(format_timestamp(t), "2026-03-01T10:00:00.250000+05:30");
    let t = parse_timestamp("2026-03-01 10:00:00+00:00", Zone::Host).unwrap();
    assert_eq!(format_timestamp(t), "2026-03-01T10:00:00+00:00");
    assert!(Zone::parse("Mars/Olympus").is_err());
}
