//! One job record of `jobs.json`: every field kept as read (so fields we do not know survive a
//! rewrite, in their order), with typed accessors for the ones the scheduler uses and the
//! reference's rules for creating a job and recording a run.

use chrono::{DateTime, FixedOffset, Utc};
use indexmap::IndexMap;
use serde_json::{Value, json};

use super::JobError;
use super::schedule::{self, Schedule, ScheduleError, Zone, format_timestamp, parse_timestamp};

/// A job as stored.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
#[serde(transparent)]
pub struct JobRecord(IndexMap<String, Value>);

/// What a new job is made from (the tool, the CLI and `/cron` all fill this).
#[derive(Debug, Clone, Default)]
pub struct NewJob {
    pub prompt: String,
    pub schedule: String,
    pub name: Option<String>,
    /// Runs before the job is removed; `None` = forever (one-shots default to 1).
    pub repeat: Option<i64>,
    pub deliver: Option<String>,
    /// The chat the job was created from: `{"platform", "chat_id", "thread_id"?, ...}`.
    pub origin: Option<Value>,
    pub skills: Vec<String>,
    pub model: Option<String>,
    pub provider: Option<String>,
    pub workdir: Option<String>,
    /// The operator (the CLI) chose `workdir`: it may lie outside the agent's roots.
    pub workdir_by_operator: bool,
}

fn text(value: Option<&Value>) -> Option<&str> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// Trimmed, de-duplicated, order kept (the reference's skill-list rule).
pub fn normalize_skills(skills: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for skill in skills {
        let skill = skill.trim().to_owned();
        if !skill.is_empty() && !out.contains(&skill) {
            out.push(skill);
        }
    }
    out
}

impl JobRecord {
    pub fn from_map(map: IndexMap<String, Value>) -> Self {
        Self(map)
    }

    pub fn to_value(&self) -> Value {
        serde_json::to_value(&self.0).unwrap_or(Value::Null)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// Sets a field in place (a new field goes last).
    pub fn set(&mut self, key: &str, value: Value) {
        if let Some(slot) = self.0.get_mut(key) {
            *slot = value;
        } else {
            self.0.insert(key.to_owned(), value);
        }
    }

    pub fn id(&self) -> &str {
        text(self.0.get("id")).unwrap_or("")
    }

    pub fn name(&self) -> String {
        if let Some(name) = text(self.0.get("name")) {
            return name.to_owned();
        }
        let prompt = self.prompt();
        let label = if prompt.trim().is_empty() {
            self.id()
        } else {
            prompt
        };
        label.chars().take(50).collect::<String>().trim().to_owned()
    }

    pub fn prompt(&self) -> &str {
        self.0.get("prompt").and_then(Value::as_str).unwrap_or("")
    }

    /// `skills`, falling back to the legacy single `skill`.
    pub fn skills(&self) -> Vec<String> {
        let list = match self.0.get("skills") {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            Some(Value::String(one)) => vec![one.clone()],
            _ => text(self.0.get("skill"))
                .map(|s| vec![s.to_owned()])
                .unwrap_or_default(),
        };
        normalize_skills(list)
    }

    pub fn model(&self) -> Option<&str> {
        text(self.0.get("model"))
    }

    pub fn provider(&self) -> Option<&str> {
        text(self.0.get("provider"))
    }

    pub fn script(&self) -> Option<&str> {
        text(self.0.get("script"))
    }

    pub fn enabled(&self) -> bool {
        self.0
            .get("enabled")
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }

    pub fn state(&self) -> String {
        text(self.0.get("state"))
            .map(str::to_owned)
            .unwrap_or_else(|| {
                if self.enabled() {
                    "scheduled"
                } else {
                    "paused"
                }
                .to_owned()
            })
    }

    /// The comma-separated `deliver` value (a list is joined, as the reference does).
    pub fn deliver(&self) -> String {
        match self.0.get("deliver") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            Some(Value::Array(items)) => {
                let parts: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
                if parts.is_empty() {
                    "local".into()
                } else {
                    parts.join(",")
                }
            }
            _ => "local".into(),
        }
    }

    pub fn origin(&self) -> Option<&Value> {
        self.0.get("origin").filter(|o| o.is_object())
    }

    pub fn schedule(&self) -> Result<Schedule, ScheduleError> {
        schedule::from_stored(self.0.get("schedule").unwrap_or(&Value::Null))
    }

    pub fn schedule_display(&self) -> String {
        if let Some(display) = text(self.0.get("schedule_display")) {
            return display.to_owned();
        }
        let schedule = self.0.get("schedule");
        for key in ["display", "value", "expr", "run_at"] {
            if let Some(t) = text(schedule.and_then(|s| s.get(key))) {
                return t.to_owned();
            }
        }
        "?".into()
    }

    fn timestamp(&self, key: &str) -> Option<DateTime<FixedOffset>> {
        parse_timestamp(text(self.0.get(key))?, Zone::Host)
    }

    pub fn next_run_at(&self) -> Option<DateTime<FixedOffset>> {
        self.timestamp("next_run_at")
    }

    pub fn last_run_at(&self) -> Option<DateTime<FixedOffset>> {
        self.timestamp("last_run_at")
    }

    pub fn last_status(&self) -> Option<&str> {
        text(self.0.get("last_status"))
    }

    /// `(times, completed)` of `repeat`; `times` is `None` for forever.
    pub fn repeat(&self) -> (Option<i64>, i64) {
        let repeat = self.0.get("repeat");
        let times = repeat
            .and_then(|r| r.get("times"))
            .and_then(Value::as_i64)
            .filter(|t| *t > 0);
        let completed = repeat
            .and_then(|r| r.get("completed"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        (times, completed)
    }

    pub fn set_time(&mut self, key: &str, t: Option<DateTime<FixedOffset>>) {
        self.set(
            key,
            t.map_or(Value::Null, |t| Value::String(format_timestamp(t))),
        );
    }

    /// Pauses the job (it keeps its schedule).
    pub fn pause(&mut self, now: DateTime<FixedOffset>, reason: Option<&str>) {
        self.set("enabled", Value::Bool(false));
        self.set("state", json!("paused"));
        self.set_time("paused_at", Some(now));
        self.set("paused_reason", reason.map_or(Value::Null, |r| json!(r)));
    }

    /// Resumes the job from `now`; a one-shot whose time has passed cannot resume.
    pub fn resume(&mut self, now: DateTime<Utc>, zone: Zone) -> Result<(), JobError> {
        let schedule = self.schedule()?;
        let next = schedule.next_run(now, None, zone);
        if next.is_none() && schedule.is_once() {
            return Err(JobError::ResumeTooLate);
        }
        self.set("enabled", Value::Bool(true));
        self.set("state", json!("scheduled"));
        self.set("paused_at", Value::Null);
        self.set("paused_reason", Value::Null);
        self.set_time("next_run_at", next);
        Ok(())
    }

    /// Makes the job due now (`run now`; the daemon notices the change within a second).
    pub fn trigger(&mut self, now: DateTime<FixedOffset>) {
        self.set("enabled", Value::Bool(true));
        self.set("state", json!("scheduled"));
        self.set("paused_at", Value::Null);
        self.set("paused_reason", Value::Null);
        self.set_time("next_run_at", Some(now));
    }

    /// Records a finished run as the reference does: status and errors, one more completed
    /// run, the next run anchored on this one. Returns false when the repeat count is used
    /// up and the job must be removed.
    pub fn record_run(
        &mut self,
        now: DateTime<Utc>,
        zone: Zone,
        status: &str,
        error: Option<&str>,
        delivery_error: Option<&str>,
    ) -> bool {
        let ran_at = zone.at(now);
        self.set_time("last_run_at", Some(ran_at));
        self.set("last_status", json!(status));
        self.set("last_error", error.map_or(Value::Null, |e| json!(e)));
        self.set(
            "last_delivery_error",
            delivery_error.map_or(Value::Null, |e| json!(e)),
        );
        if self.0.contains_key("repeat") {
            let (times, completed) = self.repeat();
            let completed = completed + 1;
            self.set("repeat", json!({"times": times, "completed": completed}));
            if times.is_some_and(|t| completed >= t) {
                return false;
            }
        }
        match self.schedule() {
            Ok(schedule) => {
                let next = schedule.next_run(now, Some(ran_at), zone);
                self.set_time("next_run_at", next);
                if next.is_none() {
                    self.set("enabled", Value::Bool(false));
                    self.set("state", json!("completed"));
                } else if self.state() != "paused" {
                    self.set("state", json!("scheduled"));
                }
            }
            Err(e) => {
                self.set("state", json!("error"));
                self.set("last_error", json!(e.0));
            }
        }
        true
    }
}

/// A job id as the reference makes them: 12 lowercase hex digits.
pub fn new_job_id() -> String {
    let bytes: [u8; 6] = rand::random();
    hex::encode(bytes)
}

/// Builds a new record with every field the reference writes, in its order. Fails on a bad
/// schedule or a one-shot already past its grace window.
pub fn create(new: NewJob, now: DateTime<Utc>, zone: Zone) -> Result<JobRecord, JobError> {
    let (stored, schedule) = schedule::parse_schedule(&new.schedule, now, zone)?;
    let next = schedule.next_run(now, None, zone);
    if next.is_none() && schedule.is_once() {
        return Err(JobError::StartPassed {
            run_at: stored["run_at"].as_str().unwrap_or("?").to_owned(),
        });
    }
    let repeat = new
        .repeat
        .filter(|r| *r > 0)
        .or(schedule.is_once().then_some(1));
    let deliver = new
        .deliver
        .filter(|d| !d.trim().is_empty())
        .unwrap_or_else(|| {
            if new.origin.is_some() {
                "origin"
            } else {
                "local"
            }
            .into()
        });
    let skills = normalize_skills(new.skills);
    let label = if new.prompt.trim().is_empty() {
        skills.first().cloned().unwrap_or_else(|| "cron job".into())
    } else {
        new.prompt.clone()
    };
    let name = new
        .name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| label.chars().take(50).collect::<String>().trim().to_owned());
    let opt = |v: Option<String>| {
        v.filter(|s| !s.trim().is_empty())
            .map_or(Value::Null, |s| json!(s.trim()))
    };
    let display = stored["display"].clone();
    let mut fields: Vec<(&str, Value)> = vec![
        ("id", json!(new_job_id())),
        ("name", json!(name)),
        ("prompt", json!(new.prompt)),
        ("skills", json!(skills)),
        ("skill", skills.first().map_or(Value::Null, |s| json!(s))),
        ("model", opt(new.model)),
        ("provider", opt(new.provider)),
        ("provider_snapshot", Value::Null),
        ("model_snapshot", Value::Null),
        ("base_url", Value::Null),
        ("script", Value::Null),
        ("no_agent", Value::Bool(false)),
        ("context_from", Value::Null),
        ("schedule", stored),
        ("schedule_display", display),
        ("repeat", json!({"times": repeat, "completed": 0})),
        ("enabled", Value::Bool(true)),
        ("state", json!("scheduled")),
        ("paused_at", Value::Null),
        ("paused_reason", Value::Null),
        ("created_at", json!(format_timestamp(zone.at(now)))),
        (
            "next_run_at",
            next.map_or(Value::Null, |t| json!(format_timestamp(t))),
        ),
        ("last_run_at", Value::Null),
        ("last_status", Value::Null),
        ("last_error", Value::Null),
        ("last_delivery_error", Value::Null),
        ("deliver", json!(deliver)),
        ("origin", new.origin.unwrap_or(Value::Null)),
        ("enabled_toolsets", Value::Null),
    ];
    let workdir = opt(new.workdir);
    let by_operator = new.workdir_by_operator && !workdir.is_null();
    fields.push(("workdir", workdir));
    if by_operator {
        fields.push((super::workdir::SET_BY_KEY, json!(super::workdir::OPERATOR)));
    }
    Ok(JobRecord(
        fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
    ))
}
