//! Schedules in the reference's three kinds, stored as it stores them: `once` (`run_at`),
//! `interval` (`minutes`) and `cron` (`expr`, evaluated by `croner` in the configured zone),
//! plus the grace rule that decides whether a run missed while nothing was ticking still runs.

use std::str::FromStr;

use chrono::{DateTime, Duration, FixedOffset, Local, NaiveDate, NaiveDateTime, Utc};
use croner::Cron;
use serde_json::{Value, json};

/// How late a one-shot may start and still run (the reference's `ONESHOT_GRACE_SECONDS`).
pub const ONESHOT_GRACE_SECONDS: i64 = 120;
/// Bounds of the recurring grace window: half a period, clamped to these.
const MIN_GRACE_SECONDS: i64 = 120;
const MAX_GRACE_SECONDS: i64 = 7200;

pub use crate::config::{UnknownZone, Zone};

/// The first cron occurrence strictly after `after`, computed on `zone`'s wall clock.
fn next_cron(zone: Zone, cron: &Cron, after: DateTime<Utc>) -> Option<DateTime<FixedOffset>> {
    match zone {
        Zone::Named(tz) => cron
            .find_next_occurrence(&after.with_timezone(&tz), false)
            .ok()
            .map(|t| t.fixed_offset()),
        Zone::Host => cron
            .find_next_occurrence(&after.with_timezone(&Local), false)
            .ok()
            .map(|t| t.fixed_offset()),
    }
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    Once { run_at: DateTime<FixedOffset> },
    Interval { minutes: i64 },
    Cron { expr: String, cron: Box<Cron> },
}

/// A schedule the user wrote that we cannot use; the text says what is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(pub String);

const ACCEPTED: &str = "accepted forms: a delay such as \"30m\", \"2h\" or \"1d\" (runs once), \
\"every 30m\" (repeats), a five-field cron expression such as \"0 9 * * *\", or a timestamp \
such as \"2026-02-03T14:00\"";

fn bad(text: String) -> ScheduleError {
    ScheduleError(format!("{text}; {ACCEPTED}"))
}

/// Minutes in a duration such as `30m`, `2 hours`, `1d`.
pub fn parse_duration(text: &str) -> Result<i64, ScheduleError> {
    let lower = text.trim().to_lowercase();
    let digits: String = lower.chars().take_while(char::is_ascii_digit).collect();
    let unit = lower[digits.len()..].trim();
    let per_unit = match unit {
        "m" | "min" | "mins" | "minute" | "minutes" => 1,
        "h" | "hr" | "hrs" | "hour" | "hours" => 60,
        "d" | "day" | "days" => 1440,
        _ => return Err(bad(format!("{:?} is not a duration", text.trim()))),
    };
    let value: i64 = digits
        .parse()
        .map_err(|_| bad(format!("{:?} is not a duration", text.trim())))?;
    value
        .checked_mul(per_unit)
        .filter(|m| *m <= 10 * 366 * 1440)
        .ok_or_else(|| bad(format!("{:?} is too long", text.trim())))
}

fn looks_like_cron(text: &str) -> bool {
    let parts: Vec<&str> = text.split_whitespace().collect();
    parts.len() >= 5
        && parts[..5].iter().all(|p| {
            p.chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '*' | '-' | ',' | '/'))
        })
}

fn parse_cron(expr: &str) -> Result<Cron, ScheduleError> {
    if expr.split_whitespace().count() != 5 {
        return Err(bad(format!(
            "cron expression {expr:?} must have exactly five fields (minute hour day month weekday)"
        )));
    }
    Cron::from_str(expr).map_err(|e| bad(format!("invalid cron expression {expr:?}: {e}")))
}

fn looks_like_timestamp(text: &str) -> bool {
    let b = text.as_bytes();
    text.contains('T')
        || (b.len() >= 10
            && b[..4].iter().all(u8::is_ascii_digit)
            && b[4] == b'-'
            && b[5..7].iter().all(u8::is_ascii_digit)
            && b[7] == b'-'
            && b[8..10].iter().all(u8::is_ascii_digit))
}

/// A wall-clock timestamp without an offset, in the forms Python's `fromisoformat` reads.
fn parse_naive(text: &str) -> Option<NaiveDateTime> {
    let text = text.replacen(' ', "T", 1);
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(&text, format) {
            return Some(t);
        }
    }
    NaiveDate::parse_from_str(&text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
}

/// A timestamp as stored or typed: with an offset (or `Z`) as is; without one, read in
/// `naive_zone`.
pub fn parse_timestamp(text: &str, naive_zone: Zone) -> Option<DateTime<FixedOffset>> {
    let text = text.trim();
    let spaced = text.replacen(' ', "T", 1);
    if let Ok(t) = DateTime::parse_from_rfc3339(&spaced) {
        return Some(t);
    }
    if let Ok(t) = DateTime::parse_from_str(&spaced, "%Y-%m-%dT%H:%M%:z") {
        return Some(t);
    }
    naive_zone.localize(parse_naive(text)?)
}

/// A timestamp in the shape Python's `isoformat()` writes (microseconds only when present).
pub fn format_timestamp(t: DateTime<FixedOffset>) -> String {
    let format = if t.timestamp_subsec_micros() == 0 {
        chrono::SecondsFormat::Secs
    } else {
        chrono::SecondsFormat::Micros
    };
    t.to_rfc3339_opts(format, false)
}

/// Parses what a user typed into the stored `schedule` object and the typed schedule.
pub fn parse_schedule(
    text: &str,
    now: DateTime<Utc>,
    zone: Zone,
) -> Result<(Value, Schedule), ScheduleError> {
    let text = text.trim();
    let lower = text.to_lowercase();
    if let Some(rest) = lower.strip_prefix("every ") {
        let minutes = parse_duration(rest)?;
        if minutes == 0 {
            return Err(bad("an interval must be at least one minute".into()));
        }
        let stored =
            json!({"kind": "interval", "minutes": minutes, "display": format!("every {minutes}m")});
        return Ok((stored, Schedule::Interval { minutes }));
    }
    if looks_like_cron(text) {
        let cron = parse_cron(text)?;
        let stored = json!({"kind": "cron", "expr": text, "display": text});
        return Ok((
            stored,
            Schedule::Cron {
                expr: text.to_owned(),
                cron: Box::new(cron),
            },
        ));
    }
    if looks_like_timestamp(text) {
        let run_at = parse_timestamp(text, zone)
            .ok_or_else(|| bad(format!("{text:?} is not a timestamp this parser reads")))?;
        let display = format!("once at {}", run_at.format("%Y-%m-%d %H:%M"));
        let stored =
            json!({"kind": "once", "run_at": format_timestamp(run_at), "display": display});
        return Ok((stored, Schedule::Once { run_at }));
    }
    if let Ok(minutes) = parse_duration(text) {
        let run_at = zone.at(now) + Duration::minutes(minutes);
        let stored = json!({"kind": "once", "run_at": format_timestamp(run_at), "display": format!("once in {text}")});
        return Ok((stored, Schedule::Once { run_at }));
    }
    Err(bad(format!("{text:?} is not a schedule")))
}

/// Reads a stored `schedule` object (ours or Python's). Naive `run_at` values are read as
/// host-local time, as the reference reads its older records.
pub fn from_stored(value: &Value) -> Result<Schedule, ScheduleError> {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    match kind {
        "once" => {
            let text = value.get("run_at").and_then(Value::as_str).unwrap_or("");
            parse_timestamp(text, Zone::Host)
                .map(|run_at| Schedule::Once { run_at })
                .ok_or_else(|| {
                    ScheduleError(format!("one-shot run_at {text:?} is not a timestamp"))
                })
        }
        "interval" => value
            .get("minutes")
            .and_then(Value::as_i64)
            .filter(|m| *m > 0)
            .map(|minutes| Schedule::Interval { minutes })
            .ok_or_else(|| {
                ScheduleError("interval schedule without a positive minutes value".into())
            }),
        "cron" => {
            let expr = value.get("expr").and_then(Value::as_str).unwrap_or("");
            let cron = parse_cron(expr).map_err(|e| ScheduleError(e.0))?;
            Ok(Schedule::Cron {
                expr: expr.to_owned(),
                cron: Box::new(cron),
            })
        }
        other => Err(ScheduleError(format!("unknown schedule kind {other:?}"))),
    }
}

impl Schedule {
    pub fn is_once(&self) -> bool {
        matches!(self, Self::Once { .. })
    }

    /// The next run after `last_run` (or from `now` when it never ran); `None` when a
    /// one-shot has run or its time is past the grace window.
    pub fn next_run(
        &self,
        now: DateTime<Utc>,
        last_run: Option<DateTime<FixedOffset>>,
        zone: Zone,
    ) -> Option<DateTime<FixedOffset>> {
        match self {
            Self::Once { run_at } => (last_run.is_none()
                && *run_at >= now - Duration::seconds(ONESHOT_GRACE_SECONDS))
            .then_some(*run_at),
            Self::Interval { minutes } => {
                let base = last_run.map_or_else(|| zone.at(now), |t| zone.at(t.to_utc()));
                Some(base + Duration::minutes(*minutes))
            }
            Self::Cron { cron, .. } => {
                let base = last_run.map_or(now, |t| t.to_utc());
                next_cron(zone, cron, base)
            }
        }
    }

    /// The first run strictly after `now` (used to skip missed runs).
    pub fn next_after_now(&self, now: DateTime<Utc>, zone: Zone) -> Option<DateTime<FixedOffset>> {
        match self {
            Self::Once { .. } => None,
            Self::Interval { minutes } => Some(zone.at(now) + Duration::minutes(*minutes)),
            Self::Cron { cron, .. } => next_cron(zone, cron, now),
        }
    }

    /// How late a run may start and still count: 120 s for one-shots; half the period for
    /// recurring schedules, between 120 s and 2 h.
    pub fn grace_seconds(&self, now: DateTime<Utc>, zone: Zone) -> i64 {
        let period = match self {
            Self::Once { .. } => return ONESHOT_GRACE_SECONDS,
            Self::Interval { minutes } => minutes * 60,
            Self::Cron { cron, .. } => {
                let Some(first) = next_cron(zone, cron, now) else {
                    return MIN_GRACE_SECONDS;
                };
                let Some(second) = next_cron(zone, cron, first.to_utc()) else {
                    return MIN_GRACE_SECONDS;
                };
                (second - first).num_seconds()
            }
        };
        (period / 2).clamp(MIN_GRACE_SECONDS, MAX_GRACE_SECONDS)
    }
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
